"""The console script's fast path for `envyard run` (cli/entry.py) must read a command line exactly as typer does,
and hand everything it is not sure of to typer. Checked against typer's own parser (no sandbox, no root)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
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
