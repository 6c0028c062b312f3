"""Checks for the arguments of the public Python API. Each returns the value to use or raises BadInput naming
the argument and what to give instead, so a bad call never surfaces as a TypeError from deep inside (or, for
NaN and NUL bytes, as silently wrong behaviour)."""

from __future__ import annotations

import math
import re
import os
from collections import namedtuple
from collections.abc import Mapping
from pathlib import Path

from .errors import BadInput
from .runtime.backend import SECURITY_LEVELS
from .runtime.holder import check_env
from .runtime.limits import Limits
from .runtime.result import MAX_OUTPUT_CEILING

MAX_TIMEOUT = 1_000_000.0  # seconds (11.5 days): poll() takes milliseconds in a C int, which caps near 24 days


def _type_name(value) -> str:
    return type(value).__name__


def text(value, name: str, *, allow_empty: bool = True) -> str:
    """A str without NUL bytes (the kernel cuts strings at NUL, so one would silently change the meaning)."""
    if not isinstance(value, str):
        raise BadInput(f"{name} must be a string, not {_type_name(value)}", fix=f"pass {name} as a str")
    if "\0" in value:
        raise BadInput(f"{name} contains a NUL byte", fix=f"remove the NUL (\\0) characters from {name}")
    if not allow_empty and not value:
        raise BadInput(f"{name} is empty", fix=f"give a non-empty {name}")
    return value


def _is_a(kind: str, value) -> bool:
    """isinstance(value, numbers.<kind>) for what is not a plain int or float (numpy's numbers): importing
    numbers costs every `envyard run` 0.2-0.4 ms, and a plain int or float is the common case."""
    import numbers

    return isinstance(value, getattr(numbers, kind))


def timeout(value, name: str = "timeout") -> float | None:
    """None (no timeout) or a finite number of seconds in (0, MAX_TIMEOUT]."""
    if value is None:
        return None
    if isinstance(value, bool) or not (isinstance(value, (int, float)) or _is_a("Real", value)):
        raise BadInput(f"{name} must be a number of seconds or None, not {_type_name(value)}",
                       fix=f"give e.g. {name}=30, or None for no limit")
    seconds = float(value)
    if math.isnan(seconds) or seconds <= 0 or seconds > MAX_TIMEOUT:
        raise BadInput(f"{name} must be more than 0 and at most {MAX_TIMEOUT:.0f} seconds, got {value!r}",
                       fix=f"give e.g. {name}=30, or None for no limit")
    return seconds


def integer(value, name: str, *, minimum: int, maximum: int | None = None, fix: str | None = None) -> int:
    """An integer (not a bool, not a float; numpy's integers are fine) in [minimum, maximum]."""
    if isinstance(value, bool) or not (isinstance(value, int) or _is_a("Integral", value)):
        raise BadInput(f"{name} must be an integer, not {_type_name(value)}", fix=fix or f"give an int >= {minimum}")
    value = int(value)
    if value < minimum or (maximum is not None and value > maximum):
        span = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise BadInput(f"{name} must be {span}, got {value}", fix=fix or f"give an int {span}")
    return value


def max_output(value) -> int:
    """Bytes of one stream kept in memory; None means the ceiling (memory is never unbounded)."""
    if value is None:
        return MAX_OUTPUT_CEILING
    return integer(value, "max_output", minimum=1, maximum=MAX_OUTPUT_CEILING,
                   fix=f"give a byte count from 1 to {MAX_OUTPUT_CEILING} (None means {MAX_OUTPUT_CEILING})")


def max_spill(value) -> int:
    return integer(value, "max_spill", minimum=0, fix="give a byte count >= 0 (0: no spill file)")


# timeout: float | None, max_output: int, max_spill: int, on_output: a callable or None. A plain namedtuple,
# not typing.NamedTuple: importing typing is a cost of every `envyard run`.
RunOptions = namedtuple("RunOptions", ["timeout", "max_output", "max_spill", "on_output"])


def run_options(seconds, out_cap, spill_cap, on_output) -> RunOptions:
    """The options `exec` and a shell's `run` share (timeout, max_output, max_spill, on_output), checked."""
    return RunOptions(timeout(seconds), max_output(out_cap), max_spill(spill_cap), callback(on_output, "on_output"))


