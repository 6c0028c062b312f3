"""Store: directories and database rows for layers, images and sandboxes.

Layout of $ENVYARD_HOME:
    store.db            SQLite (WAL): layers, images, sandboxes (with owner leases)
    layers/<id>/        sealed layer trees, never modified after sealing
    layers/.new-*/      layers being built; the name carries the builder's pid so gc can tell if it died
    sandboxes/<id>/     upper/, work/, ipc/ and spill/ of one sandbox
    trash/              directories being deleted (rename first, delete after: a crash leaves only trash)

Crash safety (record, then publish): a layer's row is written first, naming its builder (pid + start time),
and only then is its directory renamed into place. gc lists layers/ before it reads the rows, so a directory
it sees without a row is a true orphan (a crash of an older envyard, or a deletion half done), never a layer
being published; a row whose directory never appeared is dropped once its builder is gone; `.new-*`
directories of dead builders are deleted. Sandboxes likewise get their row before their directory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import BadInput, ImageNotFound, StoreError
from .. import janitor, procinfo
from .db import Database, dumps
from .registry import register_store

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._/-]{0,127}$")
TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def default_home() -> Path:
    env = os.environ.get("ENVYARD_HOME")
    if env:
        return Path(env).expanduser().resolve()
    if os.geteuid() == 0:
        return Path("/var/lib/envyard")
    return Path.home() / ".local/share/envyard"


def parse_image_name(ref: str) -> str:
    """Normalise `name[:tag]` to `name:tag` (default tag `latest`), or raise BadInput."""
    name, sep, tag = ref.rpartition(":") if ":" in ref else (ref, "", "latest")
    if not sep:
        name, tag = ref, "latest"
    if not NAME_RE.match(name) or not TAG_RE.match(tag):
        raise BadInput(
            f"invalid image name {ref!r}",
            fix="use lowercase letters, digits, '.', '_', '-', '/' and an optional ':tag', e.g. myenv:v1",
        )
    return f"{name}:{tag}"


@dataclass
class ImageConfig:
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    user: str = "root"
    shell: str = "/bin/sh"
    labels: dict[str, str] = field(default_factory=dict)
    entrypoint: list[str] | None = None  # OCI/Docker ENTRYPOINT, exec form
    cmd: list[str] | None = None  # OCI/Docker CMD, exec form
    exposed_ports: list[str] = field(default_factory=list)  # e.g. ["80/tcp"]
    healthcheck: dict | None = None  # Docker HEALTHCHECK as recorded in the image config
    stop_signal: str | None = None
    provenance: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, text: str) -> "ImageConfig":
        data = json.loads(text)
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class LayerInfo:
    id: str
    path: Path
    size: int
    created: float
    origin: dict


@dataclass
class Image:
    name: str
    layers: list[str]
    config: ImageConfig
    created: float

    def to_dict(self) -> dict:
        return {"name": self.name, "layers": self.layers, "config": asdict(self.config), "created": self.created}


@dataclass
class SandboxRecord:
    id: str
    image: str
    layers: list[str]
    dir: Path
    owner_pid: int
    owner_start: int
    init_pid: int | None
    init_start: int | None
    cgroups: list[str]
    network: str
    created: float

    def owner_alive(self) -> bool:
        return procinfo.is_alive(self.owner_pid, self.owner_start)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["dir"] = str(self.dir)
        d["owner_alive"] = self.owner_alive()
        return d


class Store:
    def __init__(self, home: Path | str | None = None):
        self.home = Path(home).resolve() if home else default_home()
        self.layers_dir = self.home / "layers"
        self.sandboxes_dir = self.home / "sandboxes"
        self.trash_dir = self.home / "trash"
        try:
            for d in (self.home, self.layers_dir, self.sandboxes_dir, self.trash_dir):
                d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the store at {self.home}: {e.strerror}", fix="set ENVYARD_HOME to a writable directory") from e
        self.db = Database(self.home / "store.db")
        register_store(self.home)  # so that every store's `host` image hides this one

    # ---- layers -------------------------------------------------------------------------------------------

    def new_layer_dir(self) -> Path:
        """A fresh directory to build a layer in; seal it with `seal_layer`."""
        path = self.layers_dir / f".new-{os.getpid()}-{procinfo.start_time(os.getpid())}-{uuid.uuid4().hex[:12]}"
        path.mkdir()
        return path

    def seal_layer(self, built: Path, origin: dict) -> LayerInfo:
        """Record a built directory as a layer, then move it into place. After this the layer is immutable.

        The row comes first and names this process as the builder, so gc can never take the published
        directory for an orphan; if we die before the rename, gc drops the row once it sees us gone."""
        layer_id = uuid.uuid4().hex
        final = self.layers_dir / layer_id
        size = dir_size(built)
        now = time.time()
        me = os.getpid()
        with self.db.transaction() as c:
            c.execute(
                "INSERT INTO layers(id, path, size, created, origin, builder_pid, builder_start)"
                " VALUES (?,?,?,?,?,?,?)",
                (layer_id, str(final), size, now, dumps(origin), me, procinfo.start_time(me)),
            )
        try:
            os.rename(built, final)
        except BaseException:
            with self.db.transaction() as c:
                c.execute("DELETE FROM layers WHERE id=?", (layer_id,))
            raise
        return LayerInfo(layer_id, final, size, now, origin)

    def add_external_layer(self, layer_id: str, path: Path, origin: dict) -> LayerInfo:
        """Record a directory the store does not own (the host's root) as a layer."""
        now = time.time()
        with self.db.transaction() as c:
            c.execute(
                "INSERT OR REPLACE INTO layers(id, path, size, created, origin) VALUES (?,?,?,?,?)",
                (layer_id, str(path), 0, now, dumps(origin)),
            )
        return LayerInfo(layer_id, path, 0, now, origin)

    def layer(self, layer_id: str) -> LayerInfo:
        rows = self.db.query("SELECT * FROM layers WHERE id=?", (layer_id,))
        if not rows:
            raise StoreError(f"layer {layer_id} is missing from the store", fix="run `envyard gc` and rebuild the image")
        r = rows[0]
        return LayerInfo(r["id"], Path(r["path"]), r["size"], r["created"], json.loads(r["origin"]))

    def layer_paths(self, layer_ids: list[str]) -> list[Path]:
        return [self.layer(i).path for i in layer_ids]

    # ---- images -------------------------------------------------------------------------------------------

    def put_image(self, name: str, layers: list[str], config: ImageConfig) -> Image:
        name = parse_image_name(name)
        now = time.time()
        with self.db.transaction() as c:
            missing = _missing_layers(c, layers)
            if missing:
                raise StoreError(
                    f"cannot record image {name}: its layers {', '.join(missing)} were removed meanwhile",
                    fix="rebuild the image it was made from (see `envyard images`), then try again",
                )
            c.execute(
                "INSERT OR REPLACE INTO images(name, layers, config, created) VALUES (?,?,?,?)",
                (name, dumps(layers), dumps(asdict(config)), now),
            )
        return Image(name, layers, config, now)

    def image(self, ref: str) -> Image:
        name = parse_image_name(ref)
        rows = self.db.query("SELECT * FROM images WHERE name=?", (name,))
        if not rows:
            raise ImageNotFound(
                f"no image named {name}",
                fix="list images with `envyard images`; make one with `envyard base pull debian:bookworm` or use `host`",
            )
        return _row_to_image(rows[0])

    def has_image(self, ref: str) -> bool:
        return bool(self.db.query("SELECT 1 FROM images WHERE name=?", (parse_image_name(ref),)))

    def images(self) -> list[Image]:
        return [_row_to_image(r) for r in self.db.query("SELECT * FROM images ORDER BY name")]

    def remove_image(self, ref: str) -> Image:
        img = self.image(ref)
        with self.db.transaction() as c:
            c.execute("DELETE FROM images WHERE name=?", (img.name,))
            used = self._used_layers()
            paths = self._drop_layer_rows(c, [i for i in dict.fromkeys(img.layers) if i not in used])
        for path in paths:
            self.discard_dir(path, background=True)
        return img

    def image_size(self, img: Image) -> int:
        return sum(self.layer(i).size for i in img.layers)

    def remove_layer(self, layer_id: str) -> None:
        """Delete one layer that nothing references any more (e.g. a verifier's throwaway view)."""
        with self.db.transaction() as c:
            paths = self._drop_layer_rows(c, [layer_id])
        for path in paths:
            self.discard_dir(path, background=True)

    def _drop_layer_rows(self, c, layer_ids: list[str]) -> list[Path]:
        """Delete layer rows inside transaction `c`; return the directories of those the store owns (the
        caller deletes them after the commit)."""
        paths = []
        for layer_id in layer_ids:
            row = c.execute("SELECT path FROM layers WHERE id=?", (layer_id,)).fetchone()
            if row is None:
                continue
            c.execute("DELETE FROM layers WHERE id=?", (layer_id,))
            if Path(row["path"]).parent == self.layers_dir:
                paths.append(Path(row["path"]))
        return paths

    def _used_layers(self) -> set[str]:
        used: set[str] = set()
        for r in self.db.query("SELECT layers FROM images UNION ALL SELECT layers FROM sandboxes"):
            used.update(json.loads(r["layers"]))
        return used

    def remove_unused_layers(self, min_age: float = 600.0) -> list[str]:
        """Delete layers no image and no sandbox stands on, once nobody can be about to name them: right away
        when the builder died before publishing the directory; otherwise when the builder is gone (or was
        never recorded, in an older store) and the layer was sealed more than `min_age` seconds ago.

        Rows are checked and deleted in one transaction, and add_sandbox/put_image check their layers in
        theirs, so a sandbox or image recorded meanwhile either keeps a layer alive or fails cleanly."""
        now = time.time()
        with self.db.transaction() as c:
            used = self._used_layers()
            doomed = []
            for r in c.execute("SELECT id, path, created, builder_pid, builder_start FROM layers").fetchall():
                if r["id"] in used:
                    continue
                # Builder first, directory second: once the builder is dead, the directory can no longer appear.
                if procinfo.is_alive(r["builder_pid"], r["builder_start"]):
                    continue
                crashed = r["builder_pid"] is not None and not Path(r["path"]).exists()
                if crashed or now - r["created"] >= min_age:
                    doomed.append(r["id"])
            paths = self._drop_layer_rows(c, doomed)
        for path in paths:
            self.discard_dir(path)
        return doomed

    # ---- sandboxes ----------------------------------------------------------------------------------------

    def add_sandbox(self, rec: SandboxRecord) -> None:
        """Record a sandbox's lease. Fails if one of its layers was removed since its image was read (a
        concurrent `rmi` and gc): once this row is in, gc keeps every layer it names."""
        with self.db.transaction() as c:
            missing = _missing_layers(c, rec.layers)
            if missing:
                raise ImageNotFound(
                    f"image {rec.image} was removed while a sandbox was being created over it"
                    f" (layers {', '.join(missing)} are gone)",
                    fix="list images with `envyard images` and use one that exists",
                )
            c.execute(
                "INSERT INTO sandboxes(id, image, layers, dir, owner_pid, owner_start, init_pid, init_start,"
                " cgroups, network, created) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (rec.id, rec.image, dumps(rec.layers), str(rec.dir), rec.owner_pid, rec.owner_start, rec.init_pid,
                 rec.init_start, dumps(rec.cgroups), rec.network, rec.created),
            )

    def update_sandbox(self, sandbox_id: str, **fields) -> None:
        cols = ", ".join(f"{k}=?" for k in fields)
        vals = [dumps(v) if isinstance(v, list) else v for v in fields.values()]
        with self.db.transaction() as c:
            c.execute(f"UPDATE sandboxes SET {cols} WHERE id=?", (*vals, sandbox_id))

    def remove_sandbox(self, sandbox_id: str) -> None:
        with self.db.transaction() as c:
            c.execute("DELETE FROM sandboxes WHERE id=?", (sandbox_id,))

    def sandboxes(self) -> list[SandboxRecord]:
        return [_row_to_sandbox(r) for r in self.db.query("SELECT * FROM sandboxes ORDER BY created")]

    def sandbox(self, sandbox_id: str) -> SandboxRecord | None:
        rows = self.db.query("SELECT * FROM sandboxes WHERE id=?", (sandbox_id,))
        return _row_to_sandbox(rows[0]) if rows else None

    # ---- deletion -----------------------------------------------------------------------------------------

    def discard_dir(self, path: Path, *, background: bool = False) -> None:
        """Delete a directory tree: rename into trash first so a crash never leaves a half-deleted live path.
        With `background`, the deletion runs on a janitor thread (what is left at exit, gc empties)."""
        if not path.exists():
            return
        target = self.trash_dir / f"{path.name}-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(path, target)
        except OSError:
            target = path
        if background:
            janitor.later(lambda: remove_tree(target))
        else:
            remove_tree(target)

    def empty_trash(self) -> int:
        n = 0
        for p in self.trash_dir.iterdir():
            remove_tree(p)
            n += 1
        return n

    def stale_new_layers(self) -> list[Path]:
        """`.new-*` layer build dirs whose builder process is gone."""
        return [p for p in self.layers_dir.glob(".new-*") if not build_dir_builder_alive(p.name)]

    def orphan_layer_dirs(self) -> list[Path]:
        """Layer directories without a row. The directories are listed before the rows are read: a layer's
        row is committed before its directory is renamed into place, so a directory seen here has its row
        visible by the time we read them, unless it really has none."""
        dirs = [p for p in self.layers_dir.iterdir() if not p.name.startswith(".")]
        known = {r["path"] for r in self.db.query("SELECT path FROM layers")}
        return [p for p in dirs if str(p) not in known]


