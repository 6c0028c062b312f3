#!/bin/bash
# Generates /app/data.txt: 1337 lines, some of them empty or blank, ending with a newline.
set -euo pipefail
python3 - <<'PY'
words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
lines = []
for i in range(1, 1338):
    if i % 11 == 0 or i % 17 == 0:
        lines.append("")                      # empty line
    elif i % 29 == 0:
        lines.append("   \t ")                # whitespace only
    else:
        n = (i * 7) % 5 + 1
        lines.append(" ".join(words[(i + k) % len(words)] for k in range(n)) + f" #{i}")
with open("/app/data.txt", "w") as f:
    f.write("\n".join(lines) + "\n")
PY
