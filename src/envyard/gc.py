"""Garbage collection: reclaim what crashed owners left behind, and layers nothing uses.

Every sandbox has a lease row naming its owner process (pid + start time). A sandbox whose owner is gone is
dead by definition: its pid namespace is killed (pid-1 verified by start time, so a reused pid is never hit),
its cgroups removed and its directory deleted. Mounts need no cleanup: they live only in the sandbox's own
mount namespace and vanish with it.

An owner can die before its lease records pid-1 (between starting bwrap and reading its info), and a snapshot's
copy can outlive the process that started it. Such processes are found by their command lines, which name
the store's paths (see `store_processes`), and killed when no live owner or builder stands behind them.

Nothing is deleted on the strength of a missing row alone while a writer might be about to add it: the store
writes rows before it makes directories or starts processes, and gc looks at directories and processes
first and at rows second, so what it sees without a row really has none.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable
from pathlib import Path

from . import janitor, procinfo
from .errors import EnvyardError
from .record import Record
from .runtime.cgroups import Cgroups
from .bases.host import prune_host_masks, release_host_root_view
from .runtime.volume import LAYERS, SandboxVolume
from .store import SandboxRecord, Store
from .store.store import build_dir_builder_alive

KILL_WAIT = 5.0

# Provenance key of a temporary image (Sandbox.snapshot(temporary=True)): the process it belongs to.
TEMPORARY_FOR = "temporary_for"


def this_process() -> dict:
    """The owner record of a temporary image: this process's pid and start time (which survives pid reuse)."""
    pid = os.getpid()
    return {"pid": pid, "start": procinfo.start_time(pid)}


def remove_dead_temporary_images(store: Store) -> list[str]:
    """Temporary images whose process has exited: intermediate states of a run that was killed before it could
    remove them itself (`envyard setup` killed by a timeout left one image per install step)."""
    gone = []
    for img in store.images():
        owner = img.config.provenance.get(TEMPORARY_FOR)
        if isinstance(owner, dict) and not procinfo.is_alive(owner.get("pid"), owner.get("start")):
            try:
                store.remove_image(img.name)
            except EnvyardError:  # removed meanwhile by its owner's own cleanup
                continue
            gone.append(img.name)
    return gone


class StoreProcess(Record):
    """A host process working for this store: a sandbox's bwrap (or the shim that execs it) or a snapshot's
    copy. `sandboxes` are the ids of the sandbox directories its arguments name, `builds` the names of the
    unfinished layer directories (`.new-<pid>-<start>-...`)."""

    def __init__(self, pid: int, start: int, sandboxes: set[str] | None = None, builds: set[str] | None = None):
        self.pid = pid
        self.start = start
        self.sandboxes = set() if sandboxes is None else sandboxes
        self.builds = set() if builds is None else builds


def store_processes(store: Store) -> list[StoreProcess]:
    """Processes of this store, found by their arguments: bwrap's name `<store>/sandboxes/<id>/...` and
    `<store>/volume/<id>/...` (also forwarded by the cgroup shim), a snapshot's cp names the latter and
    `<store>/layers/.new-...`.

    Only processes of our own pid namespace count, and the pid-1s of namespaces right below it (bwrap's): a
    command inside a sandbox can make neither, so whatever it prints on its command line is never matched."""
    sandbox_dirs = (str(store.sandboxes_dir) + "/", str(store.home / "volume") + "/")  # the volume: disk limits
    builds = str(store.layers_dir / ".new-")
    ours = len(procinfo.ns_pids(os.getpid()))
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        args = [a.decode(errors="replace") for a in procinfo.cmdline(pid)]
        hit = StoreProcess(pid, 0)
        for a in args:
            for prefix in sandbox_dirs:
                if a.startswith(prefix):
                    hit.sandboxes.add(a[len(prefix):].partition("/")[0])
            if a.startswith(builds):
                hit.builds.add(a[len(str(store.layers_dir)) + 1:].partition("/")[0])
        hit.sandboxes.discard("")  # the sandboxes/ directory itself names no sandbox
        hit.sandboxes.discard(LAYERS)  # <volume>/layers/... is a layer (bwrap's lower dirs), not a sandbox
        if not (hit.sandboxes or hit.builds) or pid == os.getpid():
            continue
        nspids = procinfo.ns_pids(pid)
        if len(nspids) == ours or (len(nspids) == ours + 1 and nspids[-1] == 1):
            hit.start = procinfo.start_time(pid)
            if hit.start:
                found.append(hit)
    return found


def _kill_and_wait(procs: list[StoreProcess], wait: float = KILL_WAIT) -> list[int]:
    """SIGKILL each process that is still the one that was found and wait until they are gone; returns the
    pids that were killed."""
    fds = {}
    for p in procs:
        fd = procinfo.pidfd_if_same(p.pid, p.start)
        if fd is None:
            continue
        try:
            if procinfo.is_alive(p.pid, p.start):  # not a zombie
                signal.pidfd_send_signal(fd, signal.SIGKILL)
                fds[p.pid] = fd
                continue
        except ProcessLookupError:
            pass
        os.close(fd)
    poller = select.poll()
    for fd in fds.values():
        poller.register(fd, select.POLLIN)  # a pidfd turns readable when its process exits
    left = len(fds)
    deadline = time.monotonic() + wait
    while left and time.monotonic() < deadline:
        for fd, _ev in poller.poll(max(1, int((deadline - time.monotonic()) * 1000))):
            poller.unregister(fd)
            left -= 1
    for fd in fds.values():
        os.close(fd)
    return sorted(fds)


