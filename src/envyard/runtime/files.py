"""Host-side access to a sandbox's files: the owner reads and writes them itself, never through programs
inside the sandbox (an agent can replace `cat`, `tar` or `mkdir` with ones that lie).

Every path is resolved by the kernel against the sandbox's own root, `/proc/<pid-1>/root`, with openat2(2):
RESOLVE_IN_ROOT makes absolute symlinks and `..` stay inside that root, RESOLVE_NO_MAGICLINKS refuses
/proc-style links, and RESOLVE_NO_XDEV keeps every step on the sandbox's root filesystem. The last one
matters because the owner is the host's root with every capability: through /proc, /sys, /dev or a bind
mount it could read or write what the sandbox itself may not, on the agent's behalf.

Only regular files are ever opened for data: a path is first opened with O_PATH (which opens nothing),
checked with fstat, and only then reopened for reading or writing, so a FIFO, socket or device an agent
planted gives a typed error at once instead of blocking or touching hardware. Directory walks (download,
upload) go one name at a time from directory descriptors and never follow a symlink.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .. import procinfo
from ..errors import (BadInput, EnvyardError, FileTooLarge, HostUnsupported, NotRegularFile, PathOutsideSandbox,
                      SandboxDied)
from .result import DEFAULT_MAX_DOWNLOAD, DEFAULT_MAX_ENTRIES, DEFAULT_MAX_READ  # noqa: F401 (files.DEFAULT_*)

MAX_DEPTH = 256  # directory nesting a walk follows (each level holds two descriptors)
CHUNK = 1 << 20

_SYS_OPENAT2 = 437  # the same number on every architecture (added after the syscall tables were unified)
RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
RESOLVE_IN_ROOT = 0x10

# A whole path, from the sandbox's root: symlinks are followed, but only ever inside the sandbox.
IN_SANDBOX = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV
# One name inside a directory we hold: no symlink is followed at all.
ONE_NAME = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV


@functools.cache
def _openat2_call():
    """The raw syscall entry and the `struct open_how` type, made on first use: ctypes costs a few milliseconds to
    import, which every `envyard run` would pay although only file access needs it."""
    import ctypes

    class OpenHow(ctypes.Structure):
        _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]

    syscall = ctypes.CDLL(None, use_errno=True).syscall
    syscall.restype = ctypes.c_long
    return ctypes, OpenHow, syscall


def openat2(dirfd: int, path: str, flags: int, resolve: int, mode: int = 0) -> int:
    """openat2(2), which Python does not wrap. Retries EAGAIN, which the kernel returns when a rename or mount
    raced with a RESOLVE_IN_ROOT/BENEATH lookup."""
    ctypes, open_how, syscall = _openat2_call()
    how = open_how(flags | os.O_CLOEXEC, mode, resolve)
    raw = os.fsencode(path)
    for _ in range(64):
        fd = syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(dirfd), ctypes.c_char_p(raw), ctypes.byref(how),
                      ctypes.c_size_t(ctypes.sizeof(how)))
        if fd >= 0:
            return fd
        err = ctypes.get_errno()
        if err not in (errno.EAGAIN, errno.EINTR):
            break
    if err == errno.ENOSYS:
        raise HostUnsupported("this kernel lacks openat2(2), which envyard's file access needs", fix="use Linux >= 5.6")
    raise OSError(err, os.strerror(err), path)


@contextlib.contextmanager
def sandbox_root(pid: int, start: int, sandbox_id: str):
    """A descriptor of the sandbox's root directory, as its pid-1 sees it.

    /proc/<pid> is opened first: that descriptor stays tied to the one process, so once its start time
    matches, the root read through it cannot belong to a process that reused the pid."""
    gone = SandboxDied(f"sandbox {sandbox_id} is no longer running", fix="create a new sandbox or call reset()")
    try:
        pid_dir = os.open(f"/proc/{pid}", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        raise gone from None
    try:
        if procinfo.start_time_at(pid_dir) != start:
            raise gone
        root = os.open("root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=pid_dir)
    except OSError:
        raise gone from None
    finally:
        os.close(pid_dir)
    try:
        yield root
    finally:
        os.close(root)


# ---- errors ---------------------------------------------------------------------------------------------------


@dataclass
class _Where:
    """The sandbox path an operation is at, for error messages."""

    path: str


@contextlib.contextmanager
def _errors(where: _Where, action: str):
    """Turn the OSError of a system call into the typed error a caller can act on."""
    try:
        yield
    except OSError as e:
        path = where.path
        code = e.errno
        if code == errno.ENOENT:
            raise FileNotFoundError(f"{path} does not exist in the sandbox") from None
        if code == errno.EXDEV:
            raise PathOutsideSandbox(
                f"{path} leads off the sandbox's own filesystem (into /proc, /sys, /dev, a bind mount or envyard's "
                "control directory)",
                fix="file methods reach only the sandbox's root filesystem; use exec for the rest",
            ) from None
        if code == errno.ELOOP:
            raise BadInput(f"cannot {action} {path}: too many levels of symlinks, or a symlink where none is followed",
                           fix="name the file itself, not a link to it") from None
        if code == errno.ENOTDIR:
            raise BadInput(f"cannot {action} {path}: a component of the path is not a directory",
                           fix="check the path inside the sandbox") from None
        if code in (errno.EISDIR, errno.ENXIO):
            raise NotRegularFile(f"{path} is not a regular file", fix="name a regular file") from None
        if code == errno.EWOULDBLOCK:
            raise EnvyardError(f"cannot {action} {path}: the file is busy (locked or leased inside the sandbox)",
                               fix="retry once the sandbox's process lets go of it") from None
        if code == errno.ENAMETOOLONG:
            raise BadInput(f"cannot {action} {path}: a name in it is too long", fix="use shorter names") from None
        raise EnvyardError(f"cannot {action} {path}: {e.strerror}") from None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def _not_regular(path: str, mode: int, fix: str | None = None) -> NotRegularFile:
    return NotRegularFile(f"{path} is {_kind(mode)}, not a regular file",
                          fix=fix or "file methods open regular files only; use exec for anything else")


def _open_regular(dirfd: int, rel: str, flags: int, resolve: int, shown: str) -> int:
    """Open a regular file: resolve with O_PATH (opens nothing), check the type, then reopen that same inode."""
    pfd = openat2(dirfd, rel, os.O_PATH | (os.O_NOFOLLOW if resolve & RESOLVE_NO_SYMLINKS else 0), resolve)
    try:
        mode = os.fstat(pfd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(shown, mode)
        # O_NONBLOCK: a lease taken inside the sandbox makes open() fail at once instead of waiting 45 s.
        return os.open(f"/proc/self/fd/{pfd}", flags | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)
    finally:
        os.close(pfd)


def _rel(parts: list[str]) -> str:
    return "/".join(parts) or "."


def _shown(parts: list[str]) -> str:
    return "/" + "/".join(parts)


# ---- reading ---------------------------------------------------------------------------------------------------


def read_file(root: int, parts: list[str], max_bytes: int) -> bytes:
    where = _Where(_shown(parts))
    with _errors(where, "read"):
        fd = _open_regular(root, _rel(parts), os.O_RDONLY, IN_SANDBOX, where.path)
        try:
            size = os.fstat(fd).st_size
            if size > max_bytes:
                raise _too_large(where.path, size, max_bytes)
            chunks, got = [], 0
            while True:  # the file may grow while we read: never take more than the cap
                chunk = os.read(fd, min(CHUNK, max_bytes + 1 - got))
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
                got += len(chunk)
                if got > max_bytes:
                    raise _too_large(where.path, got, max_bytes)
        finally:
            os.close(fd)


def _too_large(path: str, size: int, limit: int, what: str = "read_file") -> FileTooLarge:
    return FileTooLarge(f"{path} is {size} bytes, more than {what}'s cap of {limit} bytes", size=size, limit=limit,
                        fix="pass a larger max_bytes= if you really want it all, or read parts with exec "
                            "(head -c, tail -c)")


# ---- writing ---------------------------------------------------------------------------------------------------


def write_file(root: int, parts: list[str], data: bytes, mode: int | None) -> None:
    """Create or replace a file (parents created). A symlink as the file itself is refused, not followed."""
    where = _Where(_shown(parts))
    if not parts:
        raise NotRegularFile("/ is a directory, not a regular file", fix="name a file, e.g. /work/data.txt")
    with _errors(where, "write"):
        parent = make_dirs(root, parts[:-1], where)
        where.path = _shown(parts)
        try:
            fd = _create_or_truncate(parent, parts[-1], where.path)
        finally:
            os.close(parent)
        try:
            _write_all(fd, data)
            if mode is not None:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)


def make_dirs(root: int, parts: list[str], where: _Where) -> int:
    """`mkdir -p` inside the sandbox; returns a descriptor of the directory. Each step is resolved again from
    the sandbox's root, so a symlink among the parents is followed, but only inside the sandbox."""
    flags = os.O_RDONLY | os.O_DIRECTORY
    try:
        return openat2(root, _rel(parts), flags, IN_SANDBOX)
    except FileNotFoundError:
        pass
    fd = openat2(root, ".", flags, IN_SANDBOX)
    try:
        for i, name in enumerate(parts):
            where.path = _shown(parts[: i + 1])
            try:
                os.mkdir(name, 0o777, dir_fd=fd)  # mkdirat never follows a symlink of that name
            except FileExistsError:
                pass
            step = openat2(root, _rel(parts[: i + 1]), flags, IN_SANDBOX)
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _create_or_truncate(dirfd: int, name: str, shown: str, *, replace_links: bool = False) -> int:
    """Open `name` in `dirfd` for writing, emptied: a new file (O_EXCL, so nothing existing is opened) or the
    existing regular file. A symlink or special file there is refused, or with `replace_links` removed first."""
    for _ in range(8):
        try:
            pfd = openat2(dirfd, name, os.O_PATH | os.O_NOFOLLOW, ONE_NAME)
        except FileNotFoundError:
            try:
                return openat2(dirfd, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NOCTTY,
                               ONE_NAME, mode=0o666)
            except FileExistsError:
                continue  # made meanwhile: look again
        try:
            mode = os.fstat(pfd).st_mode
            if stat.S_ISREG(mode):
                fd = os.open(f"/proc/self/fd/{pfd}", os.O_WRONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)
                os.ftruncate(fd, 0)
                return fd
        finally:
            os.close(pfd)
        if replace_links and not stat.S_ISDIR(mode):
            os.unlink(name, dir_fd=dirfd)
            continue
        fix = "write to the path the link points to, or remove the link first" if stat.S_ISLNK(mode) else None
        raise _not_regular(shown, mode, fix)
    raise EnvyardError(f"cannot write {shown}: it keeps changing under us")


