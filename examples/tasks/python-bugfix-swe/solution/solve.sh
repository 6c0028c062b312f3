#!/bin/bash
set -euo pipefail
# The comprehension stops one window early: there are len(data) - window + 1 windows.
sed -i 's/for i in range(len(data) - window)\]/for i in range(len(data) - window + 1)]/' /app/mathlib/series.py
grep -q 'range(len(data) - window + 1)' /app/mathlib/series.py
