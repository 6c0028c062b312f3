#!/bin/bash
set -euo pipefail
cd /app/repo
git add notes.txt
git commit -q -m "add notes"
