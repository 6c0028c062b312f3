#!/bin/bash
set -euo pipefail
sed -i 's/\r$//' /app/run.sh /app/status.txt
chmod +x /app/run.sh
