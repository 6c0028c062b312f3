#!/usr/bin/env python3
"""Dockerfile builds: cold and cached build time of the test fixtures, `envyard build` vs `docker build`; and the
time from a Harbor task directory to the agent's first command result, envyard vs Docker.

Cold = an empty build cache (envyard: cache pruned; Docker: --no-cache); cached = the same build right after.
Docker runs as a private dockerd (its own socket and data root under /var/tmp/envyard-bench-docker, no bridge,
no iptables) with its legacy builder (Debian's docker.io 20.10 has no buildx), which cannot build heredocs or
--chmod (`everything`) and builds every stage (`multistage` has one that fails on purpose): those rows have no
Docker numbers. debian:bookworm is the same rootfs on both sides (Docker gets it through `docker import`).

    python benchmarks/build.py                    # 3 reps per fixture
    python benchmarks/build.py --reps 1 --skip-docker

"Task dir → first step" (tests/fixtures/tasks/harbor-hello, its Dockerfile FROM debian:bookworm): envyard loads
the task, builds its image, starts the agent's sandbox and runs `true` in the agent's shell (TerminalEnv.reset +
step); Docker builds the same Dockerfile, starts a container (`sleep infinity`) and runs `docker exec … true`.
Cold = no build cache; warm = the image built already.

Prints tables and writes JSON (machine, date, samples) to --json (default benchmarks/results/build.json).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import envyard
from envyard.build import build_image
from envyard.build import cache

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "dockerfiles"
TASK = ROOT / "tests" / "fixtures" / "tasks" / "harbor-hello"
DOCKER_ROOT = Path("/var/tmp/envyard-bench-docker")
DOCKER_CAN_BUILD = {"scratch", "ignore", "cache"}
console = Console()


def docker(*args, stdin=None, check=True) -> subprocess.CompletedProcess:
    env = {**os.environ, "DOCKER_HOST": f"unix://{DOCKER_ROOT / 'docker.sock'}", "DOCKER_BUILDKIT": "0"}
    r = subprocess.run(["docker", *map(str, args)], capture_output=True, env=env, stdin=stdin, timeout=1800)
    if check and r.returncode != 0:
        raise RuntimeError(f"docker {args[0]}: {r.stderr.decode(errors='replace')[-500:]}")
    return r


def start_dockerd() -> subprocess.Popen | None:
    if not shutil.which("dockerd"):
        console.print("[yellow]no dockerd (apt-get install docker.io): Docker columns skipped[/]")
        return None
    DOCKER_ROOT.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(["dockerd", "--data-root", DOCKER_ROOT / "data", "--exec-root", DOCKER_ROOT / "exec",
                             "-H", f"unix://{DOCKER_ROOT / 'docker.sock'}", "--pidfile", DOCKER_ROOT / "pid",
                             "--iptables=false", "--bridge=none"],
                            stdout=open(DOCKER_ROOT / "log", "wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while docker("info", check=False).returncode != 0:
        if proc.poll() is not None or time.monotonic() > deadline:
            console.print("[yellow]dockerd did not start: Docker columns skipped[/]")
            proc.kill()
            return None
        time.sleep(0.5)
    return proc


def prepare(name: str, work: Path) -> Path:
    ctx = work / name
    if ctx.exists():
        shutil.rmtree(ctx)
    shutil.copytree(FIXTURES / name, ctx, symlinks=True)
    if name == "everything":  # the fixture's ADD reads an archive the tests make
        with tarfile.open(ctx / "archive.tar.gz", "w:gz") as tf:
            info = tarfile.TarInfo("top/x.txt")
            info.size = 5
            tf.addfile(info, io.BytesIO(b"data\n"))
    return ctx


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def task_to_first_step(yard: envyard.Yard, with_docker: bool, reps: int) -> dict:
    """Seconds from a Harbor task directory to the result of the agent's first command (see the docstring)."""
    from envyard.envs import TerminalEnv

    def ours():
        env = TerminalEnv(TASK, yard=yard)
        try:
            _, info = env.reset()
            assert not info.get("infra_error"), info
            obs, *_ = env.step("true")
            assert obs.endswith("[exit code 0]"), obs
        finally:
            env.close()

    def theirs(no_cache: bool):
        docker("build", "-q", *(["--no-cache"] if no_cache else []), "-t", "bench/harbor-hello", TASK / "environment")
        cid = docker("run", "-d", "--network", "none", "bench/harbor-hello", "sleep", "infinity").stdout.decode().strip()
        try:
            docker("exec", cid, "true")
        finally:
            docker("rm", "-f", cid, check=False)

    samples = {"envyard_cold": [], "envyard_warm": [], "docker_cold": [], "docker_warm": []}
    for _ in range(reps):
        cache.prune(yard.store)
        samples["envyard_cold"].append(timed(ours))
        samples["envyard_warm"].append(timed(ours))
        if with_docker:
            samples["docker_cold"].append(timed(lambda: theirs(True)))
            samples["docker_warm"].append(timed(lambda: theirs(False)))
    med = {k: statistics.median(v) if v else None for k, v in samples.items()}
    console.print("  task → first step: " + ", ".join(f"{k} {v:.3f}s" for k, v in med.items() if v is not None))
    return {**med, "samples": samples}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip-docker", action="store_true")
    ap.add_argument("--debian-from", default=os.environ.get("ENVYARD_TEST_CACHE", "/var/tmp/envyard-test-cache"),
                    help="a store holding debian:bookworm (built there with debootstrap if missing)")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "build.json"))
    args = ap.parse_args()

    source = envyard.Yard(args.debian_from)
    debian = source.pull("debian:bookworm")
    work = Path(tempfile.mkdtemp(prefix="envyard-bench-build-", dir="/var/tmp"))
    yard = envyard.Yard(work / "home")
    for layer_id in debian.layers:  # the same bytes, recorded as an external layer: no copy
        yard.store.add_external_layer(layer_id, source.store.layer(layer_id).path, {"linked_from": args.debian_from})
    yard.store.put_image("debian:bookworm", debian.layers, debian.config)

    dockerd = None if args.skip_docker else start_dockerd()
    if dockerd and docker("image", "inspect", "debian:bookworm", check=False).returncode != 0:
        tar = subprocess.Popen(["tar", "-C", source.store.layer(debian.layers[0]).path, "--numeric-owner", "-cf",
                                "-", "."], stdout=subprocess.PIPE)
        docker("import", "-", "debian:bookworm", stdin=tar.stdout)
        tar.wait()

    docker_version = docker("version", "--format", "{{.Server.Version}}", check=False).stdout.decode().strip() \
        if dockerd else None
    rows = []
    try:
        for name in ("scratch", "ignore", "multistage", "cache", "everything"):
            ctx = prepare(name, work)
            steps = None
            samples = {"envyard_cold": [], "envyard_cached": [], "docker_cold": [], "docker_cached": []}
            for _ in range(args.reps):
                cache.prune(yard.store)
                img = None

                def ours():
                    nonlocal img
                    img = build_image(yard, ctx, tag=f"bench/{name}")
                samples["envyard_cold"].append(timed(ours))
                samples["envyard_cached"].append(timed(ours))
                steps = img.config.provenance["steps"]
                if dockerd and name in DOCKER_CAN_BUILD:
                    samples["docker_cold"].append(timed(lambda: docker("build", "-q", "--no-cache", "-t",
                                                                       f"bench/{name}", ctx)))
                    samples["docker_cached"].append(timed(lambda: docker("build", "-q", "-t", f"bench/{name}", ctx)))
            med = {k: statistics.median(v) if v else None for k, v in samples.items()}
            rows.append({"fixture": name, "steps": steps, **med, "samples": samples})
            console.print(f"  {name}: " + ", ".join(f"{k} {v:.3f}s" for k, v in med.items() if v is not None))
        first_step = task_to_first_step(yard, dockerd is not None, args.reps)
    finally:
        yard.close()
        yard.gc()
        source.close()
        shutil.rmtree(work, ignore_errors=True)
        if dockerd:
            dockerd.terminate()
            dockerd.wait(30)

    table = Table("fixture", "steps", "envyard cold", "envyard cached", "docker cold", "docker cached",
                  "cold: docker/envyard", "cached: docker/envyard", title="Dockerfile builds (median seconds)")
    for r in rows:
        def s(v):
            return "n/a" if v is None else f"{v:.3f}"

        def x(a, b):
            return "n/a" if a is None or b is None else f"{a / b:.1f}×"
        table.add_row(r["fixture"], str(r["steps"]), s(r["envyard_cold"]), s(r["envyard_cached"]), s(r["docker_cold"]),
                      s(r["docker_cached"]), x(r["docker_cold"], r["envyard_cold"]),
                      x(r["docker_cached"], r["envyard_cached"]))
    console.print(table)
    table = Table("", "envyard", "docker", "docker/envyard", title="Harbor task dir → first agent step (median seconds)")
    for kind in ("cold", "warm"):
        e, d = first_step[f"envyard_{kind}"], first_step[f"docker_{kind}"]
        table.add_row(kind, f"{e:.3f}", "n/a" if d is None else f"{d:.3f}", "n/a" if d is None else f"{d / e:.1f}×")
    console.print(table)
    machine = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "nproc": os.cpu_count(),
        "kernel": platform.release(), "python": platform.python_version(), "envyard": envyard.__version__,
        "load_average": os.getloadavg(),
        "docker": docker_version,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"machine": machine, "reps": args.reps, "rows": rows,
                                           "task_to_first_step": first_step}, indent=2) + "\n")
    console.print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