def build_dir_builder_alive(name: str) -> bool:
    """Whether the process that made layer build dir `name` (`.new-<pid>-<start>-<rand>`) still runs."""
    parts = name.split("-")
    try:
        return procinfo.is_alive(int(parts[1]), int(parts[2]))
    except (IndexError, ValueError):
        return False


def remove_tree(path: Path) -> None:
    """rm -rf that also copes with read-only dirs and odd files left by sandboxes (we are often root)."""
    if not os.path.lexists(path):
        return
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
        if os.path.lexists(path):  # rm copes with odd modes that shutil gives up on
            subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:  # another process emptying the trash got there first
            pass


def dir_size(path: Path) -> int:
    """Disk usage in bytes (du -s), hard links counted once."""
    try:
        out = subprocess.run(["du", "-s", "-B1", str(path)], capture_output=True, text=True, check=True).stdout
        return int(out.split()[0])
    except (subprocess.CalledProcessError, ValueError, IndexError):
        return 0


def _missing_layers(c, layer_ids: list[str]) -> list[str]:
    """Which of `layer_ids` have no row (read inside the caller's transaction)."""
    if not layer_ids:
        return []
    marks = ",".join("?" * len(layer_ids))
    have = {r["id"] for r in c.execute(f"SELECT id FROM layers WHERE id IN ({marks})", tuple(layer_ids))}
    return [i for i in dict.fromkeys(layer_ids) if i not in have]


def _row_to_image(r) -> Image:
    return Image(r["name"], json.loads(r["layers"]), ImageConfig.from_json(r["config"]), r["created"])


def _row_to_sandbox(r) -> SandboxRecord:
    return SandboxRecord(
        id=r["id"], image=r["image"], layers=json.loads(r["layers"]), dir=Path(r["dir"]), owner_pid=r["owner_pid"],
        owner_start=r["owner_start"], init_pid=r["init_pid"], init_start=r["init_start"],
        cgroups=json.loads(r["cgroups"]), network=r["network"], created=r["created"],
    )
