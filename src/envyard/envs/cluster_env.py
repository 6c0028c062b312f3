"""TerminalEnvs on a Ray cluster, for `VectorTerminalEnv(tasks, cluster=Cluster(...))`: each environment lives on
a node, in an `EnvHost` actor that holds that node's environments over its own store; every reset and step is
one remote call. Environments are spread over the live nodes, fewest first; tasks travel by digest as in
cluster.py. An environment whose node dies ends its episode with the infrastructure failure `node_lost`
(reward 0, `terminated`), and its next reset starts it on a live node."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import gymnasium as gym

from ..errors import EnvyardError
from .cluster import INFRA_NODE_LOST, Cluster, EpisodeWorker, _ray, connect, pack_task
from .env import CHARSET, MAX_TEXT
from .task import Task


class EnvHost(EpisodeWorker):
    """A node's environments (Ray calls its methods from several threads: one environment per call)."""

    def __init__(self):
        super().__init__()
        self.envs: dict[str, object] = {}

    def open(self, key: str, kwargs: dict) -> None:
        from .env import TerminalEnv

        self.envs[key] = TerminalEnv(None, yard=self.yard, **kwargs)

    def reset(self, key: str, ship: tuple, seed, options: dict):
        from .task import load_task

        task = load_task(self._task(*ship))
        return self.envs[key].reset(seed=seed, options={**options, "task": task})

    def step(self, key: str, action: str):
        return self.envs[key].step(action)

    def render(self, key: str):
        return self.envs[key].render()

    def close_env(self, key: str) -> None:
        env = self.envs.pop(key, None)
        if env is not None:
            env.close()


_HOST = None


def _env_host():
    global _HOST
    if _HOST is None:
        _HOST = _ray().remote(EnvHost)
    return _HOST


class Placement:
    """Which node's EnvHost holds each environment; one EnvHost per live node, made on first need."""

    def __init__(self, cluster: Cluster, slots: int):
        connect(cluster.address)
        self.cluster, self.slots = cluster, slots
        self.hosts: dict[str, object] = {}  # node id -> EnvHost handle
        self.load: dict[str, int] = {}
        self.lost_nodes: set[str] = set()
        self.shipped: dict[str, tuple] = {}
        self._lock = threading.Lock()

    def place(self) -> tuple[str, object]:
        with self._lock:  # environments reset from several threads at once must still spread
            return self._place()

    def _place(self) -> tuple[str, object]:
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive") and n["NodeID"] not in self.lost_nodes
                 and (self.cluster.resource is None or (n.get("Resources") or {}).get(self.cluster.resource))}
        for node in list(self.hosts):
            if node not in alive:
                self._lost(node)
        if not alive:
            raise EnvyardError("no live Ray node to place an environment on", fix="check `ray status`")
        node = min(alive, key=lambda n: self.load.get(n, 0))
        if node not in self.hosts:
            actor = _env_host().options(
                num_cpus=0, max_concurrency=self.slots, max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False))
            self.hosts[node] = actor.remote()
        self.load[node] = self.load.get(node, 0) + 1
        return node, self.hosts[node]

    def release(self, node: str) -> None:
        with self._lock:
            self.load[node] = max(0, self.load.get(node, 0) - 1)

    def lost(self, node: str) -> None:
        with self._lock:
            self._lost(node)

    def _lost(self, node: str) -> None:
        self.lost_nodes.add(node)
        handle = self.hosts.pop(node, None)
        self.load.pop(node, None)
        if handle is not None:
            try:
                _ray().kill(handle)
            except Exception:  # gone with its node
                pass

    def ship(self, root: Path) -> tuple:
        key = str(root.resolve())
        with self._lock:
            return self.shipped[key] if key in self.shipped else self._ship(key, root)

    def _ship(self, key: str, root: Path) -> tuple:
        if key not in self.shipped:
            digest, data = pack_task(root)
            self.shipped[key] = (digest, root.name, [_ray().put(data)])
        return self.shipped[key]

    def close(self) -> None:
        for node in list(self.hosts):
            handle = self.hosts.pop(node)
            try:
                _ray().get(handle.close.remote(), timeout=30)
                _ray().kill(handle)
            except Exception:
                pass


class RemoteTerminalEnv:
    """TerminalEnv's interface (reset, step, render, close, spaces), run on a node of the cluster."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, task, placement: Placement, env_kwargs: dict):
        self.default_task = task
        self.placement = placement
        self.kwargs = env_kwargs
        self.render_mode = env_kwargs.get("render_mode")
        self.observation_space = gym.spaces.Text(max_length=MAX_TEXT, charset=CHARSET)
        self.action_space = gym.spaces.Text(max_length=4096, charset=CHARSET)
        self.key = uuid.uuid4().hex
        self.node: str | None = None
        self.host = None

    def _call(self, method: str, *args):
        from ray.exceptions import RayTaskError

        try:
            return _ray().get(getattr(self.host, method).remote(self.key, *args))
        except RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None  # the env's own error (a malformed action, no task): as locally
            raise

    def _lose(self, e: Exception) -> dict:
        self.placement.lost(self.node)
        self.node = self.host = None
        return {"infra_error": INFRA_NODE_LOST, "infra_detail": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        from ray.exceptions import RayError

        options = dict(options or {})
        spec = options.pop("task", self.default_task)
        if spec is None:
            raise EnvyardError("no task given", fix='pass a task, or reset(options={"task": DIR})')
        root = Path(spec.root if isinstance(spec, Task) else spec)
        ship = self.placement.ship(root)
        info: dict = {}
        for _ in range(1 + self.placement.cluster.retries):  # a dead node: start over on another
            if self.host is None:
                self.node, self.host = self.placement.place()
                try:
                    self._call("open", self.kwargs)
                except RayError as e:
                    info = self._lose(e)
                    continue
            try:
                return self._call("reset", ship, seed, options)
            except RayError as e:
                info = self._lose(e)
        return "", {"task": root.name, **info}

    def step(self, action: str):
        from ray.exceptions import RayError

        if self.host is None:
            return "", 0.0, True, False, {"infra_error": INFRA_NODE_LOST, "note": "episode is over; call reset()"}
        try:
            return self._call("step", action)
        except RayError as e:
            return "[the environment's node was lost; the episode ends here]", 0.0, True, False, self._lose(e)

    def render(self):
        return self._call("render") if self.host is not None else None

    def close(self) -> None:
        if self.host is not None:
            try:
                self._call("close_env")
            except Exception:  # its node is gone: so is the environment
                pass
            self.placement.release(self.node)
            self.node = self.host = None
