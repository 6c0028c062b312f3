"""The sandbox's seccomp filter: system calls that reach kernel state shared with the host are refused.

Namespaces hide the host's processes, mounts and network, but every sandbox still talks to the host's kernel.
This filter closes the kernel interfaces that are not namespaced or that have been a steady source of
privilege escalations, in the spirit of Docker's default profile: loading kernel modules or a new kernel,
eBPF, perf events, the kernel keyrings, io_uring, userfaultfd, the mount family (old and new API),
joining or creating namespaces (a new user namespace would hand the sandbox a full set of capabilities),
file handles (the "shocker" escape), the clock, swap, quotas, accounting, reboot, and injecting keystrokes
into a terminal (TIOCSTI/TIOCLINUX).

Unlike Docker's profile, which allows a list of ~350 calls, this one allows by default and denies a list:
new system calls keep working for compilers, package managers and runtimes, and each denial has a reason.
Refused calls fail with EPERM (as Docker's do), except `clone3`, which fails with ENOSYS so that the C
library falls back to `clone`, whose flags the filter can inspect.

The filter is compiled with libseccomp (through pyseccomp's ctypes binding) for the native architecture and
its 32-bit companions (a 64-bit process can still make i386 system calls). The program is kept in the store,
named by a hash of this file and the machine, so a new process (`envyard run`) reads it instead of loading
libseccomp: that import alone runs `ldconfig -p` and cost more than the sandbox itself.
bubblewrap loads it (`--seccomp FD`) just before it runs the sandbox's first program, so it binds every
process of the sandbox and cannot be removed.
"""

from __future__ import annotations

import errno
import functools
import os
import zlib
from pathlib import Path

from ..errors import HostUnsupported

# Refused outright, with why. Names unknown to the running architecture are skipped.
DENIED = {
    "kernel code": ("init_module", "finit_module", "delete_module", "create_module", "kexec_load",
                    "kexec_file_load", "bpf", "uselib"),
    "kernel observation": ("perf_event_open", "lookup_dcookie", "syslog", "kcmp", "query_module",
                           "get_kernel_syms", "sysfs", "_sysctl", "ustat"),
    "kernel keyrings (not namespaced)": ("add_key", "keyctl", "request_key"),
    "exploit-prone interfaces": ("userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register"),
    "mounts": ("mount", "umount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig",
               "fsmount", "fspick", "mount_setattr", "quotactl", "quotactl_fd"),
    "namespaces": ("setns",),
    "file handles": ("open_by_handle_at", "name_to_handle_at"),
    "host state": ("settimeofday", "stime", "clock_settime", "clock_settime64", "clock_adjtime",
                   "clock_adjtime64", "swapon", "swapoff", "reboot", "acct", "vhangup", "nfsservctl",
                   "iopl", "ioperm", "vm86", "vm86old"),
}

# clone/unshare flags that create namespaces. CLONE_NEWUSER matters most: with it an unprivileged process
# gets every capability inside the new namespace, and with them the kernel's whole mount/netfilter surface.
CLONE_NEW_FLAGS = {
    "CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000, "CLONE_NEWTIME": 0x00000080,
}
# ioctls that push input into a terminal: a sandbox attached to the user's terminal could type commands
# into the user's shell after it exits.
TIOCSTI = 0x5412
TIOCLINUX = 0x541C


def _companion_arches(seccomp) -> list[int]:
    """32-bit ABIs the kernel also accepts from a process of the native architecture."""
    machine = os.uname().machine
    if machine == "x86_64":
        return [seccomp.Arch.X86, seccomp.Arch.X32]
    if machine == "aarch64":
        return [seccomp.Arch.ARM]
    return []


def _syscall_number(seccomp, name: str) -> int | None:
    try:
        nr = seccomp.resolve_syscall(seccomp.Arch.NATIVE, name)
    except (OSError, ValueError):
        return None
    return nr if nr >= 0 else None  # negative: a pseudo-number for a call this architecture lacks


@functools.lru_cache(maxsize=4)
def filter_program(cache_dir: Path | None = None) -> bytes:
    """The compiled BPF program (struct sock_filter[]): from `cache_dir` when it holds this version's, else
    compiled (once per process) and stored there."""
    if cache_dir is None:
        return _compile()
    path = Path(cache_dir) / f"seccomp-{_cache_key()}.bpf"
    try:
        program = path.read_bytes()
        if program and len(program) % 8 == 0:
            return program
    except OSError:
        pass
    program = _compile()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(program)
        os.replace(tmp, path)  # atomic: a concurrent reader sees the whole program or none
    except OSError:
        pass  # a read-only store still works, compiling each time
    return program


@functools.cache
def _cache_key() -> str:
    """Changes with the filter's definition (this file) and the machine the program was compiled for. A CRC and
    the length tell versions of this file apart (they guard against a stale cache, not an adversary: who can
    write the store's cache can write envyard itself), and zlib, unlike hashlib, costs nothing to import here."""
    source = Path(__file__).read_bytes()
    return f"{zlib.crc32(source):08x}{len(source):x}-{os.uname().machine}"


@functools.lru_cache(maxsize=1)
def _compile() -> bytes:
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError) as e:  # pyseccomp raises at import when libseccomp is absent
        raise HostUnsupported(
            f"cannot build the sandbox's seccomp filter: {e}",
            fix="apt-get install libseccomp2 and pip install pyseccomp; or opt out with security='relaxed'",
        ) from e
    eperm = seccomp.ERRNO(errno.EPERM)
    f = seccomp.SyscallFilter(seccomp.ALLOW)
    for arch in _companion_arches(seccomp):
        try:
            f.add_arch(arch)
        except OSError:
            pass  # the kernel or libseccomp does not know it: its calls then hit the bad-arch action (kill)
    for names in DENIED.values():
        for name in names:
            nr = _syscall_number(seccomp, name)
            if nr is not None:
                f.add_rule(eperm, nr)
    for name in ("clone", "unshare"):
        nr = _syscall_number(seccomp, name)
        for flag in CLONE_NEW_FLAGS.values():
            f.add_rule(eperm, nr, seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    # clone3 passes its flags in memory, where a filter cannot look: make it look unimplemented.
    nr = _syscall_number(seccomp, "clone3")
    if nr is not None:
        f.add_rule(seccomp.ERRNO(errno.ENOSYS), nr)
    ioctl = _syscall_number(seccomp, "ioctl")
    for request in (TIOCSTI, TIOCLINUX):
        f.add_rule(eperm, ioctl, seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, request))
    with os.fdopen(os.memfd_create("envyard-seccomp"), "w+b") as buf:
        f.export_bpf(buf)
        buf.seek(0)
        return buf.read()


def program_fd(cache_dir: Path | None = None) -> int:
    """A pipe's read end holding the program, for bwrap's --seccomp (it reads to EOF and closes it).
    The caller closes its copy after starting bwrap."""
    program = filter_program(cache_dir)
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, program)  # a few KB: far below a pipe's capacity, so this never blocks
    finally:
        os.close(write_fd)
    return read_fd
