"""A full disk is the machine's problem: recognise it and say so, naming the store and what frees space.

Setup (and `envyard build`'s RUN steps) install into sandboxes whose writes land on the store's disk (directly,
or through the btrfs volume file that lives there) and are capped per sandbox by a disk limit. When either runs
out, the step fails with ENOSPC ("No space left on device") or EDQUOT ("Disk quota exceeded") in its output,
which would otherwise read as the project's install or test failure — and setup would go on to try repairs and
other Pythons on a disk that cannot hold them."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import DiskFull

MIN_FREE = 1 << 30  # with less free on the store's disk, setup does not start, and a step's ENOSPC is the disk's
NO_SPACE = "No space left on device"
OVER_QUOTA = "Disk quota exceeded"
FIX = ("free space on that disk: `envyard df` shows what the store holds, `envyard gc --cache` prunes the package "
       "cache, `envyard rmi` removes images; or point ENVYARD_HOME at a larger disk")


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB"


def check(home: Path, need: int | None = None) -> None:
    """Raise DiskFull when the disk holding the store `home` has less than `need` bytes free (default MIN_FREE)."""
    need = MIN_FREE if need is None else need
    free = free_bytes(home)
    if free < need:
        raise DiskFull(f"the disk holding the store {home} has {_gb(free)} free; setup needs at least {_gb(need)}",
                       fix=FIX)


def diagnose(home: Path, output: str, limit: str | None) -> DiskFull | None:
    """The DiskFull error a failed command's `output` shows, or None: ENOSPC while the store's disk is short of
    space (a project's own test of ENOSPC handling, with the disk fine, is not one), or EDQUOT from a sandbox
    whose disk limit is `limit`."""
    if NO_SPACE in output:
        free = free_bytes(home)
        if free < MIN_FREE:
            return DiskFull(f"the disk holding the store {home} is full ({_gb(free)} free): a step failed with "
                            f"'{NO_SPACE}'", fix=FIX)
    if OVER_QUOTA in output and limit:
        return DiskFull(f"a step wrote more than a setup or build sandbox's disk limit ({limit}): '{OVER_QUOTA}'",
                        fix="no install, build step or test run should need that much: look for what writes "
                            "without bound in the step's output")
    return None
