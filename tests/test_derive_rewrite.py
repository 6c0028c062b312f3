"""`envyard derive --rewrite-model`: a model rewrites the instructions, through the real `openai` client, against a
local stand-in for an OpenAI-compatible chat endpoint. A good rewrite is used; each kind of leak, a dropped test
or command, and every endpoint failure leave the deterministic instruction in place with a counted reason."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import pytest
from chatstandin import ChatStandIn

from envyard.derive.mutation import Mutation, SourceFacts
from envyard.derive.rewrite import DETERMINISTIC, Rewriter, rewrite_task, rewrite_tasks
from envyard.derive.writer import Screened, write_task
from envyard.errors import BadInput

from bareenv import BARE, cli_cwd

SRC = str(Path(__file__).resolve().parents[1] / "src")
MINILIB = Path(__file__).resolve().parent / "fixtures" / "derive" / "minilib"

FIX_DIFF = """--- a/src/minilib/text.py
+++ b/src/minilib/text.py
@@ -3,5 +3,5 @@
 
 
 def shout(text, times=1):
-    return (text.upper() + "!") // times
+    return (text.upper() + "!") * times
 
"""
ERROR = "TypeError: unsupported operand type(s) for //: 'str' and 'int'"
COMMAND = "python -m pytest tests/test_text.py --continue-on-collection-errors"


def completion(content, finish_reason: str = "stop") -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "stand-in",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish_reason}]}


def polite(instruction: str) -> str:
    """What a well-behaved model writes: the command and the tests kept verbatim, nothing else from the code."""
    command = re.search(r"test suite \(`([^`]+)`", instruction)
    tests = re.findall(r"(?m)^- `([^`]+)`", instruction)
    lines = ["Tests started failing after my last pull", "",
             f"I ran `{command.group(1)}` and these tests fail now:", *(f"- `{t}`" for t in tests), "",
             "Could you take a look? Some of these tests are not in my checkout. Please don't change the tests."]
    return "\n".join(lines)


class StandIn(ChatStandIn):
    """`reply(instruction)` gives each answer: a str (the rewrite), a dict (a raw body), bytes (sent raw),
    ("status", code, body) or ("sleep", seconds). Keeps every request and the most requests that were ever in
    flight at once."""

    def __init__(self, reply=polite):
        self.reply = reply
        self.requests: list[dict] = []
        self.inflight = self.max_inflight = 0
        self.lock = threading.Lock()
        super().__init__()

    def answer(self, body: dict) -> tuple[int, bytes]:
        with self.lock:
            self.requests.append(body)
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            step = self.reply(body["messages"][-1]["content"])
            if isinstance(step, tuple) and step[0] == "sleep":
                self.stop.wait(step[1])
                step = polite(body["messages"][-1]["content"])
            if isinstance(step, tuple) and step[0] == "status":
                return step[1], step[2]
            if isinstance(step, str):
                step = completion(step)
            return 200, step if isinstance(step, bytes) else json.dumps(step).encode()
        finally:
            with self.lock:
                self.inflight -= 1


@pytest.fixture
def standin():
    s = StandIn()
    yield s
    s.close()


@pytest.fixture(autouse=True)
def no_openai_env(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


FACTS = SourceFacts(image="setup/minilib:latest", workdir="/work/minilib", test_runner="pytest",
                    test_command="/opt/venv/bin/python -m pytest", packages=("minilib",),
                    python="/opt/venv/bin/python",
                    files=("src/minilib/__init__.py", "src/minilib/text.py", "tests/test_text.py"))


def bug_task(root: Path, extra_hidden: dict[str, bytes] | None = None) -> Path:
    """The task derive writes for `*` → `//` in minilib's shout() (as tests/test_derive.py derives it)."""
    m = Mutation(kind="bug", name="wrong-operator-1", site="src/minilib/text.py:6:32:BinOp", break_script="true",
                 fix_script="set -e\ncd /work/minilib\n/opt/venv/bin/python -I - <<'EOF'\n"
                            "new = ['    return (text.upper() + \"!\") * times']\nEOF\n",
                 patch_lines=1, files=("src/minilib/text.py",),
                 meta={"operator": "wrong-operator", "file": "src/minilib/text.py", "line": 6,
                       "reverse_patch": FIX_DIFF})
    failing = ["tests.test_text::test_shout", "tests.test_text::test_shout_twice"]
    s = Screened(failing=failing, expect_pass=["tests.test_text::test_words", *failing],
                 messages={t: ERROR for t in failing}, scope=("tests/test_text.py",),
                 hidden={"tests/test_text.py": (MINILIB / "tests" / "test_text.py").read_bytes(),
                         **(extra_hidden or {})})
    dest = root / "minilib-bug-wrong-operator-1"
    write_task(dest, FACTS, m, s, seed=1, name=dest.name)
    return dest


