"""What a sandbox sees of the kernel's own files in /proc and /sys.

A sandbox gets a fresh procfs for its pid namespace and a read-only view of /sys, but many files there are
the host's, not the sandbox's: sysctls (`kernel.core_pattern` runs a program as host root when a process
crashes, so a writable /proc/sys is a host escape), the sysrq trigger, interrupt routing, kernel memory and
timer lists, firmware tables. As Docker does by default, those are made read-only or hidden.

bubblewrap's own `--proc` covers /proc/sys only when it finds the directory writable, which it never does
as root (the directory is mode 0555; the files inside are 0644), so the read-only binds here are explicit.
"""

from __future__ import annotations

import functools
import os

# Kernel state shared with the host, kept visible but read-only. bwrap's --proc already covers /proc/irq,
# /proc/bus and /proc/sysrq-trigger (its writability check works for them); the adversarial tests hold it to that.
READ_ONLY = ("/proc/sys", "/proc/fs")
# Hidden: directories behind a tiny empty tmpfs, files behind /dev/null (Docker's masked paths).
MASKED = ("/proc/acpi", "/proc/asound", "/proc/scsi", "/proc/kcore", "/proc/keys", "/proc/timer_list",
          "/proc/timer_stats", "/proc/sched_debug", "/proc/latency_stats", "/sys/firmware",
          "/sys/devices/virtual/powercap")


@functools.lru_cache(maxsize=1)
def mask_args() -> tuple[str, ...]:
    """bwrap arguments that apply READ_ONLY and MASKED, for the paths this kernel has (a sandbox's procfs
    has the same entries as the host's, and bwrap cannot make a missing mount point inside /proc or /sys).
    They go after --proc and the /sys bind. Each costs a mount at every sandbox start (~0.2 ms): ro binds
    are the dearest, so masks use a tmpfs or a plain bind of /dev/null."""
    args: list[str] = []
    for path in READ_ONLY:
        if os.path.lexists(path):
            args += ["--ro-bind", path, path]
    for path in MASKED:
        if os.path.isdir(path):
            args += ["--size", "4096", "--perms", "0555", "--tmpfs", path]
        elif os.path.lexists(path):
            args += ["--bind", "/dev/null", path]
    return tuple(args)
