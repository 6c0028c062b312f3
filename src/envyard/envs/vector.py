"""Batched and asyncio front-ends over TerminalEnv, for trainers that step many episodes at once.

VectorTerminalEnv is a `gymnasium.vector.VectorEnv`: observations and actions are batched as gymnasium batches
Text spaces (a tuple of strings, `batch_space(Text, n)` being a `Tuple` of Text spaces); rewards, terminations and
truncations are NumPy arrays; infos are one dict of arrays with `_key` masks (gymnasium's vector convention).
Environments auto-reset in gymnasium's default NEXT_STEP mode (declared in `metadata["autoreset_mode"]`;
SAME_STEP and DISABLED on request).

It also keeps EnvPool's send/recv: `send(actions, env_ids)` starts steps without waiting; `recv(min_results)`
returns as soon as that many have finished, in completion order, with their env ids, so a slow command in one
sandbox never holds up the batch. `step(actions)` is send + recv of all of them, in env order.
AsyncTerminalEnv wraps one TerminalEnv for asyncio code.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import functools
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from ..errors import BadInput
from ..yard import Yard
from .env import TerminalEnv
from .task import Task

if TYPE_CHECKING:
    from .cluster import Cluster

Step = tuple[str, float, bool, bool, dict]


def vector_infos(infos: Sequence[dict], n: int | None = None, slots: Sequence[int] | None = None) -> dict:
    """gymnasium's vector info convention: `{key: array over the batch, "_key": bool mask of who has it}`, nested
    dicts recursively. `infos[k]` goes to position `slots[k]` (default k) of arrays of length `n`. A key whose
    values are all bools, all ints or all floats gets that dtype; anything else (None, str, lists, mixed types)
    an object array, so an infra failure's None never breaks a float column."""
    n = len(infos) if n is None else n
    slots = range(len(infos)) if slots is None else slots
    out: dict[str, Any] = {}
    keys: dict[str, None] = {}
    for info in infos:
        keys.update(dict.fromkeys(info))
    for key in keys:
        have = [(s, info[key]) for s, info in zip(slots, infos) if key in info]
        mask = np.zeros(n, dtype=np.bool_)
        for s, _ in have:
            mask[s] = True
        values = [v for _, v in have]
        if all(isinstance(v, dict) for v in values):
            out[key] = vector_infos([v for _, v in have], n, [s for s, _ in have])
        else:
            kinds = {type(v) for v in values}
            dtype = kinds.pop() if len(kinds) == 1 else object
            if dtype not in (bool, int, float):
                dtype = object
            array = np.zeros(n, dtype=dtype) if dtype is not object else np.full(n, None, dtype=object)
            for s, v in have:
                array[s] = v
            out[key] = array
        out[f"_{key}"] = mask
    return out


