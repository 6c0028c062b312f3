#!/usr/bin/env python3
"""Print a setup-benchmark JSON (benchmarks/results/setup*.json, written by run.py) as a Markdown table.

    python benchmarks/setup/report.py benchmarks/results/setup.json
    python benchmarks/setup/report.py first.json rerun.json     # a later file's projects replace the earlier's

With several files (a re-run of some projects after a fix), the `run` column says which file each row comes
from. The last table holds the rows against issue #11's targets (the merged rows, with several files), with the
median of per-project time ratios also over only the projects the baseline sets up too.
"""

from __future__ import annotations

import json
import statistics
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
    """One row per category: counts reaching L3+ and L4 (pass ratio >= 0.9) for envyard and for the baseline
    (its L4 only in runs that ran its tests: from 2026-12-04), and both sides' median wall time."""
    def median(xs: list) -> str:
        xs = sorted(x for x in xs if x is not None)
        if not xs:
            return "–"
        mid = len(xs) // 2
        return f"{(xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2):.0f} s"

    lines = ["| category | projects | envyard L3+ | envyard L4 ≥ 0.9 | baseline L3 | baseline L4 ≥ 0.9 | "
             "envyard median time | baseline median time |", "|---|---|---|---|---|---|---|---|"]
    for cat in sorted({p.get("category", "") for p in projects}):
        ps = [p for p in projects if p.get("category", "") == cat]
        es = [p["envyard"] for p in ps]
        l3 = sum(1 for e in es if (e.get("level") or -1) >= 3)
        l4 = sum(1 for e in es if (e.get("level") or -1) >= 4 and (e.get("pass_ratio") or 0) >= 0.9)
        bl = sum(1 for p in ps if (p.get("baseline") or {}).get("l3"))
        bl4 = sum(1 for p in ps if (p.get("baseline") or {}).get("l4")
                  and ((p.get("baseline") or {}).get("pass_ratio") or 0) >= 0.9)
        et = median([e.get("wall_time") if e.get("wall_time") is not None else e.get("process_time") for e in es])
        bt = median([(p.get("baseline") or {}).get("wall_time") for p in ps])
        lines.append(f"| {cat} | {len(ps)} | {l3} | {l4} | {bl} | {bl4} | {et} | {bt} |")
    return "\n".join(lines)


def merged(paths: list[str]) -> list[dict]:
    """The projects of all files, a later file's entry replacing an earlier one of the same name; each tagged
    with the (1-based) number of the file it comes from. A later run made with --skip-baseline keeps the
    earlier run's baseline (the baseline does not depend on envyard's code)."""
    rows: dict[str, dict] = {}
    for i, path in enumerate(paths, 1):
        for p in json.load(open(path))["projects"]:
            skipped = (p.get("baseline") or {}).get("reason") == "skipped"
            earlier = rows.get(p["name"], {}).get("baseline")
            rows[p["name"]] = {**p, "run": i, **({"baseline": earlier} if skipped and earlier else {})}
    return list(rows.values())


def targets(projects: list[dict]) -> str:
    """The merged rows against issue #11's targets: L3 >= 90 %, L4 (pass ratio >= 0.9) >= 80 %, median time
    <= 2x the naive baseline's, zero missing imports on >= 40 %."""
    n = len(projects)
    es = [p["envyard"] for p in projects]
    l3 = sum(1 for e in es if (e.get("level") or -1) >= 3) / n
    l4 = sum(1 for e in es if (e.get("level") or -1) >= 4 and (e.get("pass_ratio") or 0) >= 0.9) / n
    zero = sum(1 for e in es if e.get("missing_imports") == 0) / n
    et = statistics.median([e.get("wall_time") if e.get("wall_time") is not None else e.get("process_time") or 0
                            for e in es])
    bts = [(p.get("baseline") or {}).get("wall_time") for p in projects]
    bt = statistics.median([t for t in bts if t is not None]) if any(t is not None for t in bts) else None
    ratio = f"{et / bt:.1f}× the baseline's {bt:.0f} s" if bt else "no baseline"
    mark = lambda ok: "✓" if ok else "✗"  # noqa: E731
    # Per project: envyard's time over the baseline's, over all projects and over those the baseline sets up
    # too (L4, pass ratio >= 0.9), where both sides end with the same result; elsewhere the baseline's time is
    # that of a failure, often at its first step.
    ratios, alike = [], []
    for p in projects:
        e, b = p["envyard"], p.get("baseline") or {}
        t = e.get("wall_time") if e.get("wall_time") is not None else e.get("process_time")
        if t and b.get("wall_time"):
            ratios.append(t / b["wall_time"])
            if b.get("l4") and (b.get("pass_ratio") or 0) >= 0.9:
                alike.append(t / b["wall_time"])
    per = lambda xs: f"{statistics.median(xs):.2f}× ({len(xs)} projects)" if xs else "–"  # noqa: E731
    return "\n".join([f"| over {n} projects | envyard | target | met |", "|---|---|---|---|",
                      f"| L3+ | {l3:.0%} | ≥ 90 % | {mark(l3 >= 0.9)} |",
                      f"| L4, pass ratio ≥ 0.9 | {l4:.0%} | ≥ 80 % | {mark(l4 >= 0.8)} |",
                      f"| median wall time | {et:.0f} s ({ratio}) | ≤ 2× baseline | {mark(bool(bt) and et <= 2 * bt)} |",
                      f"| median of per-project time ratios | {per(ratios)} | ≤ 2× | "
                      f"{mark(bool(ratios) and statistics.median(ratios) <= 2)} |",
                      f"| same, where the baseline reaches L4 ≥ 0.9 too | {per(alike)} | | |",
                      f"| zero missing imports | {zero:.0%} | ≥ 40 % | {mark(zero >= 0.4)} |"])


def main(paths: list[str]) -> None:
    if len(paths) > 1:
        projects = merged(paths)
        print("| project | run | category | envyard | pass ratio | time | how | baseline L3 | why not |")
        print("|---|---|---|---|---|---|---|---|---|")
        for p in projects:
            e, b = p["envyard"], p.get("baseline") or {}
            level = f"L{e['level']}" if e.get("level") is not None else "–"
            ratio = f"{e['pass_ratio']:.3f}" if e.get("pass_ratio") is not None else "–"
            t = e["wall_time"] if e.get("wall_time") else e.get("process_time")
            how, why = cell(p)
            print(f"| {p['name']} {p['version']} | {p['run']} | {p.get('category', '')} | {level} | {ratio} | "
                  f"{f'{t:.0f} s' if t else '–'} | {how} | {'yes' if b.get('l3') else 'no'} | {why} |")
        print()
        print(category_table(projects))
        print()
        print(targets(projects))
        return
    data = json.load(open(paths[0]))
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
    print()
    print(targets(data["projects"]))


if __name__ == "__main__":
    main(sys.argv[1:] or ["benchmarks/results/setup.json"])
