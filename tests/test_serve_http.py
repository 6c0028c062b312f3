"""`envyard serve` HTTP/WebSocket API: episodes, errors, limits, idle expiry, sandbox reaping."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402
from starlette.websockets import WebSocketDisconnect  # noqa: E402

from envyard.serve.http import create_app  # noqa: E402

TASKS = Path(__file__).resolve().parent.parent / "examples" / "tasks"
HELLO = "echo 'Hello, world!' > /app/hello.txt"
TOKEN = "test-token-0123456789abcdef"


@pytest.fixture
def make_client(yard):
    """A TestClient over a fresh app (lifespan running) that sends the app's token; every client is shut down at
    the end of the test. (Authentication itself is tested in test_serve_auth.py.)"""
    stack = []

    def make(**kwargs) -> TestClient:
        kwargs.setdefault("tasks_root", TASKS)
        kwargs.setdefault("token", TOKEN)
        kwargs.setdefault("allow_hosts", ["testserver"])  # the Host TestClient sends
        client = TestClient(create_app(yard, **kwargs), headers={"Authorization": f"Bearer {kwargs['token']}"})
        client.__enter__()
        stack.append(client)
        return client

    yield make
    for client in reversed(stack):
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client):
    return make_client(step_timeout=10)


def live_sandbox_ids(yard) -> set[str]:
    yard.wait_closed()
    return {s.id for s in yard.store.sandboxes()}


def create(client, task="hello-file") -> str:
    r = client.post("/envs", json={"task": task})
    assert r.status_code == 201, r.text
    return r.json()["env_id"]


def sandbox_of(client, env_id) -> str:
    sid = client.get(f"/envs/{env_id}").json()["sandbox_id"]
    assert sid
    return sid


def wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


# ---- episodes ----------------------------------------------------------------------------------------------


def test_health_and_tasks(client):
    r = client.get("/health")
    assert r.status_code == 200 and r.json()["status"] == "ok" and r.json()["max_envs"] == 64
    tasks = client.get("/tasks").json()["tasks"]
    assert "hello-file" in tasks and tasks == sorted(tasks)


def test_full_episode_scores_one(client, yard):
    r = client.post("/envs", json={"task": "hello-file"})
    assert r.status_code == 201
    body = r.json()
    env_id = body["env_id"]
    assert "hello.txt" in body["instruction"] and body["info"]["infra_error"] is None
    sandbox = sandbox_of(client, env_id)

    r = client.post(f"/envs/{env_id}/step", json={"action": HELLO})
    assert r.status_code == 200
    step = r.json()
    assert step == {"observation": "[exit code 0]", "reward": 0.0, "terminated": False, "truncated": False,
                    "info": {"step": 1, "exit_code": 0, "timed_out": False}}
    assert client.post(f"/envs/{env_id}/step", json={"action": "cat hello.txt"}).json()["observation"].startswith(
        "Hello, world!")

    state = client.get(f"/envs/{env_id}").json()
    assert state["task"] == "hello-file" and state["steps"] == 2 and state["done"] is False
    assert state["idle_seconds"] >= 0 and state["busy"] is False

    r = client.post(f"/envs/{env_id}/verify")
    assert r.status_code == 200
    end = r.json()
    assert end["reward"] == 1.0 and end["terminated"] is True and end["truncated"] is False
    assert end["info"]["infra_error"] is None and end["info"]["verifier_exit_code"] == 0
    state = client.get(f"/envs/{env_id}").json()
    assert state["done"] is True and state["reward"] == 1.0 and state["sandbox_id"] is None
    assert sandbox not in live_sandbox_ids(yard)  # verification closed the agent's sandbox

    # 409 after the end, for step and verify; a reset starts over on the same task
    for path, kw in ((f"/envs/{env_id}/step", {"json": {"action": "ls"}}), (f"/envs/{env_id}/verify", {})):
        r = client.post(path, **kw)
        assert r.status_code == 409 and r.json()["fix"]
    r = client.post(f"/envs/{env_id}/reset")
    assert r.status_code == 200 and r.json()["env_id"] == env_id and "hello.txt" in r.json()["instruction"]
    state = client.get(f"/envs/{env_id}").json()
    assert state["episode"] == 2 and state["steps"] == 0 and state["done"] is False
    obs = client.post(f"/envs/{env_id}/step", json={"action": "ls /app/hello.txt"}).json()["observation"]
    assert "No such file" in obs  # a fresh sandbox


def test_submit_action_and_do_nothing_scores_zero(client):
    env_id = create(client)
    r = client.post(f"/envs/{env_id}/step", json={"action": "submit"})
    assert r.status_code == 200
    end = r.json()
    assert end["reward"] == 0.0 and end["terminated"] is True
    assert end["info"]["infra_error"] is None and "FAIL" in end["info"]["verifier_output"]


def test_list_and_delete_closes_the_sandbox(client, yard):
    a, b = create(client), create(client)
    listed = client.get("/envs").json()
    assert {e["env_id"] for e in listed["envs"]} == {a, b} and listed["max_envs"] == 64
    sandbox = sandbox_of(client, a)
    assert sandbox in live_sandbox_ids(yard)

    r = client.delete(f"/envs/{a}")
    assert r.status_code == 204 and r.content == b""
    assert sandbox not in live_sandbox_ids(yard)
    assert client.get(f"/envs/{a}").status_code == 404
    assert client.delete(f"/envs/{a}").status_code == 404
    assert [e["env_id"] for e in client.get("/envs").json()["envs"]] == [b]


def test_shutdown_closes_every_env(make_client, yard):
    client = make_client()
    sandboxes = [sandbox_of(client, create(client)) for _ in range(2)]
    client.__exit__(None, None, None)  # lifespan shutdown (the fixture's second exit is harmless)
    assert not set(sandboxes) & live_sandbox_ids(yard)


# ---- errors ------------------------------------------------------------------------------------------------


def test_unknown_env_is_404(client):
    for method, path in (("get", "/envs/nope"), ("post", "/envs/nope/verify"), ("post", "/envs/nope/reset"),
                         ("delete", "/envs/nope")):
        r = client.request(method.upper(), path)
        assert r.status_code == 404, path
        assert r.json()["error"] and r.json()["fix"]
    assert client.post("/envs/nope/step", json={"action": "ls"}).status_code == 404


def test_bad_task_names(client):
    for name in ("../hello-file", "..", "hello-file/../count-lines", "/etc", "a/b", ".hidden"):
        r = client.post("/envs", json={"task": name})
        assert r.status_code == 400, name
        assert set(r.json()) >= {"error", "fix"}
    r = client.post("/envs", json={"task": "no-such-task"})
    assert r.status_code == 404 and "GET /tasks" in r.json()["fix"]
    assert client.get("/envs").json()["envs"] == []


def test_malformed_request_body_is_422(client):
    r = client.post("/envs", json={"tsk": "hello-file"})
    assert r.status_code == 422 and r.json()["problems"]
    env_id = create(client)
    r = client.post(f"/envs/{env_id}/step", json={"action": 3})
    assert r.status_code == 422 and any("action" in p for p in r.json()["problems"])


def write_task(root: Path, name: str, toml: str) -> Path:
    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "task.toml").write_text(toml)
    (d / "instruction.md").write_text("Do nothing.\n")
    (d / "tests" / "test.sh").write_text("#!/bin/bash\nexit 0\n")
    return d


def test_malformed_task_is_422_with_problems(make_client, tmp_path):
    write_task(tmp_path, "broken", 'name = "Broken Name"\ncolour = "red"\n[agent]\nmax_steps = -1\n')
    client = make_client(tasks_root=tmp_path)
    assert client.get("/tasks").json()["tasks"] == ["broken"]
    r = client.post("/envs", json={"task": "broken"})
    assert r.status_code == 422
    problems = r.json()["problems"]
    assert len(problems) == 3 and any("colour: unknown field" in p for p in problems)
    assert r.json()["fix"]
    assert client.get("/health").json()["envs"] == 0


def test_absolute_paths_without_tasks_root(make_client, tmp_path):
    write_task(tmp_path, "ok", 'name = "ok"\n')
    client = make_client(tasks_root=None)
    assert client.get("/tasks").json() == {"tasks_root": None, "tasks": []}
    assert client.post("/envs", json={"task": "hello-file"}).status_code == 400  # relative: no root to resolve it
    assert client.post("/envs", json={"task": str(tmp_path / ".." / tmp_path.name / "ok")}).status_code == 400
    env_id = create(client, str(tmp_path / "ok"))
    assert client.post(f"/envs/{env_id}/verify").json()["reward"] == 1.0


def test_full_is_429_with_retry_after(make_client):
    client = make_client(max_envs=2)
    a, _ = create(client), create(client)
    r = client.post("/envs", json={"task": "hello-file"})
    assert r.status_code == 429
    assert int(r.headers["Retry-After"]) >= 1
    assert r.json()["error"] and "DELETE" in r.json()["fix"]
    assert client.delete(f"/envs/{a}").status_code == 204
    create(client)  # room again


# ---- idle expiry, concurrency ------------------------------------------------------------------------------


def test_idle_envs_expire(make_client, yard):
    client = make_client(idle_timeout=0.5)
    env_id = create(client)
    sandbox = sandbox_of(client, env_id)
    assert wait_until(lambda: client.get(f"/envs/{env_id}").status_code == 404, timeout=5)
    # the env leaves the table at once; its sandbox is closed right after, in a worker thread
    assert wait_until(lambda: sandbox not in live_sandbox_ids(yard))
    assert client.get("/health").json()["envs"] == 0


def test_a_slow_step_does_not_block_the_server(client):
    env_id = create(client)
    result = {}
    t = threading.Thread(target=lambda: result.update(
        r=client.post(f"/envs/{env_id}/step", json={"action": "sleep 1.5; echo done"})))
    t.start()
    time.sleep(0.3)
    started = time.monotonic()
    assert client.get("/health").status_code == 200
    state = client.get(f"/envs/{env_id}").json()
    assert time.monotonic() - started < 0.5
    assert state["busy"] is True
    t.join()
    assert result["r"].json()["observation"].startswith("done")


# ---- WebSocket ---------------------------------------------------------------------------------------------


def test_websocket_episode(client, yard):
    env_id = create(client)
    with client.websocket_connect(f"/envs/{env_id}/ws") as ws:
        ws.send_json({"action": HELLO})
        step = ws.receive_json()  # HELLO prints nothing, so no output messages come first
        assert step["observation"] == "[exit code 0]" and step["terminated"] is False
        ws.send_text("not json")
        assert ws.receive_json()["status"] == 400
        ws.send_json({"act": "ls"})
        assert ws.receive_json()["status"] == 422
        ws.send_json({"action": "submit"})
        end = ws.receive_json()
        assert end["reward"] == 1.0 and end["terminated"] is True
        ws.send_json({"action": "ls"})
        assert ws.receive_json()["status"] == 409
        ws.send_json({"reset": True})
        assert "hello.txt" in ws.receive_json()["instruction"]
        ws.send_json({"action": "submit"})
        assert ws.receive_json()["reward"] == 0.0
    # disconnecting after the episode ended keeps the env (it can be reset)
    assert client.get(f"/envs/{env_id}").json()["episode"] == 2


def test_websocket_streams_output_before_the_step_result(client):
    env_id = create(client)
    with client.websocket_connect(f"/envs/{env_id}/ws") as ws:
        ws.send_json({"action": "for i in 1 2 3; do echo line$i; sleep 0.2; done; echo oops >&2"})
        chunks = []
        while True:
            message = ws.receive_json()
            if message.get("type") != "output":
                break
            chunks.append(message)
        assert "".join(c["data"] for c in chunks if c["stream"] == "stdout") == "line1\nline2\nline3\n"
        assert "".join(c["data"] for c in chunks if c["stream"] == "stderr") == "oops\n"
        assert len([c for c in chunks if c["stream"] == "stdout"]) >= 2  # it arrived in pieces, as it ran
        assert "line3" in message["observation"] and message["info"]["exit_code"] == 0
        ws.send_json({"action": "head -c 3000000 /dev/zero | tr '\\0' a"})
        streamed = 0
        while (message := ws.receive_json()).get("type") == "output":
            streamed += len(message["data"])
            last = message
        assert streamed <= 1 << 20 and last.get("truncated") is True
        assert "characters cut" in message["observation"]


def test_websocket_disconnect_mid_episode_reaps_the_sandbox(client, yard):
    env_id = create(client)
    sandbox = sandbox_of(client, env_id)
    with client.websocket_connect(f"/envs/{env_id}/ws") as ws:
        ws.send_json({"action": "touch /app/x"})
        assert ws.receive_json()["info"]["exit_code"] == 0
        assert client.get(f"/envs/{env_id}").json()["websocket"] is True
    assert wait_until(lambda: client.get(f"/envs/{env_id}").status_code == 404)
    assert wait_until(lambda: sandbox not in live_sandbox_ids(yard))  # closed right after, in a worker thread


def test_websocket_unknown_env(client):
    with client.websocket_connect("/envs/nope/ws") as ws:
        assert ws.receive_json()["status"] == 404
        with pytest.raises(WebSocketDisconnect) as e:
            ws.receive_json()
        assert e.value.code == 4404


# ---- OpenAPI -----------------------------------------------------------------------------------------------


def test_openapi_schema(client):
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    for path, methods in {"/health": {"get"}, "/tasks": {"get"}, "/envs": {"get", "post"},
                          "/envs/{env_id}": {"get", "delete"}, "/envs/{env_id}/step": {"post"},
                          "/envs/{env_id}/verify": {"post"}, "/envs/{env_id}/reset": {"post"}}.items():
        assert methods <= set(paths[path]), path
    assert "429" in paths["/envs"]["post"]["responses"]
    assert {"StepResult", "EnvCreated", "EnvState", "ErrorBody", "Action", "CreateEnv"} <= set(
        schema["components"]["schemas"])
    assert client.get("/docs").status_code == 200
