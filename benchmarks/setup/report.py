"""Markdown tables from one or more `run.py --json` results, for docs/benchmarks.md.

    python benchmarks/setup/report.py first.json rerun.json

A project in a later file replaces the same project from an earlier one (a re-run after a fix); the `run`
column says which file each row comes from. Prints the per-project table, the per-category table and the
summary against issue #11's targets (L3 >= 90 %, L4 with pass ratio >= 0.9 >= 80 %, median time <= 2x the
naive baseline's, zero missing imports on >= 40 %).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import summarize  # noqa: E402  (this directory is not a package)


def pct(x) -> str:
    return f"{100 * x:.0f} %" if x is not None else "–"


def secs(x) -> str:
    return f"{x:.0f} s" if x is not None else "–"


def level(e: dict) -> str:
    return f"L{e['level']}" if e.get("level") is not None and e["level"] >= 0 else "–"


def why(e: dict) -> str:
    return (e.get("reason") or "").replace("|", "/").replace("\n", " ")[:160]


def merged(paths: list[Path]) -> list[dict]:
    rows: dict[str, dict] = {}
    for i, path in enumerate(paths, 1):
        for r in json.loads(path.read_text())["projects"]:
            rows[r["name"]] = {**r, "run": i}
    return list(rows.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", type=Path, help="run.py --json files, oldest first")
    args = ap.parse_args()
    rows = merged(args.results)
    print("| project | category | run | envyard | pass ratio | missing imports | time | baseline L3 | baseline time "
          "| why not L4 ≥ 0.9 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        e, b = r["envyard"], r["baseline"]
        t = e["wall_time"] if e["wall_time"] is not None else e.get("process_time")
        ok = (e.get("level") or -1) >= 4 and (e.get("pass_ratio") or 0) >= 0.9
        print(f"| {r['name']} {r['version']} | {r['category']} | {r['run']} | {level(e)} | "
              f"{e['pass_ratio']:.3f} |" if e.get("pass_ratio") is not None else
              f"| {r['name']} {r['version']} | {r['category']} | {r['run']} | {level(e)} | – |", end="")
        print(f" {e.get('missing_imports', '–') if e.get('missing_imports') is not None else '–'} | {secs(t)} | "
              f"{'yes' if b.get('l3') else 'no'} | {secs(b.get('wall_time'))} | {'' if ok else why(e)} |")
    print()
    print("| category | projects | envyard L3+ | envyard L4 ≥ 0.9 | baseline L3 | envyard median time | "
          "baseline median time |")
    print("|---|---|---|---|---|---|---|")
    for cat in sorted({r["category"] for r in rows}):
        s = summarize([r for r in rows if r["category"] == cat])
        n = s["projects"]
        print(f"| {cat} | {n} | {round(s['envyard']['l3_plus'] * n)} | {round(s['envyard']['l4_pass_ge_0.9'] * n)} | "
              f"{round(s['baseline']['l3_plus'] * n)} | {secs(s['envyard']['median_wall_time_s'])} | "
              f"{secs(s['baseline']['median_wall_time_s'])} |")
    s = summarize(rows)
    e, b = s["envyard"], s["baseline"]
    ratio = (e["median_wall_time_s"] / b["median_wall_time_s"]) if e["median_wall_time_s"] and b["median_wall_time_s"] \
        else None
    print()
    print(f"| over {s['projects']} projects | envyard | naive baseline | target | met |")
    print("|---|---|---|---|---|")
    print(f"| L3+ | {pct(e['l3_plus'])} | {pct(b['l3_plus'])} | ≥ 90 % | {'✓' if e['l3_plus'] >= 0.9 else '✗'} |")
    print(f"| L4, pass ratio ≥ 0.9 | {pct(e['l4_pass_ge_0.9'])} | never runs the tests | ≥ 80 % | "
          f"{'✓' if e['l4_pass_ge_0.9'] >= 0.8 else '✗'} |")
    print(f"| median wall time | {secs(e['median_wall_time_s'])} | {secs(b['median_wall_time_s'])} | ≤ 2× baseline | "
          f"{'–' if ratio is None else ('✓' if ratio <= 2 else '✗') + f' ({ratio:.1f}×)'} |")
    zero = e.get("zero_missing_imports")
    print(f"| zero missing imports | {pct(zero)} | – | ≥ 40 % | {'–' if zero is None else '✓' if zero >= 0.4 else '✗'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
