"""The environment the CLI tests give envyard: a bare PATH (`/usr/bin:/bin`, as cron, `su` or an MCP client would
have), plus the machine's TLS trust settings. A network that intercepts TLS (a corporate or sandbox egress proxy)
is trusted through SSL_CERT_FILE and friends, which such an environment keeps in practice too; without them
a fresh venv's certifi rejects PyPI's certificate there."""

import os

TLS_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT")
BARE = {"PATH": "/usr/bin:/bin", **{k: os.environ[k] for k in TLS_VARIABLES if k in os.environ}}