def env_task(root: Path, message: str = "ModuleNotFoundError: No module named 'requests'") -> Path:
    m = Mutation(kind="env", name="uninstall-requests", site="dist:requests", break_script="true",
                 fix_script="set -e\nuv pip --quiet install --reinstall 'requests==2.31.0'\n", patch_lines=1,
                 meta={"mutation": "uninstall", "distribution": "requests", "version": "2.31.0", "network": "host"})
    s = Screened(failing=["tests.test_text::test_shout"], expect_pass=["tests.test_text::test_shout"],
                 messages={"tests.test_text::test_shout": message}, scope=("tests/test_text.py",))
    dest = root / "minilib-env-uninstall-requests"
    write_task(dest, FACTS, m, s, seed=1, name=dest.name)
    return dest


def rewriter(standin: StandIn, **kw) -> Rewriter:
    return Rewriter("stand-in", base_url=standin.url, **{"max_retries": 0, "request_timeout": 10, **kw})


def metadata(task: Path) -> dict:
    return tomllib.loads((task / "task.toml").read_text())["metadata"]


# ---- a good rewrite is used --------------------------------------------------------------------------------

def test_a_good_rewrite_replaces_the_instruction_and_the_deterministic_one_is_kept(tmp_path, standin):
    task = bug_task(tmp_path)
    deterministic = (task / "instruction.md").read_text()
    assert COMMAND in deterministic  # the fake task looks like the real ones
    result = rewrite_task(task, rewriter(standin))
    assert (result.instruction, result.reason) == ("rewritten", "")
    assert (task / "instruction.md").read_text() == polite(deterministic) + "\n"
    assert (task / DETERMINISTIC).read_text() == deterministic
    md = metadata(task)
    assert md["instruction"] == "rewritten by stand-in" and md["instruction_deterministic"] == DETERMINISTIC
    assert "instruction_rewrite_rejected" not in md and md["kind"] == "bug"  # the other metadata stays
    # the model was sent the deterministic instruction and nothing of the answer
    (request,) = standin.requests
    assert request["model"] == "stand-in" and request["messages"][-1]["content"] == deterministic
    sent = json.dumps(request)
    assert "* times" not in sent and "HI!HI!" not in sent and "text.py\"" not in sent


def test_a_reasoning_block_and_a_fence_around_the_reply_are_removed(tmp_path):
    s = StandIn(lambda text: f"<think>the fix is * times</think>\n```markdown\n{polite(text)}\n```")
    try:
        task = bug_task(tmp_path)
        assert rewrite_task(task, rewriter(s)).instruction == "rewritten"
        assert (task / "instruction.md").read_text().startswith("Tests started failing")
    finally:
        s.close()


# ---- each leak is refused ------------------------------------------------------------------------------------

LEAKS = {
    # the original operator in its context, however it is spaced
    "operator-in-context": (lambda t: polite(t) + "\nI think it should be `(text.upper() + \"!\") * times`.",
                            "rewrite-leaks-fix"),
    "operator-respaced": (lambda t: polite(t) + "\nMaybe `)*times` instead?", "rewrite-leaks-fix"),
    "markdown-escaped": (lambda t: polite(t) + "\nMaybe \\)\\*times instead?", "rewrite-leaks-fix"),
    "html-escaped": (lambda t: polite(t) + "\nMaybe )&#42;times instead?", "rewrite-leaks-fix"),
    "whole-fixed-line": (lambda t: polite(t) + "\n    return (text.upper() + \"!\") * times", "rewrite-leaks-fix"),
    "changed-file": (lambda t: polite(t) + "\nThe problem is somewhere in text.py.", "rewrite-leaks-location"),
    "hidden-test-content": (lambda t: polite(t) + "\nThe test does `assert shout(\"hi\", 2) == \"HI!HI!\"`.",
                            "rewrite-leaks-hidden-tests"),
    "dropped-test": (lambda t: polite(t).replace("- `tests/test_text.py::test_shout_twice`\n", ""),
                     "rewrite-drops-tests"),
    "dropped-command": (lambda t: polite(t).replace(COMMAND, "pytest"), "rewrite-drops-tests"),
    "empty": (lambda t: "   \n", "rewrite-empty"),
    "unchanged": (lambda t: t.replace("\n\n", "\n"), "rewrite-unchanged"),
    "too-long": (lambda t: polite(t) + "\n" + "It is really broken. " * 200, "rewrite-too-long"),
}