class VectorTerminalEnv(gym.vector.VectorEnv):
    """`num_envs` TerminalEnvs (one per task given) stepped concurrently on a thread pool.

    `autoreset_mode` (an `AutoresetMode` or its value): NEXT_STEP (default, gymnasium's): the step after an
    episode ended resets that environment (the action is ignored) and returns the instruction with reward 0 and
    both flags false. SAME_STEP: the step that ends an episode resets at once; its observation is the new
    instruction, `infos["final_obs"]`/`infos["final_info"]` hold the ended episode's. DISABLED: nothing resets
    by itself (reset with `options={"reset_mask": mask}`); stepping an ended environment returns TerminalEnv's
    "episode is over" reply. An auto-reset starts the environment's latest task again (a fresh sandbox).

    `cluster` (an `envyard.envs.cluster.Cluster`): the environments run on the nodes of a Ray cluster, spread
    over them, each node in its own store (envs/cluster_env.py); the API is the same. An environment whose
    node dies ends its episode with `infra_error="node_lost"` and starts on a live node at its next reset.
    """

    def __init__(self, tasks: list[str | Path | Task], *, yard: Yard | None = None, threads: int | None = None,
                 autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP, cluster: "Cluster | None" = None,
                 **env_kwargs):
        if not tasks:
            raise BadInput("VectorTerminalEnv needs at least one task")
        try:
            mode = autoreset_mode if isinstance(autoreset_mode, AutoresetMode) else AutoresetMode(autoreset_mode)
        except ValueError:
            raise BadInput(f"autoreset_mode {autoreset_mode!r} is not one of "
                           f"{[m.value for m in AutoresetMode]}") from None
        self.autoreset_mode = mode
        self._placement = None
        if cluster is not None:  # each environment on a node of a Ray cluster (envs/cluster_env.py)
            if yard is not None:
                raise BadInput("give yard or cluster, not both", fix="each node of a cluster uses its own store")
            from .cluster_env import Placement, RemoteTerminalEnv

            self.yard, self._own_yard = None, False
            self._placement = Placement(cluster, slots=cluster.per_node or len(tasks))
            self.envs = [RemoteTerminalEnv(t, self._placement, env_kwargs) for t in tasks]
        else:
            self.yard = yard or Yard()
            self._own_yard = yard is None
            self.envs = [TerminalEnv(t, yard=self.yard, **env_kwargs) for t in tasks]
        self.num_envs = len(self.envs)
        self.metadata = {"autoreset_mode": mode, "render_modes": ["ansi"]}
        self.render_mode = self.envs[0].render_mode
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._pool = cf.ThreadPoolExecutor(max_workers=threads or min(self.num_envs, 256), thread_name_prefix="venv")
        self._pending: dict[cf.Future, int] = {}
        self._busy: set[int] = set()
        self._lock = threading.Lock()
        self._tasks: list = list(tasks)  # each env's latest task: what an auto-reset starts again
        self._observations: list[str] = [""] * self.num_envs
        self._autoreset = np.zeros(self.num_envs, dtype=np.bool_)  # ended at the last step (NEXT_STEP)

    def _ids(self, env_ids) -> list[int]:
        ids = list(range(self.num_envs)) if env_ids is None else [int(i) for i in env_ids]
        for i in ids:
            if not 0 <= i < self.num_envs:
                raise BadInput(f"env id {i} out of range 0..{self.num_envs - 1}")
        if len(set(ids)) != len(ids):
            raise BadInput(f"env ids {ids} repeat an environment")
        return ids

    # ---- gymnasium VectorEnv API ----------------------------------------------------------------------------

    def reset(self, env_ids: list[int] | None = None, *, seed: int | Sequence[int | None] | None = None,
              options: dict | None = None) -> tuple[tuple[str, ...], dict]:
        """Reset all environments (or those of `options["reset_mask"]`, a bool array, or of `env_ids`) at once.

        `seed`: an int (env i gets seed + i) or one seed per env. `options`: passed to every TerminalEnv.reset
        (e.g. `{"task": DIR}`), except `"tasks"` (one task per env; None keeps the env's own) and `"reset_mask"`.
        Returns the observations of all environments (those not reset keep their latest) and the infos of those
        reset, in the vector convention."""
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        tasks = options.pop("tasks", None)
        if mask is not None:
            mask = np.asarray(mask)
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_ or not mask.any():
                raise BadInput(f"options['reset_mask'] must be a bool array of shape ({self.num_envs},) with at "
                               "least one True")
            ids = [int(i) for i in np.flatnonzero(mask)]
            if env_ids is not None:
                raise BadInput("give env_ids or options['reset_mask'], not both")
        else:
            ids = self._ids(env_ids)
        if seed is None or isinstance(seed, (int, np.integer)):
            super().reset(seed=None if seed is None else int(seed))
            seeds = [None if seed is None else int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise BadInput(f"{len(seeds)} seeds for {self.num_envs} environments")
        if tasks is not None:
            tasks = list(tasks)
            if len(tasks) != self.num_envs:
                raise BadInput(f"options['tasks'] has {len(tasks)} tasks for {self.num_envs} environments")
        with self._lock:
            clash = self._busy.intersection(ids)
            if clash:
                raise BadInput(f"environments {sorted(clash)} still have a step in flight; recv() it first")

        def one(i):
            opts = dict(options)
            if tasks is not None and tasks[i] is not None:
                opts["task"] = tasks[i]
            if "task" in opts:
                self._tasks[i] = opts["task"]
            else:
                opts["task"] = self._tasks[i]
            return self.envs[i].reset(seed=seeds[i], options=opts)

        results = list(self._pool.map(one, ids))
        for i, (obs, _) in zip(ids, results):
            self._observations[i] = obs
            self._autoreset[i] = False
        return tuple(self._observations), vector_infos([r[1] for r in results], self.num_envs, ids)

    def step(self, actions: Sequence[str], env_ids: Sequence[int] | None = None):
        """One action per environment (a tuple or list of commands, as `action_space.sample()` gives); all step
        concurrently. Returns (observations tuple, rewards float64 array, terminations bool array, truncations
        bool array, infos). With `env_ids` (not gymnasium; EnvPool's partial step) only those step, and the
        results are of their length, in their order."""
        ids = self._ids(env_ids)
        self.send(actions, ids)
        obs, rew, term, trunc, infos, got = self._collect(None, None)
        order = {i: k for k, i in enumerate(got)}
        pick = [order[i] for i in ids]
        return (tuple(obs[k] for k in pick), np.asarray([rew[k] for k in pick], dtype=np.float64),
                np.asarray([term[k] for k in pick], dtype=np.bool_), np.asarray([trunc[k] for k in pick], dtype=np.bool_),
                vector_infos([infos[k] for k in pick]))

    def render(self) -> tuple[str | None, ...]:
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs) -> None:
        self._pool.shutdown(wait=True)
        for env in self.envs:
            env.close()
        if self._own_yard:
            self.yard.close()
        if self._placement is not None:
            self._placement.close()

    # ---- EnvPool-style asynchronous API -------------------------------------------------------------------

    def send(self, actions: Sequence[str], env_ids: Sequence[int] | None = None) -> None:
        """Start a step (or, in NEXT_STEP mode after an ended episode, the auto-reset) of each env in `env_ids`
        (all by default) and return at once."""
        ids = self._ids(env_ids)
        actions = list(actions)
        if len(actions) != len(ids):
            raise BadInput(f"{len(actions)} actions for {len(ids)} environments")
        for a in actions:
            if not isinstance(a, str):
                raise BadInput(f"action must be a str, not {type(a).__name__}", fix="pass each command as a string")
        with self._lock:
            clash = self._busy.intersection(ids)
            if clash:
                raise BadInput(f"environments {sorted(clash)} still have a step in flight; recv() it first")
            for action, i in zip(actions, ids):
                self._busy.add(i)
                self._pending[self._pool.submit(self._step_one, i, action, bool(self._autoreset[i]))] = i

    def recv(self, min_results: int | None = None, timeout: float | None = None):
        """Wait for at least `min_results` finished steps (all in flight by default). Returns (observations
        tuple, rewards, terminations, truncations, infos, env_ids): arrays in completion order, infos in the
        vector convention over that batch."""
        obs, rew, term, trunc, infos, ids = self._collect(min_results, timeout)
        return (tuple(obs), np.asarray(rew, dtype=np.float64), np.asarray(term, dtype=np.bool_),
                np.asarray(trunc, dtype=np.bool_), vector_infos(infos), np.asarray(ids, dtype=np.int64))

    # ---- helpers ------------------------------------------------------------------------------------------

    def _step_one(self, i: int, action: str, autoreset: bool) -> Step:
        env = self.envs[i]
        if autoreset and self.autoreset_mode == AutoresetMode.NEXT_STEP:
            obs, info = env.reset(options={"task": self._tasks[i]})
            return obs, 0.0, False, False, info
        obs, reward, term, trunc, info = env.step(action)
        if (term or trunc) and self.autoreset_mode == AutoresetMode.SAME_STEP:
            final_obs, final_info = obs, info
            obs, info = env.reset(options={"task": self._tasks[i]})
            info = {**info, "final_obs": final_obs, "final_info": final_info}
        return obs, reward, term, trunc, info

    def _collect(self, min_results, timeout) -> tuple[list, ...]:
        with self._lock:
            pending = dict(self._pending)
        out: tuple[list, ...] = ([], [], [], [], [], [])
        if not pending:
            return out
        want = len(pending) if min_results is None else min(max(1, min_results), len(pending))
        done: list[cf.Future] = []
        for fut in cf.as_completed(pending, timeout=timeout):
            done.append(fut)
            if len(done) >= want:
                break
        done += [f for f in pending if f.done() and f not in done]
        with self._lock:
            ids = [self._pending.pop(fut) for fut in done]
            self._busy.difference_update(ids)
            error = next((f.exception() for f in done if f.exception() is not None), None)
            if error is not None:  # a malformed action, a closed env: every finished step is collected first
                raise error
            for fut, i in zip(done, ids):
                obs, reward, term, trunc, info = fut.result()
                self._observations[i] = obs
                self._autoreset[i] = bool(term or trunc)
                for column, value in zip(out, (obs, float(reward), bool(term), bool(trunc), info, i)):
                    column.append(value)
        return out


class AsyncTerminalEnv:
    """One TerminalEnv for asyncio: `await env.reset(...)`, `await env.step(action)`, `await env.close()`."""

    def __init__(self, task: str | Path | Task | None = None, *, yard: Yard | None = None,
                 executor: cf.Executor | None = None, **env_kwargs):
        self.env = TerminalEnv(task, yard=yard, **env_kwargs)
        self._executor = executor

    async def _call(self, fn, *args, **kwargs):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    async def reset(self, *, seed: int | None = None, options: dict | None = None):
        return await self._call(self.env.reset, seed=seed, options=options)

    async def step(self, action: str) -> Step:
        return await self._call(self.env.step, action)

    async def close(self) -> None:
        await self._call(self.env.close)
