#!/bin/bash
# Verifier for hello-file: /app/hello.txt must be exactly "Hello, world!\n".
set -u
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 1; }

f=/app/hello.txt
[ -f "$f" ] || fail "$f does not exist or is not a regular file"
printf 'Hello, world!\n' | cmp -s - "$f" || fail "$f content is $(od -c "$f" | head -3)"

echo 1 > /logs/verifier/reward.txt
echo PASS
