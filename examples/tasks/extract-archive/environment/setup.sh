#!/bin/bash
# Builds /app/bundle.tar.gz from a throw-away staging tree, then removes the tree, so the archive is the only
# copy of its contents. Contents are deterministic; the verifier knows their SHA-256 sums.
set -euo pipefail
stage=$(mktemp -d)
python3 - "$stage" <<'PY'
import os, sys
root = sys.argv[1]
def put(rel, data, mode=0o644):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    os.chmod(p, mode)
put("project/README.md", "# Project\n\nUnpacked from bundle.tar.gz.\n")
put("project/src/main.py", "from util.helpers import double\n\nprint(double(21))\n")
put("project/src/util/__init__.py", "")
put("project/src/util/helpers.py", "def double(x):\n    return 2 * x\n")
put("project/bin/run", "#!/bin/sh\necho running\n", 0o755)
put("project/data/table.bin", bytes(range(256)) * 64)
put("assets/logo.txt", "  _\n (_)\n")
put("assets/fonts/mono.txt", "".join(f"glyph {i}\n" for i in range(500)))
put("CHANGELOG", "1.0.0 - first bundle\n")
os.makedirs(os.path.join(root, "project/data/empty"))
PY
tar -C "$stage" -czf /app/bundle.tar.gz project assets CHANGELOG
rm -rf "$stage"