def kill_until_gone(store: Store, pick: Callable[[list[StoreProcess]], list[StoreProcess]],
                    procs: list[StoreProcess] | None = None) -> list[int]:
    """Kill the processes `pick` chooses from a scan (`procs`, or a new one), wait until they are gone, and
    scan again until it chooses nothing new: a bwrap killed while starting may have cloned its pid-1 just
    after the scan, and that child, its parent gone, would wait for it forever."""
    killed: list[int] = []
    for _ in range(5):
        batch = [p for p in pick(store_processes(store) if procs is None else procs) if p.pid not in killed]
        if not batch:
            break
        killed += _kill_and_wait(batch)
        procs = None
    return killed


def kill_sandbox(rec: SandboxRecord) -> None:
    if procinfo.is_alive(rec.init_pid, rec.init_start):
        try:
            os.kill(rec.init_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 5
        while procinfo.is_alive(rec.init_pid, rec.init_start) and time.monotonic() < deadline:
            time.sleep(0.005)


def reclaim(store: Store, rec: SandboxRecord, procs: list[StoreProcess] | None = None) -> None:
    """Kill a sandbox's processes and delete everything it owns (any owner; used by gc and `envyard rm`).
    `procs` is a scan of the store's processes (made now when not given)."""
    kill_sandbox(rec)
    # A lease without pid-1 (the owner died while bwrap started), an outer bwrap or shim still alive: find
    # them by their command lines, so the row never goes while something still runs in the directory.
    kill_until_gone(store, lambda scan: [p for p in scan if rec.id in p.sandboxes], procs)
    _forget(store, rec)


def _forget(store: Store, rec: SandboxRecord) -> None:
    Cgroups.remove(rec.cgroups)
    with SandboxVolume(store.home) as volume:
        volume.remove(rec.id)
    store.discard_dir(rec.dir)
    store.remove_sandbox(rec.id)


def reap_dead_sandboxes(store: Store, procs: list[StoreProcess] | None = None) -> list[str]:
    """Reclaim sandboxes whose owner process has died. Cheap when there is nothing to do."""
    dead = [rec for rec in store.sandboxes() if not rec.owner_alive()]
    if not dead:
        return []
    for rec in dead:
        kill_sandbox(rec)
    ids = {rec.id for rec in dead}
    kill_until_gone(store, lambda scan: [p for p in scan if p.sandboxes & ids], procs)
    for rec in dead:
        _forget(store, rec)
    return [rec.id for rec in dead]


def collect(store: Store) -> dict:
    with SandboxVolume(store.home) as volume:
        return _collect(store, volume)


def _collect(store: Store, volume: SandboxVolume) -> dict:
    """Full collection: dead sandboxes, stray processes and sandbox dirs, unfinished and orphaned layers,
    unused layers, interrupted downloads, trash, the idle host view."""
    janitor.wait()
    # Directories, then processes, then rows (see the module's docstring for why this order).
    sandbox_dirs = list(store.sandboxes_dir.iterdir())
    on_volume = volume.sandbox_ids()
    build_dirs = store.stale_new_layers()
    procs = store_processes(store)
    report: dict = {"sandboxes": reap_dead_sandboxes(store, procs)}
    recorded: set[str] = set()  # sandbox ids with a row, read after the latest scan

    def strays(scan: list[StoreProcess]) -> list[StoreProcess]:
        """Processes of sandboxes without a row, and copies into layers whose builder has died."""
        recorded.clear()
        recorded.update(r.id for r in store.sandboxes())
        return [p for p in scan if p.sandboxes - recorded or any(not build_dir_builder_alive(b) for b in p.builds)]

    report["stray_processes"] = kill_until_gone(store, strays, procs)
    # Listed before the rows were read, and a sandbox's row is written before its directory: a directory
    # without a row now was left by a dead or closing owner, and can go once nothing runs in it.
    unrecorded = [d for d in sandbox_dirs if d.name not in recorded and d.exists()]
    if unrecorded:
        running = {i for p in store_processes(store) for i in p.sandboxes}  # only if a kill above failed
        unrecorded = [d for d in unrecorded if d.name not in running]
    for d in unrecorded:
        store.discard_dir(d)
    report["stray_sandbox_dirs"] = [d.name for d in unrecorded]
    # The same for sandboxes' subvolumes on the disk-limit volume (made after the row, like the directory).
    stray_volumes = [i for i in on_volume if i not in recorded]
    if stray_volumes:
        running = {i for p in store_processes(store) for i in p.sandboxes}
        stray_volumes = [i for i in stray_volumes if i not in running]
    for i in stray_volumes:
        volume.remove(i)
    report["stray_subvolumes"] = stray_volumes
    partial = build_dirs + store.orphan_layer_dirs()
    for p in partial:
        store.discard_dir(p)
    report["partial_layers"] = [Path(p).name for p in partial]
    report["temporary_images"] = remove_dead_temporary_images(store)
    report["unused_layers"] = store.remove_unused_layers()
    report["partial_downloads"] = store.remove_stale_downloads()
    report["trash"] = store.empty_trash()
    # The host view mount is cheap to remake, so an idle store keeps no mounts at all.
    report["host_view_unmounted"] = release_host_root_view(store)
    report["old_host_masks"] = prune_host_masks(store)
    if volume.sandbox_ids():
        volume.clear_stale_quota_groups()
    # The volume stays mounted while a sandbox or an envyard process uses it (the unmount would be refused).
    # Layers made by snapshots live on it too: it stays mounted while any exists (store.layer() remounts it
    # after a reboot).
    report["volume_trimmed_bytes"] = volume.trim()  # before the unmount, which would keep the file as it is
    report["volume_unmounted"] = not store.sandboxes() and not store.has_volume_layers() and volume.release()
    return report
