"""The console script's fast path for `envyard run` (cli/entry.py) must read a command line exactly as typer does,
and hand everything it is not sure of to typer. Checked against typer's own parser; the last test runs a real
`envyard run` and checks what it imported."""

from __future__ import annotations

import inspect
import json
import os
import site
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer

from envyard.cli.entry import parse_run
from envyard.cli.main import app
from envyard.cli.run import run

SRC = Path(__file__).resolve().parents[1] / "src"

ACCEPTED = [
    ["host", "--", "true"],
    ["host", "true"],
    ["host", "sh", "-c", "echo hi; exit 3"],
    ["--", "host", "true"],
    ["host", "--"],
    ["--network", "host", "host", "--", "ls", "-h", "--json"],
    ["--network=none", "--memory", "512M", "--pids", "64", "--cpus", "0.5", "--disk", "2G", "debian:bookworm", "x"],
    ["-e", "A=1", "--env", "B=2", "--env=C=3=4", "-w", "/tmp", "--workdir=/srv", "host", "pwd"],
    ["--timeout", "2.5", "--json", "--security", "relaxed", "--backend", "docker", "img", "--", "true"],
    ["--timeout", "0", "--pids", "0", "host", "true"],
    ["--memory", "--json", "host", "true"],  # an option's value may look like an option: click takes it as is
    ["host", "--network", "bad", "true"],  # after IMAGE everything is the command (no interspersed options)
    ["-", "true"],
]

LEFT_TO_TYPER = [
    [], ["host"], ["--", "host"], ["-h"], ["--help"], ["--json", "-h", "host", "true"], ["--bogus", "host", "true"],
    ["--pids", "many", "host", "true"], ["--pids", "-1", "host", "true"], ["--pids", "1_000", "host", "true"],
    ["--cpus", "1e3", "host", "true"], ["--cpus", "inf", "host", "true"], ["--timeout", " 1", "host", "true"],
    ["--json=yes", "host", "true"], ["-w/tmp", "host", "pwd"], ["-eA=1", "host", "env"], ["--network"],
    ["--no-json", "host", "true"], ["--mem", "1G", "host", "true"],
]


def typer_params(args: list[str]) -> dict:
    group = typer.main.get_command(app)
    with group.make_context("envyard", ["run", *args]) as top:
        command = group.get_command(top, "run")
        with command.make_context("run", list(args), parent=top) as ctx:
            return dict(ctx.params)


def with_defaults(parsed: dict) -> dict:
    defaults = {k: p.default for k, p in inspect.signature(run).parameters.items()
                if p.default is not inspect.Parameter.empty}
    params = {**defaults, **parsed}
    params["env"] = params["env"] or []
    return params


@pytest.mark.parametrize("args", ACCEPTED, ids=" ".join)
def test_fast_path_reads_a_command_line_as_typer_does(args):
    fast = parse_run(args)
    assert fast is not None, "a plain command line should take the fast path"
    assert with_defaults(fast) == typer_params(args)


@pytest.mark.parametrize("args", LEFT_TO_TYPER, ids=lambda a: " ".join(a) or "(nothing)")
def test_anything_unusual_goes_to_typer(args):
    assert parse_run(args) is None


def test_help_and_usage_errors_are_typers(tmp_path):
    """Through the console entry: `run -h` prints typer's help, a missing CMD typer's usage error (exit 2)."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "ENVYARD_HOME": str(tmp_path / "home"), "COLUMNS": "120"}
    entry = [sys.executable, "-c", "from envyard.cli.entry import main; main()", "run"]
    help_ = subprocess.run([*entry, "-h"], env=env, capture_output=True, text=True, timeout=60)
    assert help_.returncode == 0 and "Run one command in a throwaway sandbox" in help_.stdout
    missing = subprocess.run([*entry, "host"], env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "Missing argument" in missing.stderr


def test_the_console_script_does_not_load_typer_rich_or_pydantic_for_run():
    """`envyard run` imports only what running a sandbox needs (checked without running one: the command fails
    at once on an unknown backend, after the fast path has chosen it)."""
    code = ("import sys; sys.argv = ['envyard', 'run', '--backend', 'nope', 'host', 'true']\n"
            "from envyard.cli import entry\n"
            "from envyard.cli import run as r\n"
            "try:\n"
            "    r.run(**entry.parse_run(sys.argv[2:]))\n"
            "except r.Failed:\n"
            "    pass\n"
            "heavy = sorted(m for m in ('typer', 'rich', 'pydantic', 'click', 'fastapi', 'gymnasium', 'openai', "
            "'asyncio', 'pyseccomp') if m in sys.modules)\n"
            "print(','.join(heavy))")
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(SRC)},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""


# Modules a plain `envyard run` must not import: the typer CLI and its helpers, typing (runtime/protocols.py),
# and what only other features use (file access, warm pools, other backends); dataclasses (with inspect, ast
# and dis: the records on this path are envyard.record classes), platform, and shutil (with zlib, bz2 and lzma:
# envyard.which finds programs). hashlib and glob are allowed only when the host mask is rebuilt (a new store,
# a changed user database): a start that reuses the recorded mask needs neither. (Still imported, and needed:
# pathlib, sqlite3, subprocess, json, re.)
NOT_ON_RUN_PATH = ("typer", "rich", "pydantic", "click", "typing", "asyncio", "pyseccomp", "ctypes", "logging",
                   "random", "socket", "concurrent.futures", "dataclasses", "inspect", "ast", "dis", "platform",
                   "shutil", "bz2", "lzma",
                   "envyard.runtime.protocols", "envyard.runtime.files", "envyard.runtime.applylayer",
                   "envyard.runtime.warm", "envyard.runtime.docker_backend")
ONLY_FOR_A_NEW_MASK = ("hashlib", "glob", "envyard.bases.hostmask")

RUN_AND_LIST_MODULES = """
import sys
at_start = set(sys.modules)  # the interpreter's own
import atexit, gc, json
from pathlib import Path
current = Path(sys.argv[1], "host", "mask-current.json")
def read():
    try:
        return current.read_bytes()
    except OSError:
        return None
