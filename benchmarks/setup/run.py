#!/usr/bin/env python3
"""`envyard setup` vs. EnvBench's naive baseline, side by side over a corpus of PyPI sdists or git repositories.

For each project in corpus.toml (one after the other, so the two never compete for the 2 cores):
  1. envyard: `envyard setup pypi:NAME==VERSION --json --out <tmp>` (per-project timeout) → level reached,
     pass ratio, wall time, reason, and the image's disk use (`envyard images --json` → size).
  2. naive baseline (the issue's `pip install -e . && pytest`), in a fresh envyard sandbox over `host` with
     network: the same source copied in, then, each step timed on its own,
         python3 -m venv /opt/v && /opt/v/bin/pip install -e . && /opt/v/bin/pip install pytest
         /opt/v/bin/python -m pytest --collect-only -q      # L3 when it exits 0 with more than zero tests
         /opt/v/bin/python -m pytest -q                     # L4 when the tests ran; pass ratio from its summary
     Its `wall_time` is the sandbox + install + the test run (what `pip install -e . && pytest` costs);
     `wall_time_collect` the sandbox + install + the collection (EnvBench's cheaper check, the figure
     recorded before 2026-12-04).

With `--corpus git_corpus.toml` (entries are `[[repo]]` tables) the source is instead a local git repository
at a pinned commit, made by git_corpus.py from a Debian orig tarball: envyard gets `envyard setup REPO --rev
COMMIT`, and the baseline the same commit's tree (cloned the way `envyard setup` fetches it).

Prints a rich table and a summary, writes JSON (results + machine info + date). See README.md here.

    python benchmarks/setup/run.py                      # store in /var/tmp/envyard-setup-bench
    python benchmarks/setup/run.py --only six,idna      # a subset
    python benchmarks/setup/run.py --corpus benchmarks/setup/git_corpus.toml --only decorator,flit
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE / "corpus.toml"
DEFAULT_JSON = HERE.parent / "results" / "setup.json"
DEFAULT_HOME = "/var/tmp/envyard-setup-bench"
BASELINE_INSTALL = "python3 -m venv /opt/v && /opt/v/bin/pip install -e . && /opt/v/bin/pip install pytest"
BASELINE_COLLECT = "/opt/v/bin/python -m pytest --collect-only -q"
BASELINE_RUN = "/opt/v/bin/python -m pytest -q"
BASELINE = f"{BASELINE_INSTALL} && {BASELINE_COLLECT}; {BASELINE_RUN}"  # as recorded in the JSON
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
            "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def envyard_cmd() -> list[str]:
    exe = shutil.which("envyard")
    return [exe] if exe else [sys.executable, "-m", "envyard.cli.main"]


# ---- envyard ---------------------------------------------------------------------------------------------------

def source_args(p: dict) -> list[str]:
    """What `envyard setup` is given for a corpus entry: the PyPI release, or the git repository at its commit."""
    if p.get("repo_path"):
        return [p["repo_path"], "--rev", p["commit"]]
    return [f"pypi:{p['name']}=={p['version']}"]


TERM_GRACE = 60  # s a timed-out setup gets to clean up after SIGTERM


def run_envyard(p: dict, home: str, timeout: float, extra: list[str] | None = None) -> dict:
    name, version = p["name"], p["version"]
    env = {**os.environ, "ENVYARD_HOME": home}
    out_dir = tempfile.mkdtemp(prefix="envyard-setup-bench-")
    image = f"bench/{re.sub(r'[^a-z0-9._-]', '-', name.lower())}:{re.sub(r'[^A-Za-z0-9._-]', '-', version)}"
    cmd = envyard_cmd() + ["setup", *source_args(p), "--json", "--out", out_dir, "--name", image,
                           "--timeout", str(int(max(60, timeout / 3))),  # per step: install, tests and replay fit in `timeout`
                           # the search stops in time for the replay: a result (the best finished branch, or how far
                           # the furthest got) rather than a killed process
                           "--time-limit", str(int(max(60, timeout * 0.6))),
                           *(extra or [])]
    t = time.monotonic()
    res: dict = {"level": None, "pass_ratio": None, "wall_time": None, "reason": "", "image": None, "disk": None}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGTERM first: setup stops its branches and removes its sandboxes and step images (as on Ctrl-C);
        # whatever is still running after the grace period is killed with the whole group.
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=TERM_GRACE)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the group of the process started just above
            proc.communicate()
        res.update(reason=f"benchmark timeout: envyard setup passed {timeout:.0f}s", process_time=time.monotonic() - t)
        shutil.rmtree(out_dir, ignore_errors=True)
        return res
    res["process_time"] = time.monotonic() - t
    res["exit_code"] = proc.returncode
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError:
        tail = (stderr.strip() or stdout.strip()).splitlines()[-3:]
        res["reason"] = f"envyard exited {proc.returncode} without JSON: {' | '.join(tail)[:400]}"
        shutil.rmtree(out_dir, ignore_errors=True)
        return res
    if isinstance(data, dict) and "level" in data:
        res.update(level=data["level"], pass_ratio=data.get("pass_ratio"), wall_time=data.get("wall_time"),
                   reason=data.get("reason", ""), image=data.get("image"), tests_total=data.get("tests_total"),
                   levels=[{k: lv.get(k) for k in ("level", "name", "ok", "detail", "seconds")}
                           for lv in data.get("levels", [])],
                   steps=[s.get("command") for s in (data.get("recipe") or {}).get("steps", [])],
                   verified=data.get("verified"), repairs=data.get("repairs", []),
                   interpreter=((data.get("recipe") or {}).get("interpreter") or {}).get("provider"),
                   cutoff=(data.get("recipe") or {}).get("cutoff"),
                   branches=[f"{b['candidate']}: {b['state']} L{b['level']}" for b in data.get("branches", [])],
                   # EnvBench's criterion: L2's count of missing imports in the final environment (after the
                   # completeness pass, when it was kept), and what the pass did
                   missing_imports=data.get("missing_imports"),
                   dedupe=data.get("dedupe") or {},  # files of the saved image now shared with earlier layers
                   completion={k: (data.get("completion") or {}).get(k) for k in
                               ("kept", "missing_before", "missing_after", "seconds", "detail", "installed", "mapped",
                                "not_installed", "tested")},
                   # where the time after the search went: the replay, and how much of it ran beside the search
                   replay={k: (data.get("replay") or {}).get(k) for k in ("ok", "seconds", "detail", "head_start")},
                   branch_seconds=[b.get("seconds") for b in data.get("branches", [])])
    else:
        res["reason"] = f"envyard error: {json.dumps(data)[:400]}"
    if res["image"]:
        res["disk"] = image_size(res["image"], home)
    shutil.rmtree(out_dir, ignore_errors=True)
    return res


def image_size(image: str, home: str) -> int | None:
    r = subprocess.run(envyard_cmd() + ["images", "--json"], capture_output=True, text=True,
                       env={**os.environ, "ENVYARD_HOME": home}, timeout=120)
    try:
        for img in json.loads(r.stdout):
            if img.get("name") == image:
                return img.get("size")
    except json.JSONDecodeError:
        pass
    return None


# ---- naive baseline --------------------------------------------------------------------------------------------

def run_baseline(yard, p: dict, timeout: float) -> dict:
    from envyard.setup.sources_fetch import fetch, fetch_pypi

    res: dict = {"l3": False, "l4": False, "collected": 0, "pass_ratio": None, "wall_time": None,
                 "wall_time_collect": None, "reason": ""}
    try:
        if p.get("repo_path"):  # the same commit envyard gets, cloned the same way
            fetched = fetch(p["repo_path"], rev=p["commit"])
        else:
            fetched = fetch_pypi(f"pypi:{p['name']}=={p['version']}")
    except Exception as e:  # noqa: BLE001 - recorded, not fatal
        res["reason"] = f"fetch failed: {e}"
        return res
    try:
        t = time.monotonic()
        with yard.sandbox("host", network="host", workdir="/") as sb:
            workdir = f"/work/{fetched.root.name}"
            sb.upload(fetched.root, workdir)

            def step(cmd: str):
                return sb.exec(cmd, cwd=workdir, env=BASE_ENV, timeout=max(1.0, timeout - (time.monotonic() - t)),
                               max_output=200_000)

            inst = step(BASELINE_INSTALL)
            ready = time.monotonic() - t  # the sandbox and the install, shared by both figures
            c = step(BASELINE_COLLECT) if inst.exit_code == 0 else inst
            res["wall_time_collect"] = ready + (c.duration if c is not inst else 0)
            r = step(BASELINE_RUN) if inst.exit_code == 0 else inst
            res["wall_time"] = ready + (r.duration if r is not inst else 0)
        res["exit_code"] = c.exit_code
        m = re.search(r"(\d+) tests? collected", c.stdout) or re.search(r"^(\d+) tests?\b", c.stdout, re.M)
        count = int(m.group(1)) if m else sum(1 for line in c.stdout.splitlines() if "::" in line)
        res["collected"] = count
        res["l3"] = c.exit_code == 0 and count > 0
        counts = pytest_counts(r.stdout) if inst.exit_code == 0 else {}
        res["counts"] = counts
        counted = sum(counts.get(k, 0) for k in ("passed", "failed", "error"))
        res["pass_ratio"] = counts.get("passed", 0) / counted if counted else None
        res["l4"] = res["l3"] and res["pass_ratio"] is not None  # the tests ran, whatever their exit code
        if c.timed_out or r.timed_out:
            res["reason"] = f"timed out after {timeout:.0f}s"
        elif not res["l3"]:
            lines = [ln for ln in (c.stdout + c.stderr).strip().splitlines() if ln.strip()]
            errs = [ln for ln in lines if re.search(r"error|Error|ERROR", ln)]
            res["reason"] = f"exit {c.exit_code}, {count} collected: " + (errs[-1] if errs else (lines or [""])[-1])[:300]
    except Exception as e:  # noqa: BLE001
        res["reason"] = f"sandbox error: {e}"
    finally:
        fetched.cleanup()
    return res


def pytest_counts(stdout: str) -> dict[str, int]:
    """The counts of pytest's last summary line (`3 failed, 10 passed, 1 error in 2.1s`); {} without one."""
    for line in reversed(stdout.strip().splitlines()):
        found = re.findall(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b", line)
        if found and re.search(r"\bin [\d.]+s\b", line):
            out: dict[str, int] = {}
            for n, kind in found:
                kind = "error" if kind.startswith("error") else kind
                out[kind] = out.get(kind, 0) + int(n)
            return out
    return {}


# ---- report ----------------------------------------------------------------------------------------------------

def machine_info() -> dict:
    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        mem = Path("/proc/meminfo").read_text().splitlines()[0].split(":", 1)[1].strip()
    except (OSError, IndexError):
        pass
    import envyard
    return {"hostname": platform.node(), "nproc": os.cpu_count(), "cpu_model": cpu_model, "mem_total": mem,
            "kernel": platform.release(), "os": _os_release(), "python_runner": platform.python_version(),
            "python_sandbox": subprocess.run(["/usr/bin/python3", "-V"], capture_output=True, text=True).stdout.strip(),
            "envyard": getattr(envyard, "__version__", "?"), "loadavg": os.getloadavg()}


def _os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.platform()


def summarize(rows: list[dict]) -> dict:
    n = len(rows)
    ey = [r["envyard"] for r in rows]
    bl = [r["baseline"] for r in rows]
    ey_times = [e["wall_time"] if e["wall_time"] is not None else e.get("process_time") for e in ey]
    bl_times = [b["wall_time"] for b in bl]
    # per project: envyard's time over the baseline's (the median of ratios does not mix projects' sizes)
    ratios = [e / b for e, b in zip(ey_times, bl_times) if e is not None and b]
    ratios_collect = [e / b["wall_time_collect"] for e, b in zip(ey_times, bl)
                      if e is not None and b.get("wall_time_collect")]
    med = lambda xs: statistics.median([x for x in xs if x is not None]) if any(x is not None for x in xs) else None  # noqa: E731
    return {
        "projects": n,
        "envyard": {
            "l3_plus": sum(1 for e in ey if (e["level"] or -1) >= 3) / n if n else None,
            "l4_pass_ge_0.9": sum(1 for e in ey if (e["level"] or -1) >= 4 and (e["pass_ratio"] or 0) >= 0.9) / n if n else None,
            "median_wall_time_s": med(ey_times),
            "median_disk_bytes": med([e["disk"] for e in ey]),
            "zero_missing_imports": sum(1 for e in ey if e.get("missing_imports") == 0) / n if n else None,
            "median_missing_imports": med([e.get("missing_imports") for e in ey]),
        },
        "baseline": {
            "l3_plus": sum(1 for b in bl if b["l3"]) / n if n else None,
            # pytest found tests but exited non-zero (collection errors in some modules): not L3 here, as for envyard
            "collected_any": sum(1 for b in bl if b.get("collected", 0) > 0) / n if n else None,
            "l4_pass_ge_0.9": sum(1 for b in bl if b.get("l4") and (b.get("pass_ratio") or 0) >= 0.9) / n if n else None,
            "median_wall_time_s": med(bl_times),
            "median_wall_time_collect_s": med([b.get("wall_time_collect") for b in bl]),
        },
        "median_time_ratio": med(ratios),  # envyard / baseline (install + tests run), per project
        "median_time_ratio_collect": med(ratios_collect),  # envyard / baseline (install + collect only)
    }


def fmt_t(x) -> str:
    return f"{x:.0f}s" if x is not None else "–"


def fmt_missing(e: dict) -> str:
    """L2's missing-import count; `before→after` when the completeness pass was kept."""
    n, c = e.get("missing_imports"), e.get("completion") or {}
    if n is None:
        return "–"
    return f"{c['missing_before']}→{n}" if c.get("kept") and c.get("missing_before") is not None else str(n)


def print_report(rows: list[dict], summary: dict) -> None:
    t = Table("project", "version", "category", "envyard level", "pass ratio", "missing imports", "time", "disk",
              "baseline level", "baseline pass ratio", "baseline time", title="envyard setup vs. naive baseline")
    for r in rows:
        e, b = r["envyard"], r["baseline"]
        lvl = f"L{e['level']}" if e["level"] is not None and e["level"] >= 0 else "none"
        color = "green" if (e["level"] or -1) >= 3 else "red"
        t.add_row(r["name"], r["version"], r.get("category", ""), f"[{color}]{lvl}[/]",
                  f"{e['pass_ratio']:.3f}" if e["pass_ratio"] is not None else "–", fmt_missing(e),
                  fmt_t(e["wall_time"] if e["wall_time"] is not None else e.get("process_time")),
                  f"{e['disk'] / 1e6:.0f} MB" if e["disk"] is not None else "–",
                  "[green]L4[/]" if b.get("l4") else "[green]L3[/]" if b["l3"] else "[red]below L3[/]",
                  f"{b['pass_ratio']:.3f}" if b.get("pass_ratio") is not None else "–", fmt_t(b["wall_time"]))
    console.print(t)
    s = summary
    pct = lambda x: f"{100 * x:.0f}%" if x is not None else "–"  # noqa: E731
    st = Table("", "envyard", "naive baseline", title=f"summary over {s['projects']} projects")
    st.add_row("share at L3+", pct(s["envyard"]["l3_plus"]), pct(s["baseline"]["l3_plus"]))
    st.add_row("  (baseline: >0 collected, ignoring exit code)", "", pct(s["baseline"].get("collected_any")))
    st.add_row("share at L4 with pass ratio ≥ 0.9", pct(s["envyard"]["l4_pass_ge_0.9"]),
               pct(s["baseline"]["l4_pass_ge_0.9"]))
    st.add_row("median wall time", fmt_t(s["envyard"]["median_wall_time_s"]), fmt_t(s["baseline"]["median_wall_time_s"]))
    st.add_row("  (baseline: install + collect only)", "", fmt_t(s["baseline"].get("median_wall_time_collect_s")))
    ratio = lambda x: f"{x:.2f}×" if x is not None else "–"  # noqa: E731
    st.add_row("median of per-project time ratios, envyard / baseline", ratio(s.get("median_time_ratio")),
               f"(vs collect only: {ratio(s.get('median_time_ratio_collect'))})")
    st.add_row("share with zero missing imports (EnvBench)", pct(s["envyard"].get("zero_missing_imports")), "–")
    md = s["envyard"]["median_disk_bytes"]
    st.add_row("median image disk use", f"{md / 1e6:.0f} MB" if md is not None else "–", "–")
    console.print(st)
    failures = [r for r in rows if (r["envyard"]["level"] or -1) < 4 or r["envyard"]["reason"] or not r["baseline"]["l3"]]
    if failures:
        console.print("[bold]reasons[/]")
        for r in failures:
            if r["envyard"]["reason"] or (r["envyard"]["level"] or -1) < 4:
                console.print(f"  {escape(r['name'])} envyard: {escape(r['envyard']['reason'] or 'L' + str(r['envyard']['level']))}")
            if not r["baseline"]["l3"]:
                console.print(f"  {escape(r['name'])} baseline: {escape(r['baseline']['reason'])}")


def load_corpus(path: Path, only: str, repos: Path | None) -> list[dict]:
    """The corpus entries to run. A git corpus's repositories are made (or found) at their pinned commits first;
    one that cannot be made stops the run with git_corpus.py's one-line reason."""
    data = tomllib.loads(path.read_text())
    entries = data.get("project") or data.get("repo")
    if not entries:
        sys.exit(f"error: {path} has neither [[project]] nor [[repo]] entries — give corpus.toml or git_corpus.toml")
    if only:
        wanted = {n.strip() for n in only.split(",")}
        unknown = wanted - {p["name"] for p in entries}
        if unknown:
            sys.exit(f"error: not in {path}: {', '.join(sorted(unknown))} — check the names given to --only")
        entries = [p for p in entries if p["name"] in wanted]
    if "repo" in data:
        import git_corpus  # beside this file

        for p in entries:
            try:
                repo, _ = git_corpus.ensure(p, repos or git_corpus.DEFAULT_CACHE)
            except git_corpus.CorpusError as e:
                sys.exit(f"error: {e}")
            p["repo_path"] = str(repo)
    return entries


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", default=DEFAULT_HOME, help=f"envyard store (ENVYARD_HOME), default {DEFAULT_HOME}")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="corpus.toml (PyPI releases, default) or "
                    "git_corpus.toml (git repositories at pinned commits)")
    ap.add_argument("--repos", type=Path, default=None, help="cache of the git corpus's tarballs and repositories "
                    "(default: git_corpus.py's, /var/tmp/envyard-git-corpus)")
    ap.add_argument("--json", type=Path, default=DEFAULT_JSON, dest="json_out")
    ap.add_argument("--timeout", type=float, default=600, help="per project and side (s), default 600")
    ap.add_argument("--only", default="", help="comma-separated project names")
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--no-complete", action="store_true", help="pass --no-complete to envyard setup (no completeness "
                    "pass), to measure what the pass costs and gains")
    ap.add_argument("--keep-images", action="store_true", help="keep the bench/* images (default: removed at the end)")
    args = ap.parse_args()

    os.environ["ENVYARD_HOME"] = args.home
    Path(args.home).mkdir(parents=True, exist_ok=True)
    import envyard

    corpus = load_corpus(args.corpus, args.only, args.repos)
    started = dt.datetime.now(dt.timezone.utc)
    t0 = time.monotonic()
    yard = envyard.Yard(args.home)
    rows = []
    for i, p in enumerate(corpus, 1):
        name, version = p["name"], p["version"]
        console.print(f"[{i}/{len(corpus)}] {name}=={version}: envyard setup …")
        e = run_envyard(p, args.home, args.timeout, ["--no-complete"] if args.no_complete else [])
        console.print(f"    envyard L{e['level']} ratio={e['pass_ratio']} {fmt_t(e['wall_time'])} {escape(e['reason'])}")
        if args.skip_baseline:
            b = {"l3": False, "l4": False, "collected": 0, "pass_ratio": None, "wall_time": None,
                 "wall_time_collect": None, "reason": "skipped"}
        else:
            console.print(f"[{i}/{len(corpus)}] {name}=={version}: naive baseline …")
            b = run_baseline(yard, p, args.timeout)
            console.print(f"    baseline L3={'yes' if b['l3'] else 'no'} ({b['collected']} tests) "
                          f"ratio={b.get('pass_ratio')} {fmt_t(b['wall_time'])} "
                          f"(collect only {fmt_t(b.get('wall_time_collect'))}) {escape(b['reason'])}")
        rows.append({"name": name, "version": version, "category": p.get("category", ""), "note": p.get("note", ""),
                     **({"commit": p["commit"], "source": f"{p['source']} {p['version']} ({p['suite']})"}
                        if p.get("repo_path") else {}),
                     "envyard": e, "baseline": b})
        # after every project, so a run stopped part-way still leaves what it measured
        write_json(args, rows, started, time.monotonic() - t0, complete=False)

    disk = layers_on_disk(args.home)  # before the images go
    if disk:
        console.print(f"layers on the sandbox volume: {disk['referenced'] / 1e9:.2f} GB referenced by files, "
                      f"{disk['on_disk'] / 1e9:.2f} GB on disk ({disk['shared'] / 1e9:.2f} GB of it shared)")
    if not args.keep_images:
        images = [r["envyard"]["image"] for r in rows if r["envyard"].get("image")]
        if images:
            subprocess.run(envyard_cmd() + ["rmi", *images], capture_output=True, env={**os.environ})
    gc = subprocess.run(envyard_cmd() + ["gc", "--json"], capture_output=True, text=True, env={**os.environ})
    total = time.monotonic() - t0

    summary = write_json(args, rows, started, total, complete=True, gc=gc.stdout.strip()[:2000], disk=disk)
    print_report(rows, summary)
    console.print(f"total run time {total / 60:.1f} min")
    console.print(f"JSON written to {args.json_out}")
    return 0


