#!/usr/bin/env bash
# envyard's main job on its zero-configuration default: install, then tour the core on the host image.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
envyard demo "$@"
