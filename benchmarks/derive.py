#!/usr/bin/env python3
"""`envyard derive` throughput: tasks derived and validated from many verified setup images.

For each verified `envyard setup` image in the store (the setup benchmark's `bench/*` by default), derive up to
--n code-bug tasks and validate them in forks (noop 0 three times, oracle 1). Reports tasks/hour on this machine,
validation cost per task, the share of candidates kept, and the distribution of kinds, difficulty and drop
reasons. Side by side on the first --compare images: coverage-guided derivation (the default: one traced baseline
run picks sites that tests execute and the test files to run) vs. naive (every site, the whole suite each time).
A sample of the written tasks (--check per image) is run through `envyard task check` and `envyard rollout`
with the oracle and noop policies.

    python benchmarks/derive.py --home /var/tmp/envyard-setup-bench --n 5
    python benchmarks/derive.py --home /var/tmp/envyard-setup-bench --kinds bug,env --total-budget 7200

    python benchmarks/derive.py --home /var/tmp/envyard-setup-bench --images bench/six,bench/attrs --n 20

With --total-budget SECONDS the run has one time budget instead of a count per image: round 1 tries every image
(3 tasks asked, a third of the budget shared out for candidates, the baseline on top); later rounds reuse each
image's baseline and give the images with the cheapest tasks (measured cost per kept task) the most time and the
largest n, never an image that kept nothing, ran out of candidates, or costs 6x the cheapest per task. Round 1
tries every image even when that takes longer than the budget (each image's baseline is paid there: on 20
images at load ~7 round 1 alone took ~3,200 s). --parallel-images images are derived at once (default 2: a
baseline keeps only one core busy), and the wall time reported is the elapsed time. Tasks go to
OUT/guided/IMAGE/rN/. Started in the background from a script, the process ignores SIGINT (the shell's doing):
stop it between images, or with SIGTERM while a baseline runs (derive's own clean-up then does not run).
After the run, --check tasks per image go through `envyard task check` and `envyard rollout` (oracle, noop), and
--harbor tasks per image through Harbor itself (its venv from scripts/install.sh --test).

The store is only read (derived snapshots are written and removed); tasks go to --out. JSON to --json
(default benchmarks/results/derive.json).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

BENCH_DIR = Path(__file__).resolve().parent
SRC = BENCH_DIR.parent / "src"
sys.path.insert(0, str(SRC))

import envyard  # noqa: E402
from envyard.derive.pipeline import Resume, derive  # noqa: E402

console = Console(stderr=True)
BASELINE_TIMEOUT = 240.0  # an image whose suite (or its traced run) takes longer is reported, not derived from


def setup_images(yard, only: list[str] | None, skip: list[str] = ()) -> list[str]:
    names = []
    for img in yard.images():
        prov = img.config.provenance or {}
        if (prov.get("provider") == "setup" and prov.get("verified") and prov.get("test_command")
                and not prov.get("snapshot_of")):  # not a snapshot of one (a derived task's image)
            if any(img.name == o or img.name.split(":")[0] == o for o in skip):
                continue
            if only is None or any(img.name == o or img.name.split(":")[0] == o for o in only):
                names.append(img.name)
    return sorted(names)


def image_dir(out_root: Path, mode: str, image: str) -> Path:
    """Where one image's tasks (and per-round reports) go."""
    return out_root / mode / image.replace("/", "_").replace(":", "_")


def envyard_cli(home: str, *args, timeout=1800) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envyard.cli.main", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, "ENVYARD_HOME": home, "PYTHONPATH": str(SRC)}, timeout=timeout)


def run_one(yard, image: str, out: Path, *, n: int, seed: int, workers: int, guided: bool,
            budget: float | None = None, kinds: tuple[str, ...] = ("bug",), resume: Resume | None = None) -> dict:
    start = time.monotonic()
    try:
        report = derive(yard, image, kinds=list(kinds), n=n, seed=seed, out=out, workers=workers, guided=guided,
                        budget_s=budget, baseline_timeout=BASELINE_TIMEOUT, resume=resume)
        data = report.to_dict()
    except Exception as e:  # noqa: BLE001 — one image's failure is reported, it does not end the whole run
        data = {"image": image, "error": getattr(e, "message", None) or f"{type(e).__name__}: {e}", "kept": 0,
                "candidates": 0, "tasks": [], "dropped_candidates": [], "wall_s": time.monotonic() - start}
    data["mode"] = "guided" if guided else "naive"
    return data


