"""Writing a new layer host-side, the way overlayfs would have recorded the same change in an upper dir.

COPY, ADD and WORKDIR need no program inside the image, so they are not run in a sandbox: the files go
straight from the context (or another image) into a fresh layer directory. Writing into an image through a
sandbox would cost a sandbox start and a second copy (the snapshot's), and could not work over `FROM scratch`,
where there is no /bin/sh to start a sandbox with. What overlayfs would do is done by hand: a directory that
already exists below is copied up (an empty directory with its mode, owner and times) before anything is put
in it, and destination paths resolve through the image's symlinks (`/var/run` → `/run`).

A RUN's layer is its sandbox's upper dir, minus the mount points bubblewrap made there (`layer_from_upper`).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Callable, Protocol

from ..store import Store
from ..store.store import remove_tree
from .errors import BuildError
from ..overlay import is_opaque
from .rootfs import Entry, LayerView, split

Owner = tuple[int, int]


class Tree(Protocol):
    """Where COPY reads from: the build context or another image (context.py)."""

    def lookup(self, rel: str, *, follow: bool) -> tuple[str, Entry | None]: ...
    def listdir(self, real: str) -> list[str]: ...


def _join(*parts: str) -> str:
    return "/" + "/".join(p for part in parts for p in split(part))


class LayerWriter:
    """Builds one layer in `dest` over the image whose layers are `lower` (host paths, top first)."""

    def __init__(self, dest: Path, lower: list[Path]):
        self.dest = dest
        self.view = LayerView([dest, *lower])
        self.files = 0

    def _host(self, real: str) -> Path:
        return self.dest.joinpath(*split(real))

    def _materialize(self, real: str) -> None:
        """Copy up every directory of `real` (a resolved path) that exists below but not yet in this layer."""
        parts = split(real)
        for i in range(1, len(parts) + 1):
            sub = "/" + "/".join(parts[:i])
            host = self._host(sub)
            if os.path.lexists(host):
                continue
            entry = self.view.get(sub, follow=False)
            if entry is None or not entry.is_dir:
                raise BuildError(f"{sub} changed while the layer was written", fix="run the build again")
            os.mkdir(host)
            _set_meta(host, (entry.st.st_uid, entry.st.st_gid), stat.S_IMODE(entry.st.st_mode),
                      entry.st.st_mtime_ns)

    def exists_as_dir(self, path: str) -> bool:
        entry = self.view.get(path)
        return entry is not None and entry.is_dir

    def ensure_dir(self, path: str, owner: Owner, mode: int = 0o755, mtime_ns: int | None = None) -> str:
        """`mkdir -p` inside the image; returns the resolved path. Missing directories get `owner` and `mode`;
        existing ones keep theirs."""
        for _ in range(1024):
            real, entry = self.view.lookup(path)
            if entry is not None:
                if not entry.is_dir:
                    raise BuildError(f"cannot make directory {path}: {real} is not a directory in the image",
                                     fix="copy to another path, or remove that file in an earlier RUN")
                self._materialize(real)
                return real
            parts = split(real)
            if ".." in parts:
                raise BuildError(f"cannot make directory {path}: it climbs out of a missing directory",
                                 fix="give a plain absolute path")
            for i in range(1, len(parts) + 1):
                sub = "/" + "/".join(parts[:i])
                if self.view.get(sub, follow=False) is None:
                    self._materialize("/" + "/".join(parts[:i - 1]))
                    os.mkdir(self._host(sub))
                    _set_meta(self._host(sub), owner, mode, mtime_ns if i == len(parts) else None)
                    break
        raise BuildError(f"cannot make directory {path}", fix="simplify the path (symlink loop?)")

    def _clear(self, host: Path, keep_dir: bool) -> None:
        """Make room in this layer for a new entry (what lies below is shadowed by it anyway)."""
        if not os.path.lexists(host):
            return
        if os.path.isdir(host) and not os.path.islink(host):
            if keep_dir:
                return
            remove_tree(host)
        else:
            os.unlink(host)

    def put_file(self, real_dir: str, name: str, src: Path, owner: Owner, mode: int, mtime_ns: int | None) -> None:
        host = self._host(_join(real_dir, name))
        self._clear(host, keep_dir=False)
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            with open(fd, "rb", closefd=False) as fin, open(host, "xb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
        finally:
            os.close(fd)
        _set_meta(host, owner, mode, mtime_ns)
        self.files += 1

    def put_bytes(self, real_dir: str, name: str, data: bytes, owner: Owner, mode: int) -> None:
        host = self._host(_join(real_dir, name))
        self._clear(host, keep_dir=False)
        host.write_bytes(data)
        _set_meta(host, owner, mode, None)
        self.files += 1

    def put_link(self, real_dir: str, name: str, target: str, owner: Owner) -> None:
        host = self._host(_join(real_dir, name))
        self._clear(host, keep_dir=False)
        os.symlink(target, host)
        os.lchown(host, *owner)
        self.files += 1

    def copy_entry(self, tree: Tree, src_real: str, entry: Entry, dest_dir: str, name: str,
                   owner_of: Callable[[os.stat_result], Owner], mode_of: Callable[[os.stat_result], int]) -> None:
        """Copy one file, link or directory tree of `tree` to `dest_dir/name` (dest_dir resolved)."""
        st = entry.st
        if entry.is_dir:
            real = self._dir_at(dest_dir, name, owner_of(st), mode_of(st), st.st_mtime_ns)
            self.copy_contents(tree, src_real, real, owner_of, mode_of)
        elif entry.is_file:
            self.put_file(dest_dir, name, entry.host, owner_of(st), mode_of(st), st.st_mtime_ns)
        elif entry.is_link:
            self.put_link(dest_dir, name, os.readlink(entry.host), owner_of(st))
        # FIFOs, sockets and devices are not copied: sandboxes cannot make device nodes, and a 0:0 character
        # device would read as a whiteout in a layer.

    def _dir_at(self, dest_dir: str, name: str, owner: Owner, mode: int, mtime_ns: int) -> str:
        """A directory for a copied one: merged into an existing directory (which keeps its metadata, and
        through a symlink as Docker does), else made with the source's."""
        path = _join(dest_dir, name)
        if self.exists_as_dir(path):
            return self.ensure_dir(path, owner)
        host = self._host(path)
        self._materialize(dest_dir)
        self._clear(host, keep_dir=False)
        os.mkdir(host)
        _set_meta(host, owner, mode, mtime_ns)
        return path

    def copy_contents(self, tree: Tree, src_real: str, dest_real: str,
                      owner_of: Callable[[os.stat_result], Owner], mode_of: Callable[[os.stat_result], int]) -> None:
        for name in tree.listdir(src_real):
            sub = _join(src_real, name)
            _, entry = tree.lookup(sub, follow=False)
            if entry is not None:
                self.copy_entry(tree, sub, entry, dest_real, name, owner_of, mode_of)

    def empty(self) -> bool:
        return not any(os.scandir(self.dest))


