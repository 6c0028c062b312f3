"""`envyard mcp TASK_DIR`: one task's sandbox served to an MCP client (Claude Desktop, an IDE, an agent) over stdio.

The server runs one episode of a TerminalEnv. The episode (the task's sandbox) starts on the first tool call, so
the task's wall-clock budget does not run while a client sits idle. Tools:

  bash(command)              run a shell command in the task's workdir → output + "[exit code N]" (one env step)
  read_file(path)            a UTF-8 text file (relative paths are relative to the workdir)
  write_file(path, content)  create or replace a file (parents are created)
  submit()                   end the episode: the tamper-proof verifier scores the final state → reward

After `submit` (or when the task's step or time budget runs out) every tool reports that the episode is over.
The instruction is the server's `instructions`, the resource `task://instruction` and the prompt `task`.
When the client goes away (stdin closes, or SIGTERM/SIGINT/SIGHUP) the env is closed and the sandbox reaped.

Nothing but the protocol may reach stdout: `serve_stdio` moves the protocol to private descriptors first, then
points fd 1 at stderr and fd 0 at /dev/null, so stray prints and child processes cannot corrupt the stream.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import io
import logging
import os
import signal
import sys
import threading
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Callable, Optional

import anyio
import anyio.to_thread
from pydantic import BaseModel, Field

from ..errors import BadInput, EnvyardError, FileTooLarge, NotRegularFile

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as _ServerClass
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as _ServerClass  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]

from mcp.server.stdio import stdio_server

log = logging.getLogger("envyard.mcp")

SERVER_NAME = "envyard"
INSTRUCTION_URI = "task://instruction"
MAX_READ_BYTES = 1 << 20  # read_file refuses bigger files: a model cannot use them whole anyway
VERIFIER_OUTPUT_CHARS = 4000  # tail of the verifier's output returned by submit


class EpisodeOver(Exception):
    """A tool was called after the episode ended (submitted, budget spent, or the server is shutting down)."""


class SubmitResult(BaseModel):
    """What `submit` returns (as structured content, and as JSON text for clients without structured output)."""

    reward: float = Field(description="The verifier's reward (0.0 when it could not run: see infra_error).")
    passed: bool = Field(description="reward >= 1.0 and no infrastructure error.")
    infra_error: Optional[str] = Field(None, description="Set when the infrastructure failed, not the agent "
                                       "(setup_failed, sandbox_died, verifier_crashed).")
    infra_detail: Optional[str] = None
    verifier_exit_code: Optional[int] = None
    verifier_output: str = Field("", description="The end of the verifier's output.")
    steps: int = Field(0, description="bash commands run in the episode.")
    truncated: bool = Field(False, description="True when the step or time budget ended the episode, not submit.")


class McpEpisode:
    """One TerminalEnv episode, safe to drive from worker threads: calls are serialized by a lock.

    Plain Python (no MCP types): raises EpisodeOver, or EnvyardError / OSError for a failed file operation.
    """

    def __init__(self, yard, task, *, step_timeout: float = 60.0):
        from ..envs.env import TerminalEnv

        self.task = task
        self.env = TerminalEnv(task, yard=yard, step_timeout=step_timeout)
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._setup_error: tuple[str, str] | None = None  # (kind, detail) when reset could not start a sandbox
        self.result: SubmitResult | None = None
        self._ended_by = ""  # why the episode ended, for the "episode is over" message

    # ---- lifecycle ----------------------------------------------------------------------------------------

    def _ensure_started(self) -> None:
        """Start the episode on first use (the caller holds the lock)."""
        if self._closed:
            raise EpisodeOver("the server is shutting down; the episode is over")
        if self._started:
            return
        self._started = True
        _, info = self.env.reset(options={"task": self.task})
        if self._closed:  # close() ran while the sandbox was starting: do not leave it behind
            self.env.close()
            raise EpisodeOver("the server is shutting down; the episode is over")
        if info.get("infra_error"):
            self._setup_error = (info["infra_error"], info.get("infra_detail") or "")
            log.warning("task %s: the sandbox did not start: %s", self.task.name, self._setup_error)

    def _check_open(self) -> None:
        self._ensure_started()
        if self.result is not None:
            r = self.result
            raise EpisodeOver(f"the episode is over ({self._ended_by}; reward {r.reward:g}"
                              + (f", infrastructure error {r.infra_error}" if r.infra_error else "")
                              + "). Start a new `envyard mcp` server for a new episode.")
        if self._setup_error is not None:
            kind, detail = self._setup_error
            raise EpisodeOver(f"the task's sandbox could not be started ({kind}): {detail.rstrip(': ')}. "
                              "This is an infrastructure error, not the agent's fault; call submit to end the episode.")

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the env (kills the sandbox). Idempotent; does not wait for a running call (closing the sandbox
        ends it)."""
        self._closed = True
        try:
            self.env.close()
        except Exception:  # shutting down: gc reclaims whatever is left
            log.exception("closing the env failed")

    # ---- tools --------------------------------------------------------------------------------------------

    def bash(self, command: str) -> str:
        if command.strip() == "submit":
            raise BadInput("`submit` is not a shell command here", fix="call the submit tool to end the episode")
        with self._lock:
            self._check_open()
            obs, reward, terminated, truncated, info = self.env.step(command)
            if terminated or truncated:  # the budget ran out (or the sandbox died): the verifier has already run
                self.result = self._result(info, truncated=truncated)
                note = self._ended_by = ("the sandbox died" if info.get("infra_error") == "sandbox_died"
                                         else "the task's step or time budget ran out")
                obs += (f"\n[episode over: {note}; the verifier ran: reward {self.result.reward:g}"
                        + (f", infrastructure error {self.result.infra_error}" if self.result.infra_error else "")
                        + "]")
            return obs

    def read_file(self, path: str) -> str:
        with self._lock:
            self._check_open()
            sb = self.env.sandbox
            target = sb.resolve(path)  # resolved (relative to the workdir) for messages; raises PathOutsideSandbox
            try:  # read by the owner, capped, never through the sandbox's own programs
                data = sb.read_file(target, max_bytes=MAX_READ_BYTES)
            except FileTooLarge as e:
                raise EnvyardError(f"{target} is {e.size} bytes, more than read_file returns ({MAX_READ_BYTES} bytes)",
                                   fix="read parts of it with bash (head, tail, sed -n)") from None
            except NotRegularFile as e:
                raise EnvyardError(e.message, fix="look at it with bash, e.g. `ls -la`") from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise EnvyardError(f"{target} is a binary file ({len(data)} bytes, not valid UTF-8 text), so "
                               "read_file cannot return it", fix="inspect it with bash, e.g. `xxd FILE | head` "
                               "or `base64 FILE`") from None

    def write_file(self, path: str, content: str) -> str:
        with self._lock:
            self._check_open()
            sb = self.env.sandbox
            target = sb.resolve(path)
            data = content.encode("utf-8")
            sb.write_file(target, data)
        return f"wrote {len(data)} bytes to {target}"

    def submit(self) -> SubmitResult:
        with self._lock:
            if self.result is None and self._setup_error is not None:  # nothing to verify: report the infra error
                kind, detail = self._setup_error
                self.result = SubmitResult(reward=0.0, passed=False, infra_error=kind, infra_detail=detail)
                self._ended_by = "submit was called"
                return self.result
            self._check_open()
            _, _, terminated, truncated, info = self.env.step("submit")
            self.result = self._result(info, truncated=truncated)
            self._ended_by = "submit was called"
            return self.result

    def _result(self, info: dict, *, truncated: bool) -> SubmitResult:
        reward = info.get("reward")
        reward = float(reward) if reward is not None else 0.0
        infra = info.get("infra_error")
        return SubmitResult(reward=reward, passed=reward >= 1.0 and not infra, infra_error=infra,
                            infra_detail=info.get("infra_detail"), verifier_exit_code=info.get("verifier_exit_code"),
                            verifier_output=(info.get("verifier_output") or "")[-VERIFIER_OUTPUT_CHARS:],
                            steps=int(info.get("steps") or 0), truncated=truncated)


