"""Captured output is bounded in memory and on the host's disk, whatever a command prints."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

import envyard
from envyard.aio import AsyncYard
from envyard.runtime.result import DEFAULT_MAX_SPILL, MAX_OUTPUT_CEILING, OutputBuffer, SpillBudget


def disk_used(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir())


def test_ten_seconds_of_yes_leaves_at_most_the_cap_on_disk(sb):
    r = sb.exec("timeout 10 yes", timeout=60)
    assert r.truncated
    assert len(r.stdout_bytes) < 1_100_000  # memory: the 1 MiB default cap
    spill_dir = Path(r.stdout_file).parent
    assert Path(r.stdout_file).stat().st_size == DEFAULT_MAX_SPILL
    assert disk_used(spill_dir) <= DEFAULT_MAX_SPILL
    marker = re.search(rb"\[envyard: (\d+) bytes omitted, (\d+) of them dropped for good; the first (\d+) bytes are in ",
                       r.stdout_bytes)
    assert marker and int(marker.group(3)) == DEFAULT_MAX_SPILL and int(marker.group(2)) > 0
    assert Path(r.stdout_file).read_bytes()[:4] == b"y\ny\n"


def test_small_caps_and_no_spill(sb):
    r = sb.exec("head -c 5000000 /dev/zero", max_output=1000, max_spill=100_000)
    assert r.truncated and Path(r.stdout_file).stat().st_size == 100_000
    dropped = 5_000_000 - 100_000 - 500  # neither in the spill file nor in the 500-byte tail kept in memory
    assert f"{dropped} of them dropped for good".encode() in r.stdout_bytes
    r = sb.exec("head -c 5000 /dev/zero; echo err >&2", max_output=100, max_spill=0)
    assert r.truncated and r.stdout_file is None and r.stderr == "err\n"
    assert b"4900 bytes omitted and dropped" in r.stdout_bytes


def test_all_spill_files_of_a_sandbox_share_one_budget(sb):
    sb._h.spill_budget = SpillBudget(150_000)  # the default is 1 GiB; a small one keeps the test fast
    sizes = []
    for _ in range(3):
        r = sb.exec("head -c 1000000 /dev/zero", max_output=1000, max_spill=100_000)
        assert r.truncated
        sizes.append(Path(r.stdout_file).stat().st_size if r.stdout_file else 0)
    assert sizes == [100_000, 50_000, 0]
    assert b"no spill file" in r.stdout_bytes


def test_shell_sessions_and_the_async_api_are_bounded_too(yard, sb):
    r = sb.shell().run("head -c 3000000 /dev/zero", max_output=1000, max_spill=10_000)
    assert r.truncated and Path(r.stdout_file).stat().st_size == 10_000
    assert len(r.stdout_bytes) < 1200

    async def main():
        ayard = AsyncYard(yard=yard)
        async with await ayard.sandbox("host") as asb:
            a = await asb.exec("head -c 3000000 /dev/zero", max_output=1000, max_spill=20_000)
            sh = await asb.shell()
            b = await sh.run("head -c 3000000 /dev/zero", max_output=1000, max_spill=30_000)
            return a, b, os.path.getsize(a.stdout_file), os.path.getsize(b.stdout_file)

    a, b, *sizes = asyncio.run(main())
    assert a.truncated and b.truncated and sizes == [20_000, 30_000]
    assert len(a.stdout_bytes) < 1200 and len(b.stdout_bytes) < 1200


def test_max_output_none_means_the_ceiling_not_unbounded(sb):
    assert OutputBuffer(None, Path("/nonexistent")).limit == MAX_OUTPUT_CEILING
    r = sb.exec("echo small", max_output=None)
    assert r.stdout == "small\n" and not r.truncated
    with pytest.raises(envyard.BadInput):
        sb.exec("true", max_output=MAX_OUTPUT_CEILING + 1)


@pytest.mark.parametrize("limit,spill,chunks", [
    (1, 0, [b"abc"]), (1, 5, [b"abcdefgh"]), (2, 100, [b"a", b"b", b"c"]), (10, 12, [b"0123456789", b"abcdef"]),
    (4, 3, [b"ab", b"cd", b"ef", b"gh"]), (7, 1000, [b"x" * 3] * 5),
])
def test_output_buffer_keeps_head_tail_and_a_capped_spill(tmp_path, limit, spill, chunks):
    stream = b"".join(chunks)
    buf = OutputBuffer(limit, tmp_path / "spill", max_spill=spill)
    for c in chunks:
        buf.feed(c)
    value = buf.value()
    assert buf.truncated == (len(stream) > limit)
    head, tail = limit // 2, limit - limit // 2
    assert value.startswith(stream[:head]) and value.endswith(stream[len(stream) - tail:])
    kept = (tmp_path / "spill").read_bytes() if buf.spill_file else b""
    assert kept == stream[:min(spill, len(stream))] if buf.truncated else kept == b""
    omitted = int(re.search(rb"(\d+) bytes omitted", value).group(1))
    assert omitted == len(stream) - head - tail
