"""`envyard serve` as a security boundary: bearer token, Host allowlist (DNS rebinding), request-size limit.

Each attack is tried for real: against the app in process (Starlette's TestClient), and against `envyard serve`
itself run in a subprocess on 127.0.0.1 with httpx and websockets as clients.
"""

from __future__ import annotations

import json
import os
import re
import socket
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
pytest.importorskip("websockets")

from fastapi.testclient import TestClient  # noqa: E402
from starlette.testclient import WebSocketDenialResponse  # noqa: E402
from starlette.websockets import WebSocketDisconnect  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402
from websockets.sync.client import connect as ws_connect  # noqa: E402

from envyard.errors import BadInput  # noqa: E402
from envyard.serve.http import create_app  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "examples" / "tasks"
TOKEN = "test-token-0123456789abcdef"
MiB = 1 << 20


def bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def make_client(yard):
    """TestClient over a fresh app (lifespan running). It sends Host `testserver`, admitted here by allow_hosts."""
    clients = []

    def make(**kwargs) -> TestClient:
        kwargs.setdefault("tasks_root", TASKS)
        kwargs.setdefault("token", TOKEN)
        kwargs.setdefault("allow_hosts", ["testserver"])
        client = TestClient(create_app(yard, **kwargs))
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in reversed(clients):
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client):
    return make_client()


# every route of the API, with a body where it takes one; the env id need not exist: 401 comes first
PROTECTED = [("GET", "/tasks", None), ("GET", "/envs", None), ("POST", "/envs", {"task": "hello-file"}),
             ("GET", "/envs/abc", None), ("DELETE", "/envs/abc", None), ("POST", "/envs/abc/step", {"action": "id"}),
             ("POST", "/envs/abc/verify", None), ("POST", "/envs/abc/reset", None), ("GET", "/no-such-route", None)]
OPEN = ["/health", "/docs", "/redoc", "/openapi.json"]


def assert_401(r):
    assert r.status_code == 401, (r.request.method, r.request.url, r.text)
    assert r.headers["www-authenticate"] == "Bearer"
    assert set(r.json()) == {"error", "fix"} and "Authorization: Bearer" in r.json()["fix"]


# ---- bearer token ------------------------------------------------------------------------------------------


def test_every_endpoint_but_health_and_docs_needs_the_token(client):
    schema = client.get("/openapi.json").json()
    documented = {(m.upper(), p) for p, ops in schema["paths"].items() for m in ops}
    tried = {(m, re.sub(r"/abc\b", "/{env_id}", p)) for m, p, _ in PROTECTED}
    assert documented - {("GET", "/health")} <= tried  # a new route must be added to PROTECTED (or to OPEN)
    for headers in ({}, bearer("wrong-token-0123456789abcdef"), bearer(TOKEN[:-1]), bearer(TOKEN + "x"),
                    {"Authorization": f"Basic {TOKEN}"}, {"Authorization": TOKEN}, {"Authorization": "Bearer "}):
        for method, path, body in PROTECTED:
            assert_401(client.request(method, path, json=body, headers=headers))
    for path in OPEN:
        r = client.get(path)
        assert r.status_code == 200, path
        assert TOKEN not in r.text, path  # nothing open gives the token away
    r = client.get("/tasks", headers=bearer())
    assert r.status_code == 200 and "hello-file" in r.json()["tasks"]
    assert client.get("/tasks", headers={"authorization": f"bearer {TOKEN}"}).status_code == 200  # scheme: any case


def test_no_env_is_created_without_the_token(client, yard):
    before = {s.id for s in yard.store.sandboxes()}
    assert_401(client.post("/envs", json={"task": "hello-file"}))
    assert client.get("/health").json()["envs"] == 0
    yard.wait_closed()
    assert {s.id for s in yard.store.sandboxes()} == before


def test_websocket_handshake_needs_the_token(client):
    for headers in ({}, bearer("wrong-token-0123456789abcdef")):
        with pytest.raises(WebSocketDenialResponse) as e, client.websocket_connect("/envs/abc/ws", headers=headers):
            pass
        assert e.value.status_code == 401 and e.value.headers["www-authenticate"] == "Bearer"
        assert set(e.value.json()) == {"error", "fix"}
    with client.websocket_connect("/envs/abc/ws", headers=bearer()) as ws:  # past the gate: the handler answers
        assert ws.receive_json()["status"] == 404


