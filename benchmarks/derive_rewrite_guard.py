"""The rewrite guard of `envyard derive --rewrite-model` (derive/rewrite.py) on real derived tasks, no model needed.

For every task directory under DIR, simulated replies are checked as a model's would be:
- polite: the issue a well-behaved model writes (the test command and failing tests verbatim, generic prose) —
  every refusal is a false one;
- leaky replies that add, to the polite one: the fixed line of fix.diff (re-spaced), the version a repair
  installs as `pip install NAME==VERSION`, the changed file's base name, a line of a hidden test —
  every acceptance is a missed leak.

    PYTHONPATH=src python benchmarks/derive_rewrite_guard.py /var/tmp/derive-out [--json]
"""

from __future__ import annotations

import json
import re
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

from envyard.derive.rewrite import Secrets, check


def polite(instruction: str) -> str:
    command = re.search(r"test suite \(`([^`]+)`", instruction)
    tests = re.findall(r"(?m)^- `([^`]+)`", instruction)
    return "\n".join(["Tests fail after updating", "", f"Running `{command.group(1) if command else 'the tests'}` "
                      "gives these failures:", *(f"- `{t}`" for t in tests), "",
                      "Please fix the project without touching the tests; some tests are not in my copy."])


def leaks(task: Path, meta: dict) -> dict[str, str]:
    """kind of leak → the sentence a leaky model would add ("" = this task has no such secret)."""
    out = {}
    diff = task / "solution" / "fix.diff"
    added = [l[1:] for l in diff.read_text().splitlines() if l.startswith("+") and not l.startswith("+++")] \
        if diff.is_file() else []
    added = [l for l in added if l.strip()]
    if added:
        tokens = re.findall(r"\w+|\S", added[0])
        out["fixed-line"] = "I think the line should read `" + " ".join(tokens) + "`."
    if meta.get("version") and meta.get("distribution"):
        out["version"] = f"Running `pip install {meta['distribution']}=={meta['version']}` might help."
    if meta.get("file"):
        out["file"] = f"I suspect {meta['file'].rsplit('/', 1)[-1]} changed."
    hidden = sorted((task / "tests" / "hidden").rglob("*.py")) if (task / "tests" / "hidden").is_dir() else []
    lines = [l.strip() for p in hidden for l in p.read_text(errors="replace").splitlines()
             if l.strip().startswith("assert ") and len(l.strip()) >= 20]
    if lines:
        out["hidden-test-line"] = f"The test checks `{lines[len(lines) // 2]}`."
    return out


def main(root: Path, as_json: bool) -> dict:
    tasks = sorted(p.parent for p in root.rglob("task.toml"))
    refused, missed, caught, tried = Counter(), Counter(), Counter(), Counter()
    start = time.monotonic()
    for task in tasks:
        det_path = task / "instruction.deterministic.md"
        det = (det_path if det_path.is_file() else task / "instruction.md").read_text()
        meta = tomllib.loads((task / "task.toml").read_text()).get("metadata", {})
        secrets = Secrets.of(task, det)
        base = polite(det)
        bad = check(det, base, secrets)
        if bad:
            refused[bad[0]] += 1
            continue  # a leak added to a refused reply says nothing about the leak check
        for kind, sentence in leaks(task, meta).items():
            tried[kind] += 1
            result = check(det, base + "\n" + sentence, secrets)
            (caught if result else missed)[kind] += 1
    seconds = time.monotonic() - start
    data = {"tasks": len(tasks), "polite_refused": sum(refused.values()), "polite_refused_by_reason": dict(refused),
            "leaks_tried": dict(tried), "leaks_caught": dict(caught), "leaks_missed": dict(missed),
            "check_ms_per_task": round(1000 * seconds / max(1, len(tasks)), 2)}
    print(json.dumps(data, indent=1) if as_json else "\n".join(f"{k}: {v}" for k, v in data.items()))
    return data


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--json"]
    if len(args) != 1:
        sys.exit("usage: derive_rewrite_guard.py DIR [--json]  (DIR holds derived task directories)")
    main(Path(args[0]), "--json" in sys.argv)