def _write_all(fd: int, data) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view[:CHUNK])
        view = view[n:]


def _copy_fd(src: int, dst: int, limit: int | None = None) -> int:
    """Copy until EOF; with `limit`, stop once more than `limit` bytes came (the caller raises). Returns bytes."""
    done = 0
    while True:
        want = CHUNK if limit is None else min(CHUNK, limit + 1 - done)
        chunk = os.read(src, want)
        if not chunk:
            return done
        _write_all(dst, chunk)
        done += len(chunk)
        if limit is not None and done > limit:
            return done


def upload(root: int, src: Path, parts: list[str]) -> None:
    """Copy a host file or directory tree to `parts` in the sandbox. Symlinks in the tree are recreated as
    symlinks (their text is only ever resolved inside the sandbox); FIFOs, sockets and devices are skipped.
    Modes and modification times are kept; files belong to root."""
    st = os.stat(src)
    where = _Where(_shown(parts))
    with _errors(where, "upload to"):
        if stat.S_ISREG(st.st_mode):
            if not parts:
                raise NotRegularFile("/ is a directory, not a regular file", fix="name a file, e.g. /work/data.txt")
            parent = make_dirs(root, parts[:-1], where)
            where.path = _shown(parts)
            try:
                _upload_file(src, None, parent, parts[-1], st, where.path, follow=True)
            finally:
                os.close(parent)
        elif stat.S_ISDIR(st.st_mode):
            dest = make_dirs(root, parts, where)
            where.path = _shown(parts)
            host = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                _upload_tree(host, dest, where, 0)
                os.fchmod(dest, st.st_mode & 0o777)
            finally:
                os.close(host)
                os.close(dest)
        else:
            raise BadInput(f"{src} is {_kind(st.st_mode)} on the host; upload copies files and directories",
                           fix="upload a regular file or a directory")


