"""Store integrity under concurrency and crashes: gc next to busy processes, owners SIGKILLed mid-operation.

Most tests start their own store in a temporary directory and end with a full gc that must leave it empty:
no process naming the store, no sandbox rows or directories, no half-built layers, no mounts. Each failed on
the code before record-then-publish, the host view's use lock and gc's process scan.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import envyard
from envyard.runtime.local import upper_dir_of
from envyard import procinfo
from envyard.gc import collect

pytestmark = pytest.mark.timeout(120)


def _python(home: Path, body: str, *args: str) -> subprocess.Popen:
    """A separate envyard process on the store at `home` (`yard` is open); stdout is a pipe of lines."""
    code = f"import sys, time, envyard\nyard = envyard.Yard({str(home)!r})\n" + textwrap.dedent(body)
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)


def _store_processes(home: Path) -> list[tuple[int, str, str]]:
    """(pid, state, command) of every process whose command line names a path inside the store."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        pid = int(name)
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if pid != os.getpid() and (str(home) + "/").encode() in cmd and state != "Z":
            found.append((pid, state, cmd.replace(b"\0", b" ").decode(errors="replace")))
    return found


def _mounted(home: Path) -> list[str]:
    return [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4].startswith(str(home) + "/")]


def _cgroups_of(sandbox_ids: set[str]) -> list[str]:
    """Cgroup directories of these sandboxes (v1: `envyard-<id>` under any controller; v2: `envyard/<id>`)."""
    found = []
    for top, dirs, _files in os.walk("/sys/fs/cgroup"):
        found += [f"{top}/{d}" for d in dirs if d.removeprefix("envyard-") in sandbox_ids]
    return found


