"""Build a minimal Debian root filesystem with debootstrap.

The result is a plain directory tree meant to become the bottom layer of an
image. On any failure (or Ctrl-C) the debootstrap process group is killed,
anything it left mounted under the destination is unmounted, and the
half-built tree is removed.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
from collections import deque
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from envyard.errors import BadInput, BaseBuildError

SUITE_PYTHON = {"bullseye": "3.9", "bookworm": "3.11", "trixie": "3.13"}
DEFAULT_MIRROR = "http://deb.debian.org/debian"

# Suites whose archive has a "-updates" pocket (and a security archive).
_UPDATES_SUITES = {"bullseye", "bookworm", "trixie"}
_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
_SUITE_RE = re.compile(r"[a-z]+")
_MIRROR_RE = re.compile(r"(https?|ftp|file)://\S+")
_TAIL_LINES = 3
# debootstrap and the tools it calls (chroot) live in sbin dirs, which a non-login PATH (cron, a service,
# `env -i`) often lacks: look there too, and give debootstrap a PATH that has them.
SYSTEM_SBIN = "/usr/sbin:/sbin"
_TAIL_CHARS = 300


def debootstrap_rootfs(
    suite: str,
    dest: Path,
    *,
    mirror: str = DEFAULT_MIRROR,
    on_progress: Callable[[str], None] | None = None,
    timeout: float = 1800,
) -> dict:
    """Run `debootstrap --variant=minbase` into `dest` and return metadata about it.

    `dest` must not exist or be an empty directory. `on_progress` receives each
    "I: ..." line of debootstrap's output without the prefix.
    """
    dest = Path(dest)
    exe = _check_inputs(suite, dest, mirror)
    try:
        _run_debootstrap(exe, suite, dest, mirror, on_progress, timeout)
        _finish_rootfs(dest, suite, mirror)
        return {
            "suite": suite,
            "mirror": mirror,
            "python": SUITE_PYTHON.get(suite),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "size_bytes": _disk_usage(dest),
        }
    except BaseException as exc:
        _remove_partial(dest, exc)
        raise


def _check_inputs(suite: str, dest: Path, mirror: str) -> str:
    """Validate arguments before anything touches the disk; return debootstrap's path."""
    if not _SUITE_RE.fullmatch(suite):
        raise BadInput(
            f"invalid Debian suite name: {suite!r}",
            fix="use a lowercase codename such as bookworm",
        )
    if not _MIRROR_RE.fullmatch(mirror):
        raise BadInput(
            f"invalid mirror URL: {mirror!r}",
            fix=f"use an http(s)/ftp/file URL such as {DEFAULT_MIRROR}",
        )
    if dest.is_symlink() or (dest.exists() and (not dest.is_dir() or any(dest.iterdir()))):
        raise BadInput(
            f"destination is not an empty directory: {dest}",
            fix="pass a path that does not exist yet or an empty directory",
        )
    exe = shutil.which("debootstrap") or shutil.which("debootstrap", path=SYSTEM_SBIN)
    if exe is None:
        raise BaseBuildError("debootstrap is not installed", fix="apt-get install -y debootstrap")
    scripts = Path(os.environ.get("DEBOOTSTRAP_DIR", "/usr/share/debootstrap")) / "scripts"
    if scripts.is_dir() and not (scripts / suite).exists():
        raise _unknown_suite(suite)
    return exe


def _unknown_suite(suite: str) -> BadInput:
    return BadInput(
        f"debootstrap does not know the suite {suite!r}",
        fix=f"use one of {', '.join(SUITE_PYTHON)} or upgrade debootstrap",
    )


def _with_sbin(path: str) -> str:
    dirs = [d for d in path.split(":") if d]
    return ":".join(dirs + [d for d in (*SYSTEM_SBIN.split(":"), "/usr/bin", "/bin") if d not in dirs])


