"""`envyard serve`: run the HTTP/WebSocket environment server (see docs/serve.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from ..errors import BadInput, EnvyardError

DEFAULT_TASKS = Path("examples/tasks")


def register(app: typer.Typer, out, err, fail, emit_json, make_yard) -> None:
    @app.command()
    def serve(
        tasks: Optional[Path] = typer.Option(None, "--tasks", help="Directory of tasks, named by their directory in "
                                             "POST /envs. Default: examples/tasks if it exists, else tasks are named "
                                             "by absolute path."),
        host: str = typer.Option("127.0.0.1", help="Address to listen on (the API runs commands: keep it local "
                                 "or behind an authenticating proxy)."),
        port: int = typer.Option(8000, help="Port to listen on."),
        max_envs: int = typer.Option(64, "--max-envs", help="Environments alive at once; more get 429."),
        idle_timeout: float = typer.Option(600, "--idle-timeout", help="Close environments idle this many seconds "
                                           "(0: never)."),
        step_timeout: float = typer.Option(60, "--step-timeout", help="Kill a command after this many seconds."),
        log_level: str = typer.Option("info", "--log-level", help="uvicorn log level: critical, error, warning, "
                                      "info, debug or trace."),
    ):
        """Serve agent environments over HTTP and WebSocket (OpenAPI docs at /docs)."""
        try:
            import uvicorn

            from ..serve.http import create_app
        except ImportError as e:  # pragma: no cover - the server's dependencies are in pyproject
            fail(EnvyardError(f"the server needs FastAPI and uvicorn: {e}", fix="pip install fastapi uvicorn"))
        try:
            if tasks is None:
                tasks = DEFAULT_TASKS.resolve() if DEFAULT_TASKS.is_dir() else None
            elif not tasks.is_dir():
                raise BadInput(f"--tasks {tasks}: not a directory", fix="pass a directory holding task directories")
            if max_envs < 1:
                raise BadInput(f"--max-envs must be at least 1, got {max_envs}")
            if idle_timeout < 0:
                raise BadInput(f"--idle-timeout must be >= 0, got {idle_timeout}")
            if step_timeout <= 0:
                raise BadInput(f"--step-timeout must be positive, got {step_timeout}")
            if log_level not in ("critical", "error", "warning", "info", "debug", "trace"):
                raise BadInput(f"unknown --log-level {log_level!r}", fix="critical, error, warning, info, debug or trace")
            yard = make_yard()
            web = create_app(yard, tasks_root=tasks, max_envs=max_envs, idle_timeout=idle_timeout or None,
                             step_timeout=step_timeout)
        except EnvyardError as e:
            fail(e)
        where = f"tasks under {tasks}" if tasks else "tasks by absolute path"
        err.print(f"envyard serve: http://{escape(host)}:{port} ({escape(where)}; docs at /docs)", highlight=False)
        try:
            uvicorn.run(web, host=host, port=port, log_level=log_level)
        finally:
            yard.close()