def check_sample(home: str, out: Path, k: int) -> dict:
    """task check + oracle/noop rollouts on the first k tasks of one image's output."""
    tasks = sorted(p.parent for p in out.glob("**/task.toml"))[:k]
    if not tasks:
        return {}
    res = {"tasks": len(tasks)}
    r = envyard_cli(home, "task", "check", *tasks, "--json")
    res["task_check_ok"] = r.returncode == 0
    for policy in ("oracle", "noop"):
        r = envyard_cli(home, "rollout", *tasks, "--policy", policy, "--json")
        try:
            eps = json.loads(r.stdout)["episodes"]
            res[policy] = [e["reward"] for e in eps]
            res[f"{policy}_infra"] = sum(1 for e in eps if e["infra_error"])
        except (ValueError, KeyError):
            res[policy] = f"rollout failed: {r.stderr.strip()[-200:]}"
    return res


HARBOR_VENV = Path(os.environ.get("ENVYARD_HARBOR_VENV", "/var/tmp/envyard-harbor-venv"))  # scripts/install.sh --test


def harbor_sample(home: str, tasks: list[Path], work: Path) -> dict:
    """Harbor itself (its venv, with envyard's Harbor environment) runs the oracle and nop agents on `tasks`:
    task name → reward per agent, as Harbor's result.json files give them."""
    harbor = HARBOR_VENV / "bin" / "harbor"
    if not harbor.exists():
        return {"skipped": f"no Harbor venv at {HARBOR_VENV} (scripts/install.sh --test makes it)"}
    if work.exists():
        shutil.rmtree(work)
    dataset = work / "dataset"
    dataset.mkdir(parents=True)
    for t in tasks:
        shutil.copytree(t, dataset / t.name)
    env = {**os.environ, "PYTHONPATH": str(SRC), "ENVYARD_HOME": home,
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # no fetch of LiteLLM's price list
    res: dict = {"tasks": len(tasks)}
    for agent in ("oracle", "nop"):
        jobs = work / "jobs"
        t = time.monotonic()
        r = subprocess.run([harbor, "run", "-p", dataset, "-a", agent, "--env",
                            "envyard.integrations.harbor:EnvyardEnvironment", "-o", jobs, "--job-name", agent,
                            "-n", "2", "-y", "-q"], env=env, cwd=work, capture_output=True, text=True, timeout=3600)
        rewards = {}
        for result in (jobs / agent).glob("*/result.json"):
            data = json.loads(result.read_text())
            rewards[data["task_name"]] = ((data.get("verifier_result") or {}).get("rewards") or {}).get("reward")
        res[agent] = rewards
        res[f"{agent}_exit"] = r.returncode
        res[f"{agent}_s"] = round(time.monotonic() - t, 1)
        if r.returncode != 0:
            res[f"{agent}_output"] = (r.stdout + r.stderr)[-1000:]
    return res


# --total-budget: round 1 tries every image with a few candidates; later rounds give each image a slice of time
# in proportion to how cheap its tasks were (cost per kept task, the baseline not counted: it is paid once)
FIRST_N = 3  # tasks asked of every image in round 1
SLICE = 150.0  # seconds of candidates a round gives the cheapest image; dearer ones get less, at least MIN_SLICE
MIN_SLICE = 40.0
TOO_DEAR = 6.0  # after round 1, an image whose tasks cost this many times the cheapest image's gets no more rounds


def plan_round(stats: dict[str, dict], left: float) -> list[tuple[str, int, float]]:
    """(image, n, budget seconds) for the next round, cheapest tasks first. `stats`: image → {"kept", "spent"
    (candidate seconds, baseline excluded), "done" (no candidates left, or it failed)}. An image that kept nothing
    gets no more rounds, nor one whose tasks cost TOO_DEAR times the cheapest's (its round would mostly be
    validations of slow suites still in flight past its slice); the others get a slice shrinking with their cost
    per task and n sized to fill it."""
    live = {i: st["spent"] / st["kept"] for i, st in stats.items() if not st["done"] and st["kept"]}
    if not live or left <= 0:
        return []
    best = min(live.values())
    plan = []
    for image, cost in sorted(live.items(), key=lambda kv: (kv[1], kv[0])):
        if cost > TOO_DEAR * best:
            continue
        budget = max(MIN_SLICE, SLICE * best / cost)
        plan.append((image, max(1, round(budget / cost * 1.5)), budget))  # 1.5: room for validations in flight
    return plan


def merge_rounds(reports: list[dict]) -> dict:
    """One image's round reports as one (the per-image row of the table and the summary)."""
    first = dict(reports[0])
    for r in reports[1:]:
        for k in ("kept", "candidates", "dropped", "wall_s", "candidate_cost_s_total"):
            first[k] = round(first.get(k, 0) + r.get(k, 0), 2)
        first["tasks"] = first["tasks"] + r["tasks"]
        first["dropped_candidates"] = first.get("dropped_candidates", []) + r.get("dropped_candidates", [])
        first["dropped_by_reason"] = dict(Counter(first.get("dropped_by_reason", {}))
                                          + Counter(r.get("dropped_by_reason", {})))
        cb = Counter({k: v for k, v in first.get("cost_breakdown", {}).items() if isinstance(v, (int, float))})
        cb.update({k: v for k, v in r.get("cost_breakdown", {}).items() if isinstance(v, (int, float))
                   and k != "baseline_s"})
        first["cost_breakdown"] = {k: round(v, 1) for k, v in cb.items() if k != "total_s_per_kept_task"}
    first["rounds"] = len(reports)
    return first


def run_budget(yard, images: list[str], out_root: Path, args) -> list[dict]:
    """Spend --total-budget seconds: every image once (round 1), then rounds by measured cost per task."""
    start = time.monotonic()
    kinds = tuple(args.kinds.split(","))
    resumes = {i: Resume() for i in images}
    reports: dict[str, list[dict]] = {i: [] for i in images}
    stats: dict[str, dict] = {}

    def one(image, rnd, n, budget):
        out = image_dir(out_root, "guided", image) / f"r{rnd}"
        r = run_one(yard, image, out, n=n, seed=args.seed, workers=args.workers, guided=True, budget=budget,
                    kinds=kinds, resume=resumes[image])
        reports[image].append(r)
        st = stats.setdefault(image, {"kept": 0, "spent": 0.0, "done": False})
        st["kept"] += r["kept"]
        st["spent"] += r["wall_s"] - r.get("facts_s", 0)
        # fewer tasks than asked well before the budget ran out: the candidates are used up
        st["done"] = bool(r.get("error")) or (r["kept"] < n and r["wall_s"] - r.get("facts_s", 0) < budget * 0.8)
        console.print(f"  r{rnd} {image}: {r['kept']}/{n} tasks from {r['candidates']} candidates in "
                      f"{r['wall_s']:.0f}s (total {sum(s['kept'] for s in stats.values())} at "
                      f"{time.monotonic() - start:.0f}s)" + (f" — {r['error']}" if r.get("error") else ""))

    # round 1: every image gets a chance: a third of the budget shared out (at least 30 s, at most 2 × SLICE of
    # candidates each, the baseline not counted)
    first_budget = min(2 * SLICE, max(30.0, 0.35 * args.total_budget * args.parallel_images / max(1, len(images))))

    def first(k, image):
        left = args.total_budget - (time.monotonic() - start)
        console.print(f"[{k + 1}/{len(images)}] round 1: {image} ({left:.0f}s of the budget left)")
        one(image, 1, args.n or FIRST_N, first_budget)

    def later(rnd, image, n, budget):
        left = args.total_budget - (time.monotonic() - start)
        if left > 0:
            one(image, rnd, n, min(budget, left))

    # --parallel-images images at a time: an image's baseline is one test run on one core, so with a single
    # image in flight the other core would idle through every baseline and every round's tail
    with cf.ThreadPoolExecutor(max_workers=args.parallel_images) as pool:
        for f in [pool.submit(first, k, image) for k, image in enumerate(images)]:
            f.result()
        rnd = 1
        while args.total_budget - (time.monotonic() - start) > 0:
            rnd += 1
            plan = plan_round(stats, args.total_budget - (time.monotonic() - start))
            if not plan:
                break
            for f in [pool.submit(later, rnd, image, n, budget) for image, n, budget in plan]:
                f.result()
    return [merge_rounds(reports[i]) for i in images if reports[i]]


def summarize(runs: list[dict], wall: float) -> dict:
    kept = sum(r["kept"] for r in runs)
    cands = sum(r["candidates"] for r in runs)
    per_task = [t["screen_s"] + t["validate_s"] for r in runs for t in r["tasks"]]
    cost_all = sum(r.get("candidate_cost_s_total", 0) for r in runs)
    return {
        "images": len(runs), "images_with_tasks": sum(1 for r in runs if r["kept"]),
        "tasks": kept, "candidates": cands, "kept_share": round(kept / cands, 3) if cands else None,
        "wall_s": round(wall, 1), "tasks_per_hour": round(kept / wall * 3600, 1) if wall else None,
        "validation_s_per_task_median": round(statistics.median(per_task), 2) if per_task else None,
        "sandbox_s_per_kept_task": round(cost_all / kept, 2) if kept else None,  # dropped candidates' cost too
        "baseline_s_median": round(statistics.median([r.get("facts_s", 0) for r in runs]), 2) if runs else None,
        "kinds": dict(Counter(t["kind"] for r in runs for t in r["tasks"])),
        "difficulty": dict(Counter(t["difficulty"] for r in runs for t in r["tasks"])),
        "failing_tests_median": statistics.median([t["failing_tests"] for r in runs for t in r["tasks"]])
        if per_task else None,
        "dropped_by_reason": dict(sum((Counter(r.get("dropped_by_reason", {})) for r in runs), Counter())),
        "cost_breakdown": breakdown(runs, kept),
    }


def breakdown(runs: list[dict], kept: int) -> dict:
    """Worker seconds by phase over all images (derive's cost_breakdown summed) and per kept task."""
    total: Counter = Counter()
    by_reason: Counter = Counter()
    for r in runs:
        cb = r.get("cost_breakdown", {})
        total.update({k: v for k, v in cb.items() if isinstance(v, (int, float)) and k != "total_s_per_kept_task"})
        for c in r.get("dropped_candidates", []):
            by_reason[c["reason"]] += c["screen_s"] + c["validate_s"]
    out = {k: round(v, 1) for k, v in total.items()}
    out["dropped_s_by_reason"] = {k: round(v, 1) for k, v in by_reason.most_common()}
    if kept:
        out["per_kept_task_s"] = {k: round(v / kept, 2) for k, v in total.items()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", default=os.environ.get("ENVYARD_HOME", "/var/tmp/envyard-setup-bench"))
    ap.add_argument("--images", help="comma-separated image names (default: every verified setup image)")
    ap.add_argument("--from-reports", action="store_true", help="summarize the per-image reports an interrupted "
                    "run left in --out instead of deriving")
    ap.add_argument("--wall", type=float, default=0, help="with --from-reports: the run's elapsed seconds (default: "
                    "from OUT/started to the last report; without that file, the sum of the images' times)")
    ap.add_argument("--skip", default="", help="comma-separated image names to leave out")
    ap.add_argument("--n", type=int, default=None, help="tasks per image (default 5; with --total-budget: "
                    f"tasks asked of each image in round 1, default {FIRST_N})")
    ap.add_argument("--total-budget", type=float, default=0, help="seconds for the whole run: every image is "
                    "tried once, then the rest goes to the images whose tasks came cheapest (rounds of adaptive n)")
    ap.add_argument("--kinds", default="bug", help="comma-separated kinds to derive (bug, env, commit)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--parallel-images", type=int, default=2, help="with --total-budget: images derived at once")
    ap.add_argument("--compare", type=int, default=3, help="images also derived naively, side by side")
    ap.add_argument("--check", type=int, default=1, help="tasks per image run through task check and rollouts")
    ap.add_argument("--harbor", type=int, default=1, help="tasks per image run through Harbor itself (oracle and "
                    "nop agents; needs the Harbor venv of scripts/install.sh --test); 0: none")
    ap.add_argument("--out", default="/var/tmp/envyard-derive-bench-out")
    ap.add_argument("--budget", type=float, default=600, help="seconds per image after which no new candidate "
                    "starts (those in flight finish)")
    ap.add_argument("--until", type=float, default=0, help="epoch seconds: until then, also take setup images "
                    "that appear in the store while the benchmark runs")
    ap.add_argument("--json", default=str(BENCH_DIR / "results" / "derive.json"))
    args = ap.parse_args()

    os.environ["ENVYARD_HOME"] = args.home
    out_root = Path(args.out)
    if args.from_reports:
        # an interrupted run: the per-image reports it wrote are summarized as they are
        def load(mode):
            found = []
            for d in sorted(p for p in (out_root / mode).glob("*") if p.is_dir()):
                # one report per image, or one per round of a --total-budget run (r1/, r2/, …)
                rounds = sorted(d.glob("r*/report.json"), key=lambda p: int(p.parent.name[1:]))
                parts = [json.loads(p.read_text()) for p in rounds or [d / "report.json"] if p.exists()]
                if parts:
                    r = merge_rounds(parts)
                    r["mode"] = mode
                    found.append(r)
            return found
        runs, naive_runs = load("guided"), load("naive")
        compared = [r["image"] for r in naive_runs]
        wall = sum(r["wall_s"] for r in runs)  # right when the images ran one after the other
        started = out_root / "started"
        if args.wall:
            wall = args.wall
        elif started.exists() and runs:  # elapsed: from the start to the last report written
            last = max(p.stat().st_mtime for p in (out_root / "guided").glob("**/report.json"))
            wall = last - float(started.read_text())
        naive_wall = sum(r["wall_s"] for r in naive_runs)
        return report(args, runs, wall, naive_runs, naive_wall, compared, out_root)
    if out_root.exists():
        shutil.rmtree(out_root)
    out_root.mkdir(parents=True)
    (out_root / "started").write_text(f"{time.time()}\n")  # --from-reports measures the elapsed time from it
    with envyard.Yard(args.home) as yard:
        images = setup_images(yard, args.images.split(",") if args.images else None, args.skip.split(","))
        if not images:
            sys.exit(f"no verified setup images in {args.home}")
        console.print(f"{len(images)} verified setup images in {args.home}")
        if args.total_budget:
            t = time.monotonic()
            runs = run_budget(yard, images, out_root, args)
            wall = time.monotonic() - t  # elapsed: with images in parallel, less than the sum of their times
            return report(args, runs, wall, [], 0.0, [], out_root)
        args.n = args.n or 5
        runs = []
        done: set[str] = set()
        while True:
            # images the setup benchmark saves while this one runs are taken too, until --until
            todo = [i for i in images if i not in done]
            if not todo and time.time() < args.until:
                images = setup_images(yard, args.images.split(",") if args.images else None, args.skip.split(","))
                todo = [i for i in images if i not in done]
                if not todo and args.until - time.time() > 60:
                    time.sleep(30)
                    continue
            if not todo:
                break
            image = todo[0]
            done.add(image)
            out = image_dir(out_root, "guided", image)
            console.print(f"[{len(done)}/{len(images)}] {image} …")
            r = run_one(yard, image, out, n=args.n, seed=args.seed, workers=args.workers, guided=True,
                        budget=args.budget, kinds=tuple(args.kinds.split(",")))
            runs.append(r)
            console.print(f"    {r['kept']} tasks from {r['candidates']} candidates in {r['wall_s']:.0f}s"
                          + (f" — {r['error']}" if r.get("error") else ""))
        wall = sum(r["wall_s"] for r in runs)  # not the waits for images to appear
        naive_runs, naive_wall = [], 0.0
        compared = [r["image"] for r in runs if r["kept"]][: args.compare]
        for image in compared:
            out = image_dir(out_root, "naive", image)
            t = time.monotonic()
            console.print(f"naive: {image} …")
            naive_runs.append(run_one(yard, image, out, n=args.n, seed=args.seed, workers=args.workers, guided=False,
                                      budget=args.budget, kinds=tuple(args.kinds.split(","))))
            naive_wall += time.monotonic() - t
    report(args, runs, wall, naive_runs, naive_wall, compared, out_root)


def report(args, runs, wall, naive_runs, naive_wall, compared, out_root) -> None:
    checks = {}
    for r in runs:
        if r["kept"] and args.check:
            out = image_dir(out_root, "guided", r["image"])
            checks[r["image"]] = check_sample(args.home, out, args.check)

    harbor = {}
    if args.harbor:  # the first --harbor tasks of each image, through Harbor itself
        sample = []
        for r in runs:
            out = image_dir(out_root, "guided", r["image"])
            sample += sorted(p.parent for p in out.glob("**/task.toml"))[:args.harbor]
        if sample:
            console.print(f"Harbor: oracle and nop on {len(sample)} tasks …")
            harbor = harbor_sample(args.home, sample, out_root / "harbor")

    guided_same = [r for r in runs if r["image"] in compared]
    result = {
        "machine": {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                    "nproc": len(os.sched_getaffinity(0)), "kernel": platform.release(),
                    "python": platform.python_version(), "envyard": envyard.__version__,
                    "loadavg_end": os.getloadavg()},
        "params": {"n": args.n, "seed": args.seed, "workers": args.workers, "kinds": args.kinds.split(","),
                   "total_budget": args.total_budget, "parallel_images": args.parallel_images},
        "summary": summarize(runs, wall),
        "compare": {"images": compared,
                    "guided": summarize(guided_same, sum(r["wall_s"] for r in guided_same)),
                    "naive": summarize(naive_runs, naive_wall)},
        "checks": checks,
        "harbor": harbor,
        "runs": [{k: v for k, v in r.items() if k != "dropped_candidates"} for r in runs],
        "naive_runs": [{k: v for k, v in r.items() if k not in ("dropped_candidates", "tasks")} for r in naive_runs],
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")

    out = Console()
    t = Table("IMAGE", "TESTS", "SUITE S", "CANDIDATES", "KEPT", "WALL S", "S/TASK", "CHECK (oracle / noop)")
    for r in runs:
        c = checks.get(r["image"], {})
        per = [x["screen_s"] + x["validate_s"] for x in r["tasks"]]
        t.add_row(r["image"], str(r.get("baseline_tests", "–")), str(r.get("suite_s", "–")), str(r["candidates"]),
                  str(r["kept"]), f"{r['wall_s']:.0f}", f"{statistics.median(per):.1f}" if per else "–",
                  f"{c.get('oracle')} / {c.get('noop')}" if c else (r.get("error", "")[:40] or "–"))
    out.print(t)
    s = result["summary"]
    out.print(f"{s['tasks']} tasks from {s['images_with_tasks']}/{s['images']} images in {s['wall_s']:.0f}s: "
              f"{s['tasks_per_hour']} tasks/hour; kept {s['kept_share']} of candidates; validation "
              f"{s['validation_s_per_task_median']} s/task (median); difficulty {s['difficulty']}; "
              f"dropped {s['dropped_by_reason']}")
    if harbor.get("tasks"):
        for agent in ("oracle", "nop"):
            got = list(harbor.get(agent, {}).values())
            out.print(f"Harbor {agent}: {len(got)} of {harbor['tasks']} trials, rewards {dict(Counter(got))}"
                      f" (harbor exit {harbor.get(agent + '_exit')}, {harbor.get(agent + '_s')} s)")
    elif harbor:
        out.print(f"Harbor: {harbor.get('skipped')}")
    if not compared:
        console.print(f"JSON: {args.json}")
        return
    c = Table("MODE (same images)", "TASKS", "CANDIDATES", "KEPT SHARE", "WALL S", "TASKS/HOUR", "SANDBOX S / KEPT TASK")
    for mode in ("guided", "naive"):
        m = result["compare"][mode]
        c.add_row(mode, str(m["tasks"]), str(m["candidates"]), str(m["kept_share"]), str(m["wall_s"]),
                  str(m["tasks_per_hour"]), str(m["sandbox_s_per_kept_task"]))
    out.print(c)
    console.print(f"JSON: {args.json}")


if __name__ == "__main__":
    main()
