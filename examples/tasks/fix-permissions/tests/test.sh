#!/bin/bash
# Verifier for fix-permissions: /app/run.sh must be executable, use LF line endings with its original lines
# (SHA-256 of the LF version fixed below), and print exactly "ok" when executed directly.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin   # ignore tools an agent may have added to /usr/local
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 1; }

f=/app/run.sh
expected_sha=c8676d8a5fff64c94a1c44bf3a103d026d8c8e38d8bf8c98396d8416c1f2f7c0

[ -f "$f" ] && [ ! -L "$f" ] || fail "$f is missing or not a regular file"
[ -x "$f" ] || fail "$f is not executable"
if grep -q $'\r' "$f"; then fail "$f still contains carriage returns"; fi
[ "$(sha256sum < "$f" | cut -d' ' -f1)" = "$expected_sha" ] || fail "$f was changed beyond its line endings"

for dir in / /tmp /app; do
    out=$(cd "$dir" && timeout 10 /app/run.sh 2>/tmp/run.err)
    rc=$?
    [ $rc -eq 0 ] || fail "/app/run.sh exited with $rc from $dir: $(head -c 300 /tmp/run.err)"
    printf '%s' "$out" | cmp -s - <(printf 'ok') || fail "/app/run.sh printed $(printf '%s' "$out" | od -c | head -2)"
done
# $(...) strips trailing newlines, so check the exact bytes once more
(cd / && timeout 10 /app/run.sh 2>/dev/null) | cmp -s - <(printf 'ok\n') || fail "output is not exactly 'ok\\n'"

echo 1 > /logs/verifier/reward.txt
echo PASS
