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


def category_table(projects: list[dict]) -> str:
    """One row per category: counts reaching L3+ and L4 (pass ratio >= 0.9) for envyard, L3 for the baseline,
    and both sides' median wall time."""
    def median(xs: list) -> str:
        xs = sorted(x for x in xs if x is not None)
        if not xs:
            return "–"
        mid = len(xs) // 2
        return f"{(xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2):.0f} s"

    lines = ["| category | projects | envyard L3+ | envyard L4 ≥ 0.9 | baseline L3 | envyard median time | "
             "baseline median time |", "|---|---|---|---|---|---|---|"]
    for cat in sorted({p.get("category", "") for p in projects}):
        ps = [p for p in projects if p.get("category", "") == cat]
        es = [p["envyard"] for p in ps]
        l3 = sum(1 for e in es if (e.get("level") or -1) >= 3)
        l4 = sum(1 for e in es if (e.get("level") or -1) >= 4 and (e.get("pass_ratio") or 0) >= 0.9)
        bl = sum(1 for p in ps if (p.get("baseline") or {}).get("l3"))
        et = median([e.get("wall_time") if e.get("wall_time") is not None else e.get("process_time") for e in es])
        bt = median([(p.get("baseline") or {}).get("wall_time") for p in ps])
        lines.append(f"| {cat} | {len(ps)} | {l3} | {l4} | {bl} | {et} | {bt} |")
    return "\n".join(lines)


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
    print(category_table(data["projects"]))
    print()
    sec = lambda x: f"{x:.0f} s" if x is not None else "–"  # noqa: E731
    disk = s["envyard"].get("median_disk_bytes")
    print(f"L3+: envyard {s['envyard']['l3_plus']:.0%}, baseline {s['baseline']['l3_plus']:.0%} "
          f"({s['baseline'].get('collected_any', 0):.0%} collecting anything); L4 ≥ 0.9: envyard "
          f"{s['envyard']['l4_pass_ge_0.9']:.0%}; median time envyard {sec(s['envyard']['median_wall_time_s'])}, "
          f"baseline {sec(s['baseline']['median_wall_time_s'])}; median disk "
          f"{f'{disk / 1e6:.0f} MB' if disk is not None else '–'}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/setup.json")
