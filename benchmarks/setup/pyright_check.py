#!/usr/bin/env python3
"""L2's missing-import count (envyard.setup.importscan) against real pyright, on the environments setup builds.

For each source (fixture repositories under tests/fixtures/repos/ and pinned PyPI sdists), one after the other:
  1. `envyard setup SOURCE --json --no-complete` (the completeness pass off, so that imports stay missing and
     the comparison has something to compare) into this benchmark's own store;
  2. in a sandbox over the saved image (setup's sandbox: network, the store's uv cache): PyPI's pyright 1.1.414
     (`pyright[nodejs]`, EnvBench's checker) or basedpyright installed into its own venv, then, timed one after
     the other, importscan (`python -I importscan.py ROOT`, as L2 runs it) and `pyright --outputjson --level
     error --pythonpath /opt/venv/bin/python` in the project root;
  3. the `reportMissingImports` diagnostics compared by (file, line, module).

Prints a table and writes JSON (benchmarks/results/pyright-check.json by default).

    python benchmarks/setup/pyright_check.py                       # the default sample
    python benchmarks/setup/pyright_check.py --tool basedpyright   # the other checker
    python benchmarks/setup/pyright_check.py --only imports_app,pypi:six==1.17.0
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
REPOS = HERE.parents[1] / "tests" / "fixtures" / "repos"
SAMPLE = [*(str(REPOS / n) for n in ("imports_app", "uvlock_app", "setupcfg", "legacy_setuppy", "toxnox",
                                    "unittest_checks", "script_tests", "django_app")),
          "pypi:six==1.17.0", "pypi:toolz==1.2.0", "pypi:pluggy==1.7.0", "pypi:structlog==26.1.0",
          "pypi:jinja2==2.11.3", "pypi:pyparsing==3.3.3"]
console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def setup(source: str, home: str, timeout: float) -> dict:
    out = tempfile.mkdtemp(prefix="envyard-pyright-check-")
    name = "check/" + "".join(c if c.isalnum() else "-" for c in Path(source).name.lower()).strip("-")
    r = subprocess.run([sys.executable, "-m", "envyard.cli.main", "setup", source, "--json", "--no-complete",
                        "--out", out, "--name", name], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "ENVYARD_HOME": home})
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError:
        return {"error": (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1][:300]}


def check(yard, image: str, tool: str) -> dict:
    from envyard.setup import importscan, pyright
    from envyard.setup import pkgcache
    from envyard.setup.search import SCAN_SCRIPT, setup_env, setup_sandbox

    img = yard.image(image)
    root = img.config.workdir
    env = setup_env()
    cache = pkgcache.scope_dir(yard.store.home, pkgcache.named_identity("pyright-check"))
    with setup_sandbox(yard, img, cache) as sb:
        t = time.monotonic()
        inst = sb.exec(pyright.install_command("/usr/bin/python3", tool), env=env, timeout=900)
        if inst.exit_code != 0:
            return {"error": f"{tool} did not install: {inst.stderr.strip()[-300:]}"}
        install_s = time.monotonic() - t
        sb.write_file(SCAN_SCRIPT, importscan.script_source())
        t = time.monotonic()
        scan = sb.exec(importscan.scan_command("/opt/venv/bin/python", root, SCAN_SCRIPT), env=env, timeout=900)
        scan_s = time.monotonic() - t
        t = time.monotonic()
        ran = sb.exec(pyright.run_command(root, "/opt/venv/bin/python", tool), env=env, timeout=1800)
        pyright_s = time.monotonic() - t
    try:
        mine = importscan.parse_scan(scan.stdout)
        theirs, summary = pyright.parse(ran.stdout, root)
    except ValueError as e:
        return {"error": f"no result: {e}; pyright exit {ran.exit_code}: {ran.stderr.strip()[-300:]}"}
    return {**pyright.compare(mine["missing"], theirs), "files": mine["files"], "pyright_files": summary.get(
        "filesAnalyzed"), "version": summary.get("version"), "importscan_s": round(scan_s, 2),
        "pyright_s": round(pyright_s, 2), "install_s": round(install_s, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", default="/var/tmp/envyard-pyright-check", help="envyard store (ENVYARD_HOME)")
    ap.add_argument("--tool", choices=("pyright", "basedpyright"), default="pyright")
    ap.add_argument("--only", default="", help="comma-separated sources (a fixture's name, or pypi:NAME==VERSION)")
    ap.add_argument("--timeout", type=float, default=900, help="per setup (s)")
    ap.add_argument("--json", type=Path, default=HERE.parent / "results" / "pyright-check.json", dest="json_out")
    args = ap.parse_args()
    os.environ["ENVYARD_HOME"] = args.home
    Path(args.home).mkdir(parents=True, exist_ok=True)
    import envyard

    sample = SAMPLE
    if args.only:
        sample = [s if s.startswith("pypi:") or "/" in s else str(REPOS / s) for s in args.only.split(",")]
    started = dt.datetime.now(dt.timezone.utc)
    yard = envyard.Yard(args.home)
    rows = []
    for i, source in enumerate(sample, 1):
        label = source if source.startswith("pypi:") else Path(source).name
        console.print(f"[{i}/{len(sample)}] {label}: envyard setup …")
        data = setup(source, args.home, args.timeout)
        row = {"source": label, "level": data.get("level"), "image": data.get("image")}
        if not data.get("image"):
            row["error"] = data.get("error") or f"no image ({data.get('reason', '')[:200]})"
        else:
            console.print(f"[{i}/{len(sample)}] {label}: importscan vs {args.tool} …")
            row.update(check(yard, data["image"], args.tool))
            subprocess.run([sys.executable, "-m", "envyard.cli.main", "rmi", data["image"]], capture_output=True)
        console.print(f"    {json.dumps({k: row.get(k) for k in ('envyard', 'pyright', 'same', 'error')})}")
        rows.append(row)
    ok = [r for r in rows if "same" in r]
    t = Table("source", "level", "files", "envyard missing", f"{args.tool} missing", "same", "importscan (s)",
              f"{args.tool} (s)", "differences", title=f"L2 missing imports: importscan vs {args.tool}")
    for r in rows:
        diff = "; ".join(f"only envyard {':'.join(map(str, k))}" for k in r.get("only_envyard", [])[:2]) + \
            "; ".join(f"only pyright {':'.join(map(str, k))}" for k in r.get("only_pyright", [])[:2])
        t.add_row(r["source"], str(r.get("level")), str(r.get("files", "–")), str(r.get("envyard", "–")),
                  str(r.get("pyright", "–")), {True: "yes", False: "NO"}.get(r.get("same"), "–"),
                  str(r.get("importscan_s", "–")), str(r.get("pyright_s", "–")), (diff or r.get("error", ""))[:90])
    console.print(t)
    med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
    summary = {"compared": len(ok), "agree": sum(1 for r in ok if r["same"]),
               "median_importscan_s": med([r["importscan_s"] for r in ok]),
               "median_pyright_s": med([r["pyright_s"] for r in ok]),
               "median_ratio": med([r["pyright_s"] / max(r["importscan_s"], 0.01) for r in ok])}
    console.print(summary)
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps({"benchmark": "pyright-check", "tool": args.tool,
                                         "date": started.isoformat(timespec="seconds"),
                                         "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                                         "summary": summary, "rows": rows}, indent=1))
    console.print(f"JSON written to {args.json_out}")
    subprocess.run([sys.executable, "-m", "envyard.cli.main", "gc"], capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
