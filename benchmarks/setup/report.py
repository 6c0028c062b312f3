#!/usr/bin/env python3
"""Print a setup-benchmark JSON (benchmarks/results/setup*.json, written by run.py) as a Markdown table.

    python benchmarks/setup/report.py benchmarks/results/setup.json
"""

from __future__ import annotations

import json
import sys


def cell(project: dict) -> tuple[str, str]:
    """(how envyard got there, why it stopped) for one project, from what run.py recorded."""
    e = project["envyard"]
    steps = e.get("steps") or []
    how = []
    if e.get("interpreter") and e["interpreter"] != "host":
        how.append(e["interpreter"].replace("debian:", ""))
    if e.get("cutoff") or any("--exclude-newer" in s for s in steps):
        how.append("cut-off")
    repairs = e.get("repairs")
    if repairs is None:  # older runs: infer from the recipe
        repairs = [s for s in steps if "apt-get" in s] + [s for s in steps if "no-build-isolation" in s]
    if repairs:
        how.append(f"{len(repairs)} repair{'s' if len(repairs) > 1 else ''}")
    why = "" if (e.get("level") or -1) >= 3 and not e.get("reason", "").startswith("benchmark") else e.get("reason", "")
    return ", ".join(how), why.replace("|", "/")[:110]


def main(path: str) -> None:
    data = json.load(open(path))
    print("| project | version | category | envyard | pass ratio | time | disk | how | baseline L3 | why not |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for p in data["projects"]:
        e, b = p["envyard"], p.get("baseline") or {}
        level = f"L{e['level']}" if e.get("level") is not None else "–"
        ratio = f"{e['pass_ratio']:.3f}" if e.get("pass_ratio") is not None else "–"
        time = f"{e['wall_time']:.0f} s" if e.get("wall_time") else "–"
        disk = f"{e['disk'] / 1e6:.0f} MB" if e.get("disk") else "–"
        how, why = cell(p)
        base = "yes" if b.get("l3") else "no"
        print(f"| {p['name']} | {p['version']} | {p.get('category', '')} | {level} | {ratio} | {time} | {disk} | "
              f"{how} | {base} | {why} |")
    s = data["summary"]
    print()
    print(f"L3+: envyard {s['envyard']['l3_plus']:.0%}, baseline {s['baseline']['l3_plus']:.0%} "
          f"({s['baseline'].get('collected_any', 0):.0%} collecting anything); L4 ≥ 0.9: envyard "
          f"{s['envyard']['l4_pass_ge_0.9']:.0%}; median time envyard {s['envyard']['median_wall_time_s']:.0f} s, "
          f"baseline {s['baseline']['median_wall_time_s']:.0f} s; median disk {s['envyard']['median_disk_bytes'] / 1e6:.0f} MB")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/setup.json")
