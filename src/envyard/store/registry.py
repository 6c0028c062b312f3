"""The machine's list of envyard stores, so that each store's `host` image can hide all the others."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

KNOWN_STORES = Path("/var/lib/envyard/known-stores")


def register_store(home: Path) -> None:
    """Add a store to the registry (once). Root only: other users cannot use the `host` image, nor write
    the registry."""
    if os.geteuid() != 0:
        return
    try:
        KNOWN_STORES.parent.mkdir(parents=True, exist_ok=True)
        with open(KNOWN_STORES, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            if str(home) not in f.read().splitlines():
                f.write(f"{home}\n")
    except OSError:
        pass  # a read-only /var/lib: the store is still hidden from its own sandboxes (hostmask.mask_spec)


def known_stores() -> list[str]:
    try:
        return KNOWN_STORES.read_text().splitlines()
    except OSError:
        return []
