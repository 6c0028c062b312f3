"""Merge a layer directory into a running sandbox's filesystem, as if it had been a lower layer from the start.

A layer dir has an overlay upper dir's format: new and changed entries, whiteouts (character devices 0:0) for
deletions, opaque directories (`overlay.opaque`) that hide what lies below them. A sandbox started over
`image + layer` and a sandbox started over `image` that then gets `apply_layer(layer)` see the same files:
entries are created with the layer's owners, modes, modification times, user xattrs and hard links; a whiteout
removes the entry; an opaque directory replaces the directory wholesale.

This lets a verifier be started and prepared ahead of time (envs/prepared.py). It is meant for a sandbox in
which nothing untrusted has run: the owner writes as the host's root, so every step is taken from a directory
descriptor with openat2's ONE_NAME rules (no symlink is followed, no mount point crossed). A mount point of
the sandbox (/proc, /dev, a bind) is left alone, as it would hide the layer's entry there too. What is not
carried over: file capabilities and other `security.*`/`trusted.*` xattrs, sockets and device nodes.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ..overlay import is_opaque, is_whiteout
from .files import CHUNK, IN_SANDBOX, MAX_DEPTH, ONE_NAME, openat2

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def apply_layer(root: int, layer: Path) -> None:
    """Merge the layer dir `layer` (on the host, not changing) into the sandbox whose root is `root`."""
    top = openat2(root, ".", os.O_RDONLY | os.O_DIRECTORY, IN_SANDBOX)
    links: dict[tuple[int, int], tuple[int, str]] = {}  # a hard-linked file's first copy: (its dir fd, name)
    try:
        _merge_dir(str(layer), top, os.fstat(top).st_dev, links, 0)
    finally:
        os.close(top)
        for fd, _ in links.values():
            os.close(fd)


def _merge_dir(src: str, dest: int, dev: int, links: dict, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise OSError(errno.ELOOP, f"{src}: nested more than {MAX_DEPTH} levels")
    with os.scandir(src) as entries:
        for entry in entries:
            st = entry.stat(follow_symlinks=False)
            name = entry.name
            if is_whiteout(st):
                _remove(dest, name, dev)
            elif stat.S_ISDIR(st.st_mode):
                sub = _directory(dest, name, dev, replace=is_opaque(entry.path))
                if sub is None:
                    continue  # a mount point of the sandbox: it hides this entry, as it would over a lower layer
                try:
                    _merge_dir(entry.path, sub, dev, links, depth + 1)
                    _set_meta(sub, st, entry.path)
                finally:
                    os.close(sub)
            elif stat.S_ISREG(st.st_mode):
                _file(entry.path, st, dest, name, dev, links)
            elif stat.S_ISLNK(st.st_mode):
                if _remove(dest, name, dev):
                    os.symlink(os.readlink(entry.path), name, dir_fd=dest)
                    os.chown(name, st.st_uid, st.st_gid, dir_fd=dest, follow_symlinks=False)
                    os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=dest, follow_symlinks=False)
            elif stat.S_ISFIFO(st.st_mode):
                if _remove(dest, name, dev):
                    os.mkfifo(name, 0o600, dir_fd=dest)
                    fd = openat2(dest, name, os.O_PATH | os.O_NOFOLLOW, ONE_NAME)
                    try:
                        os.chown(f"/proc/self/fd/{fd}", st.st_uid, st.st_gid)
                        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(st.st_mode))
                    finally:
                        os.close(fd)
            # sockets and device nodes are never created in a sandbox from the host


def _directory(dest: int, name: str, dev: int, replace: bool) -> int | None:
    """A descriptor of directory `name` in `dest`: the existing one (emptied first when `replace`), or a new one
    where there was none or a non-directory. None for a mount point."""
    try:
        st = os.stat(name, dir_fd=dest, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode) and st.st_dev != dev:
        return None
    if st is not None and (replace or not stat.S_ISDIR(st.st_mode)):
        if not _remove(dest, name, dev):
            return None
        st = None
    if st is None:
        os.mkdir(name, 0o700, dir_fd=dest)
    try:
        return openat2(dest, name, _DIR, ONE_NAME)
    except OSError as e:
        if e.errno == errno.EXDEV:
            return None
        raise


def _file(src: str, st: os.stat_result, dest: int, name: str, dev: int, links: dict) -> None:
    key = (st.st_dev, st.st_ino)
    if not _remove(dest, name, dev):
        return
    if st.st_nlink > 1 and key in links:
        first_dir, first_name = links[key]
        os.link(first_name, name, src_dir_fd=first_dir, dst_dir_fd=dest, follow_symlinks=False)
        return
    fd = openat2(dest, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, ONE_NAME,
                 mode=0o600)
    try:
        with open(src, "rb") as f:
            _copy(f.fileno(), fd)
        _set_meta(fd, st, src)
    finally:
        os.close(fd)
    if st.st_nlink > 1:
        links[key] = (os.dup(dest), name)


def _copy(src: int, dst: int) -> None:
    try:
        while os.copy_file_range(src, dst, CHUNK):
            pass
        return
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS):
            raise
    os.lseek(src, 0, os.SEEK_SET)
    os.lseek(dst, 0, os.SEEK_SET)
    os.ftruncate(dst, 0)
    while chunk := os.read(src, CHUNK):
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view):]


def _set_meta(fd: int, st: os.stat_result, src: str) -> None:
    """Owner, then mode (a chown clears set-id bits), user xattrs, then times (writing children moves them)."""
    os.fchown(fd, st.st_uid, st.st_gid)
    os.fchmod(fd, stat.S_IMODE(st.st_mode))
    for attr in os.listxattr(src, follow_symlinks=False):
        if attr.startswith("user.") and not attr.startswith("user.overlay."):
            os.setxattr(fd, attr, os.getxattr(src, attr, follow_symlinks=False))
    os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))


def _remove(dest: int, name: str, dev: int) -> bool:
    """Remove `name` from `dest`, a directory with all it holds; True when the name is free afterwards (False:
    it is, or holds, a mount point of the sandbox, which stays)."""
    try:
        st = os.stat(name, dir_fd=dest, follow_symlinks=False)
    except FileNotFoundError:
        return True
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.unlink(name, dir_fd=dest)
        except OSError as e:
            if e.errno == errno.EBUSY:  # a file bind-mounted over (e.g. /etc/resolv.conf)
                return False
            raise
        return True
    if st.st_dev != dev:
        return False
    try:
        fd = openat2(dest, name, _DIR, ONE_NAME)
    except OSError as e:
        if e.errno == errno.EXDEV:
            return False
        raise
    free = True
    try:
        for child in os.listdir(fd):
            free = _remove(fd, child, dev) and free
    finally:
        os.close(fd)
    if not free:
        return False
    try:
        os.rmdir(name, dir_fd=dest)
    except OSError as e:
        if e.errno == errno.EBUSY:
            return False
        raise
    return True
