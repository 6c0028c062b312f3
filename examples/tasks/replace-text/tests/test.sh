#!/bin/bash
# Verifier for replace-text: the tree under /app/src must equal tests/expected/src byte for byte, with the
# same set of files (nothing renamed, added or removed).
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin   # ignore tools an agent may have added to /usr/local
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt

/usr/bin/python3 -I - <<'PY' || exit 1
import os, sys

def tree(root):
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            if os.path.islink(p) or not os.path.isfile(p):
                out[rel] = None
            else:
                with open(p, "rb") as f:
                    out[rel] = f.read()
    return out

if not os.path.isdir("/app/src"):
    sys.exit("FAIL: /app/src is missing")
want, got = tree("/tests/expected/src"), tree("/app/src")
problems = []
for rel in sorted(set(want) | set(got)):
    if rel not in got:
        problems.append(f"missing file: {rel}")
    elif rel not in want:
        problems.append(f"unexpected file: {rel}")
    elif got[rel] is None:
        problems.append(f"not a regular file: {rel}")
    elif got[rel] != want[rel]:
        problems.append(f"wrong content: {rel}")
if problems:
    print("FAIL:\n  " + "\n  ".join(problems))
    sys.exit(1)
PY

echo 1 > /logs/verifier/reward.txt
echo PASS
