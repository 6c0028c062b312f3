#!/bin/bash
# Verifier for fix-symlink: /app/current must be a symlink resolving to /app/releases/1.10.2, and the
# releases must be untouched.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin   # ignore tools an agent may have added to /usr/local
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 1; }

[ -L /app/current ] || fail "/app/current is not a symbolic link"
target=$(readlink -f /app/current) || fail "cannot resolve /app/current"
[ "$target" = /app/releases/1.10.2 ] || fail "/app/current resolves to '$target', expected /app/releases/1.10.2"
[ "$(cat /app/current/VERSION 2>/dev/null)" = 1.10.2 ] || fail "/app/current/VERSION is not 1.10.2"

for v in 0.12.1 1.2.0 1.9.3 1.9.12 1.10.0 1.10.2 2.0.0-rc.1; do
    d=/app/releases/$v
    [ -d "$d" ] && [ ! -L "$d" ] || fail "$d is missing or no longer a directory"
    [ "$(cat "$d/VERSION" 2>/dev/null)" = "$v" ] || fail "$d/VERSION was changed"
    [ "$("$d/bin/app" 2>/dev/null)" = "app $v" ] || fail "$d/bin/app was changed"
done
entries=$(ls -A /app/releases | LC_ALL=C sort | tr '\n' ' ')
[ "$entries" = "0.12.1 1.10.0 1.10.2 1.2.0 1.9.12 1.9.3 2.0.0-rc.1 README backup " ] \
    || fail "entries of /app/releases changed: $entries"

echo 1 > /logs/verifier/reward.txt
echo PASS
