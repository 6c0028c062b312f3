"""`envyard run`'s body, shared by the typer command (cli/main.py) and the console script's fast path
(cli/entry.py). It imports neither typer nor rich: a failure is reported by main's `_fail`, loaded then."""

from __future__ import annotations

import json
import sys

from ..errors import BadInput, EnvyardError

RUN_ERROR = 125  # `run` passes the command's exit code through, so its own failures use 125 (as docker does)


class Failed(Exception):
    """envyard's own error in `run`: the caller prints it (with main's wording) and exits RUN_ERROR."""

    def __init__(self, error: EnvyardError):
        super().__init__(error.message)
        self.error = error


def run(image: str, cmd: list[str], *, network: str = "none", memory: str | None = None, pids: int | None = None,
        cpus: float | None = None, disk: str | None = None, env: list[str] | None = None, workdir: str | None = None,
        timeout: float | None = None, as_json: bool = False, security: str = "default",
        backend: str = "local") -> int:
    """Run one command in a throwaway sandbox; the exit code `envyard run` exits with. Raises Failed."""
    if backend == "local":
        from ..runtime import userns

        userns.prepare()  # the sandbox's user namespace gets made while the imports below run
    from ..runtime.limits import Limits
    from ..yard import Yard

    try:
        cmd = strip_dashes(cmd)
        yard = Yard(backend=backend)
        if timeout is not None and timeout <= 0:
            raise BadInput(f"--timeout must be positive, got {timeout}")
        if as_json:
            from ..runtime.local import TIMEOUT_EXIT

            with yard.sandbox(image, network=network, limits=Limits(memory=memory, pids=pids, cpus=cpus, disk=disk),
                              env=env_pairs(env), workdir=workdir, security=security) as sb:
                r = sb.exec(cmd if len(cmd) > 1 else cmd[0], timeout=timeout)
            sys.stdout.write(json.dumps({"sandbox": sb.id, "image": sb.image.name, **r.to_dict()}, indent=2,
                                        default=str) + "\n")
            return TIMEOUT_EXIT if r.timed_out else r.exit_code
        check_spec(image, network, workdir)
        return yard.run_attached(image, cmd, timeout=timeout, network=network,
                                 limits=Limits(memory=memory, pids=pids, cpus=cpus, disk=disk), env=env_pairs(env),
                                 workdir=workdir, security=security)
    except EnvyardError as e:
        raise Failed(e) from None


def check_spec(image: str, network: str, workdir: str | None) -> None:
    """The CLI's own wording for bad sandbox options of the commands that attach a terminal."""
    if network not in ("none", "host"):
        raise BadInput(f"unknown network policy {network!r}", fix="use 'none' (default) or 'host'")
    if workdir is not None and not workdir.startswith("/"):
        raise BadInput(f"workdir must be an absolute path, not {workdir!r}")


def strip_dashes(cmd: list[str]) -> list[str]:
    cmd = cmd[1:] if cmd and cmd[0] == "--" else cmd
    if not cmd:
        raise BadInput("no command given", fix="envyard run IMAGE -- CMD [ARGS...]")
    return cmd


def env_pairs(pairs: list[str] | None) -> dict[str, str]:
    env = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise BadInput(f"--env takes KEY=VALUE, got {pair!r}")
        k, v = pair.split("=", 1)
        env[k] = v
    return env
