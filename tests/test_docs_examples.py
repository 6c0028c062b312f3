"""The Python examples in README.md and docs/ run as written and do what their comments say.

Each block is taken from the Markdown file at test time (so an edited example is the one tested) and run in a
fresh interpreter from the repository root over a store of the test's own. Where an example needs something
around it (a server to talk to, a build context), the test provides it and changes nothing in the block but the
server's port. A block's claims are checked by code appended after it, in the same interpreter.

Not run here: docs/images.md's example pulls from Docker Hub, which these machines cannot reach (pull/push/save/
load are tested against a local registry in tests/oci/); docs/api.md's block is a bare import.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = str(ROOT / "src")


def python_blocks(doc: str) -> list[str]:
    """The ```python fenced blocks of a Markdown file, in order."""
    text = (ROOT / doc).read_text()
    return [textwrap.dedent(b) for b in re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)]


def block(doc: str, contains: str) -> str:
    """The one python block of `doc` that contains `contains` (an example moved or split fails here, loudly)."""
    found = [b for b in python_blocks(doc) if contains in b]
    assert len(found) == 1, f"{doc}: {len(found)} python blocks contain {contains!r}"
    return found[0]


def run_python(code: str, home: Path, cwd: Path = ROOT, env: dict | None = None, timeout: float = 240):
    env = {**os.environ, "ENVYARD_HOME": str(home), "PYTHONPATH": SRC, **(env or {})}
    r = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, f"example failed (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r


def gc(home: Path):
    subprocess.run([sys.executable, "-c", "from envyard.cli.main import app; app()", "gc"],
                   env={**os.environ, "ENVYARD_HOME": str(home), "PYTHONPATH": SRC}, capture_output=True,
                   timeout=120)


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "store"
    yield h
    gc(h)  # unmounts the host view before pytest removes the temp dir


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_readme_sandbox_example(home):
    code = block("README.md", "kids = yard.fork(snap, 8)")
    checks = """
assert r.exit_code == 2 and r.stdout == "hi\\n" and "/nope" in r.stderr, r
assert len(kids) == 8
assert kids[1].read_file("/work/a.txt") == b"data"      # the forks start from the snapshot's state
kids[0].write_file("/work/a.txt", "changed"); kids[0].reset()
assert kids[0].read_file("/work/a.txt") == b"data"      # reset: back to the image
for k in kids:
    k.close()
print("ok")
"""
    # the block closes the Yard at the end of its `with`; the checks reopen nothing, so they run inside it
    code = code.replace("    kids[0].reset()                                         # back to the image\n",
                        "    kids[0].reset()\n" + textwrap.indent(checks, "    "))
    assert "print(\"ok\")" in code, "the README example's last line moved: update this test"
    assert run_python(code, home).stdout.strip().endswith("ok")


def test_readme_env_example(home):
    code = block("README.md", "VectorTerminalEnv([")
    checks = """
assert reward == 1.0, (reward, info)  # the single env's submit (`terminated` is the vector's by now)
assert isinstance(instructions, tuple) and len(instructions) == 4 and "hello.txt" in instructions[0]
import numpy as np
assert isinstance(rewards, np.ndarray) and rewards.shape == (4,) and not terminated.any()
env.close()
print("ok")
"""
    assert run_python(code + checks, home).stdout.strip().endswith("ok")


def test_build_example(home, tmp_path):
    ctx = tmp_path / "work" / "path" / "to" / "context"
    ctx.mkdir(parents=True)
    (ctx / "Dockerfile").write_text("FROM host\nARG VERSION=1\nRUN echo \"v$VERSION\" > /version\n")
    code = block("docs/build.md", "build_image(yard")
    code = code.replace("with yard.sandbox(img) as sb: ...",
                        "with yard.sandbox(img) as sb:\n"
                        "    assert sb.exec('cat /version').stdout == 'v2\\n'\n"
                        "assert img.name.startswith('myenv:1')\nprint('ok')")
    prelude = "import envyard\nyard = envyard.Yard()\n"
    r = run_python(prelude + code + "\nyard.close()\n", home, cwd=tmp_path / "work")
    assert r.stdout.strip().endswith("ok")
    assert "RUN" in r.stdout  # on_progress=print shows the steps


def test_serve_websocket_example(home):
    port = free_port()
    token = "docs-example-token-0123456789"
    env = {**os.environ, "ENVYARD_HOME": str(home), "PYTHONPATH": SRC, "ENVYARD_SERVE_TOKEN": token}
    server = subprocess.Popen([sys.executable, "-c", "from envyard.cli.main import app; app()", "serve",
                               "--tasks", "examples/tasks", "--port", str(port)], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/envs", timeout=2)
                break
            except httpx.TransportError:
                assert server.poll() is None, f"serve exited: {server.stderr.read()[-2000:]}"
                assert time.monotonic() < deadline, "serve did not start listening within 60 s"
                time.sleep(0.2)
        code = block("docs/serve.md", "wsc.connect(").replace("localhost:8000", f"localhost:{port}")
        out = run_python(code, home, env={"ENVYARD_SERVE_TOKEN": token}).stdout
        lines = out.splitlines()
        assert "Hello, world!" in lines, out  # the command's output, streamed
        assert lines[-1] == "1.0", out  # the reward printed last
    finally:
        server.terminate()
        assert server.wait(timeout=60) == 0


def test_mcp_example(home):
    code = block("docs/serve.md", "stdio_client(server)")
    # the example starts `envyard` from PATH, as an MCP client would: the one of this checkout
    bindir = home.parent / "bin"
    bindir.mkdir()
    (bindir / "envyard").write_text(f"#!/bin/sh\nPYTHONPATH={SRC} exec {sys.executable} -c "
                                    f"'from envyard.cli.main import app; app()' \"$@\"\n")
    (bindir / "envyard").chmod(0o755)
    out = run_python(code, home, env={"PATH": f"{bindir}:{os.environ['PATH']}"}).stdout
    assert "Hello, world!" in out, out
    assert '"reward": 1.0' in out, out
