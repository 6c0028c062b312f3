#!/usr/bin/env bash
# envyard's main jobs on their zero-configuration defaults: install, tour the sandbox core on the host image,
# then set up a real project from PyPI into a verified image and run its tests in it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
envyard demo "$@"
envyard setup pypi:iniconfig==2.3.0 --out envyard-contract/iniconfig
envyard run setup/iniconfig-2.3.0 -- python -m pytest -q