def test_openapi_declares_the_bearer_scheme(client):
    schema = client.get("/openapi.json").json()
    schemes = schema["components"]["securitySchemes"]
    assert [s for s in schemes.values() if s == {**s, "type": "http", "scheme": "bearer"}]
    name = next(iter(schemes))
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            if path == "/health":
                assert "security" not in op
            else:
                assert op["security"] == [{name: []}], (method, path)
                assert "401" in op["responses"], (method, path)


def test_auth_off_only_when_asked(make_client):
    client = make_client(token=None)
    assert client.get("/tasks").status_code == 200
    assert "securitySchemes" not in client.get("/openapi.json").json().get("components", {})
    assert client.get("/tasks", headers={"Host": "evil.example"}).status_code == 400  # the Host check stays


def test_weak_tokens_are_refused(yard):
    for token in ("", "short", "has a space in it 0123456789", "ünïcödé-0123456789abcdef"):
        with pytest.raises(BadInput):
            create_app(yard, tasks_root=TASKS, token=token)
    with pytest.raises(TypeError):
        create_app(yard, tasks_root=TASKS)  # no silent default: the caller decides about authentication


# ---- Host allowlist (DNS rebinding) ------------------------------------------------------------------------


def test_foreign_host_header_is_refused(make_client):
    client = make_client(allow_hosts=["envs.example.org"])
    for host in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example", "localhost.evil.example",
                 "testserver", "[::1]evil", "[::2]:8000", "envs.example.org.evil", "", "a b"):
        r = client.get("/tasks", headers={**bearer(), "Host": host})
        assert r.status_code == 400, host
        assert set(r.json()) == {"error", "fix"} and "--allow-host" in r.json()["fix"]
        assert client.get("/health", headers={"Host": host}).status_code == 400, host  # open paths too
    for host in ("localhost", "LOCALHOST:8000", "127.0.0.1", "127.0.0.1:1", "[::1]", "[::1]:8000",
                 "envs.example.org", "Envs.Example.org:443"):
        assert client.get("/tasks", headers={**bearer(), "Host": host}).status_code == 200, host


def test_foreign_host_websocket_is_refused(make_client):
    client = make_client(allow_hosts=[])  # TestClient's websockets say Host: testserver
    with pytest.raises(WebSocketDenialResponse) as e, client.websocket_connect("/envs/abc/ws", headers=bearer()):
        pass
    assert e.value.status_code == 400 and "Host" in e.value.json()["error"]


def test_allow_hosts_must_be_names(yard):
    for name in ("http://x.org", "x.org:80", "x.org/path", "*"):
        with pytest.raises(BadInput):
            create_app(yard, tasks_root=TASKS, token=TOKEN, allow_hosts=[name])


# ---- request size ------------------------------------------------------------------------------------------


def test_bodies_over_the_limit_are_413(make_client):
    client = make_client(max_body=4096)
    r = client.post("/envs", content=b"x" * 4097, headers={**bearer(), "content-type": "application/json"})
    assert r.status_code == 413 and set(r.json()) == {"error", "fix"} and "--max-body" in r.json()["fix"]
    r = client.post("/envs", content=iter([b"x" * 3000, b"x" * 3000]), headers=bearer())  # chunked
    assert r.status_code == 413
    r = client.post("/envs", content=json.dumps({"task": "x" * 4000}), headers=bearer())  # within: reaches the app
    assert r.status_code == 422 and r.json()["problems"]


def test_default_limit_fits_the_largest_action(client):
    r = client.post("/envs/abc/step", json={"action": "x" * (1 << 20)}, headers=bearer())  # MAX_TEXT characters
    assert r.status_code == 404  # the body got through to the handler
    r = client.post("/envs/abc/step", json={"action": "x" * (2 << 20)}, headers=bearer())
    assert r.status_code == 413


def test_websocket_message_over_the_limit_closes_the_socket(make_client):
    client = make_client(max_body=4096)
    env_id = client.post("/envs", json={"task": "hello-file"}, headers=bearer()).json()["env_id"]
    with client.websocket_connect(f"/envs/{env_id}/ws", headers=bearer()) as ws:
        ws.send_json({"action": "echo " + "y" * 5000})
        assert ws.receive_json()["status"] == 413
        with pytest.raises(WebSocketDisconnect) as e:
            ws.receive_json()
        assert e.value.code == 1009


