"""The machine's CA bundle: what envyard trusts for TLS (registries) and lends to setup sandboxes, so both
work behind a TLS-intercepting proxy whose CA the machine trusts."""

from __future__ import annotations

import os
from pathlib import Path

SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"  # Debian's, kept by update-ca-certificates


def ca_bundle() -> str | None:
    """$SSL_CERT_FILE if it names a file, else the system bundle; None when neither exists."""
    for candidate in (os.environ.get("SSL_CERT_FILE"), SYSTEM_BUNDLE):
        if candidate and Path(candidate).is_file():
            return candidate
    return None