def _set_meta(path: Path, owner: Owner, mode: int, mtime_ns: int | None) -> None:
    os.lchown(path, *owner)
    os.chmod(path, mode)  # after chown, which clears set-id bits
    if mtime_ns is not None:
        os.utime(path, ns=(mtime_ns, mtime_ns))


# ---- a RUN's changes ----------------------------------------------------------------------------------------


def _parents(path: str) -> list[str]:
    """/a/b/c → ["/a/b", "/a"]."""
    parts = split(path)
    return ["/" + "/".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


def layer_from_upper(store: Store, upper: Path, mount_points: list[str], parent: LayerView) -> Path | None:
    """Copy a stopped sandbox's upper dir into a new layer directory, without the mount points bubblewrap made
    for the step (the CA bundle, /etc/resolv.conf, /proc...) where the image had nothing. None when the step
    changed nothing."""
    from ..runtime.local import _dies_with_us

    dest = store.new_layer_dir()
    try:
        cp = subprocess.run(_dies_with_us(["cp", "-a", "--reflink=auto", f"{upper}/.", str(dest)]),
                            capture_output=True, text=True)
        if cp.returncode != 0:
            raise BuildError(f"copying the step's changes failed: {cp.stderr.strip()[-300:]}",
                             fix="check free disk space in the store")
        for inside in mount_points:
            host = dest.joinpath(*split(inside))
            if parent.get(inside, follow=False) is not None or not os.path.lexists(host):
                continue
            if host.is_dir() and not host.is_symlink():
                if any(host.iterdir()):
                    continue
                host.rmdir()
            elif host.is_file() and host.stat().st_size == 0:
                host.unlink()
            else:
                continue
            # and the directories overlayfs copied up only to hold that mount point, if nothing else is in them
            for up in _parents(inside):
                d = dest.joinpath(*split(up))
                if is_opaque(d) or any(d.iterdir()):
                    break
                d.rmdir()
        if not any(dest.iterdir()):
            store.discard_dir(dest)
            return None
        return dest
    except BaseException:
        store.discard_dir(dest)
        raise
