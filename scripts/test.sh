#!/usr/bin/env bash
# Install everything the tests need, then run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --test
"$(cat .envyard-python)" -m pytest "$@"   # the interpreter install.sh installed into
