"""A user namespace for sandboxes: root inside keeps its files but holds its capabilities only there.

Without one, a sandbox's root is the host's root with fewer capabilities: any capability it keeps (Docker's
default set: CAP_NET_RAW, CAP_SETFCAP, CAP_CHOWN, ...) counts everywhere the kernel checks it, including
the host's network namespace when `network="host"`. Inside a child user namespace the same capabilities
count only for objects that namespace owns (its mount, pid, network namespaces), and file capabilities it
writes are tagged with it, so they grant nothing when such a file later runs on the host.

Every uid and gid maps to itself, so the image's files keep their owners and apt, dpkg and pip behave as
they do for root (a one-uid mapping, bwrap's own --unshare-user, breaks dpkg's chown to system users). One
namespace serves all sandboxes of a process: sharing it gives a sandbox no power over another, whose pid and
mount namespaces it can neither see nor enter. Setting the map of a child namespace needs CAP_SETUID in the
parent, which the owner has as root.
"""

from __future__ import annotations

import fcntl
import functools
import os
import subprocess
import time

from ..errors import HostUnsupported
from ..which import which

IDENTITY_MAP = "0 0 4294967295\n"


_started: subprocess.Popen | None = None  # a child making the namespace, started early by prepare()


def prepare() -> None:
    """Start making the namespace now, so that the child's exec and unshare run while the caller goes on (the
    CLI imports the sandbox code meanwhile); namespace_fd() finishes it. Without a later namespace_fd() the
    child exits by itself when this process does (its stdin closes)."""
    global _started
    if _started is None and namespace_fd.cache_info().currsize == 0:
        _started = _start_child()


@functools.lru_cache(maxsize=1)
def namespace_fd() -> int:
    """An fd of an identity-mapped user namespace, made once per process (bwrap --userns FD joins it).
    The fd keeps the namespace alive; the process that made it is gone at once."""
    global _started
    child, _started = _started or _start_child(), None
    try:
        own = os.readlink("/proc/self/ns/user")
        deadline = time.monotonic() + 5
        while os.readlink(f"/proc/{child.pid}/ns/user") == own:  # not unshared yet
            if child.poll() is not None or time.monotonic() > deadline:
                why = child.stderr.read().decode(errors="replace").strip() if child.poll() is not None else "timeout"
                raise HostUnsupported(f"cannot create a user namespace: {why}",
                                      fix="enable user namespaces (sysctl user.max_user_namespaces > 0)")
            time.sleep(0.0002)
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{child.pid}/{name}", "w") as f:
                f.write(IDENTITY_MAP)
        return _low_fd(os.open(f"/proc/{child.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC))
    except OSError as e:
        raise HostUnsupported(f"cannot set up a user namespace: {e}", fix="run as root, or use userns=False") from e
    finally:
        child.kill()
        child.wait()
        child.stdin.close()
        child.stderr.close()


def _start_child() -> subprocess.Popen:
    """A child that makes the namespace and waits on stdin while we write its maps."""
    unshare = which("unshare", path="/usr/bin:/bin")
    if unshare is None:
        raise HostUnsupported("`unshare` (util-linux) is not installed", fix="apt-get install util-linux")
    return subprocess.Popen([unshare, "--user", "--", "/bin/sh", "-c", "read _"], stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={"PATH": "/usr/bin:/bin"})


def _low_fd(fd: int) -> int:
    """Move `fd` to a number below 10 when one is free: bwrap leaves it open in the sandbox, and only a
    single-digit descriptor can be closed by a POSIX shell (`exec 7<&-`)."""
    low = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    if low > 9:
        os.close(low)
        return fd
    os.close(fd)
    return low
