#!/bin/bash
# Verifier for python-bugfix-swe: runs the hidden unittest suite (fail-to-pass and pass-to-pass tests)
# against the package in /app.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin   # ignore tools an agent may have added to /usr/local
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 1; }

expected_tests=17
[ -f /app/mathlib/__init__.py ] || fail "/app/mathlib is missing"
cd /app || fail "cannot enter /app"
find /app/mathlib -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null
PYTHONPATH=/app PYTHONDONTWRITEBYTECODE=1 timeout 45 /usr/bin/python3 -s -m unittest discover -s /tests -t /tests \
    -p 'test_*.py' -v > /tmp/unittest.log 2>&1
rc=$?
cat /tmp/unittest.log
[ $rc -eq 0 ] || fail "hidden tests failed (exit $rc)"
grep -qx "Ran $expected_tests tests in .*" /tmp/unittest.log || fail "expected $expected_tests tests to run"
tail -n 1 /tmp/unittest.log | grep -qx 'OK' || fail "the test run did not end with OK"

echo 1 > /logs/verifier/reward.txt
echo PASS
