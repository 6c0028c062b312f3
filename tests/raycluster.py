"""A private Ray cluster of local nodes for tests and benchmarks: `ray start --head`, then `ray start --address`
per extra node, each node with its own Ray temp dir, its own envyard store ($ENVYARD_HOME of its `ray start`)
and a custom resource naming it. Everything it started is stopped on exit (by process group and by the temp
dir in command lines, never `ray stop`, which would stop every Ray on the machine), its stores are
garbage-collected (which unmounts their host views) and removed, and its temp dirs deleted."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
# The head notices a dead node after health_check_failure_threshold missed checks (defaults: 5 × 3 s).
HEAD_CONFIG = {"health_check_period_ms": 500, "health_check_timeout_ms": 1000, "health_check_failure_threshold": 3}


class Skip(Exception):
    pass


@dataclass
class Node:
    name: str
    temp: Path
    store: Path
    pgid: int


@dataclass
class LocalCluster:
    root: Path
    address: str = ""
    nodes: list[Node] = field(default_factory=list)

    def _ray_start(self, name: str, cpus: int, args: list[str]) -> Node:
        # `ray start` gives a raylet 30 s (fixed) to register: a loaded machine can miss that. Try again once.
        try:
            return self._ray_start_once(name, cpus, args)
        except RuntimeError:
            self._kill(lambda pid, argv: any(str(self.root / name) in a for a in argv)
                       or _pgid(pid) == self.nodes[-1].pgid)
            self.nodes.pop()
            shutil.rmtree(self.root / name, ignore_errors=True)
            return self._ray_start_once(name, cpus, args)

    def _ray_start_once(self, name: str, cpus: int, args: list[str]) -> Node:
        temp, store = self.root / name, self.root / f"store-{name}"
        store.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env.update(ENVYARD_HOME=str(store), RAY_USAGE_STATS_ENABLED="0",
                   PYTHONPATH=os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")])))
        cmd = [str(Path(sys.executable).with_name("ray")), "start", f"--num-cpus={cpus}", f"--temp-dir={temp}",
               "--disable-usage-stats", "--object-store-memory=100000000",
               f"--resources={json.dumps({f'envyard_{name}': 1})}",
               f"--dashboard-agent-listen-port={_free_port()}", *args]
        proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, cwd=self.root)
        node = Node(name, temp, store, proc.pid)
        self.nodes.append(node)  # stopped on exit even when the start fails
        out, _ = proc.communicate(timeout=180)
        if proc.returncode != 0:
            raise RuntimeError(f"ray start ({name}) failed: {out.decode(errors='replace')[-1500:]}")
        return node

    def start(self, nodes: int = 2, cpus: int = 1) -> None:
        self._ray_start("head", cpus, ["--head", "--port=0", "--include-dashboard=false",
                                       f"--system-config={json.dumps(HEAD_CONFIG)}"])
        self.address = (self.root / "head" / "ray_current_cluster").read_text().strip()
        for i in range(1, nodes):
            self.add_node(f"n{i}", cpus)

    def add_node(self, name: str, cpus: int = 1) -> Node:
        return self._ray_start(name, cpus, [f"--address={self.address}"])

    def raylet_pid(self, name: str) -> int:
        temp = f"--temp_dir={self.root / name}"
        for pid, args in _processes():
            if args and args[0].endswith("/raylet") and temp in args:
                return pid
        raise LookupError(f"no raylet for node {name}")

    def kill_node(self, name: str) -> None:
        """The node crashes: SIGKILL its raylet and, at once, every process it started (its workers too, which
        would otherwise notice the raylet's death only later and could still hand back the episode they were
        running)."""
        node = next(n for n in self.nodes if n.name == name)
        os.kill(self.raylet_pid(name), signal.SIGKILL)
        temp = str(self.root / name)
        for pid, argv in _processes():
            if _pgid(pid) == node.pgid or any(temp in a for a in argv):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    @staticmethod
    def _kill(match) -> None:
        """SIGTERM, then SIGKILL, the processes `match(pid, argv)` picks, until none is left."""
        mine = lambda: [pid for pid, argv in _processes() if match(pid, argv)]  # noqa: E731
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in mine():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + 10
            while mine() and time.monotonic() < deadline:
                time.sleep(0.2)

    def stop(self) -> None:
        groups = {n.pgid for n in self.nodes}
        self._kill(lambda pid, argv: any(str(self.root) in a for a in argv) or _pgid(pid) in groups)
        import envyard

        for n in self.nodes:
            if n.store.is_dir():
                y = envyard.Yard(n.store)
                y.close()
                y.gc()  # reaps the sandboxes of dead workers; unmounts the host view
        # What gc leaves by design: a store's disk-limit volume while it holds image layers.
        for point in sorted(_mounts_under(self.root), reverse=True):
            if subprocess.run(["umount", point], capture_output=True).returncode:
                subprocess.run(["umount", "-l", point], capture_output=True)
        held = _mounts_under(self.root)
        if held:
            raise RuntimeError(f"mounts left under {self.root}: {held}")
        shutil.rmtree(self.root, ignore_errors=True)


def _processes():
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                args = (d / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            yield int(d.name), args


def _mounts_under(root: Path) -> list[str]:
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [m for m in mounts if m == str(root) or m.startswith(f"{root}/")]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def local_cluster(nodes: int = 2, cpus: int = 1):
    """A running LocalCluster of `nodes` nodes with `cpus` CPUs each (raise Skip when Ray is missing)."""
    if shutil.which("ray", path=str(Path(sys.executable).parent)) is None:
        raise Skip("ray is not installed (pip install 'envyard[ray]')")
    # Short: Ray's unix sockets live under the temp dir, and socket paths are limited to 107 bytes.
    cluster = LocalCluster(Path(tempfile.mkdtemp(prefix="eyr-", dir="/tmp")))
    try:
        cluster.start(nodes, cpus)
        yield cluster
    finally:
        cluster.stop()
