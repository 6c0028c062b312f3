"""asyncio API: the same Yard and Sandbox, awaitable.

Sandbox work is blocking system calls (spawning bwrap, polling FIFOs), so each call runs on a worker thread
of a pool sized for hundreds of concurrent commands (asyncio's default pool has only cpu+4 threads). A
cancelled `exec` or `run` kills the command's process tree before the CancelledError propagates.

    async with AsyncYard() as yard:
        async with await yard.sandbox("host") as sb:
            r = await sb.exec("echo hi")
        group = await yard.fork(snapshot, 8)        # created concurrently
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import validate
from .runtime import files
from .runtime.local import Cancel, LocalShell
from .runtime.result import DEFAULT_MAX_OUTPUT, DEFAULT_MAX_SPILL, ExecResult
from .store import Image
from .yard import Sandbox, Yard

DEFAULT_THREADS = 256


class AsyncYard:
    def __init__(self, home: str | Path | None = None, *, threads: int = DEFAULT_THREADS, yard: Yard | None = None):
        self.yard = yard or Yard(home)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="envyard")

    async def _call(self, fn, *args, **kwargs):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    async def image(self, ref: str | Image) -> Image:
        return await self._call(self.yard.image, ref)

    async def pull(self, spec: str, **kwargs) -> Image:
        return await self._call(self.yard.pull, spec, **kwargs)

    async def sandbox(self, image: str | Image = "host", **kwargs) -> "AsyncSandbox":
        return AsyncSandbox(self, await self._call(self.yard.sandbox, image, **kwargs))

    async def fork(self, image: str | Image, n: int, **kwargs) -> list["AsyncSandbox"]:
        """`n` sandboxes over `image`, created concurrently; none is left behind if one fails."""
        validate.count(n)
        img = await self.image(image)
        results = await asyncio.gather(*(self.sandbox(img, **kwargs) for _ in range(n)), return_exceptions=True)
        made = [r for r in results if isinstance(r, AsyncSandbox)]
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            await asyncio.gather(*(sb.close() for sb in made))
            raise failed[0]
        return made

    async def gc(self) -> dict:
        return await self._call(self.yard.gc)

    async def close(self) -> None:
        await self._call(self.yard.close)
        self._pool.shutdown(wait=False)

    async def __aenter__(self) -> "AsyncYard":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


class AsyncSandbox:
    def __init__(self, ayard: AsyncYard, sandbox: Sandbox):
        self._ayard = ayard
        self.sync = sandbox
        self.id = sandbox.id
        self.image = sandbox.image

    def __repr__(self) -> str:
        return f"<AsyncSandbox {self.id} image={self.image.name}>"

    async def exec(self, cmd: str | list[str], *, timeout: float | None = None, cwd: str | None = None,
                   env: dict[str, str] | None = None, stdin: bytes | str | None = None,
                   max_output: int | None = DEFAULT_MAX_OUTPUT, max_spill: int = DEFAULT_MAX_SPILL,
                   on_output=None, user: str | int | None = None) -> ExecResult:
        return await _cancellable(self._ayard, self.sync.exec, cmd, timeout=timeout, cwd=cwd, env=env, stdin=stdin,
                                  max_output=max_output, max_spill=max_spill, on_output=on_output, user=user)

    async def shell(self, user: str | int | None = None) -> "AsyncShell":
        return AsyncShell(self._ayard, await self._ayard._call(self.sync.shell, user))

    async def write_file(self, path: str, data: bytes | str, *, mode: int | None = None) -> None:
        await self._ayard._call(self.sync.write_file, path, data, mode=mode)

    async def read_file(self, path: str, *, max_bytes: int = files.DEFAULT_MAX_READ) -> bytes:
        return await self._ayard._call(self.sync.read_file, path, max_bytes=max_bytes)

    async def upload(self, src, dest: str) -> None:
        await self._ayard._call(self.sync.upload, src, dest)

    async def download(self, src: str, dest, *, max_bytes: int = files.DEFAULT_MAX_DOWNLOAD,
                       max_entries: int = files.DEFAULT_MAX_ENTRIES) -> list[str]:
        return await self._ayard._call(self.sync.download, src, dest, max_bytes=max_bytes, max_entries=max_entries)

    async def snapshot(self, name: str | None = None) -> Image:
        return await self._ayard._call(self.sync.snapshot, name)

    async def fork(self, n: int, **kwargs) -> list["AsyncSandbox"]:
        validate.count(n)  # before the snapshot, which would be left behind
        return await self._ayard.fork(await self.snapshot(), n, **kwargs)

    async def reset(self) -> None:
        await self._ayard._call(self.sync.reset)

    async def close(self) -> None:
        await self._ayard._call(self.sync.close)

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


class AsyncShell:
    def __init__(self, ayard: AsyncYard, shell: LocalShell):
        self._ayard = ayard
        self.sync = shell

    async def run(self, command: str, *, timeout: float | None = None,
                  max_output: int | None = DEFAULT_MAX_OUTPUT, max_spill: int = DEFAULT_MAX_SPILL) -> ExecResult:
        return await _cancellable(self._ayard, self.sync.run, command, timeout=timeout, max_output=max_output,
                                  max_spill=max_spill)

    async def interrupt(self) -> None:
        await self._ayard._call(self.sync.interrupt)

    async def close(self) -> None:
        await self._ayard._call(self.sync.close)


async def _cancellable(ayard: AsyncYard, fn, *args, **kwargs) -> ExecResult:
    """Run a blocking exec on the pool; if the awaiting task is cancelled, kill the command, then re-raise."""
    cancel = Cancel()
    future = asyncio.get_running_loop().run_in_executor(ayard._pool, functools.partial(fn, *args, cancel=cancel, **kwargs))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        cancel.fire()
        try:
            await future  # the worker returns quickly once the tree is dead
        except Exception:
            pass
        raise
    finally:
        if future.done():
            cancel.close()
        else:
            future.add_done_callback(lambda _f: cancel.close())
