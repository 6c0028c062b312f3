#!/bin/bash
# Verifier for python-env-repair: `bash /app/run.sh` must print "hello from greetlib" from any directory,
# app.py and the vendored package must be unchanged, and the greeting must really come from
# /app/vendor/greetlib (with the package moved away, the app must stop working).
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin   # ignore tools an agent may have added to /usr/local
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 1; }

app_sha=686ae042b04df2558d8d5a42d3412f3f38c0dc18c2c5308dcc089429ad462d9c
lib_sha=e4df03846230f64e28534d8032662d85ef3f6d4ca37c8338e2ce36b8edf7cc0f
clean_env=(env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8)

[ "$(sha256sum < /app/app.py 2>/dev/null | cut -d' ' -f1)" = "$app_sha" ] || fail "/app/app.py was modified"
[ -d /app/vendor/greetlib ] && [ ! -L /app/vendor/greetlib ] || fail "/app/vendor/greetlib is missing or moved"
[ "$(sha256sum < /app/vendor/greetlib/__init__.py 2>/dev/null | cut -d' ' -f1)" = "$lib_sha" ] \
    || fail "/app/vendor/greetlib/__init__.py was modified"
extra=$(find /app/vendor/greetlib -mindepth 1 -not -path '*/__pycache__*' -not -name __init__.py)
[ -z "$extra" ] || fail "unexpected files in /app/vendor/greetlib: $extra"
copies=$(find /app -name 'greetlib*' ! -type l -not -path '/app/vendor/greetlib' -not -path '/app/vendor/greetlib/*')
[ -z "$copies" ] || fail "greetlib copies or replacements found: $copies"

# greetlib must not be importable without the app's configuration (no global install, no user-site .pth)
empty=$(mktemp -d)
if (cd "$empty" && "${clean_env[@]}" python3 -c 'import greetlib' 2>/dev/null); then
    fail "greetlib is importable system-wide; the fix must be in the app's configuration"
fi

for dir in / /tmp /app "$empty"; do
    out=$(cd "$dir" && timeout 20 "${clean_env[@]}" bash /app/run.sh 2>/tmp/run.err)
    rc=$?
    [ $rc -eq 0 ] || fail "run.sh exited with $rc from $dir: $(tail -c 400 /tmp/run.err)"
    [ "$out" = "hello from greetlib" ] || fail "run.sh printed '$out' from $dir"
done
(cd / && timeout 20 "${clean_env[@]}" bash /app/run.sh 2>/dev/null) | cmp -s - <(printf 'hello from greetlib\n') \
    || fail "output is not exactly 'hello from greetlib\\n'"

# with the vendored package out of the way, the app must fail: the greeting has to come from it
mv /app/vendor/greetlib /tmp/greetlib.away || fail "cannot move the package aside"
out=$(cd / && timeout 20 "${clean_env[@]}" bash /app/run.sh 2>/dev/null)
rc=$?
mv /tmp/greetlib.away /app/vendor/greetlib
if [ $rc -eq 0 ] && [ "$out" = "hello from greetlib" ]; then
    fail "run.sh still prints the greeting without /app/vendor/greetlib: it does not use the vendored package"
fi

echo 1 > /logs/verifier/reward.txt
echo PASS
