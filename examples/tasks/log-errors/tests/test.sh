#!/bin/bash
# Verifier for log-errors: /app/errors.txt must list exactly the unique codes of ERROR lines in
# /app/logs/*.log, sorted, one per line (a final newline is optional; no blank lines, spaces or CRs).
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin   # ignore tools an agent may have added to /usr/local
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt

/usr/bin/python3 -I - <<'PY' || exit 1
import sys
expected = ["E0099", "E0507", "E1042", "E2310", "E4400", "E6001", "E9120"]
try:
    data = open("/app/errors.txt", "rb").read()
except OSError as e:
    sys.exit(f"FAIL: cannot read /app/errors.txt: {e}")
if b"\r" in data:
    sys.exit("FAIL: /app/errors.txt contains carriage returns")
text = data.decode("ascii", "replace")
if text.endswith("\n"):
    text = text[:-1]
lines = text.split("\n")
if lines != expected:
    sys.exit(f"FAIL: expected {expected}, got {lines}")
PY

echo 1 > /logs/verifier/reward.txt
echo PASS
