#!/bin/bash
set -euo pipefail
# Two faults: the search path still names the old vendor/lib location, and the style has a typo.
sed -i 's#^export PYTHONPATH=.*#export PYTHONPATH="$APP_HOME/vendor"#' /app/app.env
sed -i 's#^export GREETLIB_MODE=.*#export GREETLIB_MODE=standard#' /app/app.env
