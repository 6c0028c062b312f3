"""OpenAIPolicy against a local stand-in for a Chat Completions server, driven through the real `openai` client."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from chatstandin import ChatStandIn

from envyard.envs import SUBMIT, load_task, run_episode
from envyard.envs.openai_policy import NUDGE, OpenAIPolicy, PolicyError, fit_context, message_chars, truncate_middle
from envyard.errors import EnvyardError

HELLO = Path(__file__).resolve().parent.parent / "examples" / "tasks" / "hello-file"


def completion(*calls: tuple[str, object], content: str | None = None) -> dict:
    """A chat.completion body whose message makes the given tool calls: (name, arguments dict or raw string)."""
    tool_calls = [{"id": f"call_{i}_{time.monotonic_ns()}", "type": "function",
                   "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                  for i, (name, args) in enumerate(calls)]
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "stand-in",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def bash(command: str) -> dict:
    return completion(("bash", {"command": command}))


SUBMIT_REPLY = completion(("submit", {}))


class StandIn(ChatStandIn):
    """Answers from a script; every request body is kept in `requests`.

    A script entry is a dict (sent as JSON), bytes (sent raw with HTTP 200), ("sleep", seconds) or
    ("status", code, body)."""

    def __init__(self):
        self.script: list = []
        self.requests: list[dict] = []
        super().__init__()

    def answer(self, body: dict) -> tuple[int, bytes]:
        self.requests.append(body)
        step = self.script.pop(0) if self.script else SUBMIT_REPLY
        if isinstance(step, tuple) and step[0] == "sleep":
            self.stop.wait(step[1])
            return 200, json.dumps(SUBMIT_REPLY).encode()
        if isinstance(step, tuple) and step[0] == "status":
            return step[1], step[2]
        return 200, step if isinstance(step, bytes) else json.dumps(step).encode()


@pytest.fixture
def standin():
    s = StandIn()
    yield s
    s.close()


@pytest.fixture(scope="module")
def task():
    return load_task(HELLO)


def started(task, url: str, **kw) -> OpenAIPolicy:
    policy = OpenAIPolicy("stand-in", base_url=url, max_retries=0, request_timeout=10, **kw)
    policy.start(task, task.instruction)
    return policy


def assert_valid_conversation(messages: list[dict]):
    """Every tool call is answered by exactly one tool message before the next assistant/user message."""
    open_ids: set[str] = set()
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_ids, m
            open_ids.remove(m["tool_call_id"])
        else:
            assert not open_ids, f"unanswered tool calls {open_ids} before {m}"
            open_ids = {c["id"] for c in m.get("tool_calls") or ()}


# ---- a real episode ------------------------------------------------------------------------------------------

def test_episode_through_the_stand_in(yard, standin, task):
    standin.script = [bash("echo 'Hello, world!' > /app/hello.txt"), SUBMIT_REPLY]
    policy = OpenAIPolicy("stand-in", base_url=standin.url)
    assert policy.name == "openai:stand-in"
    ep = run_episode(yard, task, policy)
    assert ep.infra_error is None, ep.infra_detail
    assert ep.reward == 1.0
    assert ep.policy == "openai:stand-in"

    assert len(standin.requests) == 2
    first, second = standin.requests
    assert first["model"] == "stand-in"
    assert first["temperature"] == 0.0
    assert {t["function"]["name"] for t in first["tools"]} == {"bash", "submit"}
    bash_tool = next(t for t in first["tools"] if t["function"]["name"] == "bash")
    assert bash_tool["function"]["parameters"]["required"] == ["command"]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "submit" in first["messages"][0]["content"] and "/app" in first["messages"][0]["content"]
    assert first["messages"][1]["content"] == task.instruction
    # The second request carries the first command's tool result, answering the call's id.
    call = second["messages"][2]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"command": "echo 'Hello, world!' > /app/hello.txt"}
    result = second["messages"][3]
    assert result["role"] == "tool" and result["tool_call_id"] == call["id"]
    assert result["content"].endswith("[exit code 0]")

    assert policy.messages[:4] == second["messages"]
    assert policy.messages[-1]["role"] == "tool" and policy.messages[-1]["content"] == "Submitted."
    assert_valid_conversation(policy.messages)
    assert policy.stop_reason == "submit"
    assert policy.requests == 2 and policy.usage["total_tokens"] == 30


# ---- observations and context ----------------------------------------------------------------------------------

def test_truncate_middle():
    assert truncate_middle("short", 100) == "short"
    text = "HEAD" + "x" * 50_000 + "TAIL\n[exit code 1]"
    for limit in (64, 100, 1000, 8000):
        cut = truncate_middle(text, limit)
        assert len(cut) <= limit
        assert "characters cut" in cut
        assert cut.startswith("HEAD") and cut.endswith("[exit code 1]")
    assert len(truncate_middle(text, 10)) == 10


def test_huge_observation_is_cut(standin, task):
    standin.script = [bash("cat big.log"), bash("true")]
    policy = started(task, standin.url, max_observation_chars=1000)
    assert policy.act(task.instruction) == "cat big.log"
    huge = "START" + "y" * 200_000 + "END\n[exit code 0]"
    assert policy.act(huge) == "true"
    sent = standin.requests[1]["messages"][-1]
    assert sent["role"] == "tool"
    assert len(sent["content"]) <= 1000
    assert "characters cut" in sent["content"]
    assert sent["content"].startswith("START") and sent["content"].endswith("END\n[exit code 0]")
    assert policy.messages[3] == sent


def test_context_is_kept_under_budget(standin, task):
    standin.script = [bash(f"step {i}") for i in range(8)]
    policy = started(task, standin.url, max_observation_chars=2000, context_chars=6000)
    obs = task.instruction
    for i in range(8):
        assert policy.act(obs) == f"step {i}"
        obs = f"output of step {i}:" + "z" * 1900 + "\n[exit code 0]"
    last = standin.requests[-1]["messages"]
    assert sum(message_chars(m) for m in last) <= 6000
    assert_valid_conversation(last)
    assert last[0]["role"] == "system" and last[1]["content"] == task.instruction
    assert last[-1]["content"] == policy.messages[-2]["content"]  # the latest observation arrives whole
    assert any("characters cut" in m["content"] for m in last if m["role"] == "tool")  # old outputs elided
    # The recorded conversation keeps every observation as the model first saw it.
    assert sum(1 for m in policy.messages if m["role"] == "tool" and "characters cut" not in m["content"]) == 7


def test_fit_context_drops_early_turns_when_eliding_is_not_enough():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "do it"}]
    for i in range(30):
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps(
                {"command": "c" * 500})}}]},
                     {"role": "tool", "tool_call_id": f"c{i}", "content": "o" * 3000}]
    fitted = fit_context(messages, 5000)
    assert sum(message_chars(m) for m in fitted) <= 5000
    assert_valid_conversation(fitted)
    assert fitted[:2] == messages[:2] and "earlier turns were removed" in fitted[2]["content"]
    assert fitted[-2]["tool_calls"][0]["id"] == "c29"
    assert fit_context(messages[:4], 10**6) == messages[:4]


def test_extra_tool_calls_are_answered_as_skipped(standin, task):
    standin.script = [completion(("bash", {"command": "ls"}), ("bash", {"command": "pwd"}), ("submit", {})),
                      SUBMIT_REPLY]
    policy = started(task, standin.url)
    assert policy.act(task.instruction) == "ls"
    assert policy.act("a.txt\n[exit code 0]") == SUBMIT
    sent = standin.requests[1]["messages"]
    assert_valid_conversation(sent)
    tools = [m for m in sent if m["role"] == "tool"]
    assert len(tools) == 3
    assert sum("Skipped" in m["content"] for m in tools) == 2
    assert any(m["content"] == "a.txt\n[exit code 0]" for m in tools)
    assert_valid_conversation(policy.messages)


def test_no_tool_call_is_nudged_then_submits(standin, task):
    standin.script = [completion(content="I think I should look around.")] * 3
    policy = started(task, standin.url)
    assert policy.act(task.instruction) == SUBMIT
    assert policy.stop_reason == "no_tool_call"
    assert len(standin.requests) == 3
    assert [m["content"] for m in standin.requests[1]["messages"][-2:]] == ["I think I should look around.", NUDGE]
    assert sum(m["content"] == NUDGE for m in standin.requests[2]["messages"]) == 2


def test_a_nudge_can_recover(standin, task):
    standin.script = [completion(content="Let me think."), bash("ls"), SUBMIT_REPLY]
    policy = started(task, standin.url)
    assert policy.act(task.instruction) == "ls"
    assert policy.act("[exit code 0]") == SUBMIT
    assert_valid_conversation(standin.requests[-1]["messages"])


def test_unknown_tool_is_answered_and_retried(standin, task):
    standin.script = [completion(("python", {"code": "1"})), bash("ls")]
    policy = started(task, standin.url)
    assert policy.act(task.instruction) == "ls"
    sent = standin.requests[1]["messages"]
    assert_valid_conversation(sent)
    assert "no tool named 'python'" in sent[-1]["content"]


# ---- failures of the endpoint -----------------------------------------------------------------------------------

def expect_policy_error(policy: OpenAIPolicy, kind: str, url: str) -> PolicyError:
    with pytest.raises(PolicyError) as info:
        policy.act("anything")
    err = info.value
    assert isinstance(err, EnvyardError)
    assert err.kind == kind, str(err)
    assert err.infra_error == "policy_error"
    assert "stand-in" in str(err) and url in str(err)
    return err


@pytest.mark.parametrize("body,why", [
    (b"<html>502 Bad Gateway</html>", "not JSON"),
    (b"{not json", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"id": "x", "object": "chat.completion"}', "no choices"),
    (b'{"id": "x", "choices": []}', "no choices"),
    (b'{"choices": [{"index": 0}]}', "no message"),
    (b'{"error": {"message": "model overloaded"}}', "error"),
])
def test_garbage_body_raises(standin, task, body, why):
    standin.script = [body]
    err = expect_policy_error(started(task, standin.url), "bad_response", standin.url)
    assert why in str(err)


def test_http_error_raises(standin, task):
    standin.script = [("status", 500, b'{"error": {"message": "boom"}}')]
    err = expect_policy_error(started(task, standin.url), "http_status", standin.url)
    assert "500" in str(err) and "boom" in str(err)


@pytest.mark.parametrize("arguments", ['{"command": "ls"', '{"cmd": "ls"}', '{"command": 42}', '"ls"', ""])
def test_malformed_tool_arguments_raise(standin, task, arguments):
    standin.script = [completion(("bash", arguments))]
    err = expect_policy_error(started(task, standin.url), "bad_tool_call", standin.url)
    assert "malformed arguments" in str(err)


def test_timeout_raises(standin, task):
    standin.script = [("sleep", 5)]
    policy = OpenAIPolicy("stand-in", base_url=standin.url, request_timeout=0.5, max_retries=0)
    policy.start(task, task.instruction)
    t0 = time.monotonic()
    err = expect_policy_error(policy, "timeout", standin.url)
    assert time.monotonic() - t0 < 3
    assert "0.5 s" in str(err)


def test_connection_refused_raises(task):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    policy = OpenAIPolicy("stand-in", base_url=url, max_retries=0, request_timeout=5)
    policy.start(task, task.instruction)
    err = expect_policy_error(policy, "connection", url)
    assert "cannot connect" in str(err)


def test_act_before_start_is_an_error():
    with pytest.raises(EnvyardError):
        OpenAIPolicy("stand-in", base_url="http://127.0.0.1:9/v1").act("x")


def test_empty_api_key_is_bad_input_naming_the_variable(monkeypatch):
    # openai.OpenAI(api_key="") fails with "Missing credentials"; envyard says which setting is empty, at once
    from envyard.envs import make_policy
    from envyard.errors import BadInput

    monkeypatch.setenv("OPENAI_API_KEY", "")
    with pytest.raises(BadInput, match="OPENAI_API_KEY is set but empty") as e:
        make_policy("openai:some-model")
    assert e.value.exit_code == 2 and "unset OPENAI_API_KEY" in e.value.fix
    with pytest.raises(BadInput, match="api_key is empty"):
        OpenAIPolicy("some-model", api_key=" ")
    monkeypatch.delenv("OPENAI_API_KEY")
    assert make_policy("openai:some-model")().client.api_key == "not-needed"  # unset: the placeholder