def _upload_file(name, host_dir: int | None, dest_dir: int, dest_name: str, st: os.stat_result, shown: str,
                 follow: bool = False) -> None:
    src = os.open(name, os.O_RDONLY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW), dir_fd=host_dir)
    try:
        fd = _create_or_truncate(dest_dir, dest_name, shown, replace_links=True)
        try:
            _copy_fd(src, fd)
            os.fchmod(fd, st.st_mode & 0o777)
            os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(fd)
    finally:
        os.close(src)


def _check_depth(where: "_Where", depth: int) -> None:
    if depth > MAX_DEPTH:
        raise BadInput(f"{where.path}: the tree is nested more than {MAX_DEPTH} levels deep",
                       fix="copy a shallower tree, or pack it with exec (tar) first")


def _upload_tree(host: int, dest: int, where: _Where, depth: int) -> None:
    _check_depth(where, depth)
    base = where.path
    with os.scandir(host) as entries:
        for entry in entries:
            where.path = f"{base.rstrip('/')}/{entry.name}"
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                sub_dest = _child_dir(dest, entry.name)
                try:
                    sub_host = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                       dir_fd=host)
                    try:
                        _upload_tree(sub_host, sub_dest, where, depth + 1)
                    finally:
                        os.close(sub_host)
                    os.fchmod(sub_dest, st.st_mode & 0o777)
                    os.utime(sub_dest, ns=(st.st_atime_ns, st.st_mtime_ns))
                finally:
                    os.close(sub_dest)
            elif stat.S_ISREG(st.st_mode):
                _upload_file(entry.name, host, dest, entry.name, st, where.path)
            elif stat.S_ISLNK(st.st_mode):
                _remove_non_dir(dest, entry.name, where.path)
                os.symlink(os.readlink(entry.name, dir_fd=host), entry.name, dir_fd=dest)
    where.path = base


