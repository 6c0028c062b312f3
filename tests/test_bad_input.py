"""Every bad argument to the public Python API raises BadInput naming it, and leaves the sandbox working."""

from __future__ import annotations

import asyncio
import math

import pytest

import envyard
from envyard.aio import AsyncYard

NAN, INF = math.nan, math.inf


def run_async(yard, body):
    async def main():
        ayard = AsyncYard(yard=yard)
        async with await ayard.sandbox("host") as asb:
            await body(ayard, asb)

    asyncio.run(main())


async def _ashell_run(asb, **kwargs):
    sh = await asb.shell()
    await sh.run(kwargs.pop("command", "true"), **kwargs)


# (name the message must mention, call(yard, host, sandbox, tmp_path))
BAD_CALLS = {
    # exec
    "timeout nan": ("timeout", lambda y, h, s, t: s.exec("true", timeout=NAN)),
    "timeout inf": ("timeout", lambda y, h, s, t: s.exec("true", timeout=INF)),
    "timeout negative": ("timeout", lambda y, h, s, t: s.exec("true", timeout=-1)),
    "timeout zero": ("timeout", lambda y, h, s, t: s.exec("true", timeout=0)),
    "timeout huge": ("timeout", lambda y, h, s, t: s.exec("true", timeout=1e12)),
    "timeout str": ("timeout", lambda y, h, s, t: s.exec("true", timeout="5")),
    "timeout bool": ("timeout", lambda y, h, s, t: s.exec("true", timeout=True)),
    "max_output zero": ("max_output", lambda y, h, s, t: s.exec("true", max_output=0)),
    "max_output negative": ("max_output", lambda y, h, s, t: s.exec("true", max_output=-5)),
    "max_output float": ("max_output", lambda y, h, s, t: s.exec("true", max_output=1.5)),
    "max_output str": ("max_output", lambda y, h, s, t: s.exec("true", max_output="1M")),
    "max_output bool": ("max_output", lambda y, h, s, t: s.exec("true", max_output=True)),
    "max_spill negative": ("max_spill", lambda y, h, s, t: s.exec("true", max_spill=-1)),
    "max_spill None": ("max_spill", lambda y, h, s, t: s.exec("true", max_spill=None)),
    "cmd empty list": ("cmd", lambda y, h, s, t: s.exec([])),
    "cmd None item": ("cmd[1]", lambda y, h, s, t: s.exec(["echo", None])),
    "cmd int item": ("cmd[1]", lambda y, h, s, t: s.exec(["echo", 3])),
    "cmd bytes item": ("cmd[0]", lambda y, h, s, t: s.exec([b"echo"])),
    "cmd None": ("cmd", lambda y, h, s, t: s.exec(None)),
    "cmd int": ("cmd", lambda y, h, s, t: s.exec(42)),
    "cmd NUL in string": ("cmd", lambda y, h, s, t: s.exec("echo a\0b")),
    "cmd NUL in argv": ("cmd[1]", lambda y, h, s, t: s.exec(["echo", "a\0b"])),
    "cwd NUL": ("cwd", lambda y, h, s, t: s.exec("true", cwd="/tmp\0x")),
    "cwd int": ("cwd", lambda y, h, s, t: s.exec("true", cwd=5)),
    "cwd empty": ("cwd", lambda y, h, s, t: s.exec("true", cwd="")),
    "env value None": ("A", lambda y, h, s, t: s.exec("true", env={"A": None})),
    "env value NUL": ("A", lambda y, h, s, t: s.exec("true", env={"A": "x\0y"})),
    "env key NUL": ("environment variable", lambda y, h, s, t: s.exec("true", env={"A\0": "1"})),
    "env key int": ("environment variable", lambda y, h, s, t: s.exec("true", env={1: "x"})),
    "env list": ("env", lambda y, h, s, t: s.exec("true", env=["A=1"])),
    "env str": ("env", lambda y, h, s, t: s.exec("true", env="A=1")),
    "stdin int": ("stdin", lambda y, h, s, t: s.exec("cat", stdin=5)),
    "stdin list": ("stdin", lambda y, h, s, t: s.exec("cat", stdin=["x"])),
    "on_output str": ("on_output", lambda y, h, s, t: s.exec("true", on_output="print")),
    # shell sessions
    "shell timeout nan": ("timeout", lambda y, h, s, t: s.shell().run("true", timeout=NAN)),
    "shell timeout inf": ("timeout", lambda y, h, s, t: s.shell().run("true", timeout=INF)),
    "shell timeout zero": ("timeout", lambda y, h, s, t: s.shell().run("true", timeout=0)),
    "shell max_output zero": ("max_output", lambda y, h, s, t: s.shell().run("true", max_output=0)),
    "shell command None": ("command", lambda y, h, s, t: s.shell().run(None)),
    "shell command NUL": ("command", lambda y, h, s, t: s.shell().run("echo a\0b")),
    "shell command list": ("command", lambda y, h, s, t: s.shell().run(["echo"])),
    # asyncio
    "async exec timeout nan": ("timeout", lambda y, h, s, t: run_async(y, lambda ay, a: a.exec("true", timeout=NAN))),
    "async exec None item": ("cmd[0]", lambda y, h, s, t: run_async(y, lambda ay, a: a.exec([None]))),
    "async shell max_output": ("max_output", lambda y, h, s, t: run_async(y, lambda ay, a: _ashell_run(a, max_output=0))),
    "async fork zero": ("n", lambda y, h, s, t: run_async(y, lambda ay, a: ay.fork("host", 0))),
    "async fork float": ("n", lambda y, h, s, t: run_async(y, lambda ay, a: ay.fork("host", 2.5))),
    "async read NUL": ("path", lambda y, h, s, t: run_async(y, lambda ay, a: a.read_file("/etc\0"))),
    # files
    "write path NUL": ("path", lambda y, h, s, t: s.write_file("/tmp/a\0b", "x")),
    "write path None": ("path", lambda y, h, s, t: s.write_file(None, "x")),
    "write data int": ("data", lambda y, h, s, t: s.write_file("/tmp/a", 5)),
    "write data None": ("data", lambda y, h, s, t: s.write_file("/tmp/a", None)),
    "write mode str": ("mode", lambda y, h, s, t: s.write_file("/tmp/a", "x", mode="755")),
    "write mode negative": ("mode", lambda y, h, s, t: s.write_file("/tmp/a", "x", mode=-1)),
    "write mode too big": ("mode", lambda y, h, s, t: s.write_file("/tmp/a", "x", mode=0o10000)),
    "write mode bool": ("mode", lambda y, h, s, t: s.write_file("/tmp/a", "x", mode=True)),
    "read path NUL": ("path", lambda y, h, s, t: s.read_file("/etc/\0passwd")),
    "read path int": ("path", lambda y, h, s, t: s.read_file(5)),
    "read max_bytes negative": ("max_bytes", lambda y, h, s, t: s.read_file("/etc/hostname", max_bytes=-1)),
    "read max_bytes float": ("max_bytes", lambda y, h, s, t: s.read_file("/etc/hostname", max_bytes=1.5)),
    "read max_bytes None": ("max_bytes", lambda y, h, s, t: s.read_file("/etc/hostname", max_bytes=None)),
    "upload missing": ("no such file", lambda y, h, s, t: s.upload(t / "missing", "/x")),
    "upload src int": ("src", lambda y, h, s, t: s.upload(5, "/x")),
    "upload src bytes": ("src", lambda y, h, s, t: s.upload(b"/tmp", "/x")),
    "upload src NUL": ("src", lambda y, h, s, t: s.upload("/tmp\0", "/x")),
    "upload dest NUL": ("dest", lambda y, h, s, t: s.upload(t, "/x\0")),
    "download src NUL": ("src", lambda y, h, s, t: s.download("/etc\0", t / "o")),
    "download dest int": ("dest", lambda y, h, s, t: s.download("/etc/hostname", 5)),
    "download max_bytes": ("max_bytes", lambda y, h, s, t: s.download("/etc/hostname", t / "o", max_bytes=-1)),
    "download max_entries": ("max_entries", lambda y, h, s, t: s.download("/etc", t / "o", max_entries=0)),
    # Yard.sandbox / fork / keep_warm, Sandbox.fork / snapshot
    "sandbox image int": ("image", lambda y, h, s, t: y.sandbox(5)),
    "sandbox network None": ("network", lambda y, h, s, t: y.sandbox(h, network=None)),
    "sandbox network list": ("network", lambda y, h, s, t: y.sandbox(h, network=["none"])),
    "sandbox workdir int": ("workdir", lambda y, h, s, t: y.sandbox(h, workdir=5)),
    "sandbox workdir NUL": ("workdir", lambda y, h, s, t: y.sandbox(h, workdir="/a\0b")),
    "sandbox env int value": ("A", lambda y, h, s, t: y.sandbox(h, env={"A": 1})),
    "sandbox env str": ("env", lambda y, h, s, t: y.sandbox(h, env="A=1")),
    "sandbox limits pids str": ("pids", lambda y, h, s, t: y.sandbox(h, limits={"pids": "x"})),
    "sandbox limits pids bool": ("pids", lambda y, h, s, t: y.sandbox(h, limits={"pids": True})),
    "sandbox limits cpus nan": ("cpus", lambda y, h, s, t: y.sandbox(h, limits={"cpus": NAN})),
    "sandbox limits cpus inf": ("cpus", lambda y, h, s, t: y.sandbox(h, limits={"cpus": INF})),
    "sandbox limits list": ("limits", lambda y, h, s, t: y.sandbox(h, limits=[1])),
    "sandbox limits int key": ("limit", lambda y, h, s, t: y.sandbox(h, limits={1: 2})),
    "sandbox binds str": ("binds", lambda y, h, s, t: y.sandbox(h, binds="x")),
    "sandbox binds int target": ("binds", lambda y, h, s, t: y.sandbox(h, binds={str(t): 5})),
    "sandbox binds NUL": ("binds", lambda y, h, s, t: y.sandbox(h, ro_binds={"/etc\0": "/x"})),
    "fork zero": ("n", lambda y, h, s, t: y.fork(h, 0)),
    "fork negative": ("n", lambda y, h, s, t: y.fork(h, -1)),
    "fork float": ("n", lambda y, h, s, t: y.fork(h, 2.5)),
    "fork str": ("n", lambda y, h, s, t: y.fork(h, "2")),
    "fork bool": ("n", lambda y, h, s, t: y.fork(h, True)),
    "fork bad kwarg value": ("network", lambda y, h, s, t: y.fork(h, 2, network="bridge")),
    "sandbox fork zero": ("n", lambda y, h, s, t: s.fork(0)),
    "async sandbox fork": ("n", lambda y, h, s, t: run_async(y, lambda ay, a: a.fork("2"))),
    "keep_warm negative": ("size", lambda y, h, s, t: y.keep_warm(h, -1)),
    "keep_warm float": ("size", lambda y, h, s, t: y.keep_warm(h, 1.5)),
    "keep_warm str": ("size", lambda y, h, s, t: y.keep_warm(h, "2")),
    "keep_warm network": ("network", lambda y, h, s, t: y.keep_warm(h, 1, network="bridge")),
    "keep_warm workdir": ("workdir", lambda y, h, s, t: y.keep_warm(h, 1, workdir="rel")),
    "snapshot name int": ("name", lambda y, h, s, t: s.snapshot(5)),
}


