"""Shared pieces of the attack tests: a host fingerprint and synthetic tasks."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

# Sysctls an escape would touch, and files an escape or a leaked write would change.
FINGERPRINT_SYSCTLS = (
    "kernel/core_pattern", "kernel/pid_max", "kernel/modprobe", "kernel/hostname", "kernel/domainname",
    "kernel/panic", "kernel/panic_on_oops", "vm/panic_on_oom", "vm/overcommit_memory", "vm/overcommit_ratio",
    "fs/file-max", "fs/protected_symlinks", "net/ipv4/ip_forward", "kernel/randomize_va_space",
    "kernel/kptr_restrict", "kernel/dmesg_restrict", "user/max_user_namespaces",
)
FINGERPRINT_FILES = ("/etc/passwd", "/etc/shadow", "/etc/group", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf",
                     "/etc/ld.so.preload", "/etc/ld.so.conf", "/root/.bashrc", "/root/.profile", "/etc/profile")


def host_fingerprint() -> dict:
    found = {}
    for name in FINGERPRINT_SYSCTLS:
        try:
            found[f"sysctl {name}"] = Path("/proc/sys", name).read_text().strip()
        except OSError:
            found[f"sysctl {name}"] = None
    for path in FINGERPRINT_FILES:
        try:
            found[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            found[path] = None
    return found


# The verifier of the synthetic tasks: reward 1 only when /app/answer.txt holds 42.
ANSWER_VERIFIER = textwrap.dedent("""\
    #!/bin/bash
    mkdir -p /logs/verifier
    echo 0 > /logs/verifier/reward.txt
    [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ] || exit 1
    echo 1 > /logs/verifier/reward.txt
""")


def make_task(root: Path, *, tests: str | dict = ANSWER_VERIFIER, verifier_extra: str = "", environment: str = "",
              setup: str | None = None, files: dict[str, str] | None = None, name: str = "attack",
              verifier_timeout: float = 30) -> Path:
    """A task directory: `tests` is test.sh's text or {name: text} for tests/, `files` go to /app."""
    root.mkdir(parents=True)
    (root / "task.toml").write_text(f'name = "{name}"\n[environment]\n{environment}\n'
                                    f'[verifier]\ntimeout_sec = {verifier_timeout}\n{verifier_extra}\n')
    (root / "instruction.md").write_text("Write 42 to /app/answer.txt.\n")
    (root / "tests").mkdir()
    for fname, text in ({"test.sh": tests} if isinstance(tests, str) else tests).items():
        (root / "tests" / fname).write_text(text)
    if setup is not None or files:
        (root / "environment").mkdir()
        if setup is not None:
            (root / "environment" / "setup.sh").write_text(setup)
        for rel, text in (files or {}).items():
            dest = root / "environment" / "files" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
    return root
