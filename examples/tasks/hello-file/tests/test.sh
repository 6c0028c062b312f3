#!/bin/bash
# Verifier for hello-file: /app/hello.txt must be exactly "Hello, world!\n".
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin   # ignore tools an agent may have added to /usr/local
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 1; }

f=/app/hello.txt
[ -f "$f" ] || fail "$f does not exist or is not a regular file"
printf 'Hello, world!\n' | cmp -s - "$f" || fail "$f has the wrong content: $(head -c 40 "$f" | od -An -c | tr -s ' \n' ' ')"

echo 1 > /logs/verifier/reward.txt
echo PASS