@pytest.mark.parametrize("case", list(LEAKS))
def test_a_rewrite_that_leaks_or_drops_something_is_refused(tmp_path, case):
    make, reason = LEAKS[case]
    s = StandIn(make)
    try:
        task = bug_task(tmp_path)
        deterministic = (task / "instruction.md").read_text()
        result = rewrite_task(task, rewriter(s))
        assert (result.instruction, result.reason) == ("deterministic", reason), result.detail
        assert (task / "instruction.md").read_text() == deterministic == (task / DETERMINISTIC).read_text()
        md = metadata(task)
        assert md["instruction"] == "deterministic" and md["instruction_rewrite_rejected"] == reason
    finally:
        s.close()


def test_a_hidden_test_file_the_instruction_does_not_name_may_not_be_named(tmp_path):
    s = StandIn(lambda t: polite(t) + "\nAlso see tests/test_shapes.py.")
    try:
        task = bug_task(tmp_path, extra_hidden={"tests/test_shapes.py": b"def test_square():\n    pass\n"})
        assert rewrite_task(task, rewriter(s)).reason == "rewrite-leaks-hidden-tests"
    finally:
        s.close()


def test_the_version_a_repair_installs_may_only_be_named_when_the_instruction_names_it(tmp_path):
    s = StandIn(lambda t: polite(t) + "\nIt worked with requests 2.31.0 yesterday.")
    try:
        task = env_task(tmp_path / "a")
        result = rewrite_task(task, rewriter(s))
        assert result.reason == "rewrite-leaks-version" and "2.31.0" in result.detail
        # the same sentence is fine when the user-visible error already says which version is wanted
        said = env_task(tmp_path / "b", message="ImportError: minilib needs requests==2.31.0, none is installed")
        assert rewrite_task(said, rewriter(s)).instruction == "rewritten"
        # a longer version that merely starts the same is not the secret
        other = StandIn(lambda t: polite(t) + "\nI have requests 2.31.0.1 installed.")
        try:
            assert rewrite_task(env_task(tmp_path / "c"), rewriter(other)).instruction == "rewritten"
        finally:
            other.close()
    finally:
        s.close()


def test_the_commit_a_commit_task_inverts_may_not_be_named(tmp_path):
    sha = "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"
    m = Mutation(kind="commit", name="commit-1a2b3c4", site="commit:1a2b3c4", break_script="true",
                 fix_script="true", meta={"commit": sha, "parent": "f" * 40, "subject": "Handle times=0 in shout()"})
    s = Screened(failing=["tests.test_text::test_shout"], expect_pass=["tests.test_text::test_shout"],
                 messages={"tests.test_text::test_shout": "AssertionError"}, scope=("tests/test_text.py",))
    for i, extra in enumerate(["It broke around commit 1a2b3c4.", "Maybe \"Handle times=0 in shout()\" did it?"]):
        task = tmp_path / f"t{i}"
        write_task(task, FACTS, m, s, seed=1, name=task.name)
        standin = StandIn(lambda t: polite(t) + "\n" + extra)
        try:
            result = rewrite_task(task, rewriter(standin))
            assert result.reason == "rewrite-leaks-location", (extra, result)
        finally:
            standin.close()


def test_what_the_deterministic_instruction_already_says_may_be_repeated(tmp_path):
    # the error message shows the broken operator `//` and the test names the hidden file: both are fine
    s = StandIn(lambda t: polite(t) + f"\nThe error is `{ERROR}` in tests/test_text.py.")
    try:
        assert rewrite_task(bug_task(tmp_path), rewriter(s)).instruction == "rewritten"
    finally:
        s.close()


# ---- the endpoint fails: the deterministic instruction stays ------------------------------------------------

FAILURES = {
    "http-500": (("status", 500, b'{"error": {"message": "boom"}}'), {}, "rewrite-http-error"),
    "rate-limited": (("status", 429, b'{"error": {"message": "slow down"}}'), {}, "rewrite-rate-limited"),
    "not-json": (b"<html>gateway</html>", {}, "rewrite-bad-response"),
    "no-choices": ({"object": "chat.completion", "choices": []}, {}, "rewrite-bad-response"),
    "content-not-text": (completion(None), {}, "rewrite-bad-response"),
    "cut-off": (completion("Tests fail", finish_reason="length"), {}, "rewrite-too-long"),
    "timeout": (("sleep", 5), {"request_timeout": 0.5}, "rewrite-timeout"),
}


