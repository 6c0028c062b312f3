"""Per-sandbox cgroups (v1 or v2) for memory, pids and CPU limits and OOM accounting, with an rlimit fallback.

A sandbox joins its cgroups before bubblewrap starts (a tiny /bin/sh shim writes its own pid into each
`cgroup.procs` and then execs bwrap), so every process in the sandbox is accounted from its first instruction.
Where cgroups are not writable, memory and process counts are capped with rlimits and we say so once.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..record import Record
from .limits import Limits, cpu_weight
from ..log import log


CGROUP_ROOT = Path("/sys/fs/cgroup")
DEFAULT_PIDS = 8192  # when a sandbox gets a cgroup for another limit, it is also kept from fork-bombing
CPU_PERIOD_US = 100_000


class CgroupSet(Record):
    """The cgroup directories one sandbox lives in, and how to join them."""

    def __init__(self, dirs: list[str] | None = None, memory_dir: str | None = None,
                 rlimits: dict[str, int] | None = None):
        self.dirs = [] if dirs is None else dirs
        self.memory_dir = memory_dir
        self.rlimits = {} if rlimits is None else rlimits

    def shim_prefix(self) -> str:
        """Shell commands that put the shim into these cgroups / apply rlimits before it execs bwrap."""
        import shlex  # here: only a sandbox with cgroup limits needs it (0.2 ms of every `envyard run` otherwise)

        lines = [f"echo $$ > {shlex.quote(d + '/cgroup.procs')}" for d in self.dirs]
        if "as_kb" in self.rlimits:
            lines.append(f"ulimit -v {self.rlimits['as_kb']}")
        if "nproc" in self.rlimits:
            lines.append(f"ulimit -u {self.rlimits['nproc']}")
        return " && ".join(lines)

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer has killed in this sandbox so far."""
        if not self.memory_dir:
            return 0
        for name in ("memory.events", "memory.oom_control"):
            try:
                for line in Path(self.memory_dir, name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
            except OSError:
                continue
        return 0


class Cgroups:
    """Detects the cgroup flavour once and makes/removes per-sandbox cgroups."""

    def __init__(self):
        self.mode, self.reason = self._detect()
        self._warned = False

    def _detect(self) -> tuple[str, str]:
        if os.environ.get("ENVYARD_NO_CGROUPS"):
            return "rlimit", "ENVYARD_NO_CGROUPS is set"
        if (CGROUP_ROOT / "cgroup.controllers").exists():
            base = self._v2_base()
            return ("v2", "") if base else ("rlimit", "cgroup v2 is not writable by this user")
        if (CGROUP_ROOT / "pids").is_dir():
            probe = self._v1_parent("pids") / f"envyard-probe-{os.urandom(4).hex()}"
            try:
                probe.mkdir()
                probe.rmdir()
                return "v1", ""
            except OSError as e:
                return "rlimit", f"cgroup v1 is not writable ({e.strerror})"
        return "rlimit", "no cgroup hierarchy is mounted at /sys/fs/cgroup"

    # v1: each controller has its own hierarchy; nest under the cgroup this process already lives in, so
    # any limit the machine puts on us still applies to our sandboxes.
    def _v1_parent(self, controller: str) -> Path:
        own = "/"
        try:
            for line in Path("/proc/self/cgroup").read_text().splitlines():
                _, ctrls, path = line.split(":", 2)
                if controller in ctrls.split(","):
                    own = path
        except OSError:
            pass
        return CGROUP_ROOT / controller / own.lstrip("/")

    def _v2_base(self) -> Path | None:
        base = CGROUP_ROOT / "envyard"
        try:
            base.mkdir(exist_ok=True)
            wanted = [c for c in ("memory", "pids", "cpu") if c in (CGROUP_ROOT / "cgroup.controllers").read_text().split()]
            (CGROUP_ROOT / "cgroup.subtree_control").write_text(" ".join("+" + c for c in wanted))
            (base / "cgroup.subtree_control").write_text(" ".join("+" + c for c in wanted))
            return base
        except OSError:
            return None

    def warn_once(self) -> None:
        if self.mode == "rlimit" and not self._warned:
            self._warned = True
            log.warning(
                "cgroups unavailable (%s): memory is capped by RLIMIT_AS, processes by RLIMIT_NPROC (per user),"
                " CPU is not limited", self.reason,
            )

    def create(self, sandbox_id: str, limits: Limits) -> CgroupSet:
        # Joining a v1 cgroup costs the kernel an RCU grace period (~8 ms here), which would double the cost of
        # creating a sandbox; so a sandbox without limits gets no cgroup of its own.
        if limits == Limits():
            return CgroupSet()
        pids = limits.pids or DEFAULT_PIDS
        if self.mode == "v1":
            return self._create_v1(sandbox_id, limits, pids)
        if self.mode == "v2":
            return self._create_v2(sandbox_id, limits, pids)
        self.warn_once()
        rl: dict[str, int] = {}
        if limits.memory_bytes:
            rl["as_kb"] = limits.memory_bytes // 1024
        if limits.pids:
            rl["nproc"] = limits.pids
        return CgroupSet(rlimits=rl)

    def planned_dirs(self, sandbox_id: str, limits: Limits) -> list[str]:
        """The directories `create` will make for this sandbox. Its lease records them before they exist, so
        an owner killed in between leaves no cgroup that gc cannot find."""
        if limits == Limits() or self.mode == "rlimit":
            return []
        if self.mode == "v2":
            return [str(CGROUP_ROOT / "envyard" / sandbox_id)]
        controllers = (["pids"] + ["memory"] * bool(limits.memory_bytes)
                       + ["cpu"] * bool(limits.cpus or limits.cpu_shares))
        return [str(self._v1_parent(c) / f"envyard-{sandbox_id}") for c in controllers]

    def _create_v1(self, sandbox_id: str, limits: Limits, pids: int) -> CgroupSet:
        cg = CgroupSet()
        settings: dict[str, dict[str, str]] = {"pids": {"pids.max": str(pids)}}
        if limits.memory_bytes:
            settings["memory"] = {"memory.limit_in_bytes": str(limits.memory_bytes)}
        if limits.cpus:
            settings["cpu"] = {"cpu.cfs_period_us": str(CPU_PERIOD_US), "cpu.cfs_quota_us": str(int(limits.cpus * CPU_PERIOD_US))}
        if limits.cpu_shares:
            settings.setdefault("cpu", {})["cpu.shares"] = str(limits.cpu_shares)
        try:
            for controller, files in settings.items():
                d = self._v1_parent(controller) / f"envyard-{sandbox_id}"
                d.mkdir(exist_ok=True)
                cg.dirs.append(str(d))
                for name, value in files.items():
                    (d / name).write_text(value)
                if controller == "memory":
                    cg.memory_dir = str(d)
                    # Without swap accounting memsw may not exist; when it does, cap it too so swap is no escape.
                    memsw = d / "memory.memsw.limit_in_bytes"
                    if memsw.exists():
                        try:
                            memsw.write_text(str(limits.memory_bytes))
                        except OSError:
                            pass
        except OSError:
            self.remove(cg.dirs)
            raise
        return cg

    def _create_v2(self, sandbox_id: str, limits: Limits, pids: int) -> CgroupSet:
        d = CGROUP_ROOT / "envyard" / sandbox_id
        d.mkdir(exist_ok=True)
        cg = CgroupSet(dirs=[str(d)], memory_dir=str(d))
        try:
            (d / "pids.max").write_text(str(pids))
            if limits.memory_bytes:
                (d / "memory.max").write_text(str(limits.memory_bytes))
                (d / "memory.swap.max").write_text("0") if (d / "memory.swap.max").exists() else None
            if limits.cpus:
                (d / "cpu.max").write_text(f"{int(limits.cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}")
            if limits.cpu_shares:
                (d / "cpu.weight").write_text(str(cpu_weight(limits.cpu_shares)))
        except OSError:
            self.remove(cg.dirs)
            raise
        return cg

    @staticmethod
    def remove(dirs: list[str], wait: float = 2.0) -> bool:
        """rmdir each cgroup; retries briefly because killed processes leave the cgroup asynchronously."""
        deadline = time.monotonic() + wait
        ok = True
        for d in dirs:
            while True:
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        ok = False
                        break
                    time.sleep(0.01)
        return ok
