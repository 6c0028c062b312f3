#!/bin/bash
# Simulates a reorganisation of the vendor directory that nobody propagated to the app's settings:
# packages moved from vendor/lib/ up to vendor/, leaving vendor/lib/ empty behind.
set -euo pipefail
mv /app/vendor/lib/greetlib /app/vendor/greetlib
chmod 755 /app/run.sh