@pytest.mark.parametrize("case", list(FAILURES))
def test_an_endpoint_failure_keeps_the_deterministic_instruction(tmp_path, case):
    reply, kw, reason = FAILURES[case]
    s = StandIn(lambda t: reply)
    try:
        task = bug_task(tmp_path)
        deterministic = (task / "instruction.md").read_text()
        started = time.monotonic()
        result = rewrite_task(task, rewriter(s, **kw))
        assert time.monotonic() - started < 5
        assert (result.instruction, result.reason) == ("deterministic", reason), result.detail
        assert (task / "instruction.md").read_text() == deterministic
        assert metadata(task)["instruction_rewrite_rejected"] == reason
    finally:
        s.close()


def test_an_unreachable_endpoint_keeps_the_deterministic_instruction(tmp_path):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    task = bug_task(tmp_path)
    result = rewrite_task(task, Rewriter("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0))
    assert (result.instruction, result.reason) == ("deterministic", "rewrite-connection")


def test_rate_limits_are_retried_by_the_client_before_giving_up(tmp_path):
    answers = [("status", 429, b'{"error": {"message": "slow down"}}')]
    s = StandIn(lambda t: answers.pop() if answers else polite(t))
    try:
        result = rewrite_task(bug_task(tmp_path), rewriter(s, max_retries=1))
        assert result.instruction == "rewritten" and len(s.requests) == 2
    finally:
        s.close()


def test_rewrites_run_at_most_concurrency_at_once_and_keep_the_order(tmp_path):
    s = StandIn(lambda t: ("sleep", 0.3))
    try:
        tasks = []
        for i in range(6):
            t = bug_task(tmp_path / str(i))
            tasks.append(t.rename(tmp_path / f"task-{i}"))
        results = rewrite_tasks(tasks, rewriter(s, concurrency=2))
        assert [r.task for r in results] == [f"task-{i}" for i in range(6)]
        assert all(r.instruction == "rewritten" for r in results)
        assert s.max_inflight == 2 and len(s.requests) == 6
    finally:
        s.close()


# ---- configuration -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw, env, message", [
    ({}, {}, "has no endpoint"),
    ({}, {"OPENAI_API_KEY": " "}, "OPENAI_API_KEY is set but empty"),
    ({"base_url": "localhost:8000"}, {}, "is not an http(s) URL"),
    ({"model": " "}, {}, "needs a model name"),
])
def test_a_configuration_that_cannot_work_is_refused_up_front(monkeypatch, kw, env, message):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(BadInput, match=re.escape(message)):
        Rewriter(kw.pop("model", "m"), **kw)


def test_the_python_api_refuses_a_bad_configuration_before_touching_the_store(tmp_path):
    from envyard.derive.pipeline import derive

    with pytest.raises(BadInput, match="has no endpoint"):
        derive(None, "setup/none", kinds=["bug"], n=1, seed=0, out=tmp_path / "o", rewrite_model="m")
    assert not (tmp_path / "o").exists()


def test_the_endpoint_and_key_come_from_the_environment(monkeypatch, standin):
    monkeypatch.setenv("OPENAI_BASE_URL", standin.url)
    assert Rewriter("m").base_url == standin.url
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert Rewriter("m").base_url == "https://api.openai.com/v1"  # a key alone means OpenAI itself


def cli(home, *args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "envyard.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=cli_cwd(),
                          env={"ENVYARD_HOME": str(home), **BARE, "PYTHONPATH": SRC, **(env or {})})


def test_the_cli_refuses_a_bad_rewrite_configuration_with_exit_2_before_any_work(tmp_path):
    r = cli(tmp_path / "home", "derive", "setup/none", "--out", tmp_path / "o", "--rewrite-model", "m")
    assert r.returncode == 2 and "has no endpoint" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").iterdir())  # no store work done
    r = cli(tmp_path / "home", "derive", "setup/none", "--out", tmp_path / "o", "--base-url", "http://x/v1")
    assert r.returncode == 2 and "--base-url needs --rewrite-model" in r.stderr


