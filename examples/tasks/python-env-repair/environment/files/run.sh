#!/bin/bash
# Launcher for app.py: loads the settings from app.env, then runs the app with the system interpreter.
set -euo pipefail
APP_HOME="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$APP_HOME/app.env"
exec python3 "$APP_HOME/app.py" "$@"