@pytest.fixture(scope="module")
def shared(yard, host):
    with yard.sandbox(host) as s:
        yield s


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_bad_argument_raises_bad_input(yard, host, shared, tmp_path, case):
    names, call = BAD_CALLS[case]
    before = {r.id for r in yard.store.sandboxes()}
    images = {i.name for i in yard.images()}
    with pytest.raises(envyard.BadInput) as info:
        call(yard, host, shared, tmp_path)
    assert names.lower() in info.value.message.lower(), str(info.value)
    assert info.value.fix, f"no fix given: {info.value}"
    # The sandbox is unharmed, and no sandbox was left behind.
    assert shared.exec("echo ok").stdout == "ok\n"
    shared.write_file("/tmp/still", "works")
    assert shared.read_file("/tmp/still") == b"works"
    yard.wait_closed()  # the asyncio cases open (and close) a sandbox of their own
    assert {r.id for r in yard.store.sandboxes()} <= before
    assert {i.name for i in yard.images()} == images  # no snapshot left behind by a fork refused late


def test_nul_bytes_are_refused_not_dropped(shared):
    with pytest.raises(envyard.BadInput, match="NUL"):
        shared.exec("printf ok\0; touch /tmp/nul-ran")
    assert shared.exec("test -e /tmp/nul-ran").exit_code == 1  # nothing ran


def test_numbers_beyond_int_and_float_are_still_numbers():
    """validate checks int and float first and imports numbers only for anything else (numpy's scalars,
    Fraction): those stay accepted, and strings, bools and complex numbers stay refused."""
    from fractions import Fraction

    from envyard import validate
    from envyard.errors import BadInput

    class Count(int):  # an int subclass
        pass

    assert validate.timeout(Fraction(3, 2)) == 1.5 and validate.timeout(2) == 2.0
    assert validate.integer(Count(7), "pids", minimum=1) == 7
    for bad in ("3", True, 1 + 2j):
        with pytest.raises(BadInput):
            validate.timeout(bad)
    for bad in (Fraction(3, 1), 3.0, "3", False):
        with pytest.raises(BadInput):
            validate.integer(bad, "pids", minimum=1)
    numpy = pytest.importorskip("numpy")
    assert validate.integer(numpy.int64(5), "pids", minimum=1) == 5
    assert validate.timeout(numpy.float32(0.5)) == 0.5