# ---- end to end: one small derive run ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def home(tmp_path_factory):
    h = tmp_path_factory.mktemp("rewrite-home")
    r = cli(h, "setup", MINILIB, "--name", "setup/minilib", "--out", h / "contract", "--json", timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    yield h
    cli(h, "gc")


def test_derive_with_rewrite_model_end_to_end(home, tmp_path):
    answers = []
    lock = threading.Lock()

    def reply(text):  # the first request gets a good rewrite, the next a leaking one
        with lock:
            answers.append(text)
            first = len(answers) == 1
        return polite(text) if first else polite(text) + "\nThe bug is in src/minilib/numbers.py or text.py."

    s = StandIn(reply)
    try:
        out = tmp_path / "tasks"
        r = cli(home, "derive", "setup/minilib", "--n", "2", "--seed", "1", "--out", out, "--json",
                "--rewrite-model", "stand-in", "--base-url", s.url)
    finally:
        s.close()
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert report["kept"] == 2 and len(answers) == 2
    rw = report["rewrite"]
    assert rw["model"] == "stand-in" and rw["rewritten"] == 1 and rw["deterministic"] == 1
    assert rw["deterministic_by_reason"] == {"rewrite-leaks-location": 1}
    assert json.loads((out / "report.json").read_text())["rewrite"]["rewritten"] == 1
    used = {}
    for t in report["tasks"]:
        task = out / t["name"]
        md = metadata(task)
        deterministic = (task / DETERMINISTIC).read_text()
        assert deterministic in answers  # the model was sent the deterministic instruction
        used[md["instruction"]] = (task / "instruction.md").read_text()
        if md["instruction"] == "deterministic":
            assert used["deterministic"] == deterministic and t["instruction_rejected"] == "rewrite-leaks-location"
        else:
            assert md["instruction"] == "rewritten by stand-in" and t["instruction"] == "rewritten"
            assert used[md["instruction"]] == polite(deterministic) + "\n"
    assert set(used) == {"deterministic", "rewritten by stand-in"}
    # the tasks stay valid: task check passes with either instruction
    r = cli(home, "task", "check", out, "--json")
    assert r.returncode == 0, r.stdout[-2000:]
    # the human-readable summary says how many were rewritten
    r2 = subprocess.run([sys.executable, "-c", "import json,sys; from envyard.cli.derive import _print; "
                         "from rich.console import Console; _print(Console(width=200), json.load(open(sys.argv[1])))",
                         str(out / "report.json")], capture_output=True, text=True, env={"PYTHONPATH": SRC})
    assert "instructions rewritten by stand-in: 1 of 2 (deterministic kept: rewrite-leaks-location 1)" in r2.stdout


def test_without_a_rewrite_model_nothing_changes(tmp_path, standin):
    from envyard.derive.pipeline import Report

    task = bug_task(tmp_path)  # what derive writes without the flag
    assert not (task / DETERMINISTIC).exists() and "instruction" not in metadata(task)
    assert "rewrite" not in Report(image="i", seed=0, kinds=["bug"], n=1, out="o").to_dict()
    assert standin.requests == []


def test_a_fix_that_only_deletes_tokens_is_still_recognized():
    from envyard.derive.rewrite import Secrets, _fix_snippets, check

    diff = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n def f(args):\n-    if not (args):\n+    if args:\n"
    det = "# Failing\n\nThe test suite (`python -m pytest`, run from `/w`) reports 1 failing test:\n\n- `t.py::test_f`\n"
    secrets = Secrets(fix=_fix_snippets(diff), version="", locations=set(), hidden_names=set(), hidden_lines=set(),
                      command="python -m pytest", tests=["t.py::test_f"])
    ok = "Running `python -m pytest` I see `t.py::test_f` fail since the update."
    assert check(det, ok, secrets) is None
    assert check(det, ok + " The guard should be `if args :` again.", secrets)[0] == "rewrite-leaks-fix"


def test_test_ids_with_html_entities_count_as_kept_and_escaped_hidden_lines_as_quoted():
    from envyard.derive.rewrite import Secrets, _code, check

    test = "t.py::test_x[<em>&lt;bad&gt;</em>]"
    det = f"The test suite (`python -m pytest`, run from `/w`) reports 1 failing test:\n\n- `{test}`\n"
    secrets = Secrets(fix=set(), version="", locations=set(), hidden_names=set(), command="python -m pytest",
                      hidden_lines={_code('assert result == "<em>&lt;value&gt;</em>"')}, tests=[test])
    ok = f"After upgrading, `python -m pytest` fails on `{test}`, can someone look?"
    assert check(det, ok, secrets) is None
    leak = ok + ' It checks `assert result == "<em>&lt;value&gt;</em>"`.'
    assert check(det, leak, secrets)[0] == "rewrite-leaks-hidden-tests"