# ---- the MCP server -------------------------------------------------------------------------------------------


def _server_instructions(task) -> str:
    return (f"You are working on the task {task.name!r} inside an isolated Linux sandbox (working directory "
            f"{task.workdir_label}). Use the bash, read_file and write_file tools to do the task, then call submit "
            "once: a verifier scores the final state and the episode ends.\n\n"
            f"Budget: {task.max_steps} bash commands, {task.agent_timeout:g} s from the first tool call.\n\n"
            f"The task:\n\n{task.instruction}")


def _tool_kwargs(server, **kwargs) -> dict:
    """Drop keyword arguments this SDK version's `tool()` does not know (structured_output came in mcp 1.10)."""
    params = inspect.signature(server.tool).parameters
    return {k: v for k, v in kwargs.items() if k in params}


def build_server(yard, task_dir, *, step_timeout: float = 60):
    """An MCP server (mcp's MCPServer, FastMCP on mcp 1.x) serving one episode of the task in `task_dir`.

    The task is loaded now (a malformed task raises TaskError); the sandbox starts on the first tool call and is
    closed when the server's session ends. The episode is `server.envyard_episode`.
    """
    from ..envs.task import Task, load_task

    if not step_timeout or step_timeout <= 0:
        raise BadInput(f"--step-timeout must be positive, got {step_timeout}")
    task = task_dir if isinstance(task_dir, Task) else load_task(task_dir)
    episode = McpEpisode(yard, task, step_timeout=float(step_timeout))

    @asynccontextmanager
    async def lifespan(_server):
        try:
            yield {}
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(episode.close)

    server = _ServerClass(SERVER_NAME, instructions=_server_instructions(task), lifespan=lifespan,
                          log_level="WARNING")
    server.envyard_episode = episode

    async def call(fn: Callable, *args):
        try:
            return await anyio.to_thread.run_sync(fn, *args)
        except EpisodeOver as e:
            raise ToolError(str(e)) from None
        except FileNotFoundError as e:
            raise ToolError(str(e)) from None
        except EnvyardError as e:
            raise ToolError(e.message + (f" (fix: {e.fix})" if e.fix else "")) from None
        except Exception as e:  # a bug or an unexpected failure: say what it was rather than a bare "error"
            if episode.closed:  # the client went away and the sandbox was closed under the call: expected
                raise ToolError("the server is shutting down; the episode is over") from None
            log.exception("tool %s failed", getattr(fn, "__name__", fn))
            raise ToolError(f"internal error: {type(e).__name__}: {e}") from None

    text_only = _tool_kwargs(server, structured_output=False)

    @server.tool(name="bash", description=(
        f"Run a shell command (bash -c style, in a persistent shell; cwd starts at {task.workdir_label}) inside the "
        f"task's sandbox. Returns stdout, then stderr after a [stderr] line, then [exit code N] (or [timed out] "
        f"after {step_timeout:g} s). Each call is one step of the task's budget."), **text_only)
    async def bash(command: str) -> str:
        return await call(episode.bash, command)

    @server.tool(name="read_file", description=(
        f"Read a UTF-8 text file in the sandbox (relative paths are relative to {task.workdir_label}). Binary files, "
        "directories and files over 1 MiB are errors: use bash for those."), **text_only)
    async def read_file(path: str) -> str:
        return await call(episode.read_file, path)

    @server.tool(name="write_file", description=(
        f"Create or overwrite a file in the sandbox with exactly `content` (UTF-8; parent directories are "
        f"created; relative paths are relative to {task.workdir_label})."), **text_only)
    async def write_file(path: str, content: str) -> str:
        return await call(episode.write_file, path, content)

    @server.tool(name="submit", description=(
        "Finish the task: the sandbox is frozen and a verifier scores its final state. Returns the reward "
        "(1.0 = solved) and infra_error (set when the infrastructure, not the work, failed). Call it once; "
        "afterwards every tool reports that the episode is over."))
    async def submit() -> SubmitResult:
        return await call(episode.submit)

    @server.resource(INSTRUCTION_URI, name="instruction", description=f"The instruction of task {task.name}",
                     mime_type="text/markdown")
    def instruction() -> str:
        return task.instruction

    @server.prompt(name="task", description=f"Work on task {task.name} (its instruction, and how to submit).")
    def task_prompt() -> str:
        return _server_instructions(task)

    return server


