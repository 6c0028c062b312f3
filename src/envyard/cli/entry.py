"""The `envyard` console script. `envyard run IMAGE -- CMD` is the hot path (agents and scripts call it in loops),
and building the typer app costs far more than running a sandbox: typer and its pydantic type adapters, rich,
and every command module. So a plain `run` command line, one whose meaning is certain, is parsed here and run
directly; anything else — help, an unknown or malformed option, a missing argument, other commands — goes to
typer, which gives its usual answers and errors. tests/test_cli.py checks that both parsers agree."""

from __future__ import annotations

import os
import re
import signal
import sys

# `run`'s options as cli/main.py declares them: long name -> (parameter, kind); a flag takes no value.
_RUN_OPTIONS = {
    "--network": ("network", str), "--memory": ("memory", str), "--pids": ("pids", int), "--cpus": ("cpus", float),
    "--disk": ("disk", str), "--env": ("env", list), "-e": ("env", list), "--workdir": ("workdir", str),
    "-w": ("workdir", str), "--timeout": ("timeout", float), "--json": ("as_json", bool),
    "--security": ("security", str), "--backend": ("backend", str),
}
_INT = re.compile(r"0|[1-9][0-9]{0,8}")  # values whose reading by typer (pydantic) is not in doubt
_FLOAT = re.compile(r"(0|[1-9][0-9]{0,8})(\.[0-9]{1,6})?")


def parse_run(args: list[str]) -> dict | None:
    """`run`'s parameters from its arguments, or None when typer should decide (help, anything unusual)."""
    params: dict = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break  # IMAGE: options go before it (allow_interspersed_args is off)
        name, eq, value = arg.partition("=")
        spec = _RUN_OPTIONS.get(name)
        if spec is None or (eq and not name.startswith("--")):
            return None  # -h/--help, unknown options, -eK=V style short forms: typer's answer
        key, kind = spec
        if kind is bool:
            if eq:
                return None
            params[key] = True
            i += 1
            continue
        if not eq:
            if i + 1 >= len(args):
                return None
            value = args[i + 1]
            i += 1
        i += 1
        if kind is int:
            if not _INT.fullmatch(value):
                return None
            value = int(value)
        elif kind is float:
            if not _FLOAT.fullmatch(value):
                return None
            value = float(value)
        if kind is list:
            params.setdefault(key, []).append(value)
        else:
            params[key] = value
    rest = args[i:]
    if len(rest) < 2:
        return None  # IMAGE or CMD missing: typer's usage error
    return {"image": rest[0], "cmd": rest[1:], **params}


def main(app=None) -> None:
    """The console script: the fast path for a plain `envyard run`, typer for everything else."""
    signal.signal(signal.SIGTERM, _terminate)
    try:
        _main(app)
    except SystemExit as e:
        if e.code == 130 and _terminated:
            raise SystemExit(143) from None
        raise


def _main(app) -> None:
    argv = sys.argv[1:]
    params = parse_run(argv[1:]) if argv[:1] == ["run"] and not _completing() else None
    if params is not None:
        import gc

        # Most of this process's work is importing the sandbox code: thousands of long-lived objects and next to
        # no garbage, which still set off the cycle collector ~25 times, and which the interpreter's exit would
        # collect and tear down once more (together ~25-50 ms of CPU on a busy 2-core VM). So the collector is
        # off while `run` runs (reference counting frees everything as usual), and what exists when it returns
        # is frozen: the exit does not collect it. Of that, only the store's database connection held a
        # resource, and it is closed at exit regardless (store/db.py).
        gc.disable()
        try:
            code = _run(params)
        finally:
            gc.freeze()
            gc.enable()
        sys.exit(code)
    if app is None:
        from .main import app
    app()


_terminated = False


def _terminate(signum, frame) -> None:
    """SIGTERM (`timeout`, `kill`, a CI runner's cancel) takes Ctrl-C's path: each command closes its sandboxes
    and removes its partial work, then the process exits 143. Default handling would kill the process on the
    spot and leave all of that to `envyard gc`. `serve` installs its own handler (a graceful shutdown)."""
    global _terminated
    _terminated = True
    from ..errors import Terminated

    raise Terminated


def _completing() -> bool:
    return any(k.startswith("_ENVYARD") for k in os.environ)


def _run(params: dict) -> int:
    """What typer's standalone mode would do with `run`'s result and errors (typer/core.py `_main`)."""
    from .run import RUN_ERROR, Failed, run

    try:
        return run(**params)
    except Failed as e:
        from .main import _fail

        try:
            _fail(e.error, RUN_ERROR)
        except Exception as stop:  # typer.Exit
            return getattr(stop, "exit_code", RUN_ERROR)
        return RUN_ERROR
    except KeyboardInterrupt:
        return 130
