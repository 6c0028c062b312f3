#!/usr/bin/env python3
"""Rollout throughput: a scripted policy on a small task, envyard's VectorTerminalEnv vs. `docker exec`.

Each episode: start an environment (envyard: VectorTerminalEnv.reset(); docker: `docker run -d`), take
--steps cheap shell steps (`echo step $i >> /app/log.txt && tail -n 1 /app/log.txt`), then score the log
(envyard: the `submit` action, i.e. tamper-proof verification in a verifier sandbox started and prepared
while the agent works; docker: a verifier `docker exec` plus `docker rm -f`). N environments run at once, for
each N in --concurrency. envyard also runs with the verifier started only at submit (`envyard-fresh`), to show
what preparing it ahead buys.

Prints a rich table and writes JSON (with machine info). See benchmarks/README.md.

    python benchmarks/rollout.py --quick
    python benchmarks/rollout.py
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import sandbox as sbench  # noqa: E402  (shared helpers: Docker engine bring-up, machine info, statistics)

import envyard  # noqa: E402
from envyard.envs import VectorTerminalEnv, load_task, task_image  # noqa: E402
from envyard.runtime.bwrap import find_bwrap  # noqa: E402

console = Console(highlight=False, width=None if sys.stdout.isatty() else 170)
DEFAULT_HOME = "/var/tmp/envyard-bench-home"
DEFAULT_JSON = BENCH_DIR / "results" / "rollout.json"
TASK_NAME = "rollout-bench"
DOCKER_IMAGE = "envyard-bench-rollout:bookworm"
DOCKER_LABEL = "envyard-bench-rollout"
TARGET_N, TARGET_RATIO = 8, 20.0
EPISODE_TARGET_RATIO = 30.0  # issue #12: episodes/s must follow steps/s (verification prepared ahead)
FRESH = "envyard-fresh"  # envyard with the verifier started only at submit (prepare_verifier=False)


# ---- the task and the policy ------------------------------------------------------------------------------------

def step_command(i: int) -> str:
    return f"echo step {i} >> /app/log.txt && tail -n 1 /app/log.txt"


def verifier_script(steps: int) -> str:
    """Passes when the log holds exactly `step 1` .. `step N`, in order (POSIX sh: runs in both contenders)."""
    return (f"expected=$(seq 1 {steps} | sed 's/^/step /'); "
            f'[ "$(cat /app/log.txt 2>/dev/null)" = "$expected" ]')


def make_task(root: Path, steps: int) -> Path:
    root.mkdir(parents=True)
    (root / "task.toml").write_text(
        f'name = "{TASK_NAME}"\n'
        'description = "Append numbered lines to a log (rollout benchmark)."\n\n'
        '[environment]\nimage = "debian:bookworm"\nworkdir = "/app"\nnetwork = "none"\n\n'
        f"[agent]\ntimeout_sec = 3600\nmax_steps = {steps + 10}\n\n"  # the step budget must not end the episode
        '[verifier]\ntimeout_sec = 60\nnetwork = "none"\n')
    (root / "instruction.md").write_text(f"Append the lines `step 1` .. `step {steps}` to /app/log.txt, then submit.\n")
    (root / "tests").mkdir()
    (root / "tests" / "test.sh").write_text(f"#!/bin/sh\n{verifier_script(steps)}\n")
    return root


def step_ok(observation: str, i: int) -> bool:
    """envyard's observation of step i: the command's output, then the status line."""
    return observation.startswith(f"step {i}\n") and observation.rstrip().endswith("[exit code 0]")


# ---- results ---------------------------------------------------------------------------------------------------

@dataclass
class Run:
    side: str                  # "envyard" | "docker"
    n: int                     # environments at once
    episodes_per_env: int
    steps: int                 # agent steps per episode
    rounds: list[dict] = field(default_factory=list)      # per round of N episodes: start/steps/verify seconds
    step_ms: list[float] = field(default_factory=list)    # latency of every agent step
    steps_wall_s: float = 0.0  # summed wall time of the step phases
    total_wall_s: float = 0.0  # everything: start + steps + verify (+ envyard's background teardown at the end)
    drain_s: float = 0.0       # envyard: waiting for the background teardown after the last round
    bad_steps: int = 0         # a step whose output or exit code was wrong
    failed_episodes: int = 0   # verifier did not pass (or an infra error)
    errors: list[str] = field(default_factory=list)

    @property
    def total_steps(self) -> int:
        return len(self.step_ms)

    @property
    def episodes(self) -> int:
        return len(self.rounds) * self.n

    @property
    def steps_per_s(self) -> float | None:
        return self.total_steps / self.steps_wall_s if self.steps_wall_s else None

    @property
    def episodes_per_s(self) -> float | None:
        return self.episodes / self.total_wall_s if self.total_wall_s and self.rounds else None

    def phase_ms(self, key: str) -> float | None:
        xs = [r[key] * 1000 for r in self.rounds]
        return sbench.median(xs)

    def summary(self) -> dict:
        return {
            "side": self.side, "n": self.n, "episodes": self.episodes, "agent_steps": self.total_steps,
            "steps_per_s": self.steps_per_s, "episodes_per_s": self.episodes_per_s,
            "step_latency_ms_p50": sbench.median(self.step_ms), "step_latency_ms_p90": sbench.p90(self.step_ms),
            "steps_wall_s": round(self.steps_wall_s, 4), "total_wall_s": round(self.total_wall_s, 4),
            "drain_s": round(self.drain_s, 4), "bad_steps": self.bad_steps, "failed_episodes": self.failed_episodes,
            "errors": self.errors, "rounds": self.rounds,
            "step_ms": [round(x, 3) for x in self.step_ms],
        }


# ---- docker ----------------------------------------------------------------------------------------------------

class Docker(sbench.Docker):
    """sandbox.py's engine bring-up and teardown, with our own image tag and labelled containers (so that a
    container whose `docker run` was cut short by Ctrl-C is still found and removed)."""

    def __init__(self, keep_engine: bool):
        super().__init__(keep_engine)
        self.label = f"{DOCKER_LABEL}={os.getpid()}-{uuid.uuid4().hex[:8]}"

    def import_rootfs(self, layer_dir: Path) -> None:
        tar = subprocess.Popen(["tar", "-C", str(layer_dir), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        try:
            imp = subprocess.run(["docker", "import", "-", DOCKER_IMAGE], stdin=tar.stdout, capture_output=True,
                                 text=True)
        finally:
            tar.stdout.close()
            tar.wait()
        if imp.returncode != 0:
            raise RuntimeError(f"docker import failed: {imp.stderr.strip()}")
        self.images.append(DOCKER_IMAGE)

    def create(self) -> str:
        r = subprocess.run(["docker", "run", "-d", "--network", "none", "--label", self.label, "-w", "/app",
                            DOCKER_IMAGE, "sleep", "infinity"], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"docker run failed: {r.stderr.strip()[-300:]}")
        return r.stdout.strip()

    def ours(self) -> list[str]:
        return sbench.run_text(["docker", "ps", "-aq", "--filter", f"label={self.label}"]).split()

    def remove_ours(self) -> None:
        left = self.ours()
        if left:
            subprocess.run(["docker", "rm", "-f", *left], capture_output=True)

    def cleanup(self) -> None:
        with contextlib.suppress(Exception):
            self.remove_ours()
        super().cleanup()


# ---- the benchmark ---------------------------------------------------------------------------------------------

class Bench:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.notes: list[str] = []
        self.runs: list[Run] = []
        self.stop = threading.Event()
        self.yard: envyard.Yard | None = None
        self.docker: Docker | None = None
        self.venv: VectorTerminalEnv | None = None
        self.tmp: Path | None = None
        self.made_task_image: str | None = None

    def note(self, text: str) -> None:
        self.notes.append(text)
        console.print(f"  [yellow]note:[/] {text}")

    # -- setup / cleanup --

    def setup(self) -> None:
        self.yard = envyard.Yard(self.args.home)
        console.print(f"[cyan]store:[/] {self.yard.store.home}")
        t = time.monotonic()
        self.debian = self.yard.pull("debian:bookworm", on_progress=lambda m: console.print(f"  [dim]pull: {m}[/]"))
        console.print(f"[cyan]debian:bookworm[/] ready in {time.monotonic() - t:.1f} s")
        self.tmp = Path(tempfile.mkdtemp(prefix="envyard-bench-rollout-"))
        self.task = load_task(make_task(self.tmp / TASK_NAME, self.args.steps))
        # Build the task's image (debian + /app) now, so the first reset does not pay for it.
        t = time.monotonic()
        had = {img.name for img in self.yard.images()}
        img = task_image(self.yard, self.task)
        if img.name not in had:
            self.made_task_image = img.name
        console.print(f"[cyan]task image[/] {img.name} ready in {time.monotonic() - t:.2f} s")
        if self.args.skip_docker:
            self.note("docker skipped (--skip-docker)")
            return
        self.docker = Docker(keep_engine=False)
        if self.docker.start():
            console.print(f"[cyan]docker:[/] engine {self.docker.version}; importing the debootstrap rootfs ...")
            try:
                self.docker.import_rootfs(self.yard.store.layer_paths(self.debian.layers)[0])
            except Exception as e:  # noqa: BLE001 - report and go on without docker
                self.docker.ok = False
                self.docker.why = str(e)
        if not self.docker.ok:
            self.note(f"docker unavailable, docker columns are n/a: {self.docker.why}")

    @property
    def docker_ok(self) -> bool:
        return bool(self.docker and self.docker.ok)

    def cleanup(self) -> None:
        console.print("[cyan]cleaning up ...[/]")
        self.stop.set()
        if self.venv is not None:
            with contextlib.suppress(Exception):
                self.venv.close()
            self.venv = None
        if self.yard:
            with contextlib.suppress(Exception):
                self.yard.close()
            if self.made_task_image:
                with contextlib.suppress(Exception):
                    self.yard.remove_image(self.made_task_image)
            with contextlib.suppress(Exception):
                self.yard.gc()
        if self.docker:
            with contextlib.suppress(Exception):
                self.docker.cleanup()
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- envyard --

    def run_envyard(self, n: int, episodes: int, steps: int, prepare: bool = True) -> Run:
        run = Run("envyard" if prepare else FRESH, n, episodes, steps)
        t_all = time.perf_counter()
        self.venv = venv = VectorTerminalEnv([self.task] * n, yard=self.yard, threads=n, prepare_verifier=prepare)
        try:
            for _ in range(episodes):
                t0 = time.perf_counter()
                _, infos = venv.reset()
                t1 = time.perf_counter()
                infra = [d or e for e, d in zip(infos["infra_error"], infos.get("infra_detail", [None] * n)) if e]
                if infra:
                    raise RuntimeError(f"reset: {len(infra)} of {n} environments failed to start: {infra[0]}")
                self._envyard_steps(venv, n, steps, run)
                t2 = time.perf_counter()
                _, rewards, term, _, infos = venv.step(["submit"] * n)
                t3 = time.perf_counter()
                info_of = lambda k, i: infos[k][i] if k in infos and infos[f"_{k}"][i] else None  # noqa: E731
                for i, (r, done) in enumerate(zip(rewards, term)):
                    if r != 1.0 or not done or info_of("infra_error", i):
                        run.failed_episodes += 1
                        if len(run.errors) < 5:
                            detail = info_of("infra_detail", i) or info_of("verifier_output", i) or ""
                            run.errors.append(f"reward {r}, terminated {done}, infra {info_of('infra_error', i)}: "
                                              f"{detail[-200:]}")
                run.rounds.append({"start_s": t1 - t0, "steps_s": t2 - t1, "verify_s": t3 - t2})
                run.steps_wall_s += t2 - t1
        finally:
            self.venv = None
            venv.close()
        # Closing a sandbox hands its teardown to a background thread; that is work the episodes caused.
        t = time.perf_counter()
        sbench.drain_background_cleanup()
        run.drain_s = time.perf_counter() - t
        run.total_wall_s = time.perf_counter() - t_all
        return run

    def _envyard_steps(self, venv: VectorTerminalEnv, n: int, steps: int, run: Run) -> None:
        """Every environment steps on its own (EnvPool style): as soon as one step comes back, that environment's
        next step is sent. Latency = send → recv, what a trainer sees."""
        nxt = [1] * n
        sent = [time.perf_counter()] * n
        venv.send([step_command(1)] * n, list(range(n)))
        in_flight = n
        while in_flight:
            obs, _, term, trunc, _, ids = venv.recv(min_results=1)
            now = time.perf_counter()
            actions, again = [], []
            for o, te, tr, i in zip(obs, term, trunc, ids):
                in_flight -= 1
                run.step_ms.append((now - sent[i]) * 1000)
                if te or tr or not step_ok(o, nxt[i]):
                    run.bad_steps += 1
                    if len(run.errors) < 5:
                        run.errors.append(f"env {i} step {nxt[i]}: {o[-200:]!r} terminated={te} truncated={tr}")
                    if te or tr:
                        continue  # this episode is over; the submit below will report it
                nxt[i] += 1
                if nxt[i] <= steps:
                    actions.append(step_command(nxt[i]))
                    again.append(i)
            if again:
                now = time.perf_counter()
                for i in again:
                    sent[i] = now
                venv.send(actions, again)
                in_flight += len(again)

    # -- docker --

    def run_docker(self, n: int, episodes: int, steps: int) -> Run:
        run = Run("docker", n, episodes, steps)
        lock = threading.Lock()
        check = verifier_script(steps)

        def checked(argv: list[str]) -> subprocess.CompletedProcess:
            if self.stop.is_set():
                raise RuntimeError("stopped")
            return subprocess.run(argv, capture_output=True, text=True)

        def step_loop(cid: str) -> None:
            lat, bad, errs = [], 0, []
            for i in range(1, steps + 1):
                t = time.perf_counter()
                r = checked(["docker", "exec", cid, "sh", "-c", step_command(i)])
                lat.append((time.perf_counter() - t) * 1000)
                if r.returncode != 0 or r.stdout != f"step {i}\n":
                    bad += 1
                    errs.append(f"{cid[:12]} step {i}: exit {r.returncode} {r.stdout[-100:]!r} {r.stderr[-200:]!r}")
            with lock:
                run.step_ms.extend(lat)
                run.bad_steps += bad
                run.errors.extend(errs[: max(0, 5 - len(run.errors))])

        def verify_and_remove(cid: str) -> bool:
            try:
                return checked(["docker", "exec", cid, "sh", "-c", check]).returncode == 0
            finally:
                subprocess.run(["docker", "rm", "-f", cid], capture_output=True)

        def create(_):
            if self.stop.is_set():
                raise RuntimeError("stopped")
            return self.docker.create()

        t_all = time.perf_counter()
        pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="docker")
        try:
            for _ in range(episodes):
                t0 = time.perf_counter()
                cids = list(pool.map(create, range(n)))
                t1 = time.perf_counter()
                list(pool.map(step_loop, cids))
                t2 = time.perf_counter()
                passed = list(pool.map(verify_and_remove, cids))
                t3 = time.perf_counter()
                run.failed_episodes += passed.count(False)
                run.rounds.append({"start_s": t1 - t0, "steps_s": t2 - t1, "verify_s": t3 - t2})
                run.steps_wall_s += t2 - t1
        except BaseException:
            self.stop.set()  # the other workers stop after their current docker command
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            if self.stop.is_set() or run.failed_episodes or len(run.rounds) < episodes:
                self.docker.remove_ours()
        run.total_wall_s = time.perf_counter() - t_all
        return run

    # -- driver --

    def measure(self) -> None:
        a = self.args
        console.rule("warm-up (1 environment, 1 short episode each, not counted)")
        self.run_envyard(1, 1, 2)
        if self.docker_ok:
            self.run_docker(1, 1, 2)
        for n in a.concurrency:
            console.rule(f"N = {n}: {n} environments × {a.episodes_per_env} episodes × {a.steps} steps")
            sides = [("envyard", self.run_envyard)]
            if not a.skip_fresh:
                sides.append((FRESH, lambda *x: self.run_envyard(*x, prepare=False)))
            if self.docker_ok:
                sides.append(("docker", self.run_docker))
            for side, fn in sides:
                sbench.settle(1.0)
                try:
                    run = fn(n, a.episodes_per_env, a.steps)
                except KeyboardInterrupt:
                    raise
                except Exception as e:  # noqa: BLE001 - report it, go on with the rest
                    self.note(f"{side} N={n} failed: {type(e).__name__}: {e}")
                    console.print_exception(max_frames=6)
                    if side != "docker":
                        with contextlib.suppress(Exception):
                            self.yard.close()
                    continue
                self.runs.append(run)
                fmt = lambda v, f: "n/a" if v is None else format(v, f)  # noqa: E731
                console.print(f"  {side:8} {fmt(run.steps_per_s, '.1f'):>8} steps/s  "
                              f"{fmt(run.episodes_per_s, '.2f'):>7} episodes/s  "
                              f"p50 step {fmt(sbench.median(run.step_ms), '.2f')} ms  "
                              f"({run.total_wall_s:.1f} s; bad steps {run.bad_steps}, failed episodes "
                              f"{run.failed_episodes})")
                for err in run.errors:
                    console.print(f"    [red]{err}[/]")
        self.leak_check()

    def leak_check(self) -> None:
        self.yard.wait_closed()
        mine = [r.id for r in self.yard.sandboxes() if r.owner_pid == os.getpid()]
        if mine:
            self.note(f"{len(mine)} envyard sandbox lease(s) of this process still open after every env was closed: "
                      f"{', '.join(mine[:5])}")
        if self.docker_ok and (left := self.docker.ours()):
            self.note(f"{len(left)} docker container(s) of this run still exist after their episodes")

    # -- output --

    def get(self, side: str, n: int) -> Run | None:
        return next((r for r in self.runs if r.side == side and r.n == n), None)

    def report(self, machine: dict, started: float) -> dict:
        a = self.args

        def num(v, f=".1f", unit=""):
            return "n/a" if v is None else f"{v:{f}}{unit}"

        table = Table(title=f"envyard rollout benchmark — {machine['nproc']} CPUs, "
                            f"{machine['memory_total_bytes'] / (1 << 30):.1f} GiB, kernel {machine['kernel']}, "
                            f"docker {machine['docker'] or 'n/a'}; {a.episodes_per_env} episodes × {a.steps} steps "
                            f"per environment")
        for col in ("N", "steps/s envyard", "steps/s docker", "ratio", "episodes/s envyard", "episodes/s docker",
                    "ratio ", "episodes/s envyard-fresh", "ratio  ", "p50 step envyard", "p50 step docker", "target",
                    "ok", "correct"):
            table.add_column(col.strip(), justify="left" if col == "target" else "right", overflow="fold")
        targets = []
        for n in a.concurrency:
            e, d, f = self.get("envyard", n), self.get("docker", n), self.get(FRESH, n)
            es, ds = e and e.steps_per_s, d and d.steps_per_s
            ee, de = e and e.episodes_per_s, d and d.episodes_per_s
            ratio = es / ds if es and ds else None
            ep_ratio = ee / de if ee and de else None
            fe = f and f.episodes_per_s
            fresh_ratio = fe / de if fe and de else None
            target, ok = "", None
            if n == TARGET_N:
                target = f"steps ≥{TARGET_RATIO:.0f}×, episodes ≥{EPISODE_TARGET_RATIO:.0f}× docker"
                steps_ok = None if ratio is None else ratio >= TARGET_RATIO
                episodes_ok = None if ep_ratio is None else ep_ratio >= EPISODE_TARGET_RATIO
                ok = None if steps_ok is None or episodes_ok is None else steps_ok and episodes_ok
                targets.append({"n": n, "steps_ratio": ratio, "min_ratio": TARGET_RATIO, "ok": steps_ok,
                                "episodes_ratio": ep_ratio, "min_episodes_ratio": EPISODE_TARGET_RATIO,
                                "episodes_ok": episodes_ok, "episodes_ratio_fresh_verifier": fresh_ratio})
            wrong = []  # every step's output and every verdict is checked, on both sides
            for r in (e, d, f):
                if r and (r.bad_steps or r.failed_episodes):
                    wrong.append(f"{r.side} N={n}: {r.bad_steps} wrong steps, {r.failed_episodes} failed episodes")
            if e is None:
                wrong.append(f"envyard N={n} did not finish")
            if d is None and self.docker_ok:
                wrong.append(f"docker N={n} did not finish")
            self.notes.extend(wrong)
            table.add_row(
                str(n), num(es), num(ds), num(ratio, ".0f", "×"), num(ee, ".2f"), num(de, ".2f"),
                num(ep_ratio, ".1f", "×"), num(fe, ".2f"), num(fresh_ratio, ".1f", "×"),
                num(e and sbench.median(e.step_ms), ".2f", " ms"),
                num(d and sbench.median(d.step_ms), ".1f", " ms"), target,
                "" if ok is None else ("[green]✓[/]" if ok else "[red]✗[/]"),
                "[red]✗[/]" if wrong else "[green]✓[/]")
        console.print(table)

        phases = Table(title="where an episode round's time goes (median per round of N episodes)")
        for col in ("N", "side", "start (reset / docker run)", "agent steps", "verify (submit / exec + rm -f)",
                    "background teardown after the last round"):
            phases.add_column(col, justify="left" if col == "side" else "right")
        for n in a.concurrency:
            for side in ("envyard", FRESH, "docker"):
                r = self.get(side, n)
                if r is None or not r.rounds:
                    continue
                phases.add_row(str(n), side, num(r.phase_ms("start_s"), ".1f", " ms"),
                               num(r.phase_ms("steps_s"), ".1f", " ms"), num(r.phase_ms("verify_s"), ".1f", " ms"),
                               f"{r.drain_s * 1000:.1f} ms" if side != "docker" else "")
        console.print(phases)
        for text in self.notes:
            console.print(f"[yellow]note:[/] {text}")
        elapsed = time.monotonic() - started
        console.print(f"total run time: {elapsed:.1f} s")
        return {
            "machine": machine,
            "config": {"steps": a.steps, "episodes_per_env": a.episodes_per_env, "concurrency": a.concurrency,
                       "quick": a.quick, "home": str(self.yard.store.home), "step_command": step_command(1),
                       "verifier": verifier_script(a.steps), "docker_image": DOCKER_IMAGE if self.docker_ok else None},
            "targets": targets,
            "results": [r.summary() for r in self.runs],
            "notes": self.notes,
            "elapsed_s": round(elapsed, 1),
        }


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", default=DEFAULT_HOME, help=f"envyard store to use (default {DEFAULT_HOME}; keeps the "
                                                         "debian:bookworm image between runs)")
    p.add_argument("--json", default=str(DEFAULT_JSON), help="where to write the results "
                                                             "(default benchmarks/results/rollout.json in this repo)")
    p.add_argument("--steps", type=int, default=None, help="agent steps per episode (default 20; 5 with --quick)")
    p.add_argument("--episodes-per-env", type=int, default=None,
                   help="episodes each environment runs per concurrency level (default 2; 1 with --quick)")
    p.add_argument("--concurrency", default="1,8,64", help="comma list of N, environments at once (default 1,8,64)")
    p.add_argument("--skip-docker", action="store_true", help="do not measure docker")
    p.add_argument("--skip-fresh", action="store_true",
                   help="do not measure envyard with the verifier started only at submit (envyard-fresh)")
    p.add_argument("--quick", action="store_true", help="smoke run: 5 steps, 1 episode per environment")
    args = p.parse_args(argv)
    args.steps = args.steps if args.steps is not None else (5 if args.quick else 20)
    args.episodes_per_env = args.episodes_per_env if args.episodes_per_env is not None else (1 if args.quick else 2)
    try:
        args.concurrency = [int(x) for x in args.concurrency.split(",") if x.strip()]
    except ValueError:
        p.error("--concurrency must be a comma list of integers, e.g. 1,8,64")
    if not args.concurrency or min(args.concurrency) < 1 or args.steps < 1 or args.episodes_per_env < 1:
        p.error("--concurrency values, --steps and --episodes-per-env must be positive")
    return args


def cpu_busy(seconds: float = 2.0) -> float:
    """Fraction of all CPUs busy over `seconds` (from /proc/stat): the load average lags by minutes."""
    def sample():
        v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(v), v[3] + v[4]  # total, idle + iowait
    t0, i0 = sample()
    time.sleep(seconds)
    t1, i1 = sample()
    return 1 - (i1 - i0) / max(1, t1 - t0)


def _raise_interrupt(*_):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    bench = Bench(args)
    load0 = os.getloadavg()
    busy0 = cpu_busy()
    try:
        bench.setup()
        machine = sbench.machine_info(find_bwrap(), bench.yard, bench.docker.version if bench.docker_ok else None)
        machine["loadavg_start"] = load0
        machine["cpu_busy_before"] = round(busy0, 3)
        bench.measure()
        machine["loadavg_end"] = os.getloadavg()
        if busy0 > 0.25:
            bench.note(f"the machine was busy before the run ({busy0:.0%} of the CPUs over 2 s; load average "
                       f"{load0[0]:.1f}): expect noisy numbers")
        data = bench.report(machine, started)
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        console.print(f"results written to {out}")
        return 0
    except KeyboardInterrupt:
        console.print("[red]interrupted[/]")
        return 130
    finally:
        bench.cleanup()


if __name__ == "__main__":
    sys.exit(main())