# ---- stdio --------------------------------------------------------------------------------------------------


def _lowlevel(server):
    """The low-level Server under MCPServer (mcp 2.x) or FastMCP (mcp 1.x)."""
    for attr in ("_lowlevel_server", "_mcp_server"):
        low = getattr(server, attr, None)
        if low is not None:
            return low
    raise RuntimeError("unsupported mcp SDK: cannot find the low-level server under " + type(server).__name__)


def _take_stdio() -> tuple[int, int]:
    """Move the protocol's stdin/stdout to private descriptors; point fd 0 at /dev/null and fd 1 at stderr."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    os.set_inheritable(wire_in, False)
    os.set_inheritable(wire_out, False)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return wire_in, wire_out


def _read_lines(wire_in: int, loop, send, on_eof: Callable[[], None]) -> None:
    """Forward protocol lines from the client into the server (runs in a daemon thread, so a blocked read never
    delays exit). At EOF, run `on_eof` first: it kills the sandbox, which ends a command still running, and only
    then end the server's input, so the server's loop does not wait for that command."""
    try:
        with os.fdopen(wire_in, "rb", buffering=0, closefd=False) as raw, io.BufferedReader(raw) as f:
            for line in iter(f.readline, b""):
                fut = asyncio.run_coroutine_threadsafe(send.send(line.decode("utf-8", errors="replace")), loop)
                fut.result()
    except Exception:  # the server is gone (loop closed, stream closed): nothing more to forward
        pass
    finally:
        try:
            on_eof()
        finally:
            try:
                loop.call_soon_threadsafe(send.close)
            except RuntimeError:  # the loop is already closed
                pass


async def _serve(server, wire_in: int, wire_out: int, on_eof: Callable[[], None]) -> None:
    send, receive = anyio.create_memory_object_stream(0)
    reader = threading.Thread(target=_read_lines, args=(wire_in, asyncio.get_running_loop(), send, on_eof),
                              name="envyard-mcp-stdin", daemon=True)
    stdout = anyio.wrap_file(io.TextIOWrapper(os.fdopen(wire_out, "wb", closefd=False), encoding="utf-8"))
    low = _lowlevel(server)
    reader.start()
    # stdio_server only iterates `stdin` line by line: the receive stream (an async iterator of lines) will do.
    async with stdio_server(stdin=receive, stdout=stdout) as (read_stream, write_stream):
        await low.run(read_stream, write_stream, low.create_initialization_options())


def run_stdio(server, *, on_exit: Callable[[], None] | None = None) -> None:
    """Serve `server` over this process's stdin/stdout until the client closes stdin (or a signal arrives).

    Clean-up (the episode's close, then `on_exit`) runs once, on every way out: at stdin EOF (before the server
    winds down, so a running command cannot hold it up), after the server returns, or on SIGTERM/SIGINT/SIGHUP,
    after which the process exits at once.
    """
    episode: McpEpisode | None = getattr(server, "envyard_episode", None)
    lock = threading.Lock()
    done = False

    def cleanup() -> None:
        nonlocal done
        with lock:
            if done:
                return
            done = True
            try:
                if episode is not None:
                    episode.close()
            finally:
                if on_exit is not None:
                    on_exit()

    def on_signal(signum, _frame) -> None:
        # Clean up off the main thread (it may hold a lock the clean-up needs), bounded, then leave at once.
        t = threading.Thread(target=cleanup, name="envyard-mcp-exit", daemon=True)
        t.start()
        t.join(5.0)
        os._exit(128 + signum)

    wire_in, wire_out = _take_stdio()
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        anyio.run(_serve, server, wire_in, wire_out, cleanup, backend="asyncio")
    finally:
        try:
            cleanup()
        finally:
            for s, h in previous.items():
                signal.signal(s, h)


def serve(task_dir, *, step_timeout: float = 60, make_yard: Callable[[], Any] | None = None) -> None:
    """Open a Yard, serve the task over stdio, close everything at the end (what `envyard mcp` runs)."""
    if make_yard is None:
        from ..yard import Yard

        make_yard = Yard
    yard = make_yard()
    try:
        server = build_server(yard, task_dir, step_timeout=step_timeout)
    except BaseException:
        yard.close()
        raise
    run_stdio(server, on_exit=yard.close)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envyard.serve.mcp_server",
                                     description="Serve one task's sandbox to an MCP client over stdio.")
    parser.add_argument("task_dir", type=Path, metavar="TASK_DIR")
    parser.add_argument("--step-timeout", type=float, default=60.0, help="seconds per bash command (default 60)")
    args = parser.parse_args(argv)
    try:
        serve(args.task_dir, step_timeout=args.step_timeout)
    except EnvyardError as e:
        print(f"error: {e.message}" + (f"\nfix: {e.fix}" if e.fix else ""), file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
