#!/bin/bash
# Verifier for csv-sum. Expected total fixed here (computed with a real CSV parser from the shipped file);
# a naive comma split gives a different number because some product names contain quoted commas.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin   # ignore tools an agent may have added to /usr/local
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 1; }

expected=27801
f=/app/answer.txt
[ -f "$f" ] || fail "$f does not exist"
got=$(/usr/bin/python3 -I -c 'import sys; print(open(sys.argv[1]).read().strip())' "$f" 2>/dev/null) || fail "cannot read $f"
[ "$got" = "$expected" ] || fail "expected $expected, got '$got'"

echo 1 > /logs/verifier/reward.txt
echo PASS
