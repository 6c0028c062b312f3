"""scripts/install.sh on a stock Debian 12 with nothing but apt-get: no Python, no pip, no pyenv.

The machine is an envyard sandbox over the debootstrapped `debian:bookworm` base (minbase: not even python3),
with network and this checkout's tracked files copied in. Its only departure from a fresh install is the CA
bundle of the machine running the tests, lent read-only, for machines behind a TLS-intercepting proxy. Takes a few
minutes (apt and pip download for real), so it is the one test of its kind. It stops at the installed CLI: an
envyard inside an envyard sandbox cannot mount its host view (`mount` is refused even with `security="relaxed"`),
so the suite itself is not rerun in there.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from envyard import tls

ROOT = Path(__file__).resolve().parent.parent
INSIDE_CA = "/etc/test-host-ca.crt"  # not Debian's own path: the ca-certificates package rewrites that one


@pytest.mark.timeout(1500)
def test_install_on_stock_debian(debian_yard, debian, tmp_path):
    src = tmp_path / "checkout"
    src.mkdir()
    subprocess.run(f"git ls-files -z | xargs -0 tar -c | tar -x -C {src}", shell=True, cwd=ROOT, check=True)
    bundle = tls.ca_bundle()
    trust = {"SSL_CERT_FILE": INSIDE_CA, "PIP_CERT": INSIDE_CA} if bundle else {}
    with debian_yard.sandbox(debian, network="host", ro_binds={bundle: INSIDE_CA} if bundle else None, env=trust,
                             limits={"disk": "20G"}) as sb:
        assert sb.exec("command -v python3 pip pip3 pyenv").exit_code != 0  # truly nothing there
        sb.upload(src, "/root/envyard")
        r = sb.exec("cd /root/envyard && bash scripts/install.sh", timeout=1200)
        assert r.exit_code == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert "making a venv for envyard at /opt/envyard-venv" in r.stdout
        checks = sb.exec(
            "set -e; cd /root/envyard; cat .envyard-python; readlink /usr/local/bin/envyard;"
            " /usr/bin/python3 -c 'import envyard' 2>/dev/null && echo system-python-touched || true;"
            " command -v debootstrap; envyard --help | head -3", timeout=120)
        assert checks.exit_code == 0, checks.stderr
        lines = checks.stdout.splitlines()
        assert lines[0] == "/opt/envyard-venv/bin/python"  # what scripts/test.sh runs the suite with
        assert lines[1] == "/opt/envyard-venv/bin/envyard"
        assert "system-python-touched" not in checks.stdout  # PEP 668: Debian's Python is left alone
        assert lines[2] == "/usr/sbin/debootstrap"
        assert "Usage: envyard" in checks.stdout
