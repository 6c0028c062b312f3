"""Store: directories and database rows for layers, images and sandboxes.

Layout of $ENVYARD_HOME:
    store.db            SQLite (WAL): layers, images, sandboxes (with owner leases)
    layers/<id>/        sealed layer trees, never modified after sealing
    layers/.new-*/      layers being built; the name carries the builder's pid so gc can tell if it died
    sandboxes/<id>/     upper/, work/, ipc/ and spill/ of one sandbox
    trash/              directories being deleted (rename first, delete after: a crash leaves only trash)

Crash safety: a layer directory is renamed into place before its row is written, and gc deletes layer
directories without a row (and `.new-*` directories of dead builders), so every crash point is recoverable.
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
        """Move a built directory into place and record it. After this the layer is immutable."""
        layer_id = uuid.uuid4().hex
        final = self.layers_dir / layer_id
        os.rename(built, final)
        size = dir_size(final)
        now = time.time()
        with self.db.transaction() as c:
            c.execute(
                "INSERT INTO layers(id, path, size, created, origin) VALUES (?,?,?,?,?)",
                (layer_id, str(final), size, now, dumps(origin)),
            )
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
        for layer_id in img.layers:
            if layer_id not in used:
                self.remove_layer(layer_id)
        return img

    def image_size(self, img: Image) -> int:
        return sum(self.layer(i).size for i in img.layers)

    def remove_layer(self, layer_id: str) -> None:
        """Delete one layer that nothing references any more (e.g. a verifier's throwaway view)."""
        rows = self.db.query("SELECT path FROM layers WHERE id=?", (layer_id,))
        with self.db.transaction() as c:
            c.execute("DELETE FROM layers WHERE id=?", (layer_id,))
        if rows and Path(rows[0]["path"]).parent == self.layers_dir:
            self.discard_dir(Path(rows[0]["path"]), background=True)

    def _used_layers(self) -> set[str]:
        used: set[str] = set()
        for r in self.db.query("SELECT layers FROM images UNION ALL SELECT layers FROM sandboxes"):
            used.update(json.loads(r["layers"]))
        return used

    def remove_unused_layers(self, min_age: float = 600.0) -> list[str]:
        """Delete layers no image and no sandbox stands on, sealed more than `min_age` seconds ago (younger
        ones may belong to a snapshot another process is about to name)."""
        used = self._used_layers()
        removed = []
        for r in self.db.query("SELECT id, path, created FROM layers"):
            if r["id"] in used or time.time() - r["created"] < min_age:
                continue
            path = Path(r["path"])
            with self.db.transaction() as c:
                c.execute("DELETE FROM layers WHERE id=?", (r["id"],))
            if path.parent == self.layers_dir:
                self.discard_dir(path)
            removed.append(r["id"])
        return removed

    # ---- sandboxes ----------------------------------------------------------------------------------------

    def add_sandbox(self, rec: SandboxRecord) -> None:
        with self.db.transaction() as c:
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
        stale = []
        for p in self.layers_dir.glob(".new-*"):
            parts = p.name.split("-")
            try:
                pid, start = int(parts[1]), int(parts[2])
            except (IndexError, ValueError):
                stale.append(p)
                continue
            if not procinfo.is_alive(pid, start):
                stale.append(p)
        return stale

    def orphan_layer_dirs(self) -> list[Path]:
        known = {r["path"] for r in self.db.query("SELECT path FROM layers")}
        return [p for p in self.layers_dir.iterdir() if not p.name.startswith(".") and str(p) not in known]


def remove_tree(path: Path) -> None:
    """rm -rf that also copes with read-only dirs and odd files left by sandboxes (we are often root)."""
    if not os.path.lexists(path):
        return
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
        if os.path.lexists(path):  # rm copes with odd modes that shutil gives up on
            subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)
    else:
        os.unlink(path)


def dir_size(path: Path) -> int:
    """Disk usage in bytes (du -s), hard links counted once."""
    try:
        out = subprocess.run(["du", "-s", "-B1", str(path)], capture_output=True, text=True, check=True).stdout
        return int(out.split()[0])
    except (subprocess.CalledProcessError, ValueError, IndexError):
        return 0


def _row_to_image(r) -> Image:
    return Image(r["name"], json.loads(r["layers"]), ImageConfig.from_json(r["config"]), r["created"])


def _row_to_sandbox(r) -> SandboxRecord:
    return SandboxRecord(
        id=r["id"], image=r["image"], layers=json.loads(r["layers"]), dir=Path(r["dir"]), owner_pid=r["owner_pid"],
        owner_start=r["owner_start"], init_pid=r["init_pid"], init_start=r["init_start"],
        cgroups=json.loads(r["cgroups"]), network=r["network"], created=r["created"],
    )
