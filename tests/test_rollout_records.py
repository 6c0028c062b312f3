"""Rollout output for trainers: episodes.jsonl chat records (loaded by `datasets`, rendered by a tool-aware chat
template), --attempts with pass@k, --resume of an interrupted output directory."""

from __future__ import annotations

import json

import pytest

from envyard.envs import OraclePolicy, load_task, run_rollouts
from envyard.envs.openai_policy import TOOLS, OpenAIPolicy
from envyard.envs.rollout import EPISODES_FILE, pass_at_k, read_episodes, summarize
from envyard.errors import BadInput

from test_envs import make_task
from test_openai_policy import HELLO, SUBMIT_REPLY, StandIn, assert_valid_conversation, bash, completion

# A Hugging Face style chat template with tools (Hermes/Qwen-like): tools in the system turn, tool calls as
# <tool_call> blocks with their ids, tool results as <tool_response> blocks.
TEMPLATE = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}{% endif %}

<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'user' %}<|im_start|>user
{{ message.content }}<|im_end|>
{% elif message.role == 'assistant' %}<|im_start|>assistant
{% if message.content %}{{ message.content }}
{% endif %}
{%- for call in message.tool_calls or [] %}<tool_call>
{"id": {{ call.id | tojson }}, "name": {{ call.function.name | tojson }}, "arguments": {{ call.function.arguments }}}
</tool_call>
{% endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response id={{ message.tool_call_id | tojson }}>
{{ message.content }}
</tool_response><|im_end|>
{% elif message.role != 'system' %}{{ raise_exception('unknown role ' + message.role) }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


def render(messages: list[dict], tools: list[dict]) -> str:
    """Render as transformers' apply_chat_template does; with plain jinja2, set up as transformers sets it up
    (sandboxed, trim_blocks, lstrip_blocks, its tojson and raise_exception), when transformers is absent."""
    try:
        from transformers.utils.chat_template_utils import render_jinja_template
    except ImportError:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message):
            raise jinja2.exceptions.TemplateError(message)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False: json.dumps(x, ensure_ascii=ensure_ascii,
                                                                                      indent=indent)
        env.globals["raise_exception"] = raise_exception
        return env.from_string(TEMPLATE).render(messages=messages, tools=tools, add_generation_prompt=False)
    rendered, _ = render_jinja_template(conversations=[messages], tools=tools, chat_template=TEMPLATE)
    return rendered[0]


@pytest.fixture
def standin():
    s = StandIn()
    yield s
    s.close()


def test_model_episodes_are_chat_records_with_the_models_own_text_and_ids(yard, standin, tmp_path):
    first = completion(("bash", {"command": "echo 'Hello, world!' > /app/hello.txt"}),
                       content="I will write the file first.")
    call_id = first["choices"][0]["message"]["tool_calls"][0]["id"]
    submit_id = SUBMIT_REPLY["choices"][0]["message"]["tool_calls"][0]["id"]
    standin.script = [first, SUBMIT_REPLY]
    out = tmp_path / "out"
    make = lambda: OpenAIPolicy("stand-in", base_url=standin.url, max_retries=0)  # noqa: E731
    [ep] = run_rollouts(yard, [HELLO], make, out_dir=out)
    assert ep.reward == 1.0 and ep.infra_error is None
    lines = (out / EPISODES_FILE).read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert set(record) == {"messages", "tools", "reward", "metadata"}
    assert record["tools"] == TOOLS and record["reward"] == 1.0
    md = record["metadata"]
    assert (md["task"], md["policy"], md["steps"], md["infra_error"], md["attempt"]) == \
        ("hello-file", "openai:stand-in", 1, None, 0)
    assert md["task_dir"] == str(HELLO) and md["stop_reason"] == "submit" and md["trajectory"] == ep.trajectory
    messages = record["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert messages[1]["content"] == load_task(HELLO).instruction
    assert messages[2]["content"] == "I will write the file first."
    assert messages[2]["tool_calls"][0]["id"] == call_id  # the model's own ids, not rewritten
    assert messages[3]["tool_call_id"] == call_id and messages[3]["content"].endswith("[exit code 0]")
    assert messages[4]["tool_calls"][0]["id"] == submit_id and messages[5]["tool_call_id"] == submit_id
    assert_valid_conversation(messages)

    text = render(messages, record["tools"])
    assert "I will write the file first." in text
    assert f'<tool_call>\n{{"id": "{call_id}", "name": "bash", "arguments": {{"command": ' in text
    assert f'<tool_response id="{call_id}">' in text and "[exit code 0]" in text
    assert '"name": "submit"' in text and "Submitted." in text


def test_datasets_loads_the_file_as_is(yard, standin, tmp_path):
    datasets = pytest.importorskip("datasets", reason="the datasets library is not installed here")
    standin.script = [completion(("bash", {"command": "ls /app"}), content="Look first."), SUBMIT_REPLY]
    out = tmp_path / "out"
    make = lambda: OpenAIPolicy("stand-in", base_url=standin.url, max_retries=0)  # noqa: E731
    run_rollouts(yard, [HELLO], make, out_dir=out)
    ds = datasets.load_dataset("json", data_files=str(out / EPISODES_FILE), split="train")
    assert ds.num_rows == 1 and set(ds.column_names) == {"messages", "tools", "reward", "metadata"}
    row = ds[0]
    text = render(row["messages"], row["tools"])
    assert "Look first." in text and '"name": "bash"' in text and "<tool_response" in text


def test_budget_end_still_answers_the_last_tool_call(yard, standin, tmp_path):
    task = make_task(tmp_path / "t", toml_extra="[agent]\nmax_steps = 1")
    standin.script = [bash("echo 42 > /app/answer.txt")]
    out = tmp_path / "out"
    [ep] = run_rollouts(yard, [task], lambda: OpenAIPolicy("stand-in", base_url=standin.url, max_retries=0),
                        out_dir=out)
    assert ep.reward == 1.0
    [record] = read_episodes(out / EPISODES_FILE)
    assert record["messages"][-1]["role"] == "tool" and record["messages"][-1]["content"] == "[exit code 0]"
    assert_valid_conversation(record["messages"])


def test_scripted_policies_get_the_same_chat_format(yard, tmp_path):
    task = make_task(tmp_path / "t")
    out = tmp_path / "out"
    run_rollouts(yard, [task], OraclePolicy, out_dir=out)
    [record] = read_episodes(out / EPISODES_FILE)
    assert record["tools"] == TOOLS and record["reward"] == 1.0 and record["metadata"]["policy"] == "oracle"
    roles = [m["role"] for m in record["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert all("envyard" not in m for m in record["messages"])
    assert_valid_conversation(record["messages"])
    assert "/solution/solve.sh" in render(record["messages"], record["tools"])


def test_pass_at_k():
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 5, 1) == 1.0
    assert pass_at_k(5, 1, 1) == pytest.approx(0.2)
    assert pass_at_k(5, 1, 2) == pytest.approx(1 - 6 / 10)
    assert pass_at_k(3, 1, 3) == 1.0
    assert pass_at_k(2, 1, 3) == 1.0  # fewer attempts than k: whether any passed


def test_attempts_and_resume(yard, tmp_path):
    good = make_task(tmp_path / "good", name="good")
    bad = make_task(tmp_path / "bad", name="bad", solve="echo 41 > /app/answer.txt\n")
    out = tmp_path / "out"
    episodes = run_rollouts(yard, [good, bad], OraclePolicy, attempts=3, out_dir=out, concurrency=6)
    assert [(e.task, e.attempt) for e in episodes] == [("good", 0), ("good", 1), ("good", 2),
                                                       ("bad", 0), ("bad", 1), ("bad", 2)]
    summary = summarize(episodes, "oracle", 3)
    assert (summary["tasks"], summary["attempts"], summary["pass@1"], summary["pass@3"]) == (2, 3, 0.5, 0.5)
    assert len(read_episodes(out / EPISODES_FILE)) == 6

    # without --resume, an output directory with episodes is refused rather than mixed
    with pytest.raises(BadInput, match="resume"):
        run_rollouts(yard, [good], OraclePolicy, out_dir=out)

    # interrupt: keep two records and half of a third
    path = out / EPISODES_FILE
    lines = path.read_text().splitlines(keepends=True)
    kept = [json.loads(line)["metadata"] for line in lines[:2]]
    path.write_text("".join(lines[:2]) + lines[2][:40])
    ran = []
    resumed = run_rollouts(yard, [good, bad], OraclePolicy, attempts=3, out_dir=out, resume=True,
                           on_done=lambda e: ran.append(e))
    assert len(resumed) == 6 and len(ran) == 6
    again = {(m["task"], m["attempt"]): m["wall_time"] for m in kept}
    for e in resumed:  # the two kept are not run again: their records come back unchanged
        if (e.task, e.attempt) in again:
            assert e.wall_time == again[(e.task, e.attempt)]
    records = read_episodes(path)
    assert len(records) == 6
    assert sorted((r["metadata"]["task"], r["metadata"]["attempt"]) for r in records) == \
        sorted((e.task, e.attempt) for e in resumed)
    assert summarize(resumed, "oracle", 3)["pass@3"] == 0.5

    with pytest.raises(BadInput, match="policy"):
        from envyard.envs import NoopPolicy
        run_rollouts(yard, [good], NoopPolicy, out_dir=out, resume=True)
    with pytest.raises(BadInput):
        run_rollouts(yard, [good], OraclePolicy, resume=True)
    with pytest.raises(BadInput):
        run_rollouts(yard, [good], OraclePolicy, attempts=0)
