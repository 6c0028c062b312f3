"""The environment the CLI tests give envyard: a bare PATH (`/usr/bin:/bin`, as cron, `su` or an MCP client would
have), plus the machine's TLS trust settings. A network that intercepts TLS (a corporate or sandbox egress proxy)
is trusted through SSL_CERT_FILE and friends, which such an environment keeps in practice too; without them
a fresh venv's certifi rejects PyPI's certificate there."""

import os
import signal

TLS_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT")
BARE = {"PATH": "/usr/bin:/bin", **{k: os.environ[k] for k in TLS_VARIABLES if k in os.environ}}


def sigint_default() -> None:
    """A `preexec_fn` for CLI processes a test will press Ctrl-C on: SIGINT at its default disposition, as for a
    command typed at a terminal. A non-interactive shell's background job (`nohup pytest &` in a CI script)
    starts with SIGINT ignored; children inherit that, Python then installs no KeyboardInterrupt handler, and
    SIGINT would do nothing however envyard handles it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


_session_cwd: list[str] = []  # set once per session by conftest's `_cli_cwd`


def cli_cwd() -> str:
    """The working directory for CLI processes the tests start: one of this session's temp dirs, so what a
    command writes by default (`setup` writes `./envyard-contract/<name>`) goes away with the session instead of
    piling up in /tmp."""
    return _session_cwd[0]
