#!/bin/bash
# db.log was collected on a Windows host: give it CRLF line endings.
set -euo pipefail
sed -i 's/$/\r/' /app/logs/db.log
