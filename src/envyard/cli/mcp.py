"""`envyard mcp TASK_DIR`: serve one task's sandbox to an MCP client over stdio."""

from __future__ import annotations

from pathlib import Path

import typer

from ..errors import EnvyardError


def register(app: typer.Typer, out, err, fail, emit_json, make_yard) -> None:
    @app.command("mcp")
    def mcp(
        task_dir: Path = typer.Argument(..., help="The task directory (task.toml, instruction.md, tests/)."),
        step_timeout: float = typer.Option(60.0, "--step-timeout", help="Seconds each bash command may run."),
    ):
        """Serve one task's sandbox to an MCP client over stdio (tools: bash, read_file, write_file, submit).

        stdout carries the protocol only; messages go to stderr. The sandbox starts on the first tool call and is
        reaped when the client disconnects. Example client config: {"command": "envyard", "args": ["mcp", DIR]}.
        """
        from ..serve.mcp_server import serve

        try:
            serve(task_dir, step_timeout=step_timeout, make_yard=make_yard)
        except EnvyardError as e:
            fail(e)  # prints to stderr (err console) and exits with the error's code
