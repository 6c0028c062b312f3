#!/bin/bash
set -euo pipefail
cd /app/releases
best=$(find . -mindepth 1 -maxdepth 1 -type d -printf '%f\n' \
       | grep -E '^[0-9]+\.[0-9]+\.[0-9]+$' \
       | sort -t. -k1,1n -k2,2n -k3,3n | tail -n 1)
ln -sfn "releases/$best" /app/current
