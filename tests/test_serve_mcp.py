"""`envyard mcp`: the MCP server over stdio, driven by the official mcp client (stdio_client + ClientSession).

Each test spawns `python -m envyard.serve.mcp_server TASK` with its own ENVYARD_HOME and checks, after the client
has gone, that the server process exited and left no sandbox behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from envyard.store.store import Store  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HELLO = ROOT / "examples" / "tasks" / "hello-file"
SERVER = [sys.executable, "-m", "envyard.serve.mcp_server"]
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}


# ---- helpers: the result types differ a little between mcp 1.x (camelCase) and 2.x (snake_case) -------------


def is_error(result) -> bool:
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))


def text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def structured(result) -> dict | None:
    s = getattr(result, "structured_content", None)
    return s if s is not None else getattr(result, "structuredContent", None)


def submit_result(result) -> dict:
    assert not is_error(result), text(result)
    return structured(result) or json.loads(text(result))


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "envyard-home"
    h.mkdir()
    yield h
    # After every test: nothing may be left running or leased in the store (checked without opening a Yard,
    # which would reap dead owners' sandboxes and hide a leak), and `envyard gc` agrees.
    assert Store(h).sandboxes() == []
    env = {**os.environ, "ENVYARD_HOME": str(h)}
    gc = subprocess.run([sys.executable, "-c", "from envyard.cli.main import app; app()", "gc", "--json"],
                        env=env, capture_output=True, text=True, timeout=60)
    assert gc.returncode == 0, gc.stderr
    assert Store(h).sandboxes() == []


def session(home: Path, task: Path = HELLO, *extra: str):
    """A stdio MCP client session over a freshly spawned server; yields (session, initialize result)."""
    params = StdioServerParameters(command=SERVER[0], args=[*SERVER[1:], str(task), *extra],
                                   env={"ENVYARD_HOME": str(home), "PYTHONPATH": str(ROOT / "src")}, cwd=str(ROOT))

    class _Session:
        async def __aenter__(self):
            self._log = open(home / "server-stderr.log", "w")
            self._client = stdio_client(params, errlog=self._log)
            read, write = await self._client.__aenter__()
            self._session = ClientSession(read, write)
            s = await self._session.__aenter__()
            init = await s.initialize()
            return s, init

        async def __aexit__(self, *exc):
            try:
                await self._session.__aexit__(*exc)
            finally:
                try:
                    await self._client.__aexit__(*exc)
                finally:
                    self._log.close()

    return _Session()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=60))


# ---- tests ----------------------------------------------------------------------------------------------------


def test_tools_and_instruction(home):
    async def go():
        async with session(home) as (s, init):
            names = {t.name for t in (await s.list_tools()).tools}
            assert {"bash", "read_file", "write_file", "submit"} <= names
            assert "Hello, world!" in (init.instructions or "")
            res = await s.read_resource("task://instruction")
            assert "/app/hello.txt" in res.contents[0].text
            prompts = {p.name for p in (await s.list_prompts()).prompts}
            assert "task" in prompts

    run(go())


def test_solve_hello_file(home):
    async def go():
        async with session(home) as (s, _):
            r = await s.call_tool("write_file", {"path": "/app/hello.txt", "content": "Hello, world!\n"})
            assert not is_error(r), text(r)
            r = await s.call_tool("read_file", {"path": "hello.txt"})  # relative to the workdir
            assert not is_error(r) and text(r) == "Hello, world!\n"
            r = await s.call_tool("bash", {"command": "cat /app/hello.txt; false"})
            assert not is_error(r)
            assert "Hello, world!" in text(r) and "[exit code 1]" in text(r)
            result = submit_result(await s.call_tool("submit", {}))
            assert result["reward"] == 1.0 and result["passed"] is True and result["infra_error"] is None
            # the episode is over: every tool says so
            for name, args in (("bash", {"command": "ls"}), ("read_file", {"path": "hello.txt"}),
                               ("write_file", {"path": "x", "content": ""}), ("submit", {})):
                r = await s.call_tool(name, args)
                assert is_error(r) and "episode is over" in text(r), (name, text(r))

    run(go())


def test_noop_submit_scores_zero(home):
    async def go():
        async with session(home) as (s, _):
            result = submit_result(await s.call_tool("submit", {}))
            assert result["reward"] == 0.0 and result["passed"] is False and result["infra_error"] is None

    run(go())


def test_errors_are_tool_errors(home):
    async def go():
        async with session(home) as (s, _):
            r = await s.call_tool("read_file", {"path": "/app/missing.txt"})
            assert is_error(r) and "does not exist" in text(r) and "/app/missing.txt" in text(r)
            r = await s.call_tool("read_file", {"path": "../../../.."})
            assert is_error(r) and "outside the sandbox" in text(r)
            r = await s.call_tool("read_file", {"path": "/bin/sh"})
            assert is_error(r) and "binary" in text(r)
            r = await s.call_tool("read_file", {"path": "/app"})
            assert is_error(r) and "directory" in text(r)
            r = await s.call_tool("bash", {"command": "submit"})  # submitting is the submit tool's job
            assert is_error(r) and "submit tool" in text(r)
            r = await s.call_tool("bash", {"command": "echo out; echo err >&2; exit 3"})
            assert not is_error(r)
            assert "out" in text(r) and "err" in text(r) and text(r).endswith("[exit code 3]")

    run(go())


def test_stdin_eof_ends_server_and_running_command(home):
    """Raw protocol: stdout carries only JSON-RPC lines, and closing stdin while a command runs makes the server
    exit promptly (exit code 0, not a kill) with the sandbox reaped."""
    p = subprocess.Popen([*SERVER, str(HELLO)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
                         env={**os.environ, "ENVYARD_HOME": str(home), "PYTHONPATH": str(ROOT / "src")})
    try:
        def send(msg):
            p.stdin.write(json.dumps(msg) + "\n")
            p.stdin.flush()

        send(INIT)
        assert json.loads(p.stdout.readline())["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "bash", "arguments": {"command": "echo started; sleep 60"}}})
        deadline = time.monotonic() + 10
        # wait until the episode's sandbox is up (not just the one building the task's image)
        while not [r for r in Store(home).sandboxes() if r.image.startswith("task/")]:
            assert time.monotonic() < deadline, "the sandbox never started"
            time.sleep(0.05)
        time.sleep(0.3)
        started = time.monotonic()
        p.stdin.close()
        rest = p.stdout.read()
        assert p.wait(timeout=10) == 0
        assert time.monotonic() - started < 5
        for line in rest.splitlines():  # whatever came after is protocol too
            json.loads(line)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_bad_task_fails_before_serving(home, tmp_path):
    p = subprocess.run([*SERVER, str(tmp_path / "nope")], capture_output=True, text=True, timeout=30, cwd=ROOT,
                       env={**os.environ, "ENVYARD_HOME": str(home), "PYTHONPATH": str(ROOT / "src")})
    assert p.returncode != 0
    assert p.stdout == ""  # stdout is the protocol channel: errors go to stderr
    assert "error" in p.stderr


def test_sigterm_closes_the_sandbox(home):
    p = subprocess.Popen([*SERVER, str(HELLO)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
                         env={**os.environ, "ENVYARD_HOME": str(home), "PYTHONPATH": str(ROOT / "src")})
    try:
        p.stdin.write(json.dumps(INIT) + "\n" + json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
                      + "\n" + json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                           "params": {"name": "bash", "arguments": {"command": "sleep 60"}}}) + "\n")
        p.stdin.flush()
        assert json.loads(p.stdout.readline())["id"] == 1
        deadline = time.monotonic() + 10
        while not [r for r in Store(home).sandboxes() if r.image.startswith("task/")]:
            assert time.monotonic() < deadline, "the sandbox never started"
            time.sleep(0.05)
        time.sleep(0.3)
        p.terminate()
        assert p.wait(timeout=10) == 128 + 15
        assert Store(home).sandboxes() == []  # closed by the server itself, not left for gc
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


# ---- the episode logic in-process (no MCP): budgets and infrastructure errors --------------------------------


def _task_copy(tmp_path: Path, name: str, max_steps: int = 30) -> Path:
    import shutil

    d = tmp_path / name
    shutil.copytree(HELLO, d)
    toml = (d / "task.toml").read_text()
    (d / "task.toml").write_text(toml.replace('name = "hello-file"', f'name = "{name}"')
                                 .replace("max_steps = 30", f"max_steps = {max_steps}"))
    return d


def test_step_budget_ends_the_episode(yard, tmp_path):
    from envyard.envs import load_task
    from envyard.serve.mcp_server import EpisodeOver, McpEpisode

    ep = McpEpisode(yard, load_task(_task_copy(tmp_path, "two-steps", max_steps=2)))
    try:
        assert ep.bash("echo one").endswith("[exit code 0]")
        last = ep.bash("printf 'Hello, world!\\n' > /app/hello.txt")
        assert "episode over" in last and "budget" in last and "reward 1" in last
        assert ep.result.truncated and ep.result.reward == 1.0
        with pytest.raises(EpisodeOver, match="budget ran out; reward 1"):
            ep.read_file("hello.txt")
    finally:
        ep.close()


def test_setup_failure_is_an_infra_error(yard, tmp_path):
    from envyard.envs import load_task
    from envyard.serve.mcp_server import EpisodeOver, McpEpisode

    d = _task_copy(tmp_path, "broken-setup")
    (d / "environment").mkdir()
    (d / "environment" / "setup.sh").write_text("exit 3\n")
    ep = McpEpisode(yard, load_task(d))
    try:
        with pytest.raises(EpisodeOver, match="setup_failed"):
            ep.bash("true")
        result = ep.submit()
        assert result.infra_error == "setup_failed" and result.reward == 0.0 and not result.passed
        with pytest.raises(EpisodeOver, match="episode is over"):
            ep.submit()
    finally:
        ep.close()
