#!/bin/bash
set -euo pipefail
# GNU sed's \b treats letters, digits and underscore as word characters, matching the task's definition.
find /app/src -type f -name '*.txt' -print0 | xargs -0 -r sed -i 's/\bfoo\b/bar/g'
