#!/usr/bin/env python3
"""One rollout, three substrates: the starter tasks (examples/tasks) with the oracle policy on the local backend,
the Docker backend and a Ray cluster of 1 and 2 nodes, in one run, side by side.

- local vs Ray (1 node, 2 nodes): the 13 starter tasks as they are (the `host` image), `--attempts` times each.
  The Ray cluster is private (tests/raycluster.py: `ray start --head` + `ray start --address`, each node with
  its own store) and runs on this machine, so 2 nodes share its cores: the numbers measure Ray's overhead and
  the cost model, not scaling. Total parallelism is the same everywhere (`--concurrency`; with 2 nodes, half
  per node).
- local vs Docker: Docker cannot run the `host` image, so the starter tasks are copied with
  `image = "debian:bookworm"`; those the oracle solves and noop fails there locally are run on both (the
  others need tools a bare Debian lacks). dockerd is started privately (tests/dockerd.py).

Per substrate: episodes/s, median episode wall time, median per-step latency (one `bash` tool call, from the
trajectories), and for Ray the driver-side round trip per episode, the driver's and the head's (gcs_server)
CPU per episode and the bytes each result carries — the cost model of docs/scale.md.

    python benchmarks/backends.py --quick
    python benchmarks/backends.py            # writes benchmarks/results/backends.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests"), str(HERE)]
os.environ.setdefault("ENVYARD_TEST_DOCKER", "/var/tmp/envyard-bench-docker")  # not the tests' dockerd

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import envyard  # noqa: E402
from envyard.envs.rollout import make_policy, run_rollouts  # noqa: E402
from envyard.envs.task import find_tasks  # noqa: E402

console = Console()
TASKS = REPO / "examples" / "tasks"


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def step_seconds(out_dir: Path) -> list[float]:
    """Every `bash` tool call's latency in the run's trajectories (envyard's own timing of the step)."""
    out = []
    for path in out_dir.glob("*-*.jsonl"):
        calls = {}
        for line in path.read_text().splitlines():
            m = json.loads(line)
            for c in m.get("tool_calls") or []:
                calls[c["id"]] = c["function"]["name"]
            if m.get("role") == "tool" and calls.get(m.get("tool_call_id")) == "bash":
                out.append(m["envyard"]["seconds"])
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def gcs_pid(cluster) -> int | None:
    from raycluster import _processes

    head = f"--session-dir={cluster.root / 'head'}"
    for pid, args in _processes():
        if args and args[0].endswith("/gcs_server") and any(a.startswith(head) for a in args):
            return pid
    return None


def run(name: str, tasks: list[Path], attempts: int, *, yard=None, concurrency: int = 2, cluster=None,
        cluster_obj=None, gcs_idle_per_s: float = 0.0) -> dict:
    out = Path(tempfile.mkdtemp(prefix=f"bb-{name}-"))
    gcs = gcs_pid(cluster_obj) if cluster_obj else None
    driver0 = resource.getrusage(resource.RUSAGE_SELF)
    gcs0 = cpu_seconds(gcs) if gcs else None
    t0 = time.monotonic()
    eps = run_rollouts(yard, tasks, make_policy("oracle"), concurrency=concurrency, out_dir=out, attempts=attempts,
                       cluster=cluster)
    wall = time.monotonic() - t0
    driver1 = resource.getrusage(resource.RUSAGE_SELF)
    n = len(eps)
    row = {
        "name": name, "episodes": n, "wall_s": round(wall, 2), "episodes_per_s": round(n / wall, 3),
        "solved": sum(1 for e in eps if e.reward == 1.0), "infra_failures": sum(1 for e in eps if e.infra_error),
        "episode_wall_s_p50": round(median([e.wall_time for e in eps]), 3),
        "step_ms_p50": round(1000 * median(step_seconds(out)), 2),
        "rewards": {f"{e.task}#{e.attempt}": e.reward for e in eps},
    }
    if cluster is not None:
        rays = [e.metrics.get("ray", {}) for e in eps]
        row["round_trip_s_p50"] = round(median([r.get("round_trip_s") for r in rays]), 3)
        # Ray's overhead per episode: what the driver waited beyond the episode's own run on its node.
        row["ray_overhead_ms_p50"] = round(1000 * median([r["round_trip_s"] - e.wall_time
                                                          for r, e in zip(rays, eps) if r]), 1)
        row["result_bytes_p50"] = median([r.get("result_bytes") for r in rays])
        driver_cpu = (driver1.ru_utime + driver1.ru_stime) - (driver0.ru_utime + driver0.ru_stime)
        row["driver_cpu_ms_per_episode"] = round(1000 * driver_cpu / n, 1)
        if gcs:  # beyond what the head spends idle in the same time
            row["gcs_cpu_ms_per_episode"] = round(1000 * (cpu_seconds(gcs) - gcs0 - gcs_idle_per_s * wall) / n, 2)
        # Counted over the workers' life: the warm-up rollout's episodes included.
        row["nodes"] = {s["home"]: {k: s[k] for k in ("done", "peak", "slots", "fetched")}
                        for s in cluster.nodes.values()}
    shutil.rmtree(out, ignore_errors=True)
    console.print(f"[cyan]{name}[/]: {n} episodes in {wall:.1f} s ({n / wall:.2f}/s), "
                  f"{row['solved']} solved, {row['infra_failures']} infra failures")
    return row


def debian_copies(root: Path) -> list[Path]:
    """The starter tasks with `image = "debian:bookworm"` instead of the host."""
    out = []
    for t in find_tasks([TASKS]):
        dest = root / t.name
        shutil.copytree(t, dest)
        toml = dest / "task.toml"
        toml.write_text(toml.read_text().replace('image = "host"', 'image = "debian:bookworm"'))
        out.append(dest)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attempts", type=int, default=3, help="episodes per task per substrate (default 3)")
    ap.add_argument("--concurrency", type=int, default=2, help="episodes at once, in total (default 2)")
    ap.add_argument("--quick", action="store_true", help="1 attempt per task")
    ap.add_argument("--no-docker", action="store_true")
    ap.add_argument("--store", default="/var/tmp/envyard-bench-backends", help="the driver's (local/Docker) store")
    ap.add_argument("--out", default=str(HERE / "results" / "backends.json"))
    args = ap.parse_args(argv)
    attempts = 1 if args.quick else args.attempts
    c = args.concurrency

    from sandbox import machine_info  # benchmarks/sandbox.py
    from envyard.runtime.bwrap import find_bwrap

    started = time.time()
    yard = envyard.Yard(args.store)
    results: dict = {"attempts": attempts, "concurrency": c, "runs": {}}
    tasks = find_tasks([TASKS])

    # Warm-up: every task's image exists in the local store before anything is timed.
    run_rollouts(yard, tasks, make_policy("noop"), concurrency=c)
    results["runs"]["local"] = run("local", tasks, attempts, yard=yard, concurrency=c)

    from envyard.envs.cluster import Cluster
    from raycluster import local_cluster

    with local_cluster(nodes=2, cpus=max(1, c // 2)) as lc:
        import ray

        ray.init(address=lc.address, log_to_driver=False, logging_level="warning")
        try:
            gcs = gcs_pid(lc)
            idle0, t_idle = cpu_seconds(gcs), time.monotonic()
            time.sleep(10)  # the head's own background work (health checks, resource reports), to subtract
            gcs_idle_per_s = (cpu_seconds(gcs) - idle0) / (time.monotonic() - t_idle)
            results["gcs_idle_cpu_ms_per_s"] = round(1000 * gcs_idle_per_s, 2)
            for nodes, spec in ((1, Cluster(address=lc.address, per_node=c, resource="envyard_head")),
                                (2, Cluster(address=lc.address, per_node=max(1, c // 2)))):
                with spec:
                    # The first rollout starts the workers, ships the tasks and builds their images on the
                    # nodes that lack them; the timed one reuses the workers, as a trainer's next step would.
                    t0 = time.monotonic()
                    run_rollouts(None, tasks, make_policy("noop"), cluster=spec)
                    first = time.monotonic() - t0
                    row = run(f"ray-{nodes}", tasks, attempts, cluster=spec, cluster_obj=lc,
                              gcs_idle_per_s=gcs_idle_per_s)
                    row["first_rollout_s"] = round(first, 2)
                    results["runs"][f"ray-{nodes}"] = row
        finally:
            ray.shutdown()

    docker_version = None
    if not args.no_docker:
        from dockerd import DOCKER_HOST, Skip, docker, running_dockerd

        work = Path(tempfile.mkdtemp(prefix="bb-debian-"))
        try:
            yard.pull("debian:bookworm")
            copies = debian_copies(work)
            oracle = {e.task: e.reward for e in run_rollouts(yard, copies, make_policy("oracle"), concurrency=c)}
            noop = {e.task: e.reward for e in run_rollouts(yard, copies, make_policy("noop"), concurrency=c)}
            usable = [p for p in copies if oracle.get(p.name) == 1.0 and noop.get(p.name) == 0.0]
            results["docker_tasks"] = [p.name for p in usable]
            results["docker_tasks_dropped"] = sorted(p.name for p in copies if p not in usable)
            with running_dockerd():
                os.environ["DOCKER_HOST"] = DOCKER_HOST
                docker_version = docker("version", "--format", "{{.Server.Version}}").stdout.decode().strip()
                dyard = envyard.Yard(args.store, backend="docker")
                try:
                    run_rollouts(dyard, usable, make_policy("noop"), concurrency=c)  # images exported to the engine
                    results["runs"]["local-debian"] = run("local-debian", usable, attempts, yard=yard,
                                                          concurrency=c)
                    results["runs"]["docker"] = run("docker", usable, attempts, yard=dyard, concurrency=c)
                finally:
                    dyard.close()
                    dyard.gc()
        except (Skip, envyard.EnvyardError) as e:
            console.print(f"[yellow]docker skipped:[/] {e}")
            results["docker_skipped"] = str(e)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    runs = results["runs"]
    base = runs["local"]
    for r in runs.values():
        ref = runs["local-debian"] if r["name"] == "docker" else base
        r["episodes_per_s_vs_local"] = round(r["episodes_per_s"] / ref["episodes_per_s"], 3)
        r["step_ms_vs_local"] = round(r["step_ms_p50"] / ref["step_ms_p50"], 2)
    for name in ("ray-1", "ray-2", "docker"):
        ref = runs["local-debian"] if name == "docker" else base
        if name in runs:  # same rewards as locally, episode by episode
            runs[name]["same_rewards_as_local"] = runs[name]["rewards"] == ref["rewards"]

    results["machine"] = machine_info(find_bwrap(), yard, docker_version)
    results["seconds"] = round(time.time() - started, 1)
    yard.close()
    yard.gc()

    t = Table("SUBSTRATE", "EPISODES", "EP/S", "vs LOCAL", "EPISODE p50 (s)", "STEP p50 (ms)", "STEP vs LOCAL",
              "RAY OVERHEAD p50 (ms)", "SAME REWARDS")
    for r in runs.values():
        t.add_row(r["name"], str(r["episodes"]), f"{r['episodes_per_s']:.2f}", f"{r['episodes_per_s_vs_local']:.2f}×",
                  f"{r['episode_wall_s_p50']:.2f}", f"{r['step_ms_p50']:.1f}", f"{r['step_ms_vs_local']:.2f}×",
                  str(r.get("ray_overhead_ms_p50", "-")), str(r.get("same_rewards_as_local", "-")))
    console.print(t)
    for name in ("ray-1", "ray-2"):
        r = runs[name]
        console.print(f"{name}: driver CPU {r['driver_cpu_ms_per_episode']} ms/episode, head gcs_server CPU "
                      f"{r.get('gcs_cpu_ms_per_episode')} ms/episode, result {r['result_bytes_p50']} bytes/episode")
    for r in runs.values():
        r.pop("rewards")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