def _wait_until(check, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def _assert_store_empty(yard: envyard.Yard) -> None:
    """After a final gc: nothing of any sandbox or build is left, and the host view is released. The volume
    stays mounted only to hold snapshot layers that images still use."""
    store = yard.store
    assert _store_processes(store.home) == []
    assert store.sandboxes() == []
    assert sorted(p.name for p in store.sandboxes_dir.iterdir()) == []
    assert sorted(p.name for p in store.layers_dir.glob(".new-*")) == []
    assert sorted(p.name for p in store.trash_dir.iterdir()) == []
    volume = [str(store.volume_dir)] if store.has_volume_layers() else []
    assert _mounted(store.home) == volume
    if volume:
        assert sorted(p.name for p in store.volume_layers_dir.glob(".new-*")) == []
        assert store.orphan_layer_dirs() == []


def _final_gc(yard: envyard.Yard) -> dict:
    report = yard.gc()
    _assert_store_empty(yard)
    return report


# ---- gc next to busy processes ----------------------------------------------------------------------------

WORKER = """
    import json
    wid, seconds = sys.argv[1], float(sys.argv[2])
    stats = {"snapshots": 0, "forks": 0, "failures": []}
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
        try:
            with yard.sandbox("host") as sb:
                sb.write_file("/root/mark", f"{wid}-{n}")
                img = sb.snapshot(f"w{wid}/snap:{n}")
            stats["snapshots"] += 1
            kids = yard.fork(img, 2)
            try:
                for k in kids:
                    assert k.read_file("/root/mark") == f"{wid}-{n}".encode(), "fork lost the snapshot's state"
                kids[0].write_file("/root/second", "2")
                kids[0].snapshot(f"w{wid}/deep:{n}")  # an image two layers above host
                stats["snapshots"] += 1
            finally:
                for k in kids:
                    k.close()
            stats["forks"] += 1
        except Exception as e:
            stats["failures"].append(f"{type(e).__name__}: {e}"[:300])
    yard.close()
    print(json.dumps(stats), flush=True)
"""

GC_LOOP = """
    import os
    stop = sys.argv[1]
    runs = 0
    while not os.path.exists(stop):
        yard.gc()
        runs += 1
    print(runs, flush=True)
"""


def test_gc_loop_next_to_snapshotting_processes_loses_nothing(tmp_path):
    """Three processes create, snapshot and fork over `host` while a fourth loops the real gc. Nothing a live
    process made or is about to use may disappear: every image stays usable and no worker sees a failure."""
    home = tmp_path / "home"
    envyard.Yard(home).image("host")  # record the host image once, before the race starts
    stop = tmp_path / "stop-gc"
    gc_proc = _python(home, GC_LOOP, str(stop))
    workers = [_python(home, WORKER, str(i), "12") for i in range(3)]
    try:
        outs = [w.communicate(timeout=90)[0] for w in workers]
    finally:
        stop.touch()
        gc_runs = int(gc_proc.communicate(timeout=60)[0] or 0)
    assert [w.returncode for w in workers] == [0, 0, 0]
    stats = [json.loads(o) for o in outs]
    failures = [f for s in stats for f in s["failures"]]
    assert failures == [], f"{len(failures)} worker failures, e.g. {failures[:3]}"
    assert gc_runs >= 10, "gc did not run often enough to race with the workers"
    assert sum(s["snapshots"] for s in stats) >= 15

    yard = envyard.Yard(home)
    try:
        images = [i for i in yard.images() if i.name.startswith("w")]
        assert len(images) == sum(s["snapshots"] for s in stats)
        lost = [(img.name, lid) for img in images for lid in img.layers
                if not yard.store.layer(lid).path.is_dir()]
        assert lost == [], f"{len(lost)} of {len(images)} images lost a layer"
        unusable = []
        for img in images:
            wid_n = img.name.split("/")[0][1:] + "-" + img.name.rpartition(":")[2]
            with yard.sandbox(img) as sb:
                if sb.read_file("/root/mark") != wid_n.encode():
                    unusable.append(img.name)
        assert unusable == []
        yard.close()
    finally:
        _final_gc(yard)


def test_gc_between_rename_and_record_keeps_the_layer(yard):
    """The window that lost layers: gc runs right after a built layer is renamed into layers/."""
    store = yard.store
    real_rename = os.rename
    ran = []

    def rename_then_gc(src, dst):
        real_rename(src, dst)
        if Path(dst).parent == store.layers_dir and not ran:
            ran.append(collect(store))

    built = store.new_layer_dir()
    (built / "payload").write_text("kept")
    os.rename = rename_then_gc
    try:
        layer = store.seal_layer(built, {"test": "race"})
    finally:
        os.rename = real_rename
    assert ran, "the test did not reach the window it is about"
    assert layer.id not in ran[0]["partial_layers"]
    assert (store.layer(layer.id).path / "payload").read_text() == "kept"
    store.remove_layer(layer.id)
    yard.wait_closed()


def test_gc_never_unmounts_the_host_view_under_a_create_in_flight(tmp_path, monkeypatch):
    """gc runs after the create has its image (and the host view mounted) but before its sandbox row is in."""
    from envyard.store import Store

    y = envyard.Yard(tmp_path / "home")
    try:
        y.image("host")
        collect(y.store)  # nothing uses the view now: it is unmounted...
        assert _mounted(y.store.home) == []
        real_add = Store.add_sandbox
        reports = []

        def gc_first(self, rec):
            reports.append(collect(self))
            real_add(self, rec)

        monkeypatch.setattr(Store, "add_sandbox", gc_first)
        with y.sandbox("host") as sb:  # ...and the create must mount it again and keep it
            assert reports and reports[0]["host_view_unmounted"] is False
            assert sb.exec("echo up").stdout == "up\n"
        monkeypatch.undo()
        y.close()
    finally:
        _final_gc(y)


# ---- crashed builders --------------------------------------------------------------------------------------

SEAL_THEN_HANG = """
    import os
    store = yard.store
    built = store.new_layer_dir()
    (built / "f").write_text("x")
    def hang(src, dst):  # die (when killed) between recording the layer and publishing its directory
        print("recorded", flush=True)
        time.sleep(1000)
    os.rename = hang
    store.seal_layer(built, {})
"""


def test_layer_row_of_a_crashed_builder_is_removed_once_the_builder_is_gone(tmp_path):
    home = tmp_path / "home"
    builder = _python(home, SEAL_THEN_HANG)
    try:
        assert builder.stdout.readline() == "recorded\n"
        yard = envyard.Yard(home)
        rows = yard.store.db.query("SELECT id, path FROM layers")
        assert len(rows) == 1 and not Path(rows[0]["path"]).exists()
        report = collect(yard.store)  # the builder lives: its row and build dir stay
        assert report["unused_layers"] == [] and report["partial_layers"] == []
        assert len(yard.store.db.query("SELECT id FROM layers")) == 1
        assert len(list(yard.store.layers_dir.glob(".new-*"))) == 1
    finally:
        builder.kill()
        builder.wait()
    report = collect(yard.store)
    assert report["unused_layers"] == [rows[0]["id"]]
    assert yard.store.db.query("SELECT id FROM layers") == []
    assert list(yard.store.layers_dir.iterdir()) == []
    _final_gc(yard)


def test_store_of_schema_version_1_is_migrated(tmp_path):
    """A store written before layer rows carried their builder opens, works and is collected as before."""
    home = tmp_path / "home"
    (home / "layers" / "0123abcd").mkdir(parents=True)
    conn = sqlite3.connect(home / "store.db")
    conn.executescript("""
        CREATE TABLE layers (id TEXT PRIMARY KEY, path TEXT NOT NULL, size INTEGER NOT NULL DEFAULT 0,
                             created REAL NOT NULL, origin TEXT NOT NULL DEFAULT '{}');
        CREATE TABLE images (name TEXT PRIMARY KEY, layers TEXT NOT NULL, config TEXT NOT NULL, created REAL NOT NULL);
        CREATE TABLE sandboxes (id TEXT PRIMARY KEY, image TEXT NOT NULL, layers TEXT NOT NULL, dir TEXT NOT NULL,
            owner_pid INTEGER NOT NULL, owner_start INTEGER NOT NULL, init_pid INTEGER, init_start INTEGER,
            cgroups TEXT NOT NULL DEFAULT '[]', network TEXT NOT NULL, created REAL NOT NULL);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '1');
    """)
    conn.execute("INSERT INTO layers VALUES ('0123abcd', ?, 0, 1.0, '{}')", (str(home / "layers" / "0123abcd"),))
    conn.execute("""INSERT INTO images VALUES ('old:v1', '["0123abcd"]', '{}', 1.0)""")
    conn.commit()
    conn.close()
    yard = envyard.Yard(home)
    try:
        assert yard.store.db.query("SELECT value FROM meta WHERE key='schema_version'")[0]["value"] == "3"
        assert yard.store.db.query("SELECT name FROM sqlite_master WHERE name='blobs'")  # added in version 3
        assert yard.image("old:v1").layers == ["0123abcd"]
        assert collect(yard.store)["partial_layers"] == []  # the old layer is neither partial nor an orphan
        assert (home / "layers" / "0123abcd").is_dir()
        with yard.sandbox("host") as sb:
            img = sb.snapshot("new:v1")
        assert yard.store.layer(img.layers[-1]).path.is_dir()
        yard.close()
        envyard.Yard(home).store.db.close()  # a second open of a migrated store changes nothing
    finally:
        yard.gc()


# ---- owners SIGKILLed mid-operation -------------------------------------------------------------------------

FORK_FOREVER = """
    yard.image("host")
    print("go", flush=True)
    kids = yard.fork("host", 40, limits={"pids": 64} if sys.argv[1] == "limits" else None)
    print("forked", flush=True)
    time.sleep(1000)
"""


def test_owner_killed_at_random_points_of_fork_leaves_nothing_after_gc(tmp_path):
    home = tmp_path / "home"
    yard = envyard.Yard(home, reap=False)
    rng = random.Random(os.getpid())
    leaked = []
    try:
        for i in range(6):
            owner = _python(home, FORK_FOREVER, "limits" if i % 2 else "none")  # with cgroups every other time
            assert owner.stdout.readline() == "go\n"
            time.sleep(rng.uniform(0.0, 0.6))
            owner.kill()
            owner.wait()
            ids = {r.id for r in yard.store.sandboxes()}  # each create writes its row first
            collect(yard.store)
            assert _cgroups_of(ids) == [], f"iteration {i}: cgroups left"
            # A bwrap the dead owner had forked but not yet exec'd may start after gc looked; it must end by
            # itself (its holder finds the owner gone), so give it a moment, not a second gc.
            _wait_until(lambda: not _store_processes(home), 1.0)
            left = _store_processes(home)
            leaked += [(i, pid, cmd[:150]) for pid, _state, cmd in left]
            for pid, _state, _cmd in left:  # so that one leak cannot hide the next iteration's
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            assert yard.store.sandboxes() == [], f"iteration {i}: rows left"
            assert list(yard.store.sandboxes_dir.iterdir()) == [], f"iteration {i}: sandbox dirs left"
        assert leaked == [], f"{len(leaked)} processes survived gc: {leaked[:3]}"
    finally:
        _wait_until(lambda: not _store_processes(home), 5)
        _final_gc(yard)


SLOW_SNAPSHOT = """
    yard.backend.disk_limits = False  # the copying snapshot: one on the disk-limit volume copies nothing
    sb = yard.sandbox("host")
    r = sb.exec("mkdir -p /root/many && cd /root/many && seq 1 15000 | sed 's/^/f/' | xargs touch"
                " && (sleep 1000 >/dev/null 2>&1 &)")
    assert r.exit_code == 0, r.stderr
    print(sb.id, flush=True)
    sb.snapshot("crash:snap")
    print("done", flush=True)
"""


def test_owner_killed_mid_snapshot_leaves_no_frozen_sandbox_and_no_copy(tmp_path):
    home = tmp_path / "home"
    yard = envyard.Yard(home, reap=False)
    owner = _python(home, SLOW_SNAPSHOT)
    try:
        sid = owner.stdout.readline().strip()
        rec = yard.store.sandbox(sid)
        ns = procinfo.pid_namespace(rec.init_pid)
        source = f"{upper_dir_of(yard.store, sid)}/."  # what the snapshot's copy reads

        def copying():
            return [pid for pid, _state, cmd in _store_processes(home) if source in cmd]

        assert _wait_until(copying, 30), "the snapshot's copy never started"
        copy = copying()
        states = {pid: Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
                  for pid in procinfo.pids_in_namespace(ns)}
        assert "T" in states.values(), "the sandbox's commands are not frozen during the copy"
        owner.kill()
        owner.wait()
        # The owner is gone: its copy dies with it, and the sandbox takes itself down (stopped processes too).
        copy_gone = _wait_until(lambda: not any(procinfo.is_alive(p, None) for p in copy), 1.0)
        assert copy_gone, "the copy outlived its owner"
        assert _wait_until(lambda: not procinfo.pids_in_namespace(ns), 3.0), (
            "the sandbox outlived its owner: " + str({p: Path(f"/proc/{p}/stat").read_text().split()[2]
                                                      for p in procinfo.pids_in_namespace(ns)}))
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        _wait_until(lambda: not _store_processes(home), 10)
        report = collect(yard.store)
        _assert_store_empty(yard)
    assert report["sandboxes"] == [sid]
    assert len(report["partial_layers"]) == 1  # the copy's unfinished layer
    assert not yard.store.has_image("crash:snap")


def test_opening_a_current_store_does_not_wait_for_a_writer(tmp_path):
    """Every CLI start opens the store: one whose tables are already at this version is opened with reads
    only, so a long write transaction of another process (a big image import) does not hold the start up."""
    from envyard.store.db import SCHEMA_VERSION, Database

    path = tmp_path / "store.db"
    Database(path).close()  # made at this version
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        t = time.monotonic()
        db = Database(path)
        assert time.monotonic() - t < 5  # the writer holds the lock for good: waiting would take 30 s
        assert db.query("SELECT value FROM meta WHERE key='schema_version'")[0]["value"] == str(SCHEMA_VERSION)
        db.close()
    finally:
        writer.execute("ROLLBACK")
        writer.close()
