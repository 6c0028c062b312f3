"""Rollouts on a Ray cluster: episodes run on the cluster's nodes, each node in its own envyard store.

Design (docs/scale.md says why):

- **Workers.** One `EpisodeWorker` Ray actor per node, pinned there (node affinity, hard), running up to
  `per_node` episodes at once in threads, on a `Yard` over the node's own store (`$ENVYARD_HOME` of the
  node's `ray start`, else the default) with the local backend. The driver never hands a worker more than
  `per_node` episodes, so 10,000 episodes on 2 nodes keep 2 × `per_node` episodes (each one agent sandbox,
  then one verifier sandbox) alive at a time; the rest wait in the driver's queue, not in Ray.
  The workers live as long as the `Cluster` object (or the driver process): a trainer that runs a rollout per
  training step pays for starting them once.
- **Tasks by content digest.** A task directory is packed into a tar once at the driver, named by its
  sha256, and put in Ray's object store once. A worker that does not yet hold that digest fetches the tar,
  checks its sha256, and unpacks it into `<store>/ray/tasks/<digest>/` (a rename makes it appear whole);
  the task's image is then built on the node from that copy, cached by the store as any local build is.
  A node that joins late gets a worker at the driver's next look at the cluster (every few seconds) and
  fetches what it needs on first use.
- **Failures.** Every episode is keyed by (task directory, attempt). An episode whose worker or node dies
  goes back to the front of the queue and runs again on any live node, up to `retries` times; after that it
  is recorded as an infrastructure failure (`node_lost`), never as a reward. Only the driver records
  episodes, and only the first result for a key, so no reward is counted twice.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import socket
import tarfile
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..errors import BadInput, ClusterError

if TYPE_CHECKING:
    from .rollout import Episode, EpisodeWriter, Policy
    from .task import Task

INFRA_NODE_LOST = "node_lost"  # the episode's node (or its worker) died, and so did every retry
INFRA_WORKER = "worker_error"  # the worker raised: a bug or a broken node store, not the policy's doing


@dataclass
class Cluster:
    """Where and how to run episodes on Ray. `address`: "auto" (the cluster this machine belongs to, or
    $RAY_ADDRESS) or HOST:PORT of its head. `per_node`: episodes at once per node (default: the node's CPU
    count). `retries`: how many times an episode lost with its node runs again elsewhere. `resource`: use only
    nodes that offer this custom resource. `wait_nodes`: how long to wait for a node when none is alive."""

    address: str = "auto"
    per_node: int | None = None
    retries: int = 2
    resource: str | None = None
    wait_nodes: float = 60.0
    # After a rollout: per node, what its worker did (store, slots, peak episodes at once, done, tasks fetched),
    # counted over the workers' life: they are kept for the next rollout on this Cluster until close().
    nodes: dict = field(default_factory=dict, compare=False)
    _pool: "Pool | None" = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if not isinstance(self.address, str) or not self.address:
            raise BadInput(f"cluster address must be 'auto' or HOST:PORT, got {self.address!r}")
        if self.per_node is not None and (isinstance(self.per_node, bool) or not isinstance(self.per_node, int)
                                          or self.per_node < 1):
            raise BadInput(f"per_node must be a positive int, got {self.per_node!r}")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise BadInput(f"retries must be an int >= 0, got {self.retries!r}")


    def close(self) -> None:
        """Stop the workers (they also end with the driver process)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _ray():
    try:
        import ray
    except ImportError:
        raise ClusterError("Ray is not installed", fix="pip install 'envyard[ray]'") from None
    return ray


def connect(address: str = "auto") -> None:
    """Join the Ray cluster at `address` as a driver (once per process)."""
    ray = _ray()
    if ray.is_initialized():
        return
    if address not in ("auto", "local") and not address.startswith("ray://"):
        _reachable(address)  # ray.init retries an address that does not answer for minutes
    try:
        ray.init(address=address, log_to_driver=False, logging_level="warning")
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise ClusterError(f"cannot join the Ray cluster at {address}: {str(e).splitlines()[0]}",
                           fix="start one with `ray start --head`, or pass its HOST:PORT") from None