def command(cmd) -> str | list[str]:
    """A shell string, or a non-empty argv list (or tuple) of strings; no NUL bytes anywhere."""
    if isinstance(cmd, str):
        return text(cmd, "cmd")
    if isinstance(cmd, (list, tuple)):
        if not cmd:
            raise BadInput("cmd is an empty argument list", fix="give a shell string or a non-empty argv list")
        for i, arg in enumerate(cmd):
            text(arg, f"cmd[{i}]")
        return list(cmd)
    raise BadInput(f"cmd must be a shell string or a list of strings, not {_type_name(cmd)}",
                   fix='give e.g. "ls -l /" or ["ls", "-l", "/"]')


def stdin(value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise BadInput(f"stdin must be bytes, str or None, not {_type_name(value)}", fix="pass the input as bytes or str")


def data(value, name: str = "data") -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise BadInput(f"{name} must be bytes or str, not {_type_name(value)}", fix=f"pass {name} as bytes or str")


def environment(value, name: str = "env") -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BadInput(f"{name} must be a dict of str to str, not {_type_name(value)}",
                       fix=f'give e.g. {name}={{"A": "1"}}')
    return check_env(value)


def callback(value, name: str):
    if value is not None and not callable(value):
        raise BadInput(f"{name} must be callable or None, not {_type_name(value)}", fix=f"pass a function as {name}")
    return value


def mode(value) -> int | None:
    if value is None:
        return None
    return integer(value, "mode", minimum=0, maximum=0o7777, fix="give permission bits as an int, e.g. mode=0o755")


def count(value, name: str = "n") -> int:
    return integer(value, name, minimum=1, fix=f"give {name} as a positive int")


def host_path(value, name: str) -> Path:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, bytes) or not isinstance(value, str):
        raise BadInput(f"{name} must be a host path (str or Path), not {_type_name(value)}",
                       fix=f"pass {name} as a str or pathlib.Path")
    return Path(text(value, name, allow_empty=False))


def resource_limits(value) -> Limits:
    if value is not None and not isinstance(value, (Limits, Mapping)):
        raise BadInput(f"limits must be an envyard.Limits or a dict, not {_type_name(value)}",
                       fix='give e.g. limits={"memory": "1G", "pids": 256}')
    return Limits.coerce(dict(value) if isinstance(value, Mapping) else value)


def sandbox_options(*, network, limits, env, workdir, binds, ro_binds, networks) -> None:
    """The options shared by Yard.sandbox, Yard.keep_warm and Yard.fork."""
    from .runtime.podnet import PodNetwork

    if isinstance(network, PodNetwork):
        if network.closed:
            raise BadInput("the pod network given is closed", fix="make a new PodNetwork for the sandbox")
    elif not isinstance(network, str) or network not in networks:
        raise BadInput(f"unknown network policy {network!r}",
                       fix="use 'none' (default), 'host', or an envyard.PodNetwork")
    resource_limits(limits)
    environment(env)
    if workdir is not None and not text(workdir, "workdir").startswith("/"):
        raise BadInput(f"workdir must be an absolute path, not {workdir!r}", fix="give a path starting with /")
    for name, table, need in (("binds", binds, "an existing host directory"),
                              ("ro_binds", ro_binds, "an existing host path")):
        if table is None:
            continue
        if not isinstance(table, Mapping):
            raise BadInput(f"{name} must be a dict of host path to sandbox path, not {_type_name(table)}",
                           fix=f'give e.g. {name}={{"/host/dir": "/inside"}}')
        for host, inside in table.items():
            host = text(host, f"{name} key")
            inside = text(inside, f"{name}[{host!r}]")
            exists = Path(host).is_dir() if name == "binds" else Path(host).exists()
            if not exists or not inside.startswith("/"):
                raise BadInput(f"{name} {host} -> {inside}: needs {need} and an absolute path inside",
                               fix=f"map {need} to a path starting with /")


HOSTNAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def hostname(value: object) -> str | None:
    if value is not None and (not isinstance(value, str) or not HOSTNAME_RE.match(value)):
        raise BadInput(f"invalid hostname {value!r}", fix="use letters, digits and inner '-', at most 63 characters")
    return value


def security(level: object) -> str:
    if level not in SECURITY_LEVELS:
        raise BadInput(f"unknown security level {level!r}",
                       fix="use 'default', or 'relaxed' to drop the seccomp filter (see docs/security.md)")
    return level


USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,31})?$")


def user(value: object) -> str | None:
    """A user to run as: a name or a uid, optionally with `:group` (as an image's USER names one); None for
    root."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return str(value)
    if isinstance(value, str) and USER_RE.match(value):
        return value
    raise BadInput(f"user must be a user name or a uid, not {value!r}",
                   fix="give a name from the image's /etc/passwd (e.g. 'app'), a number, or USER:GROUP")
