"""`envyard run host -- true` as a whole process, for two or more source trees side by side (interleaved rounds).

    python benchmarks/cli_start.py --python /opt/envyard-venv/bin/python \
        --tree before=/path/to/old/checkout/src --tree now=src --rounds 20

Each round starts, for every tree in turn, a fresh interpreter (`--python`, e.g. the venv scripts/install.sh
makes) with PYTHONPATH set to the tree, which runs the console script's entry point on `run host -- true`. The
interpreter's bare start (`-c pass`) is measured in the same rounds as the floor. Medians of wall time and of
CPU time (the process and its children: bwrap and the command too). JSON to --json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUN = ("import sys; sys.argv = ['envyard', 'run', 'host', '--', 'true']\n"
       "from envyard.cli.entry import main\n"
       "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n")


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable, help="the interpreter envyard's console script uses")
    ap.add_argument("--tree", action="append", required=True, help="NAME=SRC_DIR (repeatable)")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "cli_start.json")
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree)
    rows = {"python -c pass (floor)": ([args.python, "-c", "pass"], dict(os.environ))}
    for name, src in trees.items():
        rows[name] = ([args.python, "-c", RUN], {**os.environ, "PYTHONPATH": str(Path(src).resolve())})
    samples = {k: [] for k in rows}
    load_before = os.getloadavg()[0]
    for _ in range(args.rounds):
        for k, (cmd, env) in rows.items():
            samples[k].append(timed(cmd, env))
    result = {"python": args.python, "rounds": args.rounds, "load_before": load_before,
              "load_after": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "rows": {k: {"wall_ms": round(1000 * statistics.median(w for w, _ in v), 1),
                           "cpu_ms": round(1000 * statistics.median(c for _, c in v), 1)} for k, v in samples.items()}}
    for k, r in result["rows"].items():
        print(f"{k:28s} wall {r['wall_ms']:7.1f} ms   cpu {r['cpu_ms']:7.1f} ms")
    print(f"load average {load_before:.1f} → {result['load_after']:.1f}, {args.rounds} interleaved rounds")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