before = read()
def open_databases():
    import sqlite3
    gc.unfreeze()  # what the entry point froze is not in get_objects()
    n = 0
    for obj in gc.get_objects():
        if isinstance(obj, sqlite3.Connection):
            try:
                obj.total_changes
                n += 1
            except sqlite3.ProgrammingError:  # closed
                pass
    return n
atexit.register(lambda: print(json.dumps({"modules": sorted(set(sys.modules) - at_start),
                                          "mask_rebuilt": read() != before, "gc_enabled": gc.isenabled(),
                                          "open_databases": open_databases()})))
sys.argv = ["envyard", "run", "host", "--", "true"]
from envyard.cli.entry import main
main()
"""


def test_a_run_imports_only_what_running_a_sandbox_needs(yard, host):
    """`envyard run host -- true` through the console script's entry point, for real: what its process imported
    beyond the interpreter's start (issue #12: each of these cost milliseconds of every start)."""
    # -S: without this machine's .pth files, some of which import typing, re or random into every interpreter
    # (a normal install has none); site-packages stays reachable through PYTHONPATH.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), *site.getsitepackages()]),
           "ENVYARD_HOME": str(yard.store.home)}
    # The first run in a store compiles the seccomp program (pyseccomp, ctypes) and caches it; the runs after it
    # are what is measured. Another process may change the machine state the mask is keyed by: then try again.
    for attempt in range(4):
        r = subprocess.run([sys.executable, "-S", "-c", RUN_AND_LIST_MODULES, str(yard.store.home)], env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        seen = json.loads(r.stdout.splitlines()[-1])
        if attempt and not seen["mask_rebuilt"]:
            break
    modules = set(seen["modules"])
    assert {"envyard.runtime.local", "envyard.yard"} <= modules  # it did run a sandbox
    assert seen["gc_enabled"]  # the entry point turns the cycle collector off while `run` runs
    assert seen["open_databases"] == 0  # the exit does not collect, but the store's connection is closed
    assert sorted(modules & set(NOT_ON_RUN_PATH)) == []
    if not seen["mask_rebuilt"]:
        assert sorted(modules & set(ONLY_FOR_A_NEW_MASK)) == []


PREPARE_AND_MAYBE_FINISH = """
import os, sys
from envyard.runtime import userns
userns.prepare()
pid = userns._started.pid
if sys.argv[1] == "finish":
    fd = userns.namespace_fd()
    print(pid, os.readlink(f"/proc/self/fd/{fd}") != os.readlink("/proc/self/ns/user"), flush=True)
else:
    print(pid, "unfinished", flush=True)
"""


@pytest.mark.parametrize("how", ["finish", "exit"])
def test_a_user_namespace_started_early_is_finished_or_goes_away(how):
    """`envyard run` starts the namespace's child before its imports (userns.prepare). Finished, the fd names a
    namespace of its own; not finished (a bad argument ends the run first), the child exits with the process."""
    r = subprocess.run([sys.executable, "-c", PREPARE_AND_MAYBE_FINISH, how], env={**os.environ, "PYTHONPATH": str(SRC)},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    pid, result = r.stdout.split()
    assert result == ("True" if how == "finish" else "unfinished")
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not Path(f"/proc/{pid}").exists(), "the namespace's child outlived the process that started it"
