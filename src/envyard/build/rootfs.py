"""An image's file tree read host-side from its layer directories, as overlayfs would merge them.

The builder reads images without starting a sandbox: to place a COPY (does the destination exist, is it a
directory, which symlinks lie on the way), to read files of another stage (`COPY --from`), to look users up in
/etc/passwd. Layers are taken top first; in each, a 0:0 character device is a whiteout and a directory with the
`overlay.opaque` xattr hides the layers below it. Symlinks resolve inside the image, never on the host: each
name is looked up in the layers' directories one at a time, and only directories are ever descended.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..overlay import is_opaque, is_whiteout
from .errors import BuildError

MAX_LINKS = 40  # as the kernel's ELOOP limit


@dataclass(frozen=True)
class Entry:
    host: Path  # the file in the layer that provides it
    st: os.stat_result  # its lstat

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.st.st_mode)

    @property
    def is_link(self) -> bool:
        return stat.S_ISLNK(self.st.st_mode)

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.st.st_mode)


def split(path: str) -> list[str]:
    return [p for p in path.split("/") if p and p != "."]


class LayerView:
    """The merged tree of `layers` (host directories, top first)."""

    def __init__(self, layers: list[Path]):
        self.layers = list(layers)

    def _step(self, contrib: list[Path], real: list[str], name: str) -> tuple[Entry | None, list[Path]]:
        """Look `name` up in directory `real`, present as a directory in each layer of `contrib`. Returns the
        entry the merge shows and, if it is a directory, the layers whose copies of it merge into it."""
        found: Entry | None = None
        below: list[Path] = []
        for layer in contrib:
            path = layer.joinpath(*real, name)
            try:
                st = os.lstat(path)
            except (FileNotFoundError, NotADirectoryError):
                continue
            if is_whiteout(st):
                break
            if found is None:
                found = Entry(path, st)
                if not stat.S_ISDIR(st.st_mode):
                    break
            elif not stat.S_ISDIR(st.st_mode):
                break
            below.append(layer)
            if is_opaque(path):
                break
        return found, below

    def _dir_layers(self, real: list[str]) -> list[Path]:
        contrib = self.layers
        for i, name in enumerate(real):
            _, contrib = self._step(contrib, real[:i], name)
        return contrib

    def lookup(self, path: str, *, follow: bool = True) -> tuple[str, Entry | None]:
        """(the path with every symlink on the way resolved, the entry there or None). The last name's symlink
        is followed only with `follow`. A missing path comes back as far as it resolved plus the rest."""
        todo = split(path)
        real: list[str] = []
        contrib = self.layers
        entry = self.root()
        links = 0
        while todo:
            name = todo.pop(0)
            if name == "..":
                if real:
                    real.pop()
                    contrib = self._dir_layers(real)
                continue
            entry, below = self._step(contrib, real, name)
            if entry is None or (todo and not entry.is_dir and not entry.is_link):
                return "/" + "/".join([*real, name, *todo]), None
            if entry.is_link and (todo or follow):
                links += 1
                if links > MAX_LINKS:
                    raise BuildError(f"too many levels of symbolic links at {path}",
                                     fix="fix the symlink loop in the image")
                target = os.readlink(entry.host)
                if target.startswith("/"):
                    real, contrib = [], self.layers
                todo = split(target) + todo
                if target.startswith("/") and not todo:
                    entry = self.root()
                continue
            real.append(name)
            contrib = below
        return "/" + "/".join(real), entry

    def root(self) -> Entry | None:
        for layer in self.layers:
            return Entry(layer, os.lstat(layer))
        return None

    def get(self, path: str, *, follow: bool = True) -> Entry | None:
        return self.lookup(path, follow=follow)[1]

    def listdir(self, real_path: str) -> list[str]:
        """Names in a directory (a path already resolved by `lookup`), whiteouts applied."""
        seen: dict[str, bool] = {}
        for layer in self._dir_layers(split(real_path)):
            directory = layer.joinpath(*split(real_path))
            try:
                names = os.listdir(directory)
            except OSError:
                continue
            for name in names:
                if name not in seen:
                    seen[name] = not is_whiteout(os.lstat(directory / name))
        return sorted(name for name, shown in seen.items() if shown)

    def read_text(self, path: str, limit: int = 1 << 20) -> str | None:
        entry = self.get(path)
        if entry is None or not entry.is_file:
            return None
        with open(entry.host, "rb") as f:
            return f.read(limit).decode(errors="replace")


# ---- users ------------------------------------------------------------------------------------------------


def _table(view: LayerView, path: str) -> list[list[str]]:
    text = view.read_text(path) or ""
    return [line.split(":") for line in text.splitlines() if line and not line.startswith("#")]


@dataclass(frozen=True)
class User:
    uid: int
    gid: int
    name: str | None  # None: a numeric user without a passwd entry
    home: str


def resolve_user(view: LayerView, spec: str, *, what: str = "USER", line: int | None = None) -> User:
    """`user[:group]` (names or numbers) as Docker resolves it against the image's /etc/passwd and /etc/group.
    A user without a group gets its primary group; a numeric user with no passwd entry gets group 0."""
    from .errors import DockerfileError

    user, _, group = spec.partition(":")
    passwd = _table(view, "/etc/passwd")
    row = next((r for r in passwd if len(r) >= 7 and (r[0] == user or (user.isdigit() and r[2] == user))), None)
    if row is not None:
        uid, gid, name, home = int(row[2]), int(row[3]), row[0], row[5] or "/"
    elif user.isdigit():
        uid, gid, name, home = int(user), 0, None, "/"
    else:
        raise DockerfileError(f"{what} {spec}: no user {user!r} in the image's /etc/passwd", line=line,
                              fix=f"create it first (RUN useradd {user}) or give a numeric uid")
    if group:
        gid = resolve_group(view, group, what=what, spec=spec, line=line)
    return User(uid, gid, name, home)


def resolve_group(view: LayerView, group: str, *, what: str, spec: str, line: int | None) -> int:
    from .errors import DockerfileError

    if group.isdigit():
        return int(group)
    row = next((r for r in _table(view, "/etc/group") if len(r) >= 3 and r[0] == group), None)
    if row is None:
        raise DockerfileError(f"{what} {spec}: no group {group!r} in the image's /etc/group", line=line,
                              fix=f"create it first (RUN groupadd {group}) or give a numeric gid")
    return int(row[2])


def chown_ids(view: LayerView, spec: str, line: int | None) -> tuple[int, int]:
    """--chown=user[:group]: a user without a group gets the same number as its gid (Docker's rule)."""
    from .errors import DockerfileError

    user, _, group = spec.partition(":")
    if not user:
        raise DockerfileError(f"--chown={spec}: no user", line=line, fix="write --chown=USER[:GROUP]")
    uid = resolve_user(view, user, what="--chown", line=line).uid
    gid = resolve_group(view, group, what="--chown", spec=spec, line=line) if group else uid
    return uid, gid