# ---- the real server: `envyard serve` on 127.0.0.1 ---------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid: int) -> tuple[float, float]:
    """(resident now, peak resident) of a process, in MiB."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


class Server:
    """`python -m envyard.cli.main serve ...` in a subprocess with its own store; stderr goes to a file."""

    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None):
        self.home, self.port = home, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "ENVYARD_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
        self.env.pop("ENVYARD_SERVE_TOKEN", None)  # only the test chooses the token
        self.env.update(env or {})
        self.log = home / "serve.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "envyard.cli.main", "serve", "--port", str(self.port), "--tasks", str(TASKS),
                 "--log-level", "warning", *args], env=self.env, stdout=subprocess.DEVNULL, stderr=log,
                stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert self.proc.poll() is None and time.monotonic() < deadline, self.stderr()
            time.sleep(0.1)

    def stderr(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # release the host view the server's store mounted, as test_cli does
        subprocess.run([sys.executable, "-m", "envyard.cli.main", "gc"], env=self.env, capture_output=True,
                       timeout=60)
        for sub in ("root", "empty"):
            if os.path.ismount(self.home / "host" / sub):
                subprocess.run(["umount", "-l", str(self.home / "host" / sub)], check=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the module, with the token it generated and printed."""
    s = Server(tmp_path_factory.mktemp("serve-home"))
    yield s
    s.stop()


def printed_token(server: Server) -> str:
    lines = [line for line in server.stderr().splitlines() if line.startswith("Authorization: Bearer ")]
    assert len(lines) == 1, server.stderr()
    return lines[0].removeprefix("Authorization: Bearer ").strip()


def test_generated_token_is_printed_and_works(server):
    token = printed_token(server)
    assert len(token) >= 32
    r = httpx.get(server.url + "/tasks", headers=bearer(token))
    assert r.status_code == 200 and "hello-file" in r.json()["tasks"]
    assert_401(httpx.get(server.url + "/tasks"))
    assert_401(httpx.get(server.url + "/tasks", headers=bearer("wrong-token-0123456789abcdef")))
    assert_401(httpx.post(server.url + "/envs", json={"task": "hello-file"}))
    assert httpx.get(server.url + "/health").status_code == 200


