#!/bin/bash
set -euo pipefail
cd /app/data
find . -type f -printf '%s\t%P\n' | sort -n -r -k1,1 | head -n 1 | cut -f2 > /app/answer.txt