def _run_debootstrap(
    exe: str,
    suite: str,
    dest: Path,
    mirror: str,
    on_progress: Callable[[str], None] | None,
    timeout: float,
) -> None:
    """Run debootstrap, streaming its progress; raise on failure or timeout."""
    cmd = [exe, "--variant=minbase", suite, str(dest), mirror]
    # Own session: we can kill debootstrap and all its children (dpkg, chroot, wget)
    # as one group, and a terminal Ctrl-C reaches only us, so cleanup stays in our hands.
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
        env={**os.environ, "PATH": _with_sbin(os.environ.get("PATH", ""))},
    )
    timed_out = threading.Event()

    def on_timeout() -> None:
        timed_out.set()
        _kill_group(proc)

    timer = threading.Timer(timeout, on_timeout)
    timer.daemon = True
    timer.start()
    tail: deque[str] = deque(maxlen=20)
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            tail.append(line)
            if line.startswith("I: ") and on_progress is not None:
                on_progress(line[3:])
        proc.wait()
    finally:
        timer.cancel()
        _kill_group(proc)  # only acts if we left the loop early (Ctrl-C, callback error)
        proc.wait()
    if timed_out.is_set():
        raise BaseBuildError(
            f"debootstrap of {suite} timed out after {timeout:.0f}s",
            fix="check network access to the mirror or raise the timeout",
        )
    if proc.returncode != 0:
        raise _failure(suite, dest, mirror, proc.returncode, list(tail))


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL debootstrap's process group while its leader is not yet reaped.

    Checking `returncode` first means the pid (= group id) cannot have been
    recycled for an unrelated process.
    """
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _failure(suite: str, dest: Path, mirror: str, code: int, output: list[str]) -> Exception:
    """Turn a failed debootstrap run into a one-line, actionable error."""
    if any("No such script" in line for line in output):
        return _unknown_suite(suite)
    errors = [line[3:] for line in output if line.startswith("E: ")]
    cause = errors[-1] if errors else f"exit status {code}"
    log_tail = _short_tail(dest / "debootstrap" / "debootstrap.log")
    message = f"debootstrap of {suite} failed: {cause}"
    if log_tail:
        message += f" (log: {log_tail})"
    return BaseBuildError(message, fix=f"check that {mirror} is reachable and serves {suite}")


def _short_tail(log: Path) -> str:
    """Last few non-empty lines of `log`, joined on one line and capped in length."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    tail = " | ".join([line.strip() for line in lines if line.strip()][-_TAIL_LINES:])
    return tail if len(tail) <= _TAIL_CHARS else "..." + tail[-_TAIL_CHARS:]


def _finish_rootfs(dest: Path, suite: str, mirror: str) -> None:
    """Trim the package cache, write sources.list and fix /tmp's mode."""
    for deb in (dest / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()
    sources = [f"deb {mirror} {suite} main"]
    if suite in _UPDATES_SUITES:
        sources.append(f"deb {mirror} {suite}-updates main")
        # The security archive lives beside the default mirror; a custom
        # (possibly offline) mirror must not gain a line pointing elsewhere.
        if mirror == DEFAULT_MIRROR:
            sources.append(f"deb {_SECURITY_MIRROR} {suite}-security main")
    (dest / "etc/apt/sources.list").write_text("\n".join(sources) + "\n")
    tmp = dest / "tmp"
    tmp.mkdir(exist_ok=True)
    os.chmod(tmp, 0o1777)


def _disk_usage(root: Path) -> int:
    """Bytes allocated under `root`, counting hard-linked inodes once (like `du -s -B1`)."""
    seen: set[tuple[int, int]] = set()
    total = 0

    def add(path: str) -> None:
        nonlocal total
        st = os.lstat(path)
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512

    add(str(root))
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:  # dirnames also holds symlinks to dirs
            add(os.path.join(dirpath, name))
    return total


def _remove_partial(dest: Path, exc: BaseException) -> None:
    """Unmount leftovers under `dest`, then delete it; never delete through a live mount."""
    remaining = _unmount_under(dest)
    if remaining:
        exc.add_note(f"left {dest} in place: still mounted: {', '.join(remaining)}")
        return
    shutil.rmtree(dest, ignore_errors=True)


def _unmount_under(dest: Path) -> list[str]:
    """Unmount every mount at or below `dest`, deepest first; return those still mounted."""
    for point in _mounts_under(dest):
        if subprocess.run(["umount", point], capture_output=True).returncode != 0:
            # Busy (e.g. a lingering process): detach lazily so rmtree can't reach it.
            subprocess.run(["umount", "-l", point], capture_output=True)
    return _mounts_under(dest)


def _mounts_under(dest: Path) -> list[str]:
    """Mount points at or below `dest` from /proc/self/mountinfo, deepest first."""
    root = os.path.realpath(dest)
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = _unescape_mount_path(line.split()[4])
            if point == root or point.startswith(root + "/"):
                found.append(point)
    return sorted(set(found), key=len, reverse=True)


def _unescape_mount_path(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo octal."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)
