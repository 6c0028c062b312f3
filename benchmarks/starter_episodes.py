#!/usr/bin/env python3
"""Episodes/s on the starter tasks (examples/tasks): the oracle policy, N episodes at once, with the verifier
prepared while the agent works (TerminalEnv's default) vs. started at submit (prepare_verifier=False).

Rounds alternate between the two sides; every episode must score 1.0. Docker cannot run these tasks as they
are (envyard-layout tasks), so the Docker comparison is benchmarks/rollout.py's.

    python benchmarks/starter_episodes.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import sandbox as sbench  # noqa: E402

import envyard  # noqa: E402
from envyard.envs import OraclePolicy, TerminalEnv, find_tasks, load_task, task_image  # noqa: E402
from envyard.runtime.bwrap import find_bwrap  # noqa: E402

console = Console(highlight=False, width=None if sys.stdout.isatty() else 150)
TASKS = BENCH_DIR.parent / "examples" / "tasks"


def one_round(yard, tasks, n: int, prepare: bool) -> tuple[float, int]:
    """Every starter task once, n episodes at once; (episodes/s, episodes not scored 1.0)."""
    def episode(task):
        env, policy = TerminalEnv(task, yard=yard, prepare_verifier=prepare), OraclePolicy()
        try:
            obs, info = env.reset()
            policy.start(task, obs)
            policy.prepare(env.sandbox)
            while True:  # as run_episode, without the trajectory records
                obs, reward, terminated, truncated, info = env.step(policy.act(obs))
                if terminated or truncated:
                    return reward
        finally:
            env.close()

    t = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        rewards = list(pool.map(episode, tasks))
    yard.wait_closed()  # teardown is work the episodes caused
    return len(tasks) / (time.perf_counter() - t), sum(r != 1.0 for r in rewards)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--home", default="/var/tmp/envyard-bench-home", help="envyard store")
    p.add_argument("--rounds", type=int, default=3, help="rounds per side (default 3)")
    p.add_argument("--concurrency", type=int, default=8, help="episodes at once (default 8)")
    p.add_argument("--json", default=str(BENCH_DIR / "results" / "starter_episodes.json"))
    a = p.parse_args(argv)
    load0 = os.getloadavg()
    yard = envyard.Yard(a.home)
    try:
        tasks = [load_task(t) for t in find_tasks([TASKS])]
        for task in tasks:  # images built (or pulled) before timing
            task_image(yard, task)
        one_round(yard, tasks, a.concurrency, True)  # warm-up
        rates: dict[str, list[float]] = {"prepared": [], "fresh": []}
        failed = 0
        for _ in range(a.rounds):
            for side in ("prepared", "fresh"):
                rate, bad = one_round(yard, tasks, a.concurrency, side == "prepared")
                rates[side].append(rate)
                failed += bad
        machine = sbench.machine_info(find_bwrap(), yard, None)
        machine["loadavg_start"], machine["loadavg_end"] = load0, os.getloadavg()
    finally:
        yard.close()
    med = {k: statistics.median(v) for k, v in rates.items()}
    table = Table(title=f"starter tasks ({len(tasks)}), oracle, N={a.concurrency}: episodes/s (median of {a.rounds})")
    for col in ("verifier", "episodes/s", "rounds", "vs fresh"):
        table.add_column(col)
    for side in ("prepared", "fresh"):
        table.add_row(side, f"{med[side]:.2f}", " ".join(f"{r:.2f}" for r in rates[side]),
                      f"{med[side] / med['fresh']:.2f}×")
    console.print(table)
    console.print(f"episodes not scored 1.0: {failed}; load average {load0[0]:.1f} → {machine['loadavg_end'][0]:.1f}")
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine, "tasks": [t.name for t in tasks], "concurrency": a.concurrency,
                               "episodes_per_s": rates, "median": med, "failed": failed}, indent=2) + "\n")
    console.print(f"results written to {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
