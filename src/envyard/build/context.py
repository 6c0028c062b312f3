"""Where COPY and ADD read from: the build context (a host directory less what .dockerignore excludes), another
stage or image (read from its layers), or an unpacked archive; source globs; content digests for the cache.

Paths inside a tree are '/'-rooted. Symlinks resolve inside the tree, never to the host's files: in the
context a link to `/etc/passwd` means the context's own `etc/passwd`, as BuildKit reads it.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
from pathlib import Path

from .errors import ContextError
from .ignore import Ignore, compile_segment
from .rootfs import MAX_LINKS, Entry, LayerView, split

MAGIC = set("*?[")


class HostTree:
    """A host directory as a source tree: the build context (with its .dockerignore) or an unpacked archive."""

    keeps_owner = False  # COPY from the context makes files root's (or --chown's)

    def __init__(self, root: Path, ignore: Ignore | None = None, *, keeps_owner: bool = False):
        self.root = root
        self.ignore = ignore or Ignore([])
        self.keeps_owner = keeps_owner

    def _host(self, real: str) -> Path:
        return self.root.joinpath(*split(real))

    def lookup(self, path: str, *, follow: bool = True) -> tuple[str, Entry | None]:
        todo, real, links = split(path), [], 0
        st = os.lstat(self.root)
        while todo:
            name = todo.pop(0)
            if name == "..":
                if real:
                    real.pop()
                continue
            try:
                st = os.lstat(self.root.joinpath(*real, name))
            except (FileNotFoundError, NotADirectoryError):
                return "/" + "/".join([*real, name, *todo]), None
            if stat.S_ISLNK(st.st_mode) and (todo or follow):
                links += 1
                if links > MAX_LINKS:
                    raise ContextError(f"too many levels of symbolic links at {path} in the context",
                                       fix="fix the symlink loop")
                target = os.readlink(self.root.joinpath(*real, name))
                if target.startswith("/"):
                    real = []
                todo = split(target) + todo
                st = os.lstat(self.root.joinpath(*real))
                continue
            if todo and not stat.S_ISDIR(st.st_mode):
                return "/" + "/".join([*real, name, *todo]), None
            real.append(name)
        rel = "/".join(real)
        if rel and self.ignore.excluded(rel) and not (stat.S_ISDIR(st.st_mode) and self._has_included(rel)):
            return "/" + rel, None
        return "/" + rel, Entry(self.root.joinpath(*real), st)

    def _has_included(self, rel: str) -> bool:
        """Whether an excluded directory holds something a `!` pattern brings back."""
        if not self.ignore.may_reinclude_below(rel):
            return False
        for dirpath, dirnames, filenames in os.walk(self.root / rel):
            base = os.path.relpath(dirpath, self.root)
            if any(not self.ignore.excluded(f"{base}/{n}") for n in dirnames + filenames):
                return True
        return False

    def listdir(self, real: str) -> list[str]:
        try:
            names = sorted(os.listdir(self._host(real)))
        except OSError:
            return []
        base = "/".join(split(real))
        out = []
        for name in names:
            rel = f"{base}/{name}" if base else name
            if not self.ignore.excluded(rel):
                out.append(name)
            elif os.path.isdir(self.root / rel) and not os.path.islink(self.root / rel) and self._has_included(rel):
                out.append(name)
        return out


class ImageTree:
    """Another stage's or image's files (`COPY --from`): owners are kept, as BuildKit keeps them."""

    keeps_owner = True

    def __init__(self, view: LayerView):
        self.view = view

    def lookup(self, path: str, *, follow: bool = True) -> tuple[str, Entry | None]:
        return self.view.lookup(path, follow=follow)

    def listdir(self, real: str) -> list[str]:
        return self.view.listdir(real)


def clean_source(src: str, line: int) -> str:
    """A COPY source as a '/'-rooted path inside its tree; `..` may not climb out of it."""
    rel = posixpath.normpath(src.lstrip("/") or ".")
    if rel == ".." or rel.startswith("../"):
        raise ContextError(f"Dockerfile line {line}: {src} is outside the build context",
                           fix="move the file into the context directory")
    return "/" if rel == "." else "/" + rel


def glob(tree, pattern: str) -> list[str]:
    """Paths of `tree` matching `pattern` (Go's filepath.Match per segment: `*`, `?`, `[...]`), sorted."""
    found = ["/"]
    for seg in split(pattern):
        nxt = []
        for base in found:
            if not MAGIC & set(seg):
                nxt.append(posixpath.join(base, seg))
                continue
            real, entry = tree.lookup(base)
            if entry is None or not entry.is_dir:
                continue
            rx = compile_segment(seg)
            nxt += [posixpath.join(base, n) for n in tree.listdir(real) if rx.match(n)]
        found = nxt
    return sorted(p for p in found if tree.lookup(p, follow=False)[1] is not None)


def digest(tree, real: str, entry: Entry, h: "hashlib._Hash", rel: str = ".") -> int:
    """Feed what a copy of `real` depends on into `h`: names, types, modes, contents, link targets (owners
    too where the copy keeps them; never times). Returns the number of entries."""
    st = entry.st
    owner = f"{st.st_uid}:{st.st_gid}" if tree.keeps_owner else ""
    h.update(f"{rel}\0{stat.S_IFMT(st.st_mode):o}\0{stat.S_IMODE(st.st_mode):o}\0{owner}\0".encode())
    if entry.is_file:
        with open(entry.host, "rb") as f:
            h.update(hashlib.file_digest(f, "sha256").digest())
        return 1
    if entry.is_link:
        h.update(os.readlink(entry.host).encode(errors="surrogateescape"))
        return 1
    count = 1
    if entry.is_dir:
        for name in tree.listdir(real):
            sub = posixpath.join(real, name)
            _, child = tree.lookup(sub, follow=False)
            if child is not None:
                count += digest(tree, sub, child, h, f"{rel}/{name}")
    return count
