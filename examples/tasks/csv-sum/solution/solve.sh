#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import csv
with open("/app/sales.csv", newline="") as f:
    total = sum(int(row["amount"]) for row in csv.DictReader(f) if row["region"] == "West")
with open("/app/answer.txt", "w") as out:
    out.write(f"{total}\n")
PY
