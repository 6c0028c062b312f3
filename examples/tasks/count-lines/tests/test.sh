#!/bin/bash
# Verifier for count-lines. The data file is generated deterministically by setup.sh with 1337 lines;
# the expected value is fixed here so that editing /app/data.txt cannot change it.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin   # ignore tools an agent may have added to /usr/local
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 1; }

expected=1337
f=/app/answer.txt
[ -f "$f" ] || fail "$f does not exist"
got=$(/usr/bin/python3 -I -c 'import sys; print(open(sys.argv[1]).read().strip())' "$f" 2>/dev/null) || fail "cannot read $f"
[ "$got" = "$expected" ] || fail "expected $expected, got '$got'"

echo 1 > /logs/verifier/reward.txt
echo PASS
