"""Pod networks: one private network namespace that several sandboxes share, the way the containers of a
Docker Compose project reach each other by service name.

All sandboxes of a pod see the same loopback: a service listening on 127.0.0.1:5432 (or 0.0.0.0:5432) in one
sandbox is reached as `db:5432` from the others, because every sandbox of the pod gets an /etc/hosts that maps
the pod's names to 127.0.0.1 (as in a Kubernetes pod; two services cannot listen on the same port). Nothing
outside the pod can reach it, and it reaches nothing outside unless made with `internet=True`: then
slirp4netns gives it a user-mode NAT to the host's network (outbound only, the host's own loopback excluded),
with a DNS forwarder at 10.0.2.3.

The namespace is owned by the sandboxes' user namespace, so root in a sandbox may bind ports below 1024 in it,
as it may in a namespace bwrap makes. It is held by a file descriptor of the owner: when the owner closes the
pod or dies, the kernel frees it. The slirp4netns helper exits when the owner's end of its exit pipe closes,
which the kernel does when the owner dies, so a crash leaks nothing.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import threading
import time

from ..errors import BadInput, HostUnsupported
from ..which import which
from . import userns

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
SLIRP_DNS = "10.0.2.3"
START_TIMEOUT = 10.0
NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._")


class PodNetwork:
    """A network namespace for a group of sandboxes: pass it as `network=` to `Yard.sandbox`."""

    def __init__(self, names: list[str] | tuple[str, ...] = (), *, internet: bool = False):
        for name in names:
            if not isinstance(name, str) or not name or not set(name) <= NAME_CHARS or name[0] in "-.":
                raise BadInput(f"invalid host name {name!r} for a pod network",
                               fix="use letters, digits, '-', '.' and '_' (as a compose service name)")
        self.names = tuple(dict.fromkeys(names))
        self.internet = False
        self._lock = threading.Lock()
        self._slirp: subprocess.Popen | None = None
        self._slirp_exit_w: int | None = None
        self.fd: int | None = _new_namespace()
        try:
            _loopback_up(self.fd)
            if internet:
                self.connect_internet()
        except BaseException:
            self.close()
            raise

    def __str__(self) -> str:
        return "pod+internet" if self.internet else "pod"

    @property
    def closed(self) -> bool:
        return self.fd is None

    def hosts_file(self, hostname: str) -> str:
        """/etc/hosts for a sandbox of the pod (`hostname` is its own name)."""
        names = " ".join(dict.fromkeys(n for n in (hostname, *self.names) if n != "localhost"))
        return (f"127.0.0.1\tlocalhost {names}\n"
                "::1\tlocalhost ip6-localhost ip6-loopback\n")

    def resolv_conf(self) -> str | None:
        """/etc/resolv.conf for a sandbox of the pod: slirp4netns's forwarder, or None (no outside names)."""
        return f"nameserver {SLIRP_DNS}\n" if self.internet else None

    def nsenter_prefix(self) -> list[str]:
        """The argv prefix that starts a program in this namespace; the fd must be passed to it."""
        if self.fd is None:
            raise BadInput("this pod network is closed", fix="make a new PodNetwork")
        return [_tool("nsenter"), f"--net=/proc/self/fd/{self.fd}", "--"]

    def close(self) -> None:
        with self._lock:
            if self._slirp_exit_w is not None:
                os.close(self._slirp_exit_w)  # slirp4netns exits when this pipe closes
                self._slirp_exit_w = None
            if self._slirp is not None:
                try:
                    self._slirp.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    self._slirp.kill()
                    self._slirp.wait()
                self._slirp = None
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None

    def __enter__(self) -> "PodNetwork":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def connect_internet(self) -> None:
        """Give the pod outbound access to the host's network from now on (sandboxes started after this get
        a resolv.conf for it). Idempotent."""
        with self._lock:
            if not self.internet:
                self._start_slirp()
                self.internet = True

    def _start_slirp(self) -> None:
        slirp = which("slirp4netns", path="/usr/bin:/bin:/usr/local/bin")
        if slirp is None:
            raise HostUnsupported("a pod network with internet access needs slirp4netns, which is not installed",
                                  fix="apt-get install slirp4netns (scripts/install.sh does), or run the pod "
                                      "without internet")
        ready_r, ready_w = os.pipe()
        exit_r, exit_w = os.pipe()
        argv = [slirp, "--configure", "--mtu=65520", "--disable-host-loopback", f"--ready-fd={ready_w}",
                f"--exit-fd={exit_r}", "--netns-type=path", f"/proc/self/fd/{self.fd}", "tap0"]
        try:
            self._slirp = subprocess.Popen(argv, pass_fds=(ready_w, exit_r, self.fd), stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                           start_new_session=True)  # a Ctrl-C meant for the owner is not its
        finally:
            os.close(ready_w)
            os.close(exit_r)
        self._slirp_exit_w = exit_w
        try:
            ready = _read_with_timeout(ready_r, START_TIMEOUT)
        finally:
            os.close(ready_r)
        if ready != b"1":
            self._slirp.kill()
            why = self._slirp.stderr.read().decode(errors="replace").strip().splitlines()
            raise HostUnsupported(f"slirp4netns did not start: {why[-1] if why else 'no reason given'}",
                                  fix="check that slirp4netns works on this machine, or run the pod without internet")


def _tool(name: str) -> str:
    path = which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")
    if path is None:
        raise HostUnsupported(f"`{name}` (util-linux) is not installed", fix="apt-get install util-linux")
    return path


def _new_namespace() -> int:
    """A new network namespace owned by the sandboxes' user namespace; returns an fd that holds it."""
    user_fd = userns.namespace_fd()
    child = subprocess.Popen([_tool("nsenter"), f"--user=/proc/self/fd/{user_fd}", "--", _tool("unshare"), "--net",
                              "--", "/bin/sh", "-c", "echo ok; read _"], pass_fds=(user_fd,), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={"PATH": "/usr/bin:/bin"})
    try:
        if child.stdout.readline().strip() != b"ok":
            child.wait()
            why = child.stderr.read().decode(errors="replace").strip()
            raise HostUnsupported(f"cannot create a network namespace: {why or 'unknown reason'}",
                                  fix="run as root on a kernel with network namespaces")
        return os.open(f"/proc/{child.pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        child.kill()
        child.wait()
        for stream in (child.stdin, child.stdout, child.stderr):
            stream.close()


def _loopback_up(netns_fd: int) -> None:
    """Bring `lo` up in the namespace. A network namespace is per thread, so a short-lived thread enters it
    and the rest of the process stays where it is."""
    failure: list[BaseException] = []

    def enter_and_configure():
        import ctypes  # here, not at the top: every Yard imports this module, few make pods
        import socket

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(netns_fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                req = struct.pack("16sH", b"lo", 0)
                flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, req + b"\0" * 22)[:18])[1]
                fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP) + b"\0" * 22)
        except BaseException as e:  # reported to the caller's thread
            failure.append(e)

    t = threading.Thread(target=enter_and_configure, name="envyard-podnet")
    t.start()
    t.join()
    if failure:
        raise HostUnsupported(f"cannot bring up the pod's loopback: {failure[0]}",
                              fix="run as root on a kernel with network namespaces")


def _read_with_timeout(fd: int, timeout: float) -> bytes:
    import select

    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        if select.select([fd], [], [], left)[0]:
            return os.read(fd, 1)
    return b""
