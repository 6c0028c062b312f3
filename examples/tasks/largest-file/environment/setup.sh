#!/bin/bash
# Builds /app/data: a tree of files of assorted sizes. The largest regular file is
# archive/2023/q4/export-final.bin (1048583 bytes); the runner-up is only one byte smaller, a directory holds
# more bytes in total than any single file, and a symlink points at a much larger file outside the tree.
set -euo pipefail
python3 - <<'PY'
import os
root = "/app/data"
files = {
    "archive/2023/q4/export-final.bin": 1048583,
    "archive/2023/q3/export.bin": 524288,
    "archive/2022/export-old.bin": 1000000,
    "media/video/intro.mp4": 1048582,
    "media/images/logo.png": 48213,
    "media/images/banner.png": 310774,
    "docs/manual.pdf": 777777,
    "docs/readme.txt": 1200,
    ".cache/blob.tmp": 1048000,
    "notes.txt": 93,
}
for i in range(40):                       # many medium files: their directory is the biggest in total
    files[f"logs/app-{i:02d}.log"] = 200000 + i * 37
for rel, size in files.items():
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pattern = (rel.encode() + b"\n") * (size // (len(rel) + 1) + 1)
    with open(path, "wb") as f:
        f.write(pattern[:size])
os.makedirs(os.path.join(root, "links"), exist_ok=True)
os.symlink(os.path.realpath("/usr/bin/python3"), os.path.join(root, "links", "interpreter"))
os.makedirs(os.path.join(root, "empty", "dir"), exist_ok=True)
PY