def _reachable(address: str) -> None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise BadInput(f"--ray {address!r}: expected auto or HOST:PORT (the head's GCS port)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as e:
        raise ClusterError(f"no Ray cluster at {address}: {e.strerror or e}",
                           fix="start one with `ray start --head`, or pass the address `ray start` printed") from None


# ---- tasks by content digest ---------------------------------------------------------------------------------


def pack_task(root: Path) -> tuple[str, bytes]:
    """The task directory as a tar (sorted entries, so the same files give the same bytes) and its sha256."""
    root = Path(root).resolve()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        paths = sorted(root.rglob("*"))
        for p in paths:
            info = tar.gettarinfo(str(p), arcname=str(p.relative_to(root)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if info.isfile():
                with p.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    data = buf.getvalue()
    return hashlib.sha256(data).hexdigest(), data


def unpack_task(cache: Path, digest: str, name: str, fetch: Callable[[], bytes]) -> Path:
    """`cache/<digest>/<name>`, unpacked from `fetch()` the first time (its sha256 checked first); a rename
    publishes it whole, so concurrent callers (threads or processes) never see half a task."""
    final = cache / digest
    if not final.is_dir():
        data = fetch()
        got = hashlib.sha256(data).hexdigest()
        if got != digest:
            raise ClusterError(f"task {name}: shipped tar has sha256 {got}, expected {digest}")
        cache.mkdir(parents=True, exist_ok=True)
        tmp = cache / f".new-{uuid.uuid4().hex}"
        (tmp / name).mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(tmp / name, filter="data")
        try:
            tmp.rename(final)
        except OSError:  # another worker published it first
            shutil.rmtree(tmp, ignore_errors=True)
    return final / name


# ---- the worker (a Ray actor, one per node) ------------------------------------------------------------------


class EpisodeWorker:
    """Runs episodes on its node, in the node's own store. Methods are called by Ray from up to
    `max_concurrency` threads at once."""

    def __init__(self):
        from ..yard import Yard

        self.yard = Yard()
        self.cache = self.yard.store.home / "ray" / "tasks"
        self._lock = threading.Lock()
        self._task_locks: dict[str, threading.Lock] = {}
        self.running = self.peak = self.done = self.fetched = 0

    def info(self) -> dict:
        return {"home": str(self.yard.store.home), "pid": os.getpid(),
                "node": _ray().get_runtime_context().get_node_id()}

    def stats(self) -> dict:
        with self._lock:
            return {"running": self.running, "peak": self.peak, "done": self.done, "fetched": self.fetched}

    def _task(self, digest: str, name: str, blob) -> Path:
        with self._lock:
            lock = self._task_locks.setdefault(digest, threading.Lock())

        def fetch() -> bytes:
            with self._lock:
                self.fetched += 1
            return _ray().get(blob[0])  # a list, so Ray hands the reference over instead of the bytes

        with lock:
            return unpack_task(self.cache, digest, name, fetch)

    def run(self, make: Callable[[], "Policy"], digest: str, name: str, blob: list, attempt: int) -> dict:
        from .rollout import chat_record, play_episode
        from .task import load_task

        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            task = load_task(self._task(digest, name, blob))
            policy = make()
            ep, messages = play_episode(self.yard, task, policy, attempt=attempt)
            return {"episode": ep.to_dict(), "messages": messages,
                    "policy_messages": getattr(policy, "messages", None),
                    "record": chat_record(task, policy, messages, ep)}
        finally:
            with self._lock:
                self.running -= 1
                self.done += 1

    def close(self) -> None:
        self.yard.close()


# ---- the driver ----------------------------------------------------------------------------------------------


@dataclass
class _Worker:
    node: str
    handle: object
    slots: int
    busy: int = 0


_ACTOR = None


def _actor_class():
    global _ACTOR
    if _ACTOR is None:
        _ACTOR = _ray().remote(EpisodeWorker)
    return _ACTOR


class Pool:
    """The driver's view of the cluster: one worker per live node (made on first sight of the node), each
    with its slot count."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.workers: dict[str, _Worker] = {}
        self.lost: set[str] = set()  # nodes whose worker died: not used again by this Cluster
        self.checked = 0.0

    def refresh(self, force: bool = False) -> None:
        """Every few seconds: add a worker for each live node that has none; forget those of dead nodes."""
        if not force and time.monotonic() - self.checked < 2.0:
            return
        self.checked = time.monotonic()
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        alive = {}
        for n in ray.nodes():
            res = n.get("Resources") or {}
            if n.get("Alive") and (self.cluster.resource is None or res.get(self.cluster.resource)):
                alive[n["NodeID"]] = res
        for node in list(self.workers):
            if node not in alive:
                self.drop(node)
        for node, res in alive.items():
            if node in self.workers or node in self.lost:
                continue
            slots = self.cluster.per_node or max(1, int(res.get("CPU", 1)))
            actor = _actor_class().options(
                num_cpus=0, max_concurrency=slots, max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False))
            self.workers[node] = _Worker(node, actor.remote(), slots)

    def drop(self, node: str) -> None:
        w = self.workers.pop(node, None)
        self.lost.add(node)
        if w is not None:
            try:
                _ray().kill(w.handle)
            except Exception:  # already gone with its node
                pass

    def free(self) -> list[_Worker]:
        """Workers with a free slot, the least busy first (spreads episodes over nodes)."""
        return sorted((w for w in self.workers.values() if w.busy < w.slots), key=lambda w: w.busy / w.slots)

    def stats(self) -> dict[str, dict]:
        ray = _ray()
        out = {}
        for node, w in self.workers.items():
            try:
                out[node] = {**ray.get(w.handle.info.remote(), timeout=30),
                             **ray.get(w.handle.stats.remote(), timeout=30),
                             "slots": w.slots}
            except Exception:  # a node lost since
                pass
        return out

    def close(self) -> None:
        ray = _ray()
        for w in self.workers.values():
            try:
                ray.get(w.handle.close.remote(), timeout=30)
                ray.kill(w.handle)
            except Exception:
                pass
        self.workers.clear()


def run_on_cluster(cluster: Cluster, jobs: list[tuple["Task", int]], make: Callable[[], "Policy"], *,
                   done: dict[tuple[str, int], "Episode"], out_dir: Path | None, writer: "EpisodeWriter | None",
                   on_done: Callable[["Episode"], None] | None) -> list["Episode"]:
    """The episodes of `jobs` (those not in `done`) on the cluster, in job order; `cluster.nodes` gets what
    each node's worker did."""
    from .rollout import Episode, write_trajectory

    connect(cluster.address)
    ray = _ray()
    from ray.exceptions import RayActorError, RayError, RayTaskError

    results: dict[tuple[str, int], Episode] = {}
    blobs: dict[str, tuple[str, list]] = {}  # task dir -> (digest, [object ref]), put once
    queue: deque[tuple["Task", int, str]] = deque()
    for task, attempt in jobs:
        key = (str(Path(task.root).resolve()), attempt)
        if key in done:
            results[key] = done[key]
            if on_done:
                on_done(done[key])
            continue
        if key[0] not in blobs:
            digest, data = pack_task(Path(task.root))
            blobs[key[0]] = (digest, [ray.put(data)])
        queue.append((task, attempt, key[0]))

    def finish(key: tuple[str, int], ep: Episode) -> None:
        if key in results:  # a duplicate: the first result stands
            return
        results[key] = ep
        if on_done:
            on_done(ep)

    def lost(task: "Task", attempt: int, kind: str, detail: str) -> Episode:
        name = make().name
        return Episode(task.name, name, None, 0, 0.0, kind, detail, attempt=attempt,
                       task_dir=str(Path(task.root).resolve()))

    if cluster._pool is None:
        cluster._pool = Pool(cluster)
    pool = cluster._pool
    tries: dict[tuple[str, int], int] = {}
    inflight: dict = {}  # object ref -> (task, attempt, task dir, worker)
    waiting_since = None
    try:
        while queue or inflight:
            pool.refresh(force=not pool.workers)
            for w in pool.free():
                while queue and w.busy < w.slots:
                    task, attempt, tdir = queue.popleft()
                    digest, blob = blobs[tdir]
                    ref = w.handle.run.remote(make, digest, Path(task.root).name, blob, attempt)
                    inflight[ref] = (task, attempt, tdir, w, time.monotonic())
                    w.busy += 1
            if not inflight:
                if not pool.workers:  # no live node: wait a while for one, then give up on what is left
                    waiting_since = waiting_since or time.monotonic()
                    if time.monotonic() - waiting_since > cluster.wait_nodes:
                        while queue:
                            task, attempt, tdir = queue.popleft()
                            finish((tdir, attempt), lost(task, attempt, INFRA_NODE_LOST,
                                                         "no live Ray node to run it on"))
                        break
                time.sleep(0.5)
                continue
            waiting_since = None
            refs = list(inflight)
            ready, _ = ray.wait(refs, num_returns=1, timeout=1.0)
            if ready and len(refs) > 1:  # then all that are ready: one O(in flight) scan per batch, not per episode
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            for ref in ready:
                task, attempt, tdir, w, sent = inflight.pop(ref)
                w.busy -= 1
                key = (tdir, attempt)
                try:
                    out = ray.get(ref)
                except RayError as e:
                    worker_bug = isinstance(e, RayTaskError) and not isinstance(e, RayActorError)
                    if not worker_bug:
                        pool.drop(w.node)  # its node or process is gone; a live node gets a new worker
                    tries[key] = tries.get(key, 0) + 1
                    if tries[key] <= cluster.retries:
                        queue.appendleft((task, attempt, tdir))
                    else:
                        kind = INFRA_WORKER if worker_bug else INFRA_NODE_LOST
                        cause = getattr(e, "cause", None) if worker_bug else None  # the exception on the node
                        what = cause or e
                        finish(key, lost(task, attempt, kind,
                                         f"{type(what).__name__}: {(str(what).splitlines() or [''])[0][:300]}"))
                    continue
                if key in results:
                    continue
                ep = Episode.from_dict(out["episode"])
                ep.task_dir = tdir  # the driver's path, not the node's copy
                # What the episode cost the cluster: submit-to-result time at the driver (the episode's own
                # wall_time plus Ray's overhead), the node, and the size of what came back.
                ep.metrics = {**ep.metrics, "ray": {"node": w.node[:12],
                                                    "round_trip_s": round(time.monotonic() - sent, 4),
                                                    "result_bytes": len(json.dumps(out))}}
                if tries.get(key):
                    ep.metrics["retries"] = tries[key]
                if out_dir is not None:
                    ep.trajectory = write_trajectory(out_dir, task.name, out["messages"], out["policy_messages"], ep)
                if writer is not None:
                    record = out["record"]
                    record["metadata"] = {**ep.to_dict(), "stop_reason": record["metadata"].get("stop_reason")}
                    writer.write(record)
                finish(key, ep)
        cluster.nodes = pool.stats()
    except BaseException:
        cluster.close()  # an interrupted rollout: stop the episodes in flight
        raise
    return [results[(str(Path(t.root).resolve()), a)] for t, a in jobs]
