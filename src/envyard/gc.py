"""Garbage collection: reclaim what crashed owners left behind, and layers nothing uses.

Every sandbox has a lease row naming its owner process (pid + start time). A sandbox whose owner is gone is
dead by definition: its pid namespace is killed (pid-1 verified by start time, so a reused pid is never hit),
its cgroups removed and its directory deleted. Mounts need no cleanup: they live only in the sandbox's own
mount namespace and vanish with it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from . import janitor, procinfo
from .runtime.cgroups import Cgroups
from .bases.host import release_host_root_view
from .store import SandboxRecord, Store


def kill_sandbox(rec: SandboxRecord) -> None:
    if procinfo.is_alive(rec.init_pid, rec.init_start):
        try:
            os.kill(rec.init_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 5
        while procinfo.is_alive(rec.init_pid, rec.init_start) and time.monotonic() < deadline:
            time.sleep(0.005)


def reclaim(store: Store, rec: SandboxRecord) -> None:
    """Kill a sandbox's processes and delete everything it owns (any owner; used by gc and `envyard rm`)."""
    kill_sandbox(rec)
    Cgroups.remove(rec.cgroups)
    store.discard_dir(rec.dir)
    store.remove_sandbox(rec.id)


def reap_dead_sandboxes(store: Store) -> list[str]:
    """Reclaim sandboxes whose owner process has died. Cheap when there is nothing to do."""
    reaped = []
    for rec in store.sandboxes():
        if not rec.owner_alive():
            reclaim(store, rec)
            reaped.append(rec.id)
    return reaped


def collect(store: Store) -> dict:
    """Full collection: dead sandboxes, stray sandbox dirs, unfinished and orphaned layers, unused layers, trash."""
    janitor.wait()
    report: dict = {"sandboxes": reap_dead_sandboxes(store)}
    known = {r.id for r in store.sandboxes()}
    stray = []
    for d in store.sandboxes_dir.iterdir():
        # A dir without a row older than a minute was left by a crash between mkdir and the row insert.
        if d.name not in known and time.time() - d.stat().st_mtime > 60:
            store.discard_dir(d)
            stray.append(d.name)
    report["stray_sandbox_dirs"] = stray
    partial = store.stale_new_layers() + store.orphan_layer_dirs()
    for p in partial:
        store.discard_dir(p)
    report["partial_layers"] = [Path(p).name for p in partial]
    report["unused_layers"] = store.remove_unused_layers()
    report["trash"] = store.empty_trash()
    # The host view mount is cheap to remake, so an idle store keeps no mounts at all.
    host_layer = str(store.home / "host" / "root")
    in_use = any(host_layer in map(str, store.layer_paths(r.layers)) for r in store.sandboxes())
    report["host_view_unmounted"] = False if in_use else release_host_root_view(store)
    return report
