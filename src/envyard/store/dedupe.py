"""Identical files across layers, stored once.

Layers made by snapshots (every `envyard setup` step, build step and sandbox snapshot) are read-only btrfs
subvolumes on the store's sandbox volume (runtime/volume.py). Two projects' environments hold the same pytest,
numpy or torch files, each written by its own install; btrfs can make such files share their extents with
FIDEDUPERANGE, which compares the bytes itself under lock and remaps only ranges that are equal — so a wrong
guess costs a read, never data, and readers (running sandboxes) see the same bytes before and after.

`dedupe(store)` goes over the volume's layers it has not seen yet and indexes every file of at least MIN_SIZE
bytes. One whose size matches a file already indexed is hashed (blake2b; the indexed one too, once) and, when
the hashes agree, deduped against it. The index is `<store>/dedupe.db` (sqlite), and
a file lock keeps two processes from working on it at once. Files stay where they are, with their inodes,
modes and times: only where their bytes live changes. Layers elsewhere (the store's own directory on ext4:
debootstrap bases, pulled layers) are not touched; ext4 cannot share extents.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sqlite3
import stat
import struct
import time
from pathlib import Path

from ..errors import EnvyardError

MIN_SIZE = 16 * 1024  # smaller files: little to gain per file, and btrfs keeps files under 2 KiB inline anyway
_CHUNK = 16 << 20  # btrfs dedupes at most 16 MiB per call
_FIDEDUPERANGE = 0xC0189436  # _IOWR(0x94, 54, struct file_dedupe_range)
_RANGE = struct.Struct("QQHHI")  # src_offset, src_length, dest_count, reserved1, reserved2
_INFO = struct.Struct("qQQiI")  # dest_fd, dest_offset, bytes_deduped, status, reserved
_DIFFERS = 1  # FILE_DEDUPE_RANGE_DIFFERS

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files(path TEXT PRIMARY KEY, size INTEGER NOT NULL, digest TEXT);
CREATE INDEX IF NOT EXISTS files_by_size ON files(size);
CREATE TABLE IF NOT EXISTS layers(id TEXT PRIMARY KEY);
"""


def share(src: str, dst: str, size: int) -> int:
    """Make `dst` share `src`'s extents where their bytes are equal; the bytes now shared (0 when they differ)."""
    s = os.open(src, os.O_RDONLY)
    try:
        d = os.open(dst, os.O_RDONLY)  # enough for root, who owns the store
        try:
            done = 0
            for offset in range(0, size, _CHUNK):
                length = min(_CHUNK, size - offset)
                arg = bytearray(_RANGE.pack(offset, length, 1, 0, 0) + _INFO.pack(d, offset, 0, 0, 0))
                fcntl.ioctl(s, _FIDEDUPERANGE, arg)
                _, _, deduped, status, _ = _INFO.unpack_from(arg, _RANGE.size)
                if status == _DIFFERS:
                    return done  # a hash collision or a file changed under us: nothing wrong was shared
                if status < 0:
                    raise OSError(-status, os.strerror(-status), dst)
                done += deduped
            return done
        finally:
            os.close(d)
    finally:
        os.close(s)


def _digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "blake2b").hexdigest()


def _files(root: Path):
    """(path, stat) of the regular files of at least MIN_SIZE under `root`, symlinks not followed."""
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_size >= MIN_SIZE:
                yield path, st


class _Index:
    """Every file looked at, by size, with its hash once another file of its size came along (so a copy is found
    as long as any layer holding one remains)."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def twin(self, path: str, st: os.stat_result) -> str | None:
        """Index `path`; return an indexed file with the same content (not the same inode), or None."""
        rows = self.db.execute("SELECT path, digest FROM files WHERE size=?", (st.st_size,)).fetchall()
        digest = _digest(path) if rows else None
        found = None
        for other, other_digest in rows:
            try:
                ost = os.lstat(other)
            except OSError:
                ost = None
            if ost is None or ost.st_size != st.st_size or not stat.S_ISREG(ost.st_mode):
                self.db.execute("DELETE FROM files WHERE path=?", (other,))  # its layer is gone
                continue
            if other_digest is None:
                other_digest = _digest(other)
                self.db.execute("UPDATE files SET digest=? WHERE path=?", (other_digest, other))
            if other_digest == digest and (ost.st_dev, ost.st_ino) != (st.st_dev, st.st_ino):
                found = other
                break
        self.db.execute("INSERT OR REPLACE INTO files(path, size, digest) VALUES (?,?,?)", (path, st.st_size, digest))
        return found


def volume_layers(store) -> dict[str, Path]:
    """The store's layers on the sandbox volume: id -> layer directory."""
    prefix = f"{store.volume_layers_dir}/"
    rows = store.db.query("SELECT id, path FROM layers WHERE path LIKE ?", (prefix + "%",))
    return {r["id"]: Path(r["path"]) for r in rows}


def dedupe(store, layer_ids: list[str] | None = None) -> dict:
    """Dedupe the volume's layers not seen before (only those among `layer_ids`, when given) against every
    layer seen so far. Returns what it did: layers, files and bytes shared, seconds. It never fails its caller
    (it only saves space): a file that cannot be read or shared is left as it is, and anything else that goes
    wrong (the volume, the index) ends the run with `error` in the report."""
    t = time.monotonic()
    report = {"layers": 0, "files": 0, "bytes": 0, "seconds": 0.0}
    try:
        _dedupe(store, layer_ids, report)
    except (OSError, sqlite3.Error, EnvyardError) as e:  # e.g. a damaged index: `rm <store>/dedupe.db` resets it
        report["error"] = f"{type(e).__name__}: {e}"
    report["seconds"] = round(time.monotonic() - t, 3)
    return report


def _dedupe(store, layer_ids: list[str] | None, report: dict) -> None:
    layers = volume_layers(store)
    if layer_ids is not None:
        layers = {i: p for i, p in layers.items() if i in set(layer_ids)}
    if not layers:
        return
    store.layer(next(iter(layers)))  # mounts the volume after a reboot
    with open(store.home / "dedupe.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        db = sqlite3.connect(store.home / "dedupe.db", isolation_level=None)
        try:
            db.executescript(_SCHEMA)
            index = _Index(db)
            seen = {r[0] for r in db.execute("SELECT id FROM layers")}
            for layer_id, root in layers.items():
                if layer_id in seen or not root.is_dir():
                    continue
                db.execute("BEGIN")
                for path, st in _files(root):
                    try:
                        twin = index.twin(path, st)
                        shared = share(twin, path, st.st_size) if twin is not None else 0
                    except OSError:  # a layer removed meanwhile, a range the kernel will not take: not shared
                        continue
                    report["files"] += shared > 0
                    report["bytes"] += shared
                db.execute("INSERT OR IGNORE INTO layers(id) VALUES (?)", (layer_id,))
                db.execute("COMMIT")
                report["layers"] += 1
            gone = seen - set(volume_layers(store))
            db.executemany("DELETE FROM layers WHERE id=?", [(i,) for i in gone])
        finally:
            db.close()