def _child_dir(dirfd: int, name: str) -> int:
    """Open subdirectory `name` of `dirfd`, making it (or replacing a non-directory there) as needed."""
    try:
        os.mkdir(name, 0o700, dir_fd=dirfd)
    except FileExistsError:
        if not stat.S_ISDIR(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode):
            os.unlink(name, dir_fd=dirfd)
            os.mkdir(name, 0o700, dir_fd=dirfd)
    return openat2(dirfd, name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, ONE_NAME)


def _remove_non_dir(dirfd: int, name: str, shown: str) -> None:
    try:
        mode = os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        raise BadInput(f"{shown} is a directory; it cannot be replaced by a file or link",
                       fix="remove that directory first, or copy to another path")
    os.unlink(name, dir_fd=dirfd)


# ---- download --------------------------------------------------------------------------------------------------


@dataclass
class _Budget:
    max_bytes: int
    max_entries: int
    bytes: int = 0
    entries: int = 0
    skipped: list[str] = field(default_factory=list)

    def entry(self, path: str) -> None:
        self.entries += 1
        if self.entries > self.max_entries:
            raise BadInput(f"download stopped at {path}: more than {self.max_entries} files, directories and links",
                           fix="pass a larger max_entries= or download a smaller directory")

    def size_left(self) -> int:
        return self.max_bytes - self.bytes


