"""The store's SQLite database: images, layers, sandboxes and their leases.

One connection per Store object, guarded by a lock so threads can share it. WAL mode and a busy timeout let
several envyard processes use the same store at once; every write is a short IMMEDIATE transaction.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

from ..errors import StoreError

SCHEMA_VERSION = 3  # 2: layers carry their builder (pid + start time) while they are being sealed
#                     3: blobs (registry blob digest → layer), so pulled layers are stored once

SCHEMA = """
CREATE TABLE IF NOT EXISTS layers (
    id       TEXT PRIMARY KEY,
    path     TEXT NOT NULL,          -- absolute directory (outside the store for the host's root)
    size     INTEGER NOT NULL DEFAULT 0,
    created  REAL NOT NULL,
    origin   TEXT NOT NULL DEFAULT '{}',  -- JSON: what produced this layer
    builder_pid    INTEGER,          -- the process that recorded the layer before publishing its directory
    builder_start  INTEGER           -- (with its start time): while it lives, a missing directory is not a crash
);
CREATE TABLE IF NOT EXISTS images (
    name     TEXT PRIMARY KEY,       -- always name:tag
    layers   TEXT NOT NULL,          -- JSON list of layer ids, bottom first
    config   TEXT NOT NULL,          -- JSON ImageConfig
    created  REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sandboxes (
    id           TEXT PRIMARY KEY,
    image        TEXT NOT NULL,
    layers       TEXT NOT NULL,      -- JSON list of layer ids it stands on (keeps them alive)
    dir          TEXT NOT NULL,
    owner_pid    INTEGER NOT NULL,
    owner_start  INTEGER NOT NULL,   -- owner's start time in clock ticks: guards against pid reuse
    init_pid     INTEGER,            -- host pid of the sandbox's pid-1
    init_start   INTEGER,
    cgroups      TEXT NOT NULL DEFAULT '[]',
    network      TEXT NOT NULL,
    created      REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS blobs (
    digest      TEXT PRIMARY KEY,    -- sha256:... of a registry blob (compressed, as served)
    layer_id    TEXT NOT NULL,       -- the layer unpacked from it (rows go with their layer)
    diff_id     TEXT NOT NULL,       -- sha256:... of the uncompressed tar
    media_type  TEXT NOT NULL,
    size        INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS blobs_by_layer ON blobs(layer_id);
CREATE INDEX IF NOT EXISTS blobs_by_diff_id ON blobs(diff_id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class Database:
    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.RLock()
        try:
            self._conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
            # Closed when this object goes, or else at exit: a connection is part of a reference cycle (its
            # statement cache), and `envyard run` exits without collecting cycles (cli/entry.py). Closing
            # checkpoints the WAL and removes its files.
            self._close = weakref.finalize(self, self._conn.close)
            self._conn.row_factory = sqlite3.Row
            self._initialise()
        except sqlite3.DatabaseError as e:
            raise StoreError(
                f"cannot open the store database {path}: {e}",
                fix="check ENVYARD_HOME points at an envyard store, or move the broken file aside",
            ) from e

    def _initialise(self) -> None:
        """WAL mode and the schema. Switching a new database to WAL needs it to itself and SQLite answers
        "locked" at once, without waiting, when several processes open a new store together: retry a while."""
        deadline = time.monotonic() + 30
        while True:
            try:
                self._conn.execute("PRAGMA busy_timeout=30000")
                if self._conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                if self._schema_version() == SCHEMA_VERSION:
                    return  # made and migrated by an earlier open: no write transaction on every start
                with self.transaction() as c:
                    for stmt in SCHEMA.split(";\n"):
                        if stmt.strip():
                            c.execute(stmt)
                    c.execute(
                        "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                    )
                    _migrate(c)
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e) or time.monotonic() > deadline:
                    raise
                import random  # only on contention

                time.sleep(random.uniform(0.005, 0.05))

    def _schema_version(self) -> int | None:
        """The version the store's tables are at; None for a new (or not yet complete) database."""
        try:
            row = self._conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return None
            raise
        return int(row[0]) if row and str(row[0]).isdigit() else None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """An IMMEDIATE transaction: takes the write lock up front so concurrent writers queue, not deadlock."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")

    def query(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def close(self) -> None:
        with self._lock:
            self._close()


# Columns added since version 1, per table. CREATE TABLE IF NOT EXISTS leaves an older table as it was (and
# creates the tables added since: blobs in version 3).
ADDED_COLUMNS = {"layers": (("builder_pid", "INTEGER"), ("builder_start", "INTEGER"))}


def _migrate(c: sqlite3.Connection) -> None:
    """Bring a store written by an older envyard up to SCHEMA_VERSION (inside the schema transaction, so
    several processes opening the same old store migrate it once)."""
    for table, columns in ADDED_COLUMNS.items():
        have = {r["name"] for r in c.execute(f"PRAGMA table_info({table})")}
        for name, kind in columns:
            if name not in have:
                c.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
    c.execute("UPDATE meta SET value=? WHERE key='schema_version' AND CAST(value AS INTEGER) < ?",
              (str(SCHEMA_VERSION), SCHEMA_VERSION))


def dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True)