def test_real_websocket_needs_the_token(server):
    url = f"ws://127.0.0.1:{server.port}/envs/abc/ws"
    for headers in ({}, bearer("wrong-token-0123456789abcdef")):
        with pytest.raises(InvalidStatus) as e:
            ws_connect(url, additional_headers=headers, open_timeout=10)
        assert e.value.response.status_code == 401
        assert set(json.loads(e.value.response.body)) == {"error", "fix"}
    with ws_connect(url, additional_headers=bearer(printed_token(server)), open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["status"] == 404
        with pytest.raises(ConnectionClosed) as e:
            ws.recv(timeout=10)
        assert e.value.rcvd.code == 4404


def test_dns_rebinding_host_is_refused(server):
    """A page at http://attacker.example:PORT whose name was rebound to 127.0.0.1 reaches the server with its own
    name in Host; the server refuses it, even on /health and with a right token (which such a page lacks)."""
    headers = {"Host": f"attacker.example:{server.port}"}
    for path in ("/health", "/tasks"):
        r = httpx.get(server.url + path, headers=headers)
        assert r.status_code == 400 and "--allow-host" in r.json()["fix"]
    r = httpx.post(server.url + "/envs", json={"task": "hello-file"},
                   headers={**headers, **bearer(printed_token(server))})
    assert r.status_code == 400
    with pytest.raises(InvalidStatus) as e:
        ws_connect(f"ws://127.0.0.1:{server.port}/envs/abc/ws", open_timeout=10,
                   additional_headers={**bearer(printed_token(server)), "Host": "attacker.example"})
    assert e.value.response.status_code == 400
    assert httpx.get(f"http://localhost:{server.port}/health").status_code == 200


def send_huge_body(server: Server, token: str, chunked: bool) -> tuple[httpx.Response, float, int, float]:
    """POST 300 MiB to /envs. Returns the response, seconds taken, bytes the client got to send, and how many MiB
    the server's peak RSS grew by."""
    size, sent = 300 * MiB, 0
    chunk = b"x" * MiB

    def body():
        nonlocal sent
        for _ in range(size // MiB):
            sent += len(chunk)
            yield chunk

    headers = {**bearer(token), "content-type": "application/json"}
    if not chunked:
        headers["content-length"] = str(size)
    _, peak_before = rss_mib(server.proc.pid)
    started = time.monotonic()
    r = httpx.post(server.url + "/envs", content=body(), headers=headers, timeout=120)
    took = time.monotonic() - started
    time.sleep(0.2)
    _, peak_after = rss_mib(server.proc.pid)
    return r, took, sent, peak_after - peak_before


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_huge_body_is_refused_without_being_read(server, chunked):
    token = printed_token(server)
    httpx.get(server.url + "/tasks", headers=bearer(token))  # warm up
    r, took, sent, grew = send_huge_body(server, token, chunked)
    assert r.status_code == 413 and "--max-body" in r.json()["fix"], r.text
    assert took < 5, took
    assert sent < 64 * MiB, sent  # the server stopped reading: the client could not send the rest
    assert grew < 10, f"server peak RSS grew by {grew:.1f} MiB"
    assert httpx.get(server.url + "/tasks", headers=bearer(token)).status_code == 200  # and it still serves


def test_huge_body_without_token_is_401_at_once(server):
    r, took, sent, grew = send_huge_body(server, "wrong-token-0123456789abcdef", chunked=False)
    assert r.status_code == 401 and took < 5 and sent < 64 * MiB and grew < 10


def test_real_websocket_message_over_the_limit(server):
    """uvicorn's ws_max_size is --max-body: a 3 MiB message ends the connection with 1009 (message too big)."""
    token = printed_token(server)
    env_id = httpx.post(server.url + "/envs", json={"task": "hello-file"}, headers=bearer(token),
                        timeout=60).json()["env_id"]
    with ws_connect(f"ws://127.0.0.1:{server.port}/envs/{env_id}/ws", additional_headers=bearer(token),
                    open_timeout=10, max_size=None) as ws:
        ws.send(json.dumps({"action": "echo " + "y" * (3 * MiB)}))
        with pytest.raises(ConnectionClosed) as e:
            ws.recv(timeout=10)
        assert e.value.rcvd.code == 1009


# ---- the command line --------------------------------------------------------------------------------------


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envyard.cli.main", *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL,
                          env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})})


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.7", "envs.example.org"])
def test_no_auth_is_refused_off_loopback(host, tmp_path):
    r = run_cli("serve", "--no-auth", "--host", host, "--port", str(free_port()), env={"ENVYARD_HOME": str(tmp_path)})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: --no-auth is refused") and host in lines[0]
    assert lines[1].startswith("fix: ")


def test_bad_auth_options_exit_2(tmp_path):
    home = {"ENVYARD_HOME": str(tmp_path)}
    for args, env, words in ((["--token", "short"], {}, "at least 16"),
                             (["--no-auth"], {"ENVYARD_SERVE_TOKEN": TOKEN}, "both given"),
                             (["--allow-host", "http://x.org"], {}, "not a host name"),
                             (["--max-body", "lots"], {}, "invalid size")):
        r = run_cli("serve", "--port", str(free_port()), *args, env={**home, **env})
        assert r.returncode == 2 and words in r.stderr and "fix:" in r.stderr, (args, r.stderr)


def test_token_from_the_environment_is_not_printed(tmp_path):
    s = Server(tmp_path, env={"ENVYARD_SERVE_TOKEN": TOKEN})
    try:
        assert TOKEN not in s.stderr() and "ENVYARD_SERVE_TOKEN" in s.stderr()
        assert httpx.get(s.url + "/tasks", headers=bearer()).status_code == 200
        assert_401(httpx.get(s.url + "/tasks"))
    finally:
        s.stop()


def test_no_auth_on_loopback_serves_without_token(tmp_path):
    s = Server(tmp_path, "--no-auth", "--allow-host", "envs.example.org")
    try:
        assert "no authentication" in s.stderr()
        assert httpx.get(s.url + "/tasks").status_code == 200
        assert httpx.get(s.url + "/tasks", headers={"Host": "envs.example.org"}).status_code == 200
        assert httpx.get(s.url + "/tasks", headers={"Host": "attacker.example"}).status_code == 400
    finally:
        s.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_ctrl_c_stop_the_server_with_exit_0(tmp_path, sig):
    # uvicorn re-raises SIGTERM after its graceful shutdown; under the default handler that was exit 143
    s = Server(tmp_path, "--no-auth")
    try:
        s.proc.send_signal(sig)
        assert s.proc.wait(30) == 0, s.stderr()
    finally:
        s.stop()
