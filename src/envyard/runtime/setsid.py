"""A tiny static `setsid` for the sandbox's runners: it starts a new session and execs its arguments.

Every one-shot command runs in a session of its own, so that a timeout can kill its whole tree (double-forked
daemons included). A shell cannot call setsid(2) itself, so each runner used to be started through the image's
util-linux `setsid`: a dynamically linked program whose loading (ld.so, libc) was the largest cost of an exec,
about a third of the sandbox's CPU per command. This program makes the same two system calls without a
loader or a libc, so its exec costs a fraction of that. It is written into each sandbox's read-only control
directory (/.envyard/setsid); on a CPU it has no code for, the holder falls back to the image's `setsid`.

Unlike util-linux's, it never forks: when setsid(2) fails (the caller leads a process group, which the holder's
background jobs never do) it exits with status 126 rather than run the command outside a session of its own.
"""

from __future__ import annotations

import os
import struct

# x86-64 Linux, entered with the stack as the kernel leaves it: [rsp] = argc, [rsp+8] = argv[0], ...
_X86_64 = bytes.fromhex(
    "b870000000"    # mov eax, 112 (setsid)
    "0f05"          # syscall
    "4885c0"        # test rax, rax
    "7821"          # js fail (+33)
    "488b7c2410"    # mov rdi, [rsp+16]         ; argv[1]: the program
    "488d742410"    # lea rsi, [rsp+16]         ; &argv[1]: its argv
    "488b1424"      # mov rdx, [rsp]            ; argc
    "488d54d410"    # lea rdx, [rsp+rdx*8+16]   ; envp, just past argv's NULL
    "b83b000000"    # mov eax, 59 (execve)
    "0f05"          # syscall                   ; returns only on failure
    "bf7f000000"    # mov edi, 127              ; as a shell says "not found"
    "eb05"          # jmp exit (+5)
    "bf7e000000"    # fail: mov edi, 126
    "b8e7000000"    # exit: mov eax, 231 (exit_group)
    "0f05"          # syscall
)

_BASE = 0x400000
_HEADERS = 64 + 56  # one ELF header, one program header


def _elf(code: bytes, machine: int) -> bytes:
    """A static ELF executable that loads the whole file read+exec at _BASE and starts right after the headers."""
    size = _HEADERS + len(code)
    header = struct.pack("<4sBBBB8xHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0,  # 64-bit, little-endian, SysV
                         2, machine, 1, _BASE + _HEADERS, 64, 0, 0, 64, 56, 1, 0, 0, 0)
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, _BASE, _BASE, size, size, 0x1000)  # PT_LOAD, R+X
    return header + load + code


def program() -> bytes | None:
    """The helper for this machine's CPU, or None where there is none (the image's setsid is used then)."""
    if os.uname().machine == "x86_64":  # os.uname, not platform: importing platform costs ~1.5 ms a start
        return _elf(_X86_64, 0x3E)
    return None


def install(ipc_dir: str) -> bool:
    """Write the helper into a sandbox's control directory (mode 0755); False when this CPU has none or the
    directory's filesystem is mounted noexec (the bind at /.envyard keeps that flag, and a runner that cannot
    be started would leave the holder waiting for it)."""
    data = program()
    if data is None or os.statvfs(ipc_dir).f_flag & os.ST_NOEXEC:
        return False
    fd = os.open(f"{ipc_dir}/setsid", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o755)
    try:
        os.fchmod(fd, 0o755)  # the umask may have taken bits off
        os.write(fd, data)
    finally:
        os.close(fd)
    return True
