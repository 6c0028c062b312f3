#!/bin/bash
set -euo pipefail
cat /app/logs/*.log | tr -d '\r' \
    | awk '$2 == "ERROR" && match($3, /^\[E[0-9][0-9][0-9][0-9]\]$/) { print substr($3, 2, 5) }' \
    | LC_ALL=C sort -u > /app/errors.txt
