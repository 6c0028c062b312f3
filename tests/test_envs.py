"""Agent environments: task validation, tamper-proof verification, TerminalEnv, rollouts."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from envyard.envs import (SUBMIT, NoopPolicy, OraclePolicy, ReplayPolicy, TerminalEnv, check_task, find_tasks,
                          load_task, run_episode, run_rollouts)
from envyard.envs.task import TaskError

from conftest import Scripted

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks"

# A verifier that trusts python3 and writes its reward file from Python.
PY_VERIFIER = textwrap.dedent("""\
    #!/bin/bash
    python3 - <<'EOF'
    import pathlib
    ok = pathlib.Path("/app/answer.txt").read_text().strip() == "42" if pathlib.Path("/app/answer.txt").exists() else False
    pathlib.Path("/logs/verifier/reward.txt").write_text("1" if ok else "0")
    EOF
""")


def make_task(root: Path, name="answer", toml_extra="", tests=PY_VERIFIER, setup=None, solve="echo 42 > /app/answer.txt\n",
              verifier_extra=""):
    root.mkdir(parents=True)
    (root / "task.toml").write_text(f'name = "{name}"\n{toml_extra}\n[verifier]\ntimeout_sec = 30\n{verifier_extra}\n')
    (root / "instruction.md").write_text("Write 42 to /app/answer.txt.\n")
    (root / "tests").mkdir()
    (root / "tests" / "test.sh").write_text(tests)
    (root / "solution").mkdir()
    (root / "solution" / "solve.sh").write_text(solve)
    if setup is not None:
        (root / "environment").mkdir()
        (root / "environment" / "setup.sh").write_text(setup)
    return root


# ---- task validation ----------------------------------------------------------------------------------------


def test_shipped_tasks_are_valid():
    tasks = find_tasks([EXAMPLES])
    assert len(tasks) >= 12
    assert {t.name: check_task(t) for t in tasks} == {t.name: [] for t in tasks}
    assert all((t / "solution" / "solve.sh").is_file() for t in tasks)


@pytest.mark.parametrize("toml,expect", [
    ('name = "x"\n[environment]\nimage = 3', "environment.image: expected a string"),
    ('name = "x"\nbogus = 1', "bogus: unknown field"),
    ('name = "Bad Name"', "must be lowercase"),
    ('description = "no name"', "name: required"),
    ('name = "x"\n[environment]\nnetwork = "bridge"', "environment.network"),
    ('name = "x"\n[verifier]\nnetwork = "wifi"', "verifier.network"),
    ('name = "x"\n[environment]\nworkdir = "app"', "environment.workdir: must be an absolute path"),
    ('name = "x"\n[agent]\ntimeout_sec = -1', "agent.timeout_sec: must be positive"),
    ('name = "x"\n[agent]\nmax_steps = 2.5', "agent.max_steps: expected an integer"),
    ('name = "x"\n[environment]\nmemory = "lots"', "invalid size"),
    ('name = "x"\n[verifier]\nprotected = ["rel"]', "verifier.protected[0]"),
    ('name = "x"\nagent = 5', "[agent]: must be a table"),
    ('name = "x"\n[agent\n', "not valid TOML"),
])
def test_malformed_task_fields_are_named(tmp_path, toml, expect):
    root = make_task(tmp_path / "t")
    (root / "task.toml").write_text(toml)
    problems = check_task(root)
    assert any(expect in p for p in problems), problems
    assert all(p.startswith(str(root)) for p in problems)
    with pytest.raises(TaskError):
        load_task(root)


def test_missing_parts_are_named(tmp_path):
    root = make_task(tmp_path / "t")
    (root / "instruction.md").unlink()
    (root / "tests" / "test.sh").unlink()
    problems = check_task(root)
    assert any("instruction.md: missing" in p for p in problems)
    assert any("needs test.sh" in p for p in problems)
    assert check_task(tmp_path / "nope") == [f"{tmp_path / 'nope'}: not a directory"]


def test_task_functions_take_str_paths(tmp_path):
    # load_task always took a str; check_task and inspect_task must too, with the same answers as for a Path
    from envyard.envs.task import inspect_task

    assert check_task(str(EXAMPLES / "hello-file")) == []
    root = make_task(tmp_path / "t")
    (root / "instruction.md").unlink()
    assert check_task(str(root)) == check_task(root) != []
    problems, task = inspect_task(str(EXAMPLES / "hello-file"))
    assert problems == [] and task.name == "hello-file"
    assert check_task(str(tmp_path / "nope")) == [f"{tmp_path / 'nope'}: not a directory"]


# ---- shipped tasks: oracle 1, do-nothing 0 ----------------------------------------------------------------


def test_oracle_solves_every_shipped_task_and_noop_solves_none(yard, tmp_path):
    tasks = find_tasks([EXAMPLES])
    oracle = run_rollouts(yard, tasks, OraclePolicy, concurrency=4, out_dir=tmp_path / "oracle")
    assert {e.task: (e.reward, e.infra_error) for e in oracle} == {e.task: (1.0, None) for e in oracle}
    noop = run_rollouts(yard, tasks, NoopPolicy, concurrency=4)
    assert {e.task: e.reward for e in noop} == {e.task: 0.0 for e in noop}
    # trajectories are OpenAI-style messages plus a result line
    lines = [json.loads(l) for l in Path(oracle[0].trajectory).read_text().splitlines()]
    assert lines[0]["role"] == "user"
    assert lines[1]["tool_calls"][0]["function"]["name"] == "bash"
    assert lines[-1]["role"] == "envyard_result" and lines[-1]["reward"] == 1.0


# ---- tamper-proof verification ------------------------------------------------------------------------------


TAMPERING = {
    "writes the reward file and keeps rewriting it": [
        "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt",
        "nohup sh -c 'while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; sleep 0.01; done' >/dev/null 2>&1 &",
    ],
    "plants its own tests": ["mkdir -p /tests && printf 'echo 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh"],
    "replaces python3": ["for p in /usr/bin/python3*; do [ -L $p ] && continue; printf '#!/bin/sh\\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\\n' > $p; done"],
    "adds a sitecustomize hook": [
        "d=$(python3 -c 'import sysconfig;print(sysconfig.get_paths()[\"stdlib\"])'); "
        "printf 'import pathlib\\npathlib.Path(\"/app/answer.txt\").write_text(\"42\")\\n' > $d/sitecustomize.py"],
    "shadows python3 earlier on PATH": [
        "printf '#!/bin/sh\\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\\n' > /usr/local/sbin/python3"
        " && chmod +x /usr/local/sbin/python3"],
    "adds a user site hook": [
        "d=$(python3 -m site --user-site) && mkdir -p $d && "
        "printf 'import pathlib\\npathlib.Path(\\\"/app/answer.txt\\\").write_text(\\\"42\\\")\\n' > $d/usercustomize.py"],
    "replaces bash": ["printf '#!/bin/sh\\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\\n' > /tmp/b"
                      " && chmod +x /tmp/b && mv /tmp/b /usr/bin/bash"],
}


@pytest.mark.parametrize("carry", ["/app", "/"])
@pytest.mark.parametrize("attack", list(TAMPERING))
def test_tampering_cannot_raise_the_reward(yard, tmp_path, attack, carry):
    """Neither by default (only the workdir is carried) nor when a task carries everything (the filter)."""
    task = load_task(make_task(tmp_path / "t", verifier_extra=f'carry = ["{carry}"]'))
    ep = run_episode(yard, task, Scripted(*TAMPERING[attack]))
    assert ep.infra_error is None
    assert ep.reward == 0.0


@pytest.mark.parametrize("attack", ["replaces python3", "adds a sitecustomize hook", "shadows python3 earlier on PATH",
                                    "adds a user site hook", "replaces bash"])
def test_each_attack_would_work_without_the_allowlist_and_filter(yard, tmp_path, attack, monkeypatch):
    """Proves the attacks above are real: carrying everything, unfiltered, they do raise the reward."""
    import envyard.envs.carry as carry_mod

    monkeypatch.setattr(carry_mod, "filter_carried", lambda *a, **k: None)
    task = load_task(make_task(tmp_path / "t", verifier_extra='carry = ["/"]'))
    assert run_episode(yard, task, Scripted(*TAMPERING[attack])).reward == 1.0


def test_honest_work_and_new_tools_are_kept(yard, tmp_path):
    verifier = "#!/bin/bash\n[ \"$(mytool)\" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
    task = load_task(make_task(tmp_path / "t", tests=verifier, verifier_extra='carry = ["/app", "/usr/local/bin"]'))
    ep = run_episode(yard, task, Scripted("printf '#!/bin/sh\\necho 42\\n' > /usr/local/bin/mytool && chmod +x /usr/local/bin/mytool"))
    assert ep.reward == 1.0
    assert run_episode(yard, task, Scripted("true")).reward == 0.0


# ---- infrastructure failures are typed, never scored ---------------------------------------------------------


def test_setup_failure_is_an_infra_error(yard, tmp_path):
    task = load_task(make_task(tmp_path / "t", setup="echo broken >&2; exit 3\n"))
    ep = run_episode(yard, task, OraclePolicy())
    assert ep.infra_error == "setup_failed" and ep.reward is None
    assert "broken" in ep.infra_detail


def test_missing_image_is_an_infra_error(yard, tmp_path):
    task = load_task(make_task(tmp_path / "t", toml_extra='[environment]\nimage = "no-such-image"'))
    ep = run_episode(yard, task, OraclePolicy())
    assert ep.infra_error == "setup_failed" and ep.reward is None


def test_verifier_timeout_scores_zero_not_an_infra_error(yard, tmp_path):
    """An agent can make a verifier hang (see tests/adversarial): a masked episode would reward that."""
    root = make_task(tmp_path / "t", tests="#!/bin/bash\nsleep 100\n")
    (root / "task.toml").write_text('name = "slow"\n[verifier]\ntimeout_sec = 1\n')
    ep = run_episode(yard, load_task(root), OraclePolicy())
    assert ep.infra_error is None and ep.reward == 0.0 and ep.metrics == {"verifier_timed_out": True}


def test_reward_json_and_exit_code_fallback(yard, tmp_path):
    js = make_task(tmp_path / "js", tests='#!/bin/bash\necho \'{"reward": 0.5, "passed": 3}\' > /logs/verifier/reward.json\n')
    ep = run_episode(yard, load_task(js), OraclePolicy())
    assert ep.reward == 0.5 and ep.metrics == {"passed": 3}
    code = make_task(tmp_path / "code", tests="#!/bin/bash\ntest -f /app/answer.txt\n")
    assert run_episode(yard, load_task(code), OraclePolicy()).reward == 1.0
    assert run_episode(yard, load_task(code), NoopPolicy()).reward == 0.0


# ---- TerminalEnv --------------------------------------------------------------------------------------------


def test_terminal_env_passes_gymnasium_checker(yard, tmp_path):
    from gymnasium.utils.env_checker import check_env

    env = TerminalEnv(make_task(tmp_path / "t"), yard=yard, step_timeout=5)
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()


def test_terminal_env_episode(yard, tmp_path):
    env = TerminalEnv(yard=yard)
    obs, info = env.reset(options={"task": make_task(tmp_path / "t")})
    assert "Write 42" in obs and info["infra_error"] is None
    obs, reward, term, trunc, info = env.step("pwd; echo 42 > answer.txt")
    assert obs.startswith("/app\n") and "[exit code 0]" in obs and reward == 0 and not term
    obs, reward, term, trunc, info = env.step("head -c 100000000 /dev/zero | tr '\\0' a")
    assert len(obs) < 20_000 and "characters cut" in obs
    obs, reward, term, trunc, info = env.step(SUBMIT)
    assert term and reward == 1.0
    env.close()


def test_a_nul_byte_in_an_action_is_refused_to_the_agent_not_an_infra_error(yard, tmp_path):
    env = TerminalEnv(make_task(tmp_path / "t"), yard=yard)
    env.reset()
    obs, reward, term, trunc, info = env.step("touch /app/ran\0; echo x")
    assert "NUL" in obs and "[exit code 2]" in obs and not term and not trunc and info.get("infra_error") is None
    obs, *_ = env.step("test -e /app/ran; echo $?; echo 42 > /app/answer.txt")  # nothing of it ran; the sandbox lives
    assert obs.startswith("1\n")
    obs, reward, term, trunc, info = env.step(SUBMIT)
    assert term and reward == 1.0
    env.close()


def test_step_budget_truncates_and_still_verifies(yard, tmp_path):
    root = make_task(tmp_path / "t")
    (root / "task.toml").write_text('name = "short"\n[agent]\nmax_steps = 2\n')
    env = TerminalEnv(root, yard=yard)
    env.reset()
    env.step("echo 42 > /app/answer.txt")
    obs, reward, term, trunc, info = env.step("true")
    assert trunc and not term and reward == 1.0
    env.close()


def test_replay_policy(yard, tmp_path):
    replay = tmp_path / "actions.jsonl"
    replay.write_text('{"command": "echo 42 > /app/answer.txt"}\n"submit"\n')
    task = load_task(make_task(tmp_path / "t"))
    assert run_episode(yard, task, ReplayPolicy(replay)).reward == 1.0


def test_sixty_four_concurrent_episodes(yard, tmp_path):
    root = make_task(tmp_path / "t")
    episodes = run_rollouts(yard, [root] * 64, OraclePolicy, concurrency=64)
    assert [e.reward for e in episodes] == [1.0] * 64
    assert not any(e.infra_error for e in episodes)


# ---- batched and asyncio front-ends -------------------------------------------------------------------------


def test_vector_env_send_recv(yard, tmp_path):
    import time as _time

    from envyard.envs import VectorTerminalEnv

    root = make_task(tmp_path / "t")
    venv = VectorTerminalEnv([root] * 4, yard=yard)
    try:
        obs, infos = venv.reset()
        assert len(obs) == 4 and all("Write 42" in o for o in obs)
        # one slow environment does not hold up the others
        venv.send(["sleep 2", "echo 42 > /app/answer.txt", "echo 42 > /app/answer.txt", "true"], [0, 1, 2, 3])
        start = _time.monotonic()
        got = venv.recv(min_results=3)
        assert _time.monotonic() - start < 1.5
        assert sorted(got[5].tolist()) == [1, 2, 3]
        rest = venv.recv()
        assert rest[5].tolist() == [0]
        obs, rewards, term, trunc, infos = venv.step(["submit"] * 4)
        assert rewards.tolist() == [0.0, 1.0, 1.0, 0.0] and term.all()
        with pytest.raises(Exception):
            venv.send(["true"], [7])
    finally:
        venv.close()


def test_async_env(yard, tmp_path):
    import asyncio

    from envyard.envs import AsyncTerminalEnv

    async def episode():
        env = AsyncTerminalEnv(make_task(tmp_path / "t"), yard=yard)
        await env.reset()
        await env.step("echo 42 > /app/answer.txt")
        _, reward, term, _, _ = await env.step("submit")
        await env.close()
        return reward, term

    assert asyncio.run(episode()) == (1.0, True)


def test_model_endpoint_failure_is_an_infra_error_and_the_run_goes_on(yard, tmp_path):
    from envyard.envs import make_policy

    root = make_task(tmp_path / "t")
    factory = make_policy("openai:stand-in", base_url="http://127.0.0.1:9/v1")  # nothing listens on port 9
    episodes = run_rollouts(yard, [root, root], factory, concurrency=2)
    assert [(e.reward, e.infra_error) for e in episodes] == [(None, "policy_error")] * 2
    assert "stand-in" in episodes[0].infra_detail


def test_unreadable_reward_is_an_infra_error(yard, tmp_path):
    root = make_task(tmp_path / "t", tests="#!/bin/bash\necho 'not a number' > /logs/verifier/reward.txt\n")
    ep = run_episode(yard, load_task(root), OraclePolicy())
    assert ep.reward is None and ep.infra_error == "verifier_crashed" and "not a number" in ep.infra_detail
