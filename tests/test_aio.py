"""The asyncio API."""

from __future__ import annotations

import asyncio
import time

import pytest

from envyard.aio import AsyncYard
from conftest import sandbox_processes


@pytest.fixture
def ayard(yard):
    return AsyncYard(yard=yard)


def test_async_exec_shell_files_snapshot(ayard, host):
    async def main():
        async with await ayard.sandbox(host) as sb:
            r = await sb.exec("echo hi")
            assert r.stdout == "hi\n"
            sh = await sb.shell()
            await sh.run("cd /tmp")
            assert (await sh.run("pwd")).stdout == "/tmp\n"
            await sb.write_file("/tmp/f", "data")
            assert await sb.read_file("/tmp/f") == b"data"
            snap = await sb.snapshot()
        kids = await ayard.fork(snap, 4)
        outs = await asyncio.gather(*(k.exec("cat /tmp/f") for k in kids))
        assert [o.stdout for o in outs] == ["data"] * 4
        await asyncio.gather(*(k.close() for k in kids))
        ayard.yard.remove_image(snap.name)

    asyncio.run(main())


def test_many_concurrent_commands_run_side_by_side(ayard, host):
    async def main():
        sbs = await ayard.fork(host, 16)
        start = time.monotonic()
        results = await asyncio.gather(*(sb.exec("sleep 0.5; echo done") for sb in sbs))
        elapsed = time.monotonic() - start
        await asyncio.gather(*(sb.close() for sb in sbs))
        return results, elapsed

    results, elapsed = asyncio.run(main())
    assert all(r.stdout == "done\n" for r in results)
    assert elapsed < 3  # not serialised on a small default thread pool


def test_cancelling_an_exec_kills_the_command(ayard, host):
    async def main():
        async with await ayard.sandbox(host) as sb:
            task = asyncio.create_task(sb.exec("sleep 1000 & sleep 1000"))
            await asyncio.sleep(0.3)
            task.cancel()
            start = time.monotonic()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert time.monotonic() - start < 3
            left = await sb.exec("ps -eo args")
            assert "sleep 1000" not in left.stdout
            sh = await sb.shell()
            task = asyncio.create_task(sh.run("sleep 1000"))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert (await sh.run("echo alive")).stdout == "alive\n"
            return sb

    sb = asyncio.run(main())
    ayard.yard.wait_closed()
    assert sandbox_processes(sb.sync) == []
