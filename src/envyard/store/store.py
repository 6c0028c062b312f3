"""Store: directories and database rows for layers, images and sandboxes.

Layout of $ENVYARD_HOME:
    store.db            SQLite (WAL): layers, images, sandboxes (with owner leases)
    layers/<id>/        sealed layer trees, never modified after sealing
    layers/.new-*/      layers being built; the name carries the builder's pid so gc can tell if it died
    downloads/          registry blobs being downloaded (kept after an interruption, so a pull resumes)
    sandboxes/<id>/     upper/, work/, ipc/ and spill/ of one sandbox
    trash/              directories being deleted (rename first, delete after: a crash leaves only trash)

Crash safety (record, then publish): a layer's row is written first, naming its builder (pid + start time),
and only then is its directory renamed into place. gc lists layers/ before it reads the rows, so a directory
it sees without a row is a true orphan (a crash of an older envyard, or a deletion half done), never a layer
being published; a row whose directory never appeared is dropped once its builder is gone; `.new-*`
directories of dead builders are deleted. Sandboxes likewise get their row before their directory.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from pathlib import Path

from ..errors import EnvyardError, ImageNotFound, StoreError
from .. import janitor, procinfo
from ..record import Record
from .db import Database, dumps
from .names import lookup_names, parse_image_name
from .registry import register_store


def default_home() -> Path:
    env = os.environ.get("ENVYARD_HOME")
    if env:
        return Path(env).expanduser().resolve()
    if os.geteuid() == 0:
        return Path("/var/lib/envyard")
    return Path.home() / ".local/share/envyard"


class ImageConfig(Record):
    """entrypoint and cmd: OCI/Docker ENTRYPOINT and CMD, exec form; exposed_ports e.g. ["80/tcp"];
    healthcheck: Docker HEALTHCHECK as recorded in the image config."""

    def __init__(self, env: dict[str, str] | None = None, workdir: str = "/", user: str = "root",
                 shell: str = "/bin/sh", labels: dict[str, str] | None = None, entrypoint: list[str] | None = None,
                 cmd: list[str] | None = None, exposed_ports: list[str] | None = None, healthcheck: dict | None = None,
                 stop_signal: str | None = None, provenance: dict | None = None):
        self.env = {} if env is None else env
        self.workdir = workdir
        self.user = user
        self.shell = shell
        self.labels = {} if labels is None else labels
        self.entrypoint = entrypoint
        self.cmd = cmd
        self.exposed_ports = [] if exposed_ports is None else exposed_ports
        self.healthcheck = healthcheck
        self.stop_signal = stop_signal
        self.provenance = {} if provenance is None else provenance

    @classmethod
    def from_json(cls, text: str) -> "ImageConfig":
        data = json.loads(text)
        return cls(**{k: v for k, v in data.items() if k in cls._fields})


class LayerInfo(Record):
    def __init__(self, id: str, path: Path, size: int, created: float, origin: dict):
        self.id = id
        self.path = path
        self.size = size
        self.created = created
        self.origin = origin


class BlobInfo(Record, frozen=True):
    """A registry blob a layer was unpacked from (or packed into for a push). Layers are found by it, so the
    same blob, or the same content compressed another way (same diff_id), is stored once. digest: sha256:... of
    the blob as a registry serves it; diff_id: sha256:... of the uncompressed tar (the image config's
    rootfs.diff_ids)."""

    def __init__(self, digest: str, diff_id: str, media_type: str, size: int):
        self._set(digest=digest, diff_id=diff_id, media_type=media_type, size=size)


class Image(Record):
    def __init__(self, name: str, layers: list[str], config: ImageConfig, created: float):
        self.name = name
        self.layers = layers
        self.config = config
        self.created = created

    def to_dict(self) -> dict:
        return {"name": self.name, "layers": self.layers, "config": self.config.asdict(), "created": self.created}


class SandboxRecord(Record):
    def __init__(self, id: str, image: str, layers: list[str], dir: Path, owner_pid: int, owner_start: int,
                 init_pid: int | None, init_start: int | None, cgroups: list[str], network: str, created: float):
        self.id = id
        self.image = image
        self.layers = layers
        self.dir = dir
        self.owner_pid = owner_pid
        self.owner_start = owner_start
        self.init_pid = init_pid
        self.init_start = init_start
        self.cgroups = cgroups
        self.network = network
        self.created = created

    def owner_alive(self) -> bool:
        return procinfo.is_alive(self.owner_pid, self.owner_start)

    def to_dict(self) -> dict:
        d = self.asdict()
        d["dir"] = str(self.dir)
        d["owner_alive"] = self.owner_alive()
        return d


class Store:
    def __init__(self, home: Path | str | None = None):
        self.home = Path(home).resolve() if home else default_home()
        self.layers_dir = self.home / "layers"
        self.sandboxes_dir = self.home / "sandboxes"
        self.trash_dir = self.home / "trash"
        self.downloads_dir = self.home / "downloads"
        # Layers made by O(1) snapshots live on the sandbox volume (runtime/volume.py), each a read-only
        # btrfs subvolume <id> whose `upper` directory is the layer.
        self.volume_dir = self.home / "volume"
        self.volume_layers_dir = self.volume_dir / "layers"
        try:
            for d in (self.home, self.layers_dir, self.sandboxes_dir, self.trash_dir, self.downloads_dir):
                d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the store at {self.home}: {e.strerror}", fix="set ENVYARD_HOME to a writable directory") from e
        self.db = Database(self.home / "store.db")
        register_store(self.home)  # so that every store's `host` image hides this one

    # ---- layers -------------------------------------------------------------------------------------------

    def new_layer_dir(self) -> Path:
        """A fresh directory to build a layer in; seal it with `seal_layer`."""
        path = self.layers_dir / self.new_layer_name()
        path.mkdir()
        return path

    @staticmethod
    def new_layer_name() -> str:
        """The name of a layer being built: it names the builder, so gc can tell an abandoned one."""
        return f".new-{os.getpid()}-{procinfo.start_time(os.getpid())}-{os.urandom(6).hex()}"

    def owns_layer_dir(self, path: Path) -> bool:
        """Whether a layer's directory is the store's own (not the host's root or an external path)."""
        return Path(path).parent == self.layers_dir or self.volume_layer_root(path) is not None

    def volume_layer_root(self, path: Path) -> Path | None:
        """The subvolume of a layer on the sandbox volume that `path` (the subvolume or its `upper`) names."""
        path = Path(path)
        for candidate in (path, path.parent):
            if candidate.parent == self.volume_layers_dir:
                return candidate
        return None

    def seal_layer(self, built: Path, origin: dict, *, blob: BlobInfo | None = None) -> LayerInfo:
        """Record a built directory as a layer, then move it into place. After this the layer is immutable.

        The row comes first and names this process as the builder, so gc can never take the published
        directory for an orphan; if we die before the rename, gc drops the row once it sees us gone.

        With `blob`, the layer is also found by that blob's digest and diff_id from now on. If another process
        published a layer for the same blob meanwhile, that one is returned and `built` is discarded."""
        layer_id = os.urandom(16).hex()
        snapshot = self.volume_layer_root(built) if built.name == "upper" else None
        if snapshot is not None:  # a btrfs snapshot (volume.py): published as it is, in O(1)
            source, final = snapshot, self.volume_layers_dir / layer_id / "upper"
            size = 0  # measured in the background: walking the tree here would undo the O(1) snapshot
        else:
            final = self.layers_dir / layer_id
            source, size = built, dir_size(built)
        now = time.time()
        me = os.getpid()
        with self.db.transaction() as c:
            if blob is not None:
                existing = _published_layer(c, "digest", blob.digest)
                if existing is not None:
                    self.discard_dir(built, background=True)
                    return existing
            c.execute(
                "INSERT INTO layers(id, path, size, created, origin, builder_pid, builder_start)"
                " VALUES (?,?,?,?,?,?,?)",
                (layer_id, str(final), size, now, dumps(origin), me, procinfo.start_time(me)),
            )
            if blob is not None:
                _insert_blob(c, layer_id, blob)
        try:
            os.rename(source, final if snapshot is None else final.parent)
        except BaseException:
            with self.db.transaction() as c:
                c.execute("DELETE FROM blobs WHERE layer_id=?", (layer_id,))
                c.execute("DELETE FROM layers WHERE id=?", (layer_id,))
            raise
        if snapshot is not None:
            from ..runtime.volume import set_readonly

            set_readonly(final.parent)
            janitor.later(lambda: self._record_size(layer_id, final))
        return LayerInfo(layer_id, final, size, now, origin)

    def _record_size(self, layer_id: str, path: Path) -> None:
        size = dir_size(path)
        with self.db.transaction() as c:
            c.execute("UPDATE layers SET size=? WHERE id=?", (size, layer_id))

    def layer_for_blob(self, *, digest: str | None = None, diff_id: str | None = None) -> LayerInfo | None:
        """A published layer unpacked from blob `digest`, or else from any blob of uncompressed digest
        `diff_id` (the same tar compressed another way); None if there is none."""
        with self.db.transaction() as c:
            for column, value in (("digest", digest), ("diff_id", diff_id)):
                found = _published_layer(c, column, value) if value else None
                if found is not None:
                    return found
        return None

    def record_blob(self, layer_id: str, blob: BlobInfo) -> None:
        """Remember that `blob` holds layer `layer_id` (after a push packed it), unless the layer is gone."""
        with self.db.transaction() as c:
            if not _missing_layers(c, [layer_id]):
                _insert_blob(c, layer_id, blob)

    def blobs_of(self, layer_id: str) -> list[BlobInfo]:
        rows = self.db.query("SELECT * FROM blobs WHERE layer_id=? ORDER BY digest", (layer_id,))
        return [BlobInfo(r["digest"], r["diff_id"], r["media_type"], r["size"]) for r in rows]

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
        path = Path(r["path"])
        if path.parent.parent == self.volume_layers_dir and not os.path.ismount(self.volume_dir):
            self._mount_volume()  # after a reboot, or an unmount by hand: the layer is on the volume
        return LayerInfo(r["id"], path, r["size"], r["created"], json.loads(r["origin"]))

    def _mount_volume(self) -> None:
        from ..runtime.volume import SandboxVolume

        try:
            with SandboxVolume(self.home) as volume:
                volume.ensure()
        except EnvyardError as e:
            raise StoreError(f"the store's layers on {self.volume_dir} are unavailable: {e.message}",
                             fix=e.fix or "check that the volume can be mounted (root, loop devices, btrfs)") from e

    def has_volume_layers(self) -> bool:
        rows = self.db.query("SELECT 1 FROM layers WHERE path LIKE ? LIMIT 1", (f"{self.volume_layers_dir}/%",))
        return bool(rows)

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
                (name, dumps(layers), dumps(config.asdict()), now),
            )
        return Image(name, layers, config, now)

    def image(self, ref: str) -> Image:
        """The image named `ref`; a short name also finds a pulled image's full name (`python:3.12-slim` →
        `docker.io/library/python:3.12-slim`) when no image has the short name itself."""
        names = lookup_names(ref)
        for name in names:
            rows = self.db.query("SELECT * FROM images WHERE name=?", (name,))
            if rows:
                return _row_to_image(rows[0])
        raise ImageNotFound(
            f"no image named {names[0]}",
            fix="list images with `envyard images`; make one with `envyard base pull debian:bookworm`, pull one "
                "with `envyard pull REF`, or use `host`",
        )

    def has_image(self, ref: str, *, exact: bool = False) -> bool:
        """Whether `image(ref)` finds an image; with `exact`, whether one has exactly this name."""
        names = [parse_image_name(ref)] if exact else lookup_names(ref)
        return any(self.db.query("SELECT 1 FROM images WHERE name=?", (name,)) for name in names)

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
            c.execute("DELETE FROM blobs WHERE layer_id=?", (layer_id,))
            path = Path(row["path"])
            if self.owns_layer_dir(path):
                paths.append(self.volume_layer_root(path) or path)
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
        snapshot = self.volume_layer_root(path)
        if snapshot is not None:  # a layer's btrfs subvolume: deleted at once, blocks freed by btrfs later
            from ..runtime.volume import destroy_subvolume

            destroy_subvolume(snapshot)
            return
        target = self.trash_dir / f"{path.name}-{os.urandom(4).hex()}"
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

    def remove_stale_downloads(self) -> list[str]:
        """Delete the files in downloads/ no process holds locked (a pull resuming a blob, a push or save packing
        one holds its file's lock while it works); returns their names."""
        removed = []
        for path in self.downloads_dir.iterdir():
            try:
                with open(path, "rb") as f:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    path.unlink()  # under the lock: a pull waiting for it then opens a new file
                    removed.append(path.name)
            except (BlockingIOError, FileNotFoundError, IsADirectoryError):
                continue
        return removed

    def stale_new_layers(self) -> list[Path]:
        """`.new-*` layer build dirs whose builder process is gone."""
        dirs = [*self.layers_dir.glob(".new-*"), *self._volume_layer_dirs(".new-*")]
        return [p for p in dirs if not build_dir_builder_alive(p.name)]

    def _volume_layer_dirs(self, pattern: str) -> list[Path]:
        """Entries of the volume's layer directory (none while the volume is not mounted)."""
        if not os.path.ismount(self.volume_dir):
            return []
        return list(self.volume_layers_dir.glob(pattern))

    def orphan_layer_dirs(self) -> list[Path]:
        """Layer directories without a row. The directories are listed before the rows are read: a layer's
        row is committed before its directory is renamed into place, so a directory seen here has its row
        visible by the time we read them, unless it really has none."""
        dirs = [p for p in self.layers_dir.iterdir() if not p.name.startswith(".")]
        snapshots = [p for p in self._volume_layer_dirs("*") if not p.name.startswith(".")]
        known = {r["path"] for r in self.db.query("SELECT path FROM layers")}
        return [p for p in dirs if str(p) not in known] + [p for p in snapshots if f"{p}/upper" not in known]


