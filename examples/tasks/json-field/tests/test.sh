#!/bin/bash
# Verifier for json-field: /app/answer.txt must hold the value of .server.port (8443).
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin   # ignore tools an agent may have added to /usr/local
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 1; }

expected=8443
f=/app/answer.txt
[ -f "$f" ] || fail "$f does not exist"
got=$(/usr/bin/python3 -I -c 'import sys; print(open(sys.argv[1]).read().strip())' "$f" 2>/dev/null) || fail "cannot read $f"
[ "$got" = "$expected" ] || fail "expected $expected, got '$got'"

echo 1 > /logs/verifier/reward.txt
echo PASS