def layers_on_disk(home: str) -> dict | None:
    """What the store's layers on the sandbox volume take, by btrfs's own accounting (`btrfs filesystem du`):
    `referenced` counts every file's extents once per file (the cost without any sharing), `on_disk` counts each
    extent once (exclusive + shared), `shared` the extents more than one file refers to. None without a volume."""
    layers = Path(home) / "volume" / "layers"
    if not layers.is_dir():
        return None
    os.sync()  # data still in the page cache has no extents yet
    r = subprocess.run(["btrfs", "filesystem", "du", "-s", "--raw", str(layers)], capture_output=True, text=True,
                       env={**os.environ, "PATH": "/usr/sbin:/sbin:" + os.environ.get("PATH", "")})
    try:
        referenced, exclusive, shared = (int(x) for x in r.stdout.splitlines()[-1].split()[:3])
    except (IndexError, ValueError):
        return None
    return {"referenced": referenced, "on_disk": exclusive + shared, "exclusive": exclusive, "shared": shared}


def write_json(args, rows: list[dict], started: dt.datetime, total: float, *, complete: bool, gc: str = "",
               disk: dict | None = None) -> dict:
    """Write the results so far (`complete` false until the last project is done); returns the summary."""
    summary = summarize(rows)
    summary["by_category"] = {c: summarize([r for r in rows if r["category"] == c])
                              for c in sorted({r["category"] for r in rows})}
    result = {"benchmark": "setup", "date": started.isoformat(timespec="seconds"), "run_time_s": round(total, 1),
              "complete": complete, "corpus": str(args.corpus), "machine": machine_info(), "home": args.home,
              "timeout_s": args.timeout, "baseline_command": BASELINE, "summary": summary, "projects": rows, "gc": gc,
              "layers_on_disk": disk}
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return summary


if __name__ == "__main__":
    sys.exit(main())