def download(root: int, parts: list[str], dest: Path, max_bytes: int, max_entries: int) -> list[str]:
    """Copy a sandbox file or tree to the host path `dest`; returns the sandbox paths it did not copy.

    Symlinks are never followed inside the tree. One is recreated under `dest` only when its target stays
    inside the copied tree (see _link_stays_inside); any other, and FIFOs, sockets, devices and mount points,
    are skipped and listed. The path `parts` itself may go through symlinks, resolved inside the sandbox."""
    where = _Where(_shown(parts))
    budget = _Budget(max_bytes, max_entries)
    with _errors(where, "download"):
        pfd = openat2(root, _rel(parts), os.O_PATH, IN_SANDBOX)
        try:
            mode = os.fstat(pfd).st_mode
            if stat.S_ISDIR(mode):
                top = os.open(f"/proc/self/fd/{pfd}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            elif stat.S_ISREG(mode):
                top = os.open(f"/proc/self/fd/{pfd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)
            else:
                raise _not_regular(where.path, mode)
        finally:
            os.close(pfd)
    try:
        # The host side is the caller's own path: its errors stay plain OSErrors naming it.
        host_dir = dest.parent if stat.S_ISREG(mode) else dest
        host_dir.mkdir(parents=True, exist_ok=True)
        host = os.open(host_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            with _errors(where, "download"):
                if stat.S_ISREG(mode):
                    _download_file(top, host, dest.name, where.path, str(dest), budget)
                else:
                    _download_tree(top, host, str(dest), where, 0, budget)
        finally:
            os.close(host)
    finally:
        os.close(top)
    return budget.skipped


def _download_file(src: int, host_dir: int, name: str, shown: str, host_shown: str, budget: _Budget) -> None:
    st = os.fstat(src)
    if st.st_size > budget.size_left():  # a sparse or huge file fails here, before a byte is copied
        raise _too_large(shown, budget.bytes + st.st_size, budget.max_bytes, "download")
    _remove_non_dir(host_dir, name, f"the host's {host_shown}")
    out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                  (st.st_mode & 0o755) | 0o600, dir_fd=host_dir)
    try:
        done = _copy_fd(src, out, budget.size_left())
    finally:
        os.close(out)
    budget.bytes += done
    if budget.bytes > budget.max_bytes:
        raise _too_large(shown, budget.bytes, budget.max_bytes, "download")


def _download_tree(src: int, host: int, host_shown: str, where: _Where, depth: int, budget: _Budget) -> None:
    _check_depth(where, depth)
    base = where.path
    with os.scandir(src) as entries:
        for entry in entries:
            where.path = f"{base.rstrip('/')}/{entry.name}"
            budget.entry(where.path)
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                try:
                    sub = openat2(src, entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, ONE_NAME)
                except OSError as e:
                    if e.errno not in (errno.EXDEV, errno.ELOOP, errno.ENOTDIR):
                        raise
                    budget.skipped.append(where.path)  # a mount point, or swapped for a link meanwhile
                    continue
                try:
                    sub_host = _child_dir(host, entry.name)
                    try:
                        _download_tree(sub, sub_host, f"{host_shown}/{entry.name}", where, depth + 1, budget)
                    finally:
                        os.close(sub_host)
                finally:
                    os.close(sub)
            elif stat.S_ISREG(st.st_mode):
                try:
                    fd = _open_regular(src, entry.name, os.O_RDONLY, ONE_NAME, where.path)
                except (NotRegularFile, OSError) as e:
                    if isinstance(e, OSError) and e.errno not in (errno.EXDEV, errno.ELOOP):
                        raise
                    budget.skipped.append(where.path)  # swapped for something else meanwhile
                    continue
                try:
                    _download_file(fd, host, entry.name, where.path, f"{host_shown}/{entry.name}", budget)
                finally:
                    os.close(fd)
            elif stat.S_ISLNK(st.st_mode):
                target = os.readlink(entry.name, dir_fd=src)
                if _link_stays_inside(target, depth):
                    _remove_non_dir(host, entry.name, f"the host's {host_shown}/{entry.name}")
                    os.symlink(target, entry.name, dir_fd=host)
                else:
                    budget.skipped.append(f"{where.path} -> {target}")
            else:
                budget.skipped.append(where.path)
    where.path = base


def _link_stays_inside(target: str, depth: int) -> bool:
    """Whether a relative link `target`, in a directory `depth` levels below the copied tree's top, resolves
    inside the tree on the host. Only leading `..` are accepted: after a name, `..` would climb from wherever
    that name leads, which may itself be a link, so it cannot be judged from the text."""
    if not target or target.startswith("/"):
        return False
    names = [p for p in target.split("/") if p not in ("", ".")]
    ups = 0
    for i, name in enumerate(names):
        if name == "..":
            if i != ups:
                return False
            ups += 1
    return ups <= depth
