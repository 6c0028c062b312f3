"""Batched and asyncio front-ends over TerminalEnv, for trainers that step many episodes at once.

VectorTerminalEnv follows EnvPool's send/recv: `send(actions, env_ids)` starts steps without waiting;
`recv(min_results)` returns as soon as that many have finished, in completion order, with their env ids, so a
slow command in one sandbox never holds up the batch. `step(actions)` is send + recv of all of them.
AsyncTerminalEnv wraps one TerminalEnv for asyncio code.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import functools
import threading
from pathlib import Path

from ..errors import BadInput
from ..yard import Yard
from .env import TerminalEnv
from .task import Task

Step = tuple[str, float, bool, bool, dict]


class VectorTerminalEnv:
    def __init__(self, tasks: list[str | Path | Task], *, yard: Yard | None = None, threads: int | None = None,
                 **env_kwargs):
        if not tasks:
            raise BadInput("VectorTerminalEnv needs at least one task")
        self.yard = yard or Yard()
        self._own_yard = yard is None
        self.envs = [TerminalEnv(t, yard=self.yard, **env_kwargs) for t in tasks]
        self.num_envs = len(self.envs)
        self._pool = cf.ThreadPoolExecutor(max_workers=threads or min(self.num_envs, 256), thread_name_prefix="venv")
        self._pending: dict[cf.Future, int] = {}
        self._busy: set[int] = set()
        self._lock = threading.Lock()

    def _ids(self, env_ids) -> list[int]:
        ids = list(range(self.num_envs)) if env_ids is None else list(env_ids)
        for i in ids:
            if not 0 <= i < self.num_envs:
                raise BadInput(f"env id {i} out of range 0..{self.num_envs - 1}")
        return ids

    def reset(self, env_ids: list[int] | None = None) -> tuple[list[str], list[dict]]:
        """Reset the given environments (all by default) concurrently; results in the order of `env_ids`."""
        ids = self._ids(env_ids)
        results = list(self._pool.map(lambda i: self.envs[i].reset(), ids))
        return [r[0] for r in results], [r[1] for r in results]

    def send(self, actions: list[str], env_ids: list[int] | None = None) -> None:
        ids = self._ids(env_ids)
        if len(actions) != len(ids):
            raise BadInput(f"{len(actions)} actions for {len(ids)} environments")
        with self._lock:
            clash = self._busy.intersection(ids)
            if clash:
                raise BadInput(f"environments {sorted(clash)} still have a step in flight; recv() it first")
            for action, i in zip(actions, ids):
                self._busy.add(i)
                self._pending[self._pool.submit(self.envs[i].step, action)] = i

    def recv(self, min_results: int | None = None, timeout: float | None = None):
        """Wait for at least `min_results` finished steps (all in flight by default). Returns
        (observations, rewards, terminated, truncated, infos, env_ids) in completion order."""
        with self._lock:
            pending = dict(self._pending)
        if not pending:
            return [], [], [], [], [], []
        want = len(pending) if min_results is None else min(max(1, min_results), len(pending))
        done: list[cf.Future] = []
        for fut in cf.as_completed(pending, timeout=timeout):
            done.append(fut)
            if len(done) >= want:
                break
        done += [f for f in pending if f.done() and f not in done]
        out: tuple[list, ...] = ([], [], [], [], [], [])
        with self._lock:
            for fut in done:
                i = self._pending.pop(fut)
                self._busy.discard(i)
                obs, reward, term, trunc, info = fut.result()
                for column, value in zip(out, (obs, reward, term, trunc, info, i)):
                    column.append(value)
        return out

    def step(self, actions: list[str], env_ids: list[int] | None = None):
        """Step the given environments concurrently; results in the order of `env_ids`."""
        ids = self._ids(env_ids)
        self.send(actions, ids)
        obs, rew, term, trunc, infos, got = self.recv()
        order = {i: k for k, i in enumerate(got)}
        pick = lambda col: [col[order[i]] for i in ids]  # noqa: E731
        return pick(obs), pick(rew), pick(term), pick(trunc), pick(infos)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for env in self.envs:
            env.close()
        if self._own_yard:
            self.yard.close()


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
