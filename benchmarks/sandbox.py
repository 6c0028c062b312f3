#!/usr/bin/env python3
"""Side-by-side latency and density benchmark: envyard vs. a raw bubblewrap floor vs. Docker.

Measures, in one run:
  0. issue #12's rows, every contender interleaved (create→exec→close with teardown, one-shot exec, the
     `envyard run` console script vs `docker run`, fork per child under the machine's load)
  1. create -> first exec result -> close    (raw bwrap, envyard over debian:bookworm and host, docker run --rm)
  2. exec round trip                          (raw resident shell, envyard shell session / one-shot, docker exec)
  3. fork cost per child vs. image size       (yard.fork(img, 8) over a 10 MB and a 1 GB snapshot)
  4. reset after a few writes; snapshot of 100 MB of changes
  5. idle density: host memory per idle sandbox with --idle sandboxes open at once

Prints a rich table and writes JSON (with machine info). See benchmarks/README.md.

    python benchmarks/sandbox.py --home /var/tmp/envyard-bench --quick
    python benchmarks/sandbox.py --home /var/tmp/envyard-bench
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.table import Table

import envyard
from envyard.runtime.bwrap import find_bwrap

console = Console(highlight=False, width=None if sys.stdout.isatty() else 170)
MARK = "__envyard_bench_mark__"
DOCKER_IMAGE = "envyard-bench:bookworm"
FORK_N = 8
DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "sandbox.json"
MiB = 1 << 20


# ---- statistics -----------------------------------------------------------------------------------------------

def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def p90(xs: list[float]) -> float | None:
    """90th percentile, nearest rank (no interpolation: with few samples it is a real observation)."""
    if not xs:
        return None
    s = sorted(xs)
    return s[max(0, math.ceil(0.9 * len(s)) - 1)]


def timed_ms(fn: Callable[[], object]) -> float:
    t = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t) / 1e6


def sample(fn: Callable[[], object], reps: int, warmup: int = 2) -> list[float]:
    for _ in range(warmup):
        fn()
    return [timed_ms(fn) for _ in range(reps)]


def interleaved(tasks: list[tuple[str, Callable[[], object], int]], warmup: int = 2) -> dict[str, list[float]]:
    """Sample several contenders round-robin (order rotated each round, fewer-rep tasks spread evenly), so
    that background noise (writeback, other tenants) hits all of them alike instead of whichever ran last."""
    for _, fn, _ in tasks:
        for _ in range(warmup):
            fn()
    rounds = max(k for _, _, k in tasks)
    out: dict[str, list[float]] = {name: [] for name, _, _ in tasks}
    for i in range(rounds):
        due = [(name, fn) for name, fn, k in tasks if (i + 1) * k // rounds > i * k // rounds]
        shift = i % len(due) if due else 0
        for name, fn in due[shift:] + due[:shift]:
            out[name].append(timed_ms(fn))
    return out


def settle(seconds: float = 1.0) -> None:
    """Flush dirty pages and pause, so writeback from a previous step does not land in the next measurement."""
    os.sync()
    time.sleep(seconds)


# ---- result rows --------------------------------------------------------------------------------------------

@dataclass
class Row:
    section: str
    name: str
    unit: str = "ms"
    samples: list[float] = field(default_factory=list)
    value: float | None = None           # headline number (median of samples unless set directly)
    p90: float | None = None
    target: str = ""
    target_max: float | None = None      # value must be <= this
    raw_ref: str | None = None           # name of the row that is this row's raw floor
    raw_max: float | None = None         # value / raw must be <= this
    docker_ref: str | None = None        # name of the docker row to compare against
    docker_min: float | None = None      # docker / value must be >= this
    vs_raw: float | None = None
    vs_docker: float | None = None
    ok: bool | None = None
    ok_override: bool | None = None      # forces a fail (e.g. fewer sandboxes opened than asked)
    note: str = ""
    extra: dict = field(default_factory=dict)

    def finish(self) -> "Row":
        if self.samples and self.value is None:
            self.value = median(self.samples)
        if self.samples and self.p90 is None and len(self.samples) > 1:
            self.p90 = p90(self.samples)
        return self


class Results:
    def __init__(self):
        self.rows: list[Row] = []
        self.notes: list[str] = []

    def add(self, row: Row) -> Row:
        self.rows.append(row.finish())
        v = row.value
        shown = "n/a" if v is None else (f"{v:.3f} {row.unit}" if row.unit == "ms" else f"{v:.2f} {row.unit}")
        console.print(f"  [dim]{row.section}[/] {row.name}: [bold]{shown}[/]" + (f"  ({row.note})" if row.note else ""))
        return row

    def note(self, text: str) -> None:
        self.notes.append(text)
        console.print(f"  [yellow]note:[/] {text}")

    def get(self, name: str) -> Row | None:
        return next((r for r in self.rows if r.name == name), None)

    def evaluate(self) -> None:
        for r in self.rows:
            checks = []
            if r.raw_ref and (raw := self.get(r.raw_ref)) and raw.value and r.value is not None:
                r.vs_raw = r.value / raw.value
                if r.raw_max is not None:
                    checks.append(r.vs_raw <= r.raw_max)
            if r.docker_ref and (dk := self.get(r.docker_ref)) and dk.value and r.value:
                r.vs_docker = dk.value / r.value
                if r.docker_min is not None:
                    checks.append(r.vs_docker >= r.docker_min)
            elif r.docker_min is not None:
                r.note = (r.note + "; " if r.note else "") + "docker target not checked (no docker)"
            if r.target_max is not None and r.value is not None:
                checks.append(r.value <= r.target_max)
            if r.ok_override is not None:
                checks.append(r.ok_override)
            if checks:
                r.ok = all(checks)


# ---- machine info -------------------------------------------------------------------------------------------

def meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        out[key] = int(rest.split()[0]) * 1024
    return out


def run_text(argv: list[str], timeout: float = 20) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def machine_info(bwrap: str, yard: envyard.Yard, docker_version: str | None) -> dict:
    mi = meminfo()
    cpu_model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "hostname": platform.node(),
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_model": cpu_model,
        "memory_total_bytes": mi.get("MemTotal"),
        "memory_available_bytes": mi.get("MemAvailable"),
        "kernel": platform.release(),
        "os": run_text(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "python": platform.python_version(),
        "envyard": envyard.__version__,
        "bwrap_path": bwrap,
        "bwrap_version": run_text([bwrap, "--version"]),
        "cgroups": yard.backend.cgroups.mode,
        "store_fs": run_text(["stat", "-f", "-c", "%T", str(yard.store.home)]),
        "docker": docker_version,
    }


# ---- process accounting ------------------------------------------------------------------------------------

def proc_children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            data = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        ppid = int(data[data.rfind(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def descendants(root: int) -> list[int]:
    kids = proc_children_map()
    out, todo = [], list(kids.get(root, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def stray_sandbox_processes(sandboxes_dir: Path, since_ticks: int) -> list[tuple[int, str]]:
    """Processes started after `since_ticks` (clock ticks since boot) whose command line names a sandbox
    directory of our store that no longer exists: sandbox processes nobody owns any more."""
    prefix = str(sandboxes_dir.resolve()) + "/"
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            args = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2] == "Z" or int(stat[stat.rfind(")") + 2:].split()[19]) < since_ticks:
            continue
        for a in args:
            a = a.decode(errors="replace")
            if a.startswith(prefix):
                sandbox_dir = Path(prefix + a[len(prefix):].split("/")[0])
                if not sandbox_dir.exists():
                    found.append((int(name), a))
                break
    return found


def own_start_ticks() -> int:
    stat = Path("/proc/self/stat").read_text()
    return int(stat[stat.rfind(")") + 2:].split()[19])


def pss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def rss_bytes(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


# ---- docker ---------------------------------------------------------------------------------------------------

class Docker:
    """Brings up a Docker engine if needed (and stops it again if we started it); everything we make is removed."""

    def __init__(self, keep_engine: bool):
        self.keep_engine = keep_engine
        self.ok = False
        self.why = ""
        self.version: str | None = None
        self.dockerd: subprocess.Popen | None = None
        self.ip_forward: str | None = None  # net.ipv4.ip_forward before we started dockerd
        self.images: list[str] = []
        self.containers: list[str] = []

    @staticmethod
    def _info_ok() -> bool:
        try:
            return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False

    def start(self) -> bool:
        if not shutil.which("dockerd") or not shutil.which("docker"):
            console.print("[cyan]docker:[/] dockerd/docker missing; installing docker.io with apt-get ...")
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
            r = subprocess.run(["apt-get", "install", "-y", "-qq", "docker.io"], env=env, capture_output=True, text=True)
            if r.returncode != 0 or not shutil.which("dockerd"):
                self.why = f"apt-get install docker.io failed: {(r.stderr or r.stdout).strip()[-300:]}"
                return False
        if not self._info_ok():
            console.print("[cyan]docker:[/] engine not reachable; starting dockerd (log: /var/log/dockerd.log) ...")
            # A default dockerd turns on the host's IP forwarding for its bridge; cleanup() puts it back.
            self.ip_forward = _read_ip_forward()
            log = open("/var/log/dockerd.log", "ab")
            try:
                self.dockerd = subprocess.Popen(["dockerd"], stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, start_new_session=True)
            finally:
                log.close()
            deadline = time.monotonic() + 60
            while not self._info_ok():
                if self.dockerd.poll() is not None:
                    tail = Path("/var/log/dockerd.log").read_text(errors="replace").strip().splitlines()[-3:]
                    self.why = f"dockerd exited with {self.dockerd.returncode}: {' | '.join(tail)}"
                    self.dockerd = None
                    return False
                if time.monotonic() > deadline:
                    self.why = "dockerd did not answer `docker info` within 60 s (see /var/log/dockerd.log)"
                    return False
                time.sleep(0.5)
        self.version = run_text(["docker", "version", "--format", "{{.Server.Version}}"]) or "unknown"
        self.ok = True
        return True

    def import_rootfs(self, layer_dir: Path) -> None:
        tar = subprocess.Popen(["tar", "-C", str(layer_dir), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        try:
            imp = subprocess.run(["docker", "import", "-", DOCKER_IMAGE], stdin=tar.stdout, capture_output=True, text=True)
        finally:
            tar.stdout.close()
            tar.wait()
        if imp.returncode != 0:
            raise RuntimeError(f"docker import failed: {imp.stderr.strip()}")
        self.images.append(DOCKER_IMAGE)

    def run_detached(self) -> str:
        cid = subprocess.run(["docker", "run", "-d", "--network", "none", DOCKER_IMAGE, "sleep", "infinity"],
                             capture_output=True, text=True, check=True).stdout.strip()
        self.containers.append(cid)
        return cid

    def cleanup(self) -> None:
        if self.containers:
            subprocess.run(["docker", "rm", "-f", *self.containers], capture_output=True)
            self.containers.clear()
        for img in self.images:
            subprocess.run(["docker", "rmi", "-f", img], capture_output=True)
        self.images.clear()
        if self.dockerd is not None and not self.keep_engine:
            self.dockerd.terminate()
            try:
                self.dockerd.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.dockerd.kill()
                self.dockerd.wait()
            self.dockerd = None
            if self.ip_forward is not None and _read_ip_forward() != self.ip_forward:
                Path(IP_FORWARD).write_text(self.ip_forward)


IP_FORWARD = "/proc/sys/net/ipv4/ip_forward"


def _read_ip_forward() -> str | None:
    try:
        return Path(IP_FORWARD).read_text().strip()
    except OSError:
        return None


# ---- raw bubblewrap floor ---------------------------------------------------------------------------------------

class RawFloor:
    """The least one can do with bwrap for the same isolation shape: overlay root, fresh upper/work, pid+net ns."""

    def __init__(self, bwrap: str, lower: Path, scratch: Path):
        self.bwrap = bwrap
        self.lower = lower
        self.scratch = scratch
        self.procs: list[subprocess.Popen] = []

    def _args(self, upper: Path, work: Path, *cmd: str) -> list[str]:
        return [self.bwrap, "--overlay-src", str(self.lower), "--overlay", str(upper), str(work), "/",
                "--proc", "/proc", "--dev", "/dev", "--unshare-pid", "--unshare-net", *cmd]

    def create_exec_close(self) -> None:
        d = self.scratch / uuid.uuid4().hex[:12]
        upper, work = d / "upper", d / "work"
        upper.mkdir(parents=True)
        work.mkdir()
        try:
            subprocess.run(self._args(upper, work, "/bin/true"), check=True)
        finally:
            shutil.rmtree(d)

    @contextlib.contextmanager
    def resident_shell(self):
        """A persistent /bin/sh in a bwrap sandbox reading commands from a pipe; yields a round-trip function."""
        d = self.scratch / uuid.uuid4().hex[:12]
        upper, work = d / "upper", d / "work"
        upper.mkdir(parents=True)
        work.mkdir()
        proc = subprocess.Popen(self._args(upper, work, "/bin/sh"), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.procs.append(proc)
        win, rout = proc.stdin.fileno(), proc.stdout.fileno()
        marker = (MARK + "\n").encode()

        def round_trip(cmd: str) -> None:
            os.write(win, f"{cmd}; echo {MARK}\n".encode())
            buf = b""
            while not buf.endswith(marker):
                chunk = os.read(rout, 4096)
                if not chunk:
                    raise RuntimeError("raw resident shell died")
                buf += chunk

        try:
            round_trip("true")  # wait until it is up
            yield round_trip
        finally:
            proc.stdin.close()
            proc.wait(timeout=10)
            proc.stdout.close()
            self.procs.remove(proc)
            shutil.rmtree(d, ignore_errors=True)

    def kill_all(self) -> None:
        for p in self.procs:
            with contextlib.suppress(OSError):
                p.kill()
            with contextlib.suppress(Exception):
                p.wait(timeout=5)
        self.procs.clear()


# ---- helpers around envyard -------------------------------------------------------------------------------------

try:  # newer envyard tears sandboxes down on a background thread after close(); wait for it where it exists
    from envyard.janitor import wait as _janitor_wait
except ImportError:
    _janitor_wait = None


def drain_background_cleanup() -> None:
    if _janitor_wait:
        _janitor_wait()


def must(r: envyard.ExecResult, what: str) -> envyard.ExecResult:
    if r.exit_code != 0:
        raise RuntimeError(f"{what} failed with exit code {r.exit_code}: {r.stderr.strip()[-300:]}")
    return r


def fill_script(total_bytes: int, directory: str = "/data", chunk: int = 64 * MiB) -> str:
    """Shell that writes `total_bytes` of random data as several files of at most `chunk` bytes."""
    parts, i, left = [f"mkdir -p {directory}"], 0, total_bytes
    while left > 0:
        n = min(chunk, left)
        parts.append(f"head -c {n} /dev/urandom > {directory}/f{i:03d}")
        left -= n
        i += 1
    return " && ".join(parts)


def build_image_of_size(yard: envyard.Yard, base: envyard.Image, size: int, name: str) -> envyard.Image:
    with yard.sandbox(base) as sb:
        must(sb.exec(fill_script(size), timeout=600), f"writing {size} bytes")
        return sb.snapshot(name)


def mounts_under(path: Path) -> list[str]:
    prefix = str(path.resolve()).rstrip("/") + "/"
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        mnt = line.split()[1].replace("\\040", " ")
        if mnt.startswith(prefix) or mnt == prefix.rstrip("/"):
            found.append(mnt)
    return sorted(found, key=len, reverse=True)


# ---- the benchmark ------------------------------------------------------------------------------------------

class Bench:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.res = Results()
        self.reps = args.reps
        self.fast_reps = max(args.reps * 10, 50)  # sub-millisecond operations get more samples
        self.slow_reps = max(3, args.reps // 6)   # 100 MB snapshots, fork rounds
        self.docker_reps = args.reps
        self.made_images: list[str] = []
        self._snapshot_image = None  # snapshot_image()
        self.open_sandboxes: list = []
        self.tmp_home: Path | None = None
        self.scratch: Path | None = None
        self.docker: Docker | None = None
        self.raw: RawFloor | None = None
        self.yard: envyard.Yard | None = None
        self.start_ticks = own_start_ticks()
        self.sections: set[str] = set()

    # -- setup / cleanup --

    def setup(self) -> None:
        if self.args.home:
            home = Path(self.args.home)
        else:
            self.tmp_home = Path(tempfile.mkdtemp(prefix="envyard-bench-home-", dir="/var/tmp"))
            home = self.tmp_home
        self.yard = envyard.Yard(home)
        self.scratch = Path(tempfile.mkdtemp(prefix="envyard-bench-raw-", dir=str(home)))
        self.bwrap = find_bwrap()
        console.print(f"[cyan]store:[/] {self.yard.store.home}   [cyan]bwrap:[/] {self.bwrap}")
        t = time.monotonic()
        self.debian = self.yard.pull("debian:bookworm", on_progress=lambda m: console.print(f"  [dim]pull: {m}[/]"))
        console.print(f"[cyan]debian:bookworm[/] ready in {time.monotonic() - t:.1f} s")
        self.host = self.yard.image("host")
        self.debian_layer = self.yard.store.layer_paths(self.debian.layers)[0]
        self.raw = RawFloor(self.bwrap, self.debian_layer, self.scratch)
        if self.args.skip_docker:
            self.res.note("docker skipped (--skip-docker)")
        else:
            self.docker = Docker(keep_engine=self.args.keep_dockerd)
            if self.docker.start():
                console.print(f"[cyan]docker:[/] engine {self.docker.version}; importing the debootstrap rootfs ...")
                try:
                    self.docker.import_rootfs(self.debian_layer)
                except Exception as e:  # noqa: BLE001 - report and go on without docker
                    self.docker.ok = False
                    self.docker.why = str(e)
            if not self.docker.ok:
                self.res.note(f"docker unavailable, docker columns are n/a: {self.docker.why}")

    @property
    def docker_ok(self) -> bool:
        return bool(self.docker and self.docker.ok)

    def cleanup(self) -> None:
        console.print("[cyan]cleaning up ...[/]")
        for sb in self.open_sandboxes:
            with contextlib.suppress(Exception):
                sb.close()
        self.open_sandboxes.clear()
        if self.raw:
            self.raw.kill_all()
        if self.yard:
            with contextlib.suppress(Exception):
                self.yard.close()
            for name in self.made_images:
                with contextlib.suppress(Exception):
                    self.yard.remove_image(name)
            with contextlib.suppress(Exception):
                self.yard.gc()
            with contextlib.suppress(Exception):
                self.reap_strays("at cleanup")
        if self.docker:
            with contextlib.suppress(Exception):
                self.docker.cleanup()
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
        if self.tmp_home:
            # gc unmounts the host root view; make sure nothing is still mounted before deleting anything.
            for m in mounts_under(self.tmp_home):
                subprocess.run(["umount", "-l", m], capture_output=True)
            if not mounts_under(self.tmp_home):
                subprocess.run(["rm", "-rf", "--one-file-system", str(self.tmp_home)], capture_output=True)
            else:
                console.print(f"[red]left {self.tmp_home} in place: something is still mounted under it[/]")

    def reap_strays(self, when: str) -> None:
        """A sandbox whose start failed half-way can leave bwrap processes behind that no lease points at
        (seen when envyard's start-up raised): report them and end them; they are ours."""
        time.sleep(0.2)
        strays = stray_sandbox_processes(self.yard.store.sandboxes_dir, self.start_ticks)
        if strays:
            self.res.note(f"{when}: envyard left {len(strays)} stray sandbox process(es) with no sandbox dir behind "
                          f"(pids {', '.join(str(p) for p, _ in strays)}); killed them")
            for pid, _ in strays:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    # -- 0. issue #12's table, every contender interleaved --

    def bench_hot(self) -> None:
        """The rows of issue #12, each with envyard, its floor and Docker sampled round-robin in one loop (Docker
        included: its daemon's after-work then lands in everyone's samples alike, not in one contender's)."""
        console.rule("0. issue #12: hot paths — envyard vs floor vs Docker, interleaved")
        settle()
        cli = self.args.envyard_cli or shutil.which("envyard")
        interp = Path(cli).read_text(errors="replace").splitlines()[0].removeprefix("#!").split()[0] if cli else None
        cli_env = {**os.environ, "ENVYARD_HOME": str(self.yard.store.home)}
        run = lambda argv, **kw: subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, **kw)  # noqa: E731
        f_create, e_create, d_run = ("floor: raw bwrap, true, rm (debian)", "envyard create → exec → close, "
                                     "teardown waited (debian)", "docker run --rm")
        f_exec, e_exec, e_sess, d_exec = ("floor: resident sh, `/bin/true`", "envyard sb.exec('true') one-shot",
                                          "envyard sh.run('true') session", "docker exec")
        f_py, e_cli = "floor: the CLI's interpreter, `-c pass`", "envyard run host -- true (console script)"
        e_typer = "same command through typer (the old entry point)"

        def cycle():
            with self.yard.sandbox(self.debian) as sb:
                must(sb.exec("true"), "true")
            drain_background_cleanup()  # teardown included in the figure

        with contextlib.ExitStack() as stack:
            rt = stack.enter_context(self.raw.resident_shell())
            live = stack.enter_context(self.yard.sandbox(self.debian))
            sh = live.shell()
            stack.callback(sh.close)
            tasks = [(f_create, self.raw.create_exec_close, self.reps), (e_create, cycle, self.reps),
                     (f_exec, lambda: rt("/bin/true"), self.fast_reps),
                     (e_exec, lambda: must(live.exec("true"), "exec"), self.fast_reps),
                     (e_sess, lambda: must(sh.run("true"), "sh.run"), self.fast_reps)]
            if cli and interp:
                tasks += [(f_py, lambda: run([interp, "-c", "pass"]), self.reps),
                          (e_cli, lambda: run([cli, "run", "host", "--", "true"], env=cli_env), self.reps),
                          (e_typer, lambda: run([interp, "-c", "from envyard.cli.main import app; app()", "run",
                                                 "host", "--", "true"], env=cli_env), self.reps)]
            if self.docker_ok:
                cid = self.docker.run_detached()
                tasks += [(d_run, lambda: run(["docker", "run", "--rm", "--network", "none", DOCKER_IMAGE, "true"]),
                           self.docker_reps),
                          (d_exec, lambda: run(["docker", "exec", cid, "true"]), self.docker_reps)]
            got = interleaved(tasks)
        r = self.res
        r.add(Row("hot", f_create, samples=got[f_create], note="mkdir upper+work, bwrap /bin/true, rm -r"))
        r.add(Row("hot", e_create, samples=got[e_create], target="≤1.5× floor, teardown included", raw_ref=f_create,
                  raw_max=1.5, docker_ref=d_run))
        r.add(Row("hot", d_run, samples=got.get(d_run, []), note="" if self.docker_ok else "n/a"))
        r.add(Row("hot", f_exec, samples=got[f_exec], note="pipe round trip + fork/exec"))
        r.add(Row("hot", e_exec, samples=got[e_exec], target="≤1 ms", target_max=1, raw_ref=f_exec,
                  docker_ref=d_exec))
        r.add(Row("hot", e_sess, samples=got[e_sess], raw_ref=f_exec, docker_ref=d_exec))
        r.add(Row("hot", d_exec, samples=got.get(d_exec, []), note="" if self.docker_ok else "n/a"))
        if cli and interp:
            r.add(Row("hot", f_py, samples=got[f_py], note=interp))
            r.add(Row("hot", e_cli, samples=got[e_cli], target="≤100 ms, ≥5× docker run", target_max=100,
                      raw_ref=f_py, docker_ref=d_run, docker_min=5, note=cli))
            r.add(Row("hot", e_typer, samples=got[e_typer], raw_ref=f_py, docker_ref=d_run,
                      note="typer, rich, pydantic and every command module loaded"))
        else:
            r.add(Row("hot", e_cli, note="no envyard console script found (--envyard-cli)"))
        self.bench_hot_loop(f_create)
        self.bench_hot_fork()
        if "reset" not in self.sections:
            self.bench_snapshot_many_files()

    def bench_hot_loop(self, floor_name: str) -> None:
        """create → exec → close back to back, as a rollout loop does, with the teardown on the janitor thread;
        batches of envyard and of the floor alternate, and each envyard batch ends when its teardowns are done."""
        batch, floor, ours = 10, [], []
        for _ in range(max(3, self.reps // batch)):
            t = time.perf_counter_ns()
            for _ in range(batch):
                self.raw.create_exec_close()
            floor.append((time.perf_counter_ns() - t) / 1e6 / batch)
            t = time.perf_counter_ns()
            for _ in range(batch):
                with self.yard.sandbox(self.debian) as sb:
                    must(sb.exec("true"), "true")
            drain_background_cleanup()
            ours.append((time.perf_counter_ns() - t) / 1e6 / batch)
        name = "  floor, same batches"
        self.res.add(Row("hot", name, samples=floor))
        self.res.add(Row("hot", "envyard create → exec → close in a loop, per sandbox (all teardowns done)",
                         samples=ours, target="≤1.5× floor", raw_ref=name, raw_max=1.5,
                         note=f"batches of {batch}; the janitor holds at most 32 teardowns"))

    def bench_hot_fork(self) -> None:
        per_child = []
        for _ in range(max(3, self.slow_reps)):
            t = time.perf_counter_ns()
            kids = self.yard.fork(self.debian, FORK_N)
            per_child.append((time.perf_counter_ns() - t) / 1e6 / FORK_N)
            for k in kids:
                k.close()
            drain_background_cleanup()
        self.res.add(Row("hot", f"envyard fork per child ({FORK_N} children), machine as loaded as it is",
                         samples=per_child, target="≤20 ms", target_max=20,
                         note=f"load average {os.getloadavg()[0]:.1f}"))

    # -- 1. create -> first exec -> close --

    def bench_create(self) -> None:
        console.rule("1. create → first exec result → close")
        settle()

        def envyard_once(img):
            def go():
                with self.yard.sandbox(img) as sb:
                    must(sb.exec("true"), "true")
            return go

        raw, deb, host, dock = ("raw bwrap floor (debian)", "envyard (debian:bookworm)", "envyard (host)",
                                "docker run --rm")
        layered = "envyard (debian + a snapshot layer)"
        tasks = [(raw, self.raw.create_exec_close, self.reps), (deb, envyard_once(self.debian), self.reps),
                 (host, envyard_once(self.host), self.reps)]
        snap_img = self.snapshot_image()
        if snap_img is not None:  # its sandbox's subvolume is a snapshot of the layer's (volume._numbered_after)
            tasks.append((layered, envyard_once(snap_img), self.reps))
        got = interleaved(tasks)
        if self.docker_ok:
            # Docker in a block of its own: its daemons finish work after the CLI returns, which would
            # otherwise land in the next contender's sample.
            argv = ["docker", "run", "--rm", "--network", "none", DOCKER_IMAGE, "true"]
            settle(0.5)
            got[dock] = sample(lambda: subprocess.run(argv, check=True), self.docker_reps, warmup=1)
        # Warm pool: sandboxes of this spec started ahead of time, so create is a hand-over. Spaced by 30 ms,
        # as rollouts are (the pool refills in the background between episodes).
        warm = "envyard warm pool (debian)"
        self.yard.keep_warm(self.debian, 4, wait=True)
        try:
            def spaced():
                time.sleep(0.03)
                return None
            got[warm] = []
            for _ in range(self.reps + 2):
                spaced()
                got[warm].append(timed_ms(envyard_once(self.debian)))
            got[warm] = got[warm][2:]
        finally:
            self.yard.keep_warm(self.debian, 0)
            self.yard.wait_closed()
        r = self.res
        r.add(Row("create", raw, samples=got[raw], note="subprocess bwrap … /bin/true incl. mkdir/rm of upper+work"))
        for label in (deb, host, warm, layered):
            if label not in got:
                continue
            r.add(Row("create", label, samples=got[label], target="≤10 ms, ≤2× raw, ≥20× docker", target_max=10,
                      raw_ref=raw, raw_max=2, docker_ref=dock, docker_min=20,
                      note="keep_warm(image, 4); 30 ms between episodes" if label == warm else ""))
        self.phase_breakdown()
        if self.docker_ok:
            r.add(Row("create", dock, samples=got[dock], note="--network none"))
        else:
            r.add(Row("create", dock, note="n/a"))

    def snapshot_image(self):
        """debian:bookworm + one layer made by a snapshot (3,000 small files), made once; None without the
        disk-limit volume (the layer is then a copy on the store's filesystem, like debian's)."""
        if not self.yard.can_limit_disk:
            return None
        if self._snapshot_image is None:
            name = f"envyard-bench/layered:{uuid.uuid4().hex[:8]}"
            with self.yard.sandbox(self.debian) as sb:
                must(sb.exec("mkdir -p /data && seq 1 3000 | sed 's|^|/data/f|' | xargs touch"), "writing files")
                self.made_images.append(name)
                self._snapshot_image = sb.snapshot(name)
        return self._snapshot_image

    # -- 1b. what each defence costs --

    def bench_defences(self) -> None:
        """create → exec(true) → close → teardown done, over debian, with every defence and with each switched
        off in turn, interleaved. The switches (a module flag, a backend attribute, the mask list) exist for this
        measurement; docs/security.md says what each defence does."""
        console.rule("1b. what each defence costs (create → exec → close → teardown, debian)")
        settle()
        from envyard.runtime import local

        backend = self.yard.backend

        @contextlib.contextmanager
        def off(*what: str):
            saved = (local.mask_args, local.USER_NAMESPACE, backend.disk_limits)
            if "masks" in what:
                local.mask_args = lambda: ()
            if "userns" in what:
                local.USER_NAMESPACE = False
            if "disk" in what:
                backend.disk_limits = False
            try:
                yield
            finally:
                local.mask_args, local.USER_NAMESPACE, backend.disk_limits = saved

        def variant(*what: str, security: str = "default"):
            def go():
                with off(*what), self.yard.sandbox(self.debian, security=security) as sb:
                    must(sb.exec("true"), "true")
                # Teardown included: left to the background, one variant's teardown (a subvolume to delete, a
                # tree to remove) would land in the next variant's sample, always the same one.
                drain_background_cleanup()
            return go

        raw, full = "raw bwrap floor (debian, this section)", "envyard, all defences"
        variants = {full: variant(), "envyard, without seccomp (relaxed)": variant(security="relaxed"),
                    "envyard, without kernel path masks": variant("masks"),
                    "envyard, without user namespace": variant("userns"),
                    "envyard, without disk limit": variant("disk"),
                    "envyard, none of these": variant("masks", "userns", "disk", security="relaxed")}
        got = interleaved([(raw, self.raw.create_exec_close, self.reps)] +
                          [(name, fn, self.reps) for name, fn in variants.items()])
        self.res.add(Row("defences", raw, samples=got[raw]))
        for name in variants:
            self.res.add(Row("defences", name, samples=got[name], raw_ref=raw,
                             target="≤2× raw" if name == full else "", raw_max=2 if name == full else None,
                             note="teardown included"))

    def phase_breakdown(self) -> None:
        """Where the envyard create→exec→close time goes (create / first exec / close), for the report.
        close() may hand the teardown to a background thread; how long that takes is a row of its own."""
        parts: dict[str, list[float]] = {"create": [], "first exec": [], "close": [], "background teardown": []}
        for _ in range(self.reps):
            t0 = time.perf_counter_ns()
            sb = self.yard.sandbox(self.debian)
            t1 = time.perf_counter_ns()
            must(sb.exec("true"), "true")
            t2 = time.perf_counter_ns()
            sb.close()
            t3 = time.perf_counter_ns()
            drain_background_cleanup()
            t4 = time.perf_counter_ns()
            parts["create"].append((t1 - t0) / 1e6)
            parts["first exec"].append((t2 - t1) / 1e6)
            parts["close"].append((t3 - t2) / 1e6)
            parts["background teardown"].append((t4 - t3) / 1e6)
        notes = {"close": "until close() returns", "background teardown": "after close() returns, off the caller's path"}
        for k, v in parts.items():
            if k == "background teardown" and not _janitor_wait:
                continue
            self.res.add(Row("create", f"  envyard phase: {k}", samples=v, note=notes.get(k, "breakdown (debian)")))

    # -- 2. exec round trip --

    def bench_exec(self) -> None:
        console.rule("2. exec round trip")
        settle()
        r = self.res
        b_raw, f_raw = "raw resident sh: builtin `true`", "raw resident sh: `/bin/true`"
        e_sh, e_ex, dk = "envyard sh.run('true') (session)", "envyard sb.exec('true') (one-shot)", "docker exec"
        with contextlib.ExitStack() as stack:
            rt = stack.enter_context(self.raw.resident_shell())
            sb = stack.enter_context(self.yard.sandbox(self.debian))
            sh = sb.shell()
            stack.callback(sh.close)
            tasks = [(b_raw, lambda: rt("true"), self.fast_reps), (f_raw, lambda: rt("/bin/true"), self.fast_reps),
                     (e_sh, lambda: must(sh.run("true"), "sh.run"), self.fast_reps),
                     (e_ex, lambda: must(sb.exec("true"), "exec"), self.fast_reps)]
            got = interleaved(tasks, warmup=10)
        if self.docker_ok:
            cid = self.docker.run_detached()
            argv = ["docker", "exec", cid, "true"]
            settle(0.5)
            got[dk] = sample(lambda: subprocess.run(argv, check=True), self.docker_reps * 2, warmup=2)
        r.add(Row("exec", b_raw, samples=got[b_raw], note="pipe round trip, no fork"))
        r.add(Row("exec", f_raw, samples=got[f_raw], note="pipe round trip + fork/exec"))
        r.add(Row("exec", e_sh, samples=got[e_sh], target="≤2 ms, ≥25× docker exec", target_max=2, raw_ref=b_raw,
                  docker_ref=dk, docker_min=25))
        r.add(Row("exec", e_ex, samples=got[e_ex], raw_ref=f_raw, docker_ref=dk, note="fresh /bin/sh per command"))
        r.add(Row("exec", dk, samples=got.get(dk, []), note="" if self.docker_ok else "n/a"))

    # -- 3. fork cost vs image size --

    def bench_fork(self) -> None:
        console.rule(f"3. fork cost vs image size (yard.fork(img, {FORK_N}))")
        sizes = [("10 MB", 10 * MiB), (f"{self.args.big_mb} MB", self.args.big_mb * MiB)]
        images, info = {}, {}
        for label, size in sizes:  # build both first: the 1 GB write-back must not land in the 10 MB samples
            name = f"envyard-bench/fork-{size // MiB}mb:{uuid.uuid4().hex[:8]}"
            t = time.monotonic()
            self.made_images.append(name)
            images[label] = build_image_of_size(self.yard, self.debian, size, name)
            built = time.monotonic() - t
            layer = self.yard.store.image_size(images[label]) - self.yard.store.image_size(self.debian)
            info[label] = {"image_bytes_written": size, "snapshot_layer_bytes": layer, "build_s": round(built, 2)}
            console.print(f"  [dim]built the {label} image in {built:.1f} s (layer {layer / MiB:.0f} MiB)[/]")
        settle(2.0)

        def fork_round(img, check: bool) -> float:
            t0 = time.perf_counter_ns()
            kids = self.yard.fork(img, FORK_N)
            per_child = (time.perf_counter_ns() - t0) / 1e6 / FORK_N
            self.open_sandboxes.extend(kids)
            try:
                if check:  # the children really stand on the image
                    must(kids[-1].exec("test -s /data/f000"), "fork child sees the image's files")
            finally:
                for k in kids:
                    k.close()
                    self.open_sandboxes.remove(k)
            return per_child

        for label in images:  # warm-up round, with a content check
            fork_round(images[label], check=True)
        per_child: dict[str, list[float]] = {label: [] for label in images}
        for rnd in range(self.slow_reps * 2):  # alternate sizes so drift hits both alike
            order = list(images) if rnd % 2 == 0 else list(reversed(images))
            for label in order:
                per_child[label].append(fork_round(images[label], check=False))
        rows = []
        for label in images:
            rows.append(self.res.add(Row(
                "fork", f"envyard fork, {label} image (per child)", samples=per_child[label],
                target="≤20 ms/child", target_max=20, raw_ref="raw bwrap floor (debian)",
                note=f"{FORK_N} children; snapshot layer {info[label]['snapshot_layer_bytes'] / MiB:.0f} MiB",
                extra=info[label])))
        for label, img in images.items():
            self.yard.remove_image(img.name)
            self.made_images.remove(img.name)
        small, big = rows
        if small.value and big.value:
            self.res.add(Row("fork", f"  size dependence ({sizes[1][0]} / 10 MB)", unit="×",
                             value=big.value / small.value, target="≈1× (≤1.5×)", target_max=1.5,
                             note="per-child time ratio"))
        self.res.add(Row("fork", "docker (no fork)", note="n/a"))

    # -- 4. reset, snapshot --

    def bench_reset_snapshot(self) -> None:
        console.rule("4. reset, snapshot")
        settle()
        def resets(image, write: str) -> tuple[list[float], bool]:
            """reset() timings after `write`, the first two dropped; and whether /work/f1 is gone after them."""
            with self.yard.sandbox(image) as sb:
                samples = []
                for i in range(self.reps + 2):
                    must(sb.exec(write), "writing files")
                    ms = timed_ms(sb.reset)
                    if i >= 2:
                        samples.append(ms)
                return samples, sb.exec("test ! -e /work/f1").exit_code == 0

        samples, gone = resets(self.debian, "mkdir -p /work && for i in 1 2 3 4 5; do echo data$i > /work/f$i; done; "
                                            "echo x >> /etc/motd")
        self.res.add(Row("reset", "envyard reset() after a few writes", samples=samples, target="≤10 ms",
                         target_max=10, raw_ref="raw bwrap floor (debian)", note="" if gone else "WARNING: files survived reset"))
        snap_img = self.snapshot_image()
        if snap_img is not None:
            samples, gone = resets(snap_img, "mkdir -p /work && echo x > /work/f1")
            self.res.add(Row("reset", "envyard reset() over debian + a snapshot layer", samples=samples,
                             target="≤10 ms", target_max=10, raw_ref="raw bwrap floor (debian)",
                             note="the fresh subvolume is a snapshot of the layer's" if gone
                             else "WARNING: files survived reset"))
        samples = []
        for i in range(self.slow_reps):
            with self.yard.sandbox(self.debian) as sb:
                must(sb.exec(fill_script(100 * MiB, "/big", 25 * MiB) + " && sync -f /big/f000"), "writing 100 MB")
                name = f"envyard-bench/snap:{uuid.uuid4().hex[:8]}"
                self.made_images.append(name)
                t = time.perf_counter_ns()
                snap = sb.snapshot(name)
                samples.append((time.perf_counter_ns() - t) / 1e6)
            if i == 0:
                with self.yard.sandbox(snap) as check:
                    must(check.exec("test -s /big/f003"), "snapshot holds the 100 MB")
            self.yard.remove_image(name)
            self.made_images.remove(name)
        self.res.add(Row("snapshot", "envyard snapshot() of 100 MB of changes", samples=samples,
                         target="≤1000 ms", target_max=1000, note="4 × 25 MB files"))
        self.bench_snapshot_many_files()
        self.res.add(Row("snapshot", "docker commit", note="not measured"))

    def bench_snapshot_many_files(self) -> None:
        """A snapshot after 10,000 small files, interleaved: on the disk-limit volume (a btrfs snapshot,
        O(1)) and as a copy (the path of a machine without the volume)."""
        backend = self.yard.backend
        if not self.yard.can_limit_disk:
            self.res.add(Row("snapshot", "envyard snapshot() of 10k small files (btrfs volume)",
                             note="no disk-limit volume here"))
            return
        write = "mkdir -p /many && cd /many && seq 1 10000 | sed 's/^/f/' | xargs touch && echo x > f1 && sync -f f1"
        samples: dict[bool, list[float]] = {True: [], False: []}
        try:
            for _ in range(self.slow_reps):
                for on_volume in (True, False):
                    backend.disk_limits = on_volume
                    with self.yard.sandbox(self.debian) as sb:
                        must(sb.exec(write, timeout=120), "writing 10k files")
                        name = f"envyard-bench/many:{uuid.uuid4().hex[:8]}"
                        t = time.perf_counter_ns()
                        sb.snapshot(name)
                        samples[on_volume].append((time.perf_counter_ns() - t) / 1e6)
                    self.yard.remove_image(name)
        finally:
            backend.disk_limits = True
        self.res.add(Row("snapshot", "envyard snapshot() of 10k small files (btrfs volume)", samples=samples[True],
                         target="≤50 ms", target_max=50, note="btrfs snapshot of the sandbox's subvolume"))
        self.res.add(Row("snapshot", "envyard snapshot() of 10k small files (copy)", samples=samples[False],
                         note="cp -a of the upper dir: machines without the volume"))

    # -- 5. idle density --

    def bench_idle(self) -> None:
        n = self.args.idle
        console.rule(f"5. idle density ({n} sandboxes open at once)")
        settle()
        me = os.getpid()
        # Baseline: nothing of ours running besides, say, a docker CLI we do not own (docker is ours only as a
        # client; dockerd runs in its own session but is our child when we started it: exclude its tree).
        excluded = set()
        if self.docker and self.docker.dockerd:
            excluded.add(self.docker.dockerd.pid)
            excluded.update(descendants(self.docker.dockerd.pid))
        before_pids = set(descendants(me)) - excluded
        before_pss = sum(pss_bytes(p) for p in before_pids)
        rss0 = rss_bytes()
        avail0 = meminfo()["MemAvailable"]
        t0 = time.perf_counter()
        failure = ""
        for i in range(n):
            try:
                self.open_sandboxes.append(self.yard.sandbox(self.debian))
            except envyard.EnvyardError as e:
                failure = f"{type(e).__name__}: {e}"
            except (OSError, ValueError) as e:  # e.g. select() on a descriptor >= FD_SETSIZE inside envyard
                failure = f"{type(e).__name__}: {e}"
            if failure:
                self.res.note(f"idle: sandbox #{i + 1} of {n} failed to open ({failure}); "
                              f"measuring density over the {len(self.open_sandboxes)} that opened")
                break
            if (i + 1) % 100 == 0:
                console.print(f"  [dim]{i + 1}/{n} open ({time.perf_counter() - t0:.1f} s)[/]")
        open_s = time.perf_counter() - t0
        asked, n = n, len(self.open_sandboxes)
        if n == 0:
            raise RuntimeError(f"no idle sandbox could be opened: {failure}")
        time.sleep(1.0)  # let lazily-touched pages settle
        # Every sandbox answers (they are live, not just spawned).
        probe = self.open_sandboxes[len(self.open_sandboxes) // 2]
        must(probe.exec("true"), "idle sandbox answers")
        pids = [p for p in descendants(me) if p not in excluded and p not in before_pids]
        by_comm: dict[str, list[int]] = {}
        zombies = 0
        for p in list(pids):
            try:
                comm = Path(f"/proc/{p}/comm").read_text().strip()
                stat = Path(f"/proc/{p}/stat").read_text()
            except OSError:
                pids.remove(p)
                continue
            if stat[stat.rfind(")") + 2] == "Z":  # an exited command not yet reaped by its holder: no memory
                zombies += 1
                pids.remove(p)
                continue
            by_comm.setdefault(comm, []).append(pss_bytes(p))
        pss = sum(sum(v) for v in by_comm.values())
        breakdown = {c: {"processes": len(v), "pss_bytes": sum(v)} for c, v in by_comm.items()}
        rss1 = rss_bytes()
        avail1 = meminfo()["MemAvailable"]
        per = (pss + max(0, rss1 - rss0)) / n
        short = f"; ONLY {n} of {asked} opened" if n < asked else ""
        self.res.add(Row("idle", f"PSS of {n} sandboxes + owner RSS growth, per sandbox", unit="MiB",
                         value=per / MiB, target="≤3 MiB", target_max=3, ok_override=False if short else None,
                         note=f"{len(pids)} processes, PSS {pss / MiB:.1f} MiB ("
                              + ", ".join(f"{c}×{d['processes']}: {d['pss_bytes'] / MiB:.1f}" for c, d in breakdown.items())
                              + f"), owner RSS +{(rss1 - rss0) / MiB:.1f} MiB{short}",
                         extra={"n": n, "asked": asked, "open_failure": failure, "processes": len(pids), "pss_bytes": pss, "owner_rss_growth_bytes": rss1 - rss0,
                                "baseline_pss_bytes": before_pss, "by_command": breakdown, "zombies": zombies}))
        self.res.add(Row("idle", "MemAvailable drop, per sandbox", unit="MiB", value=(avail0 - avail1) / n / MiB,
                         note="system-wide: includes kernel memory (page tables, mounts, namespaces)",
                         extra={"mem_available_before": avail0, "mem_available_after": avail1}))
        self.res.add(Row("idle", f"time to open {n} sandboxes (per sandbox)", value=open_s * 1000 / n,
                         note=f"total {open_s:.2f} s{short}"))
        t0 = time.perf_counter()
        while self.open_sandboxes:
            self.open_sandboxes.pop().close()
        close_s = time.perf_counter() - t0
        drain_background_cleanup()
        drained_s = time.perf_counter() - t0
        self.res.add(Row("idle", f"time to close {n} sandboxes (per sandbox)", value=close_s * 1000 / n,
                         note=f"total {close_s:.2f} s; {drained_s:.2f} s until the background teardown finished"))

    # -- output --

    def report(self, machine: dict, started: float) -> dict:
        self.res.evaluate()
        table = Table(title=f"envyard sandbox benchmark — {machine['nproc']} CPUs, "
                            f"{machine['memory_total_bytes'] / (1 << 30):.1f} GiB, kernel {machine['kernel']}, "
                            f"{machine['bwrap_version']}, docker {machine['docker'] or 'n/a'}")
        for col, just in (("section", "left"), ("what", "left"), ("median", "right"), ("p90", "right"),
                          ("target", "left"), ("vs raw", "right"), ("vs docker", "right"), ("ok", "center"),
                          ("note", "left")):
            table.add_column(col, justify=just, overflow="fold")

        def fmt(v, unit):
            if v is None:
                return "n/a"
            return f"{v:.3f} ms" if unit == "ms" and v < 10 else (f"{v:.1f} ms" if unit == "ms" else f"{v:.2f} {unit}")

        last = None
        for r in self.res.rows:
            if last is not None and r.section != last:
                table.add_section()
            last = r.section
            table.add_row(
                r.section, r.name, fmt(r.value, r.unit), fmt(r.p90, r.unit) if r.p90 is not None else "",
                r.target, f"{r.vs_raw:.2f}×" if r.vs_raw else "",
                f"{r.vs_docker:.0f}× faster" if r.vs_docker else ("n/a" if r.docker_ref else ""),
                "" if r.ok is None else ("[green]✓[/]" if r.ok else "[red]✗[/]"), r.note,
            )
        console.print(table)
        for n in self.res.notes:
            console.print(f"[yellow]note:[/] {n}")
        elapsed = time.monotonic() - started
        console.print(f"total run time: {elapsed:.1f} s")
        return {
            "machine": machine,
            "config": {"reps": self.reps, "fast_reps": self.fast_reps, "slow_reps": self.slow_reps,
                       "docker_reps": self.docker_reps, "idle": self.args.idle, "quick": self.args.quick,
                       "big_image_mb": self.args.big_mb, "fork_n": FORK_N, "home": str(self.yard.store.home)},
            "results": [{**asdict(r), "samples": [round(s, 4) for s in r.samples]} for r in self.res.rows],
            "notes": self.res.notes,
            "elapsed_s": round(elapsed, 1),
        }


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", help="envyard store to use (keeps the debian:bookworm image between runs); "
                                  "default: a fresh temp dir under /var/tmp, deleted afterwards")
    p.add_argument("--reps", type=int, default=30, help="repetitions per latency measurement (default 30)")
    p.add_argument("--json", default=str(DEFAULT_JSON),
                   help="where to write the results (default benchmarks/results/sandbox.json in this repo)")
    p.add_argument("--skip-docker", action="store_true", help="do not measure docker")
    p.add_argument("--keep-dockerd", action="store_true", help="leave a dockerd we started running afterwards")
    p.add_argument("--idle", type=int, default=500, help="sandboxes to hold open for the density test (default 500)")
    p.add_argument("--big-mb", type=int, default=1024, help="size of the big image for the fork test (default 1024)")
    p.add_argument("--quick", action="store_true", help="fast smoke run: few reps, 50 idle sandboxes, 100 MB big image")
    p.add_argument("--only", default="hot,create,defences,exec,fork,reset,idle",
                   help="comma list of sections to run (hot,create,defences,exec,fork,reset,idle); hot is issue "
                        "#12's table")
    p.add_argument("--envyard-cli", help="the envyard console script for the CLI row (default: envyard on PATH)")
    args = p.parse_args(argv)
    if args.quick:
        args.reps = min(args.reps, 5)
        args.idle = min(args.idle, 50)
        args.big_mb = min(args.big_mb, 100)
    if args.reps < 1 or args.idle < 1 or args.big_mb < 1:
        p.error("--reps, --idle and --big-mb must be positive")
    return args


def _raise_interrupt(*_):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    # Ctrl-C and SIGTERM both unwind through the finally below.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored (`cmd &`)
    bench = Bench(args)
    sections = {s.strip() for s in args.only.split(",") if s.strip()}
    load0 = os.getloadavg()
    try:
        bench.setup()
        machine = machine_info(bench.bwrap, bench.yard, bench.docker.version if bench.docker_ok else None)
        bench.sections = sections
        steps = [("hot", bench.bench_hot), ("create", bench.bench_create), ("defences", bench.bench_defences), ("exec", bench.bench_exec),
                 ("fork", bench.bench_fork),
                 ("reset", bench.bench_reset_snapshot), ("idle", bench.bench_idle)]
        machine["loadavg_start"] = load0
        for key, step in steps:
            if key not in sections:
                continue
            try:
                step()
            except KeyboardInterrupt:
                raise
            except Exception as e:  # noqa: BLE001 - report it and go on with the other sections
                bench.res.note(f"section {key} failed: {type(e).__name__}: {e}")
                console.print_exception(max_frames=8)
                for sb in bench.open_sandboxes:
                    with contextlib.suppress(Exception):
                        sb.close()
                bench.open_sandboxes.clear()
            bench.reap_strays(f"after section {key}")
        machine["loadavg_end"] = os.getloadavg()
        if load0[0] > machine["nproc"] * 0.5:
            bench.res.note(f"the machine was busy before the run (load average {load0[0]:.1f} on "
                           f"{machine['nproc']} CPUs; {machine['loadavg_end'][0]:.1f} at the end, ours included): "
                           "expect noisy numbers")
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
