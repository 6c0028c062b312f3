"""`envyard serve`: run the HTTP/WebSocket environment server (see docs/serve.md)."""

from __future__ import annotations

import ipaddress
import signal
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from ..errors import BadInput, EnvyardError

DEFAULT_TASKS = Path("examples/tasks")


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified  # 0.0.0.0, ::
    except ValueError:
        return False


def register(app: typer.Typer, out, err, fail, emit_json, make_yard) -> None:
    @app.command()
    def serve(
        tasks: Optional[Path] = typer.Option(None, "--tasks", help="Directory of tasks, named by their directory in "
                                             "POST /envs. Default: examples/tasks if it exists, else tasks are named "
                                             "by absolute path."),
        host: str = typer.Option("127.0.0.1", help="Address to listen on. The API runs commands: anything but a "
                                 "loopback address needs a token (--no-auth is refused)."),
        port: int = typer.Option(8000, help="Port to listen on."),
        token: Optional[str] = typer.Option(None, "--token", envvar="ENVYARD_SERVE_TOKEN", show_envvar=True,
                                            metavar="TOKEN",
                                            help="Bearer token clients must send (Authorization: Bearer TOKEN), at "
                                            "least 16 characters. Default: a new random one, printed at start-up. "
                                            "Prefer the environment variable: a command line is visible to other "
                                            "users."),
        no_auth: bool = typer.Option(False, "--no-auth", help="No token: any process on this machine can use the "
                                     "API. Only with a loopback --host."),
        allow_host: list[str] = typer.Option([], "--allow-host", metavar="NAME",
                                             help="Also accept requests whose Host header is NAME (repeatable). "
                                             "Always accepted: localhost, 127.0.0.1, [::1] and the --host address."),
        max_body: str = typer.Option("2M", "--max-body", metavar="SIZE",
                                     help="Largest request body or WebSocket message, e.g. 2M or 4194304 (bytes); "
                                     "larger ones get 413."),
        max_envs: int = typer.Option(64, "--max-envs", help="Environments alive at once; more get 429."),
        idle_timeout: float = typer.Option(600, "--idle-timeout", help="Close environments idle this many seconds "
                                           "(0: never)."),
        step_timeout: float = typer.Option(60, "--step-timeout", help="Kill a command after this many seconds."),
        log_level: str = typer.Option("info", "--log-level", help="uvicorn log level: critical, error, warning, "
                                      "info, debug or trace."),
    ):
        """Serve agent environments over HTTP and WebSocket (OpenAPI docs at /docs). Clients authenticate with a
        bearer token, printed at start-up unless --token gives one."""
        try:
            import uvicorn

            from ..runtime.limits import parse_bytes
            from ..serve.guard import is_loopback, new_token
            from ..serve.http import create_app
        except ImportError as e:  # pragma: no cover - the server's dependencies are in pyproject
            fail(EnvyardError(f"the server needs FastAPI and uvicorn: {e}", fix="pip install fastapi uvicorn"))
        try:
            if tasks is None:
                tasks = DEFAULT_TASKS.resolve() if DEFAULT_TASKS.is_dir() else None
            elif not tasks.is_dir():
                raise BadInput(f"--tasks {tasks}: not a directory", fix="pass a directory holding task directories")
            if no_auth and token is not None:
                raise BadInput("--no-auth and a token (--token or ENVYARD_SERVE_TOKEN) were both given",
                               fix="drop one of them")
            if no_auth and not is_loopback(host):
                raise BadInput(f"--no-auth is refused with --host {host}: other machines may reach that address",
                               fix="drop --no-auth (a token is then made and printed), or use --host 127.0.0.1")
            max_body_bytes = parse_bytes(max_body)
            if max_body_bytes < 1:
                raise BadInput(f"--max-body must be positive, got {max_body}")
            if max_envs < 1:
                raise BadInput(f"--max-envs must be at least 1, got {max_envs}")
            if idle_timeout < 0:
                raise BadInput(f"--idle-timeout must be >= 0, got {idle_timeout}")
            if step_timeout <= 0:
                raise BadInput(f"--step-timeout must be positive, got {step_timeout}")
            if log_level not in ("critical", "error", "warning", "info", "debug", "trace"):
                raise BadInput(f"unknown --log-level {log_level!r}", fix="critical, error, warning, info, debug or trace")
            generated = token is None and not no_auth
            if generated:
                token = new_token()
            # the address it listens on is a name clients may use; a wildcard (0.0.0.0, ::) is not
            hosts = [*([] if _is_wildcard(host) else [host]), *allow_host]
            yard = make_yard()
            web = create_app(yard, tasks_root=tasks, token=None if no_auth else token, allow_hosts=hosts,
                             max_body=max_body_bytes, max_envs=max_envs, idle_timeout=idle_timeout or None,
                             step_timeout=step_timeout)
        except EnvyardError as e:
            fail(e)

        def say(text: str) -> None:
            err.print(escape(text), highlight=False)

        where = f"tasks under {tasks}" if tasks else "tasks by absolute path"
        say(f"envyard serve: http://{host}:{port} ({where}; docs at /docs)")
        if no_auth:
            say("envyard serve: no authentication (--no-auth): any process on this machine can run commands "
                "through the API")
        elif generated:
            say("envyard serve: every request but GET /health needs this header (a new token at each start; "
                "set ENVYARD_SERVE_TOKEN or --token to keep one):")
            say(f"Authorization: Bearer {token}")
        else:
            say("envyard serve: every request but GET /health needs `Authorization: Bearer TOKEN` with the token "
                "given by --token or ENVYARD_SERVE_TOKEN")
        if not is_loopback(host):
            say(f"envyard serve: requests must name the server (Host header) as one of "
                f"{', '.join(['localhost', '127.0.0.1', '[::1]', *hosts])}; --allow-host NAME adds a name")
        # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal to the handler that was in place
        # before it; under Python's default handler that kills the process (exit 143). This one makes the
        # re-raised signal (or one that comes before uvicorn listens) end the command with exit 0.
        def on_sigterm(signum, frame) -> None:
            raise typer.Exit(0)

        previous = signal.signal(signal.SIGTERM, on_sigterm)
        try:
            uvicorn.run(web, host=host, port=port, log_level=log_level, ws_max_size=max_body_bytes)
        finally:
            signal.signal(signal.SIGTERM, previous)
            yard.close()
