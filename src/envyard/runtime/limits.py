"""Resource limits for a sandbox: memory, process count, CPU share, disk."""

from __future__ import annotations

import math
import re

from ..errors import BadInput
from ..record import Record

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
DEFAULT_DISK = 10 << 30  # what a sandbox may write when no disk limit is given (where disk limits work)
MIN_SHARES, MAX_SHARES = 2, 262144  # cgroup v1's cpu.shares range (Docker's --cpu-shares)


def parse_bytes(value: int | str) -> int:
    """`512M`, `2g`, `1.5G`, `1048576` → bytes."""
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgtKMGT]?)(?:i?[bB])?\s*", str(value))
    if not m:
        raise BadInput(f"invalid size {value!r}", fix="write sizes like 512M, 2G or a number of bytes")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


class Limits(Record, frozen=True):
    """memory: bytes or '512M'; pids: max processes+threads; cpus: CPU share, e.g. 0.5 or 2; disk: bytes the
    sandbox may write (its writable layer), default DEFAULT_DISK; cpu_shares: the sandbox's weight when the
    CPUs are contended, relative to others (Docker's --cpu-shares: 1024 is the default weight, 2-262144); it
    caps nothing while a core is idle."""

    def __init__(self, memory: int | str | None = None, pids: int | None = None, cpus: float | None = None,
                 disk: int | str | None = None, cpu_shares: int | None = None):
        self._set(memory=memory, pids=pids, cpus=cpus, disk=disk, cpu_shares=cpu_shares)
        if self.memory is not None and (isinstance(self.memory, bool)
                                        or not isinstance(self.memory, (int, float, str))):
            raise BadInput(f"memory limit must be bytes or a size string, not {type(self.memory).__name__}",
                           fix="give e.g. memory='512M' or memory=1 << 30")
        if self.pids is not None and (isinstance(self.pids, bool) or not isinstance(self.pids, int)):
            raise BadInput(f"pids limit must be an int, not {type(self.pids).__name__}", fix="give e.g. pids=256")
        if self.cpus is not None and (isinstance(self.cpus, bool) or not isinstance(self.cpus, (int, float))
                                      or not math.isfinite(self.cpus)):
            raise BadInput(f"cpus limit must be a finite number, not {self.cpus!r}", fix="give e.g. 0.5 or 2")
        if self.disk is not None and (isinstance(self.disk, bool) or not isinstance(self.disk, (int, float, str))):
            raise BadInput(f"disk limit must be bytes or a size string, not {type(self.disk).__name__}",
                           fix="give e.g. disk='10G'")
        if self.disk is not None and self.disk_bytes < 16 << 20:
            raise BadInput(f"disk limit {self.disk!r} is below 16 MiB", fix="give at least 16M")
        if self.memory is not None and self.memory_bytes < 4 << 20:
            raise BadInput(f"memory limit {self.memory!r} is below 4 MiB", fix="give at least 4M")
        if self.pids is not None and self.pids < 4:
            raise BadInput(f"pids limit {self.pids} is below 4", fix="allow at least 4 processes")
        if self.cpus is not None and self.cpus <= 0:
            raise BadInput(f"cpus limit {self.cpus} must be positive", fix="give e.g. 0.5 or 2")
        if self.cpu_shares is not None and (isinstance(self.cpu_shares, bool) or not isinstance(self.cpu_shares, int)
                                            or not MIN_SHARES <= self.cpu_shares <= MAX_SHARES):
            raise BadInput(f"cpu_shares must be an int from {MIN_SHARES} to {MAX_SHARES}, not {self.cpu_shares!r}",
                           fix="give e.g. 512 (half the default weight of 1024)")

    @property
    def memory_bytes(self) -> int | None:
        return None if self.memory is None else parse_bytes(self.memory)

    @property
    def disk_bytes(self) -> int:
        return DEFAULT_DISK if self.disk is None else parse_bytes(self.disk)

    @property
    def needs_cgroup(self) -> bool:
        """Memory, pids and CPU are enforced by cgroups; the disk limit is not."""
        return (self.memory, self.pids, self.cpus, self.cpu_shares) != (None, None, None, None)

    @classmethod
    def coerce(cls, value: "Limits | dict | None") -> "Limits":
        if value is None:
            return cls()
        if isinstance(value, Limits):
            return value
        if isinstance(value, dict):
            unknown = set(value) - {"memory", "pids", "cpus", "disk", "cpu_shares"}
            if unknown:
                raise BadInput(f"unknown limit(s): {', '.join(sorted(map(str, unknown)))}",
                               fix="use memory, pids, cpus, disk, cpu_shares")
            return cls(**value)
        raise BadInput(f"limits must be a Limits or a dict, not {type(value).__name__}")


def cpu_weight(shares: int) -> int:
    """cgroup v2's cpu.weight (1-10000, default 100) for v1 cpu.shares (2-262144, default 1024), as runc and
    systemd convert it."""
    return 1 + ((shares - 2) * 9999) // 262142