def build_dir_builder_alive(name: str) -> bool:
    """Whether the process that made layer build dir `name` (`.new-<pid>-<start>-<rand>`) still runs."""
    parts = name.split("-")
    try:
        return procinfo.is_alive(int(parts[1]), int(parts[2]))
    except (IndexError, ValueError):
        return False


def _remove_flat_dir(path: Path) -> bool:
    """Remove a directory whose subdirectories are empty (a closed sandbox's: `ipc/`, `spill/`); False, with
    whatever could not go left in place, when it holds more. Symbolic links are removed, never followed."""
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    os.rmdir(entry.path)
                else:
                    os.unlink(entry.path)
        os.rmdir(path)
        return True
    except OSError:
        return False


def remove_tree(path: Path) -> None:
    """rm -rf that also copes with read-only dirs and odd files left by sandboxes (we are often root)."""
    if not os.path.lexists(path):
        return
    if path.is_dir() and not path.is_symlink():
        if _remove_flat_dir(path):
            return
        import shutil  # here, not at the top: it costs 1.3 ms (zlib, bz2, lzma), and a sandbox's dir needs none

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


def _published_layer(c, column: str, value: str) -> LayerInfo | None:
    """The layer a blob row with `column` = `value` names, if its directory is in place (read inside the
    caller's transaction). A layer whose builder has not renamed it in yet does not count: it may never be."""
    rows = c.execute(
        f"SELECT l.* FROM blobs b JOIN layers l ON l.id = b.layer_id WHERE b.{column}=? ORDER BY l.created",
        (value,),
    ).fetchall()
    for r in rows:
        if Path(r["path"]).is_dir():
            return LayerInfo(r["id"], Path(r["path"]), r["size"], r["created"], json.loads(r["origin"]))
    return None


def _insert_blob(c, layer_id: str, blob: BlobInfo) -> None:
    c.execute("INSERT OR REPLACE INTO blobs(digest, layer_id, diff_id, media_type, size) VALUES (?,?,?,?,?)",
              (blob.digest, layer_id, blob.diff_id, blob.media_type, blob.size))


def _row_to_image(r) -> Image:
    return Image(r["name"], json.loads(r["layers"]), ImageConfig.from_json(r["config"]), r["created"])


def _row_to_sandbox(r) -> SandboxRecord:
    return SandboxRecord(
        id=r["id"], image=r["image"], layers=json.loads(r["layers"]), dir=Path(r["dir"]), owner_pid=r["owner_pid"],
        owner_start=r["owner_start"], init_pid=r["init_pid"], init_start=r["init_start"],
        cgroups=json.loads(r["cgroups"]), network=r["network"], created=r["created"],
    )
