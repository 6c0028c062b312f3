"""Foreign task layouts read as they are: Harbor's task.toml and Terminal-Bench 1's task.yaml."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envyard.envs import load_task
from envyard.envs.task import TaskError, find_tasks, inspect_task, task_format

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tasks"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks"


def copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(FIXTURES / name, dest)
    return dest


def test_formats_are_recognised():
    assert task_format(FIXTURES / "harbor-hello") == "harbor"
    assert task_format(FIXTURES / "tbench-hello") == "terminal-bench"
    assert {task_format(t) for t in find_tasks([EXAMPLES])} == {"envyard"}
    assert FIXTURES / "tbench-hello" in find_tasks([FIXTURES])


def test_a_harbor_task_maps_to_envyard():
    task = load_task(FIXTURES / "harbor-hello")
    assert task.format == "harbor" and task.name == "harbor-hello"
    assert task.dockerfile == FIXTURES / "harbor-hello" / "environment" / "Dockerfile"
    assert task.build_context == FIXTURES / "harbor-hello" / "environment"
    assert task.workdir is None and task.carry == ["/"]  # Harbor's tests may check anything the agent changed
    assert (task.agent_timeout, task.verifier_timeout, task.build_timeout) == (300.0, 120.0, 600.0)
    assert (task.limits.cpus, task.limits.memory, task.limits.disk) == (1.0, "1024M", "2048M")
    assert task.agent_network == "host" and task.verifier_network == "host"  # allow_internet defaults to true
    assert task.test_command == "bash /tests/test.sh" and task.solution.name == "solve.sh"
    assert task.metadata["difficulty"] == "easy" and task.notes == []


def test_harbor_defaults_unknown_fields_and_templates(tmp_path, monkeypatch):
    root = copy("harbor-hello", tmp_path)
    (root / "task.toml").write_text('schema_version = "1.4"\nfuture_key = 1\n[task]\nname = "org/Hello_World.v2"\n'
                                    '[environment]\nallow_internet = false\nmcp_servers = []\nnew_thing = "x"\n'
                                    'env = { TOKEN = "${ENVYARD_TEST_TOKEN:-none}", FIXED = "1" }\n'
                                    '[verifier]\nenv = { MODE = "strict" }\n')
    monkeypatch.setenv("ENVYARD_TEST_TOKEN", "abc")
    problems, task = inspect_task(root)
    assert problems == []
    assert task.name == "org-hello-world-v2"
    assert task.agent_network == "none" and task.verifier_network == "none"
    assert (task.limits.cpus, task.limits.memory, task.limits.disk) == (1.0, "2048M", "10240M")  # Harbor's
    assert task.env == {"TOKEN": "abc", "FIXED": "1"} and task.verifier_env == {"MODE": "strict"}
    assert any("future_key: not used by envyard (kept)" in n for n in task.notes)
    assert any("new_thing: not used by envyard (kept)" in n for n in task.notes)
    assert any("mcp_servers: recorded, not acted on" in n for n in task.notes)
    assert task.metadata["harbor"]["future_key"] == 1


@pytest.mark.parametrize("toml,expect", [
    ('version = "1.0"\n[environment]\ngpus = 1', "GPUs are not supported"),
    ('version = "1.0"\n[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org"]', "allowlist"),
    ('version = "1.0"\n[agent]\nuser = "agent"', "agent.user"),
    ('version = "1.0"\n[verifier]\nenv = "x"', "env: must be a table"),
    ('version = "1.0"\n[environment]\nmemory_mb = 1', "below 4 MiB"),
])
def test_harbor_fields_envyard_cannot_honour_are_problems(tmp_path, toml, expect):
    root = copy("harbor-hello", tmp_path)
    (root / "task.toml").write_text(toml)
    problems, task = inspect_task(root)
    assert task is None and any(expect in p for p in problems), problems
    with pytest.raises(TaskError):
        load_task(root)


def test_harbor_missing_parts_are_named(tmp_path):
    root = copy("harbor-hello", tmp_path)
    (root / "environment" / "Dockerfile").unlink()
    (root / "tests" / "test.sh").unlink()
    problems, _ = inspect_task(root)
    assert any("needs a Dockerfile or a docker-compose.yaml" in p for p in problems)
    assert any("test.sh: missing" in p for p in problems)


def test_harbor_compose_main_service(tmp_path):
    root = copy("harbor-hello", tmp_path)
    (root / "environment" / "docker-compose.yaml").write_text(
        "services:\n  main:\n    build:\n      context: .\n    environment:\n      MODE: fast\n")
    task = load_task(root)
    assert task.dockerfile.name == "Dockerfile" and task.env == {"MODE": "fast"}
    (root / "environment" / "docker-compose.yaml").write_text(
        "services:\n  main:\n    build: .\n    depends_on: [db]\n  db:\n    image: postgres:16\n")
    task = load_task(root)
    assert [s.name for s in task.services] == ["db"] and task.services[0].image == "postgres:16"
    assert task.compose.main_name == "main" and task.compose.main_depends_on == {"db": "service_started"}


def test_a_terminal_bench_task_maps_to_envyard():
    task = load_task(FIXTURES / "tbench-hello")
    assert task.format == "terminal-bench" and task.name == "tbench-hello"
    assert task.instruction.startswith("Create the file /app/hello.txt")
    assert task.dockerfile.name == "Dockerfile" and task.build_context == (FIXTURES / "tbench-hello").resolve()
    assert (task.agent_timeout, task.verifier_timeout) == (300.0, 120.0)
    assert task.env["TEST_DIR"] == "/tests" and task.test_command == "bash /tests/run-tests.sh"
    assert [dest for _, dest in task.verifier_files] == ["/tests", "/tests/run-tests.sh"]
    assert task.reward_from == "pytest" and task.solution_commands == ["echo 'Hello, world!' > /app/hello.txt"]
    assert task.metadata["difficulty"] == "easy" and task.carry == ["/"]


def test_terminal_bench_problems_are_named(tmp_path):
    root = copy("tbench-hello", tmp_path)
    (root / "task.yaml").write_text("instruction: ''\nparser_name: swebench\nmax_test_timeout_sec: -1\nnew: 1\n")
    (root / "run-tests.sh").unlink()
    problems, _ = inspect_task(root)
    assert any("instruction: required" in p for p in problems)
    assert any("parser_name: 'swebench' is not supported" in p for p in problems)
    assert any("max_test_timeout_sec: must be a positive" in p for p in problems)
    assert any("run-tests.sh: missing" in p for p in problems)
    (root / "task.yaml").write_text("instruction: [unclosed\n")
    assert any("not valid YAML" in p for p in inspect_task(root)[0])


def test_pytest_summary_decides_a_terminal_bench_reward():
    from envyard.envs.verify import pytest_reward

    assert pytest_reward(0, "..\n==== 2 passed in 0.01s ====\n") == (1.0, {"tests": {"passed": 2},
                                                                         "test_script_exit_code": 0})
    assert pytest_reward(1, "==== 1 failed, 1 passed in 0.02s ====\n")[0] == 0.0
    assert pytest_reward(0, "==== 1 passed, 1 error in 0.02s ====\n")[0] == 0.0
    assert pytest_reward(0, "no pytest here\n")[0] == 0.0


# ---- end to end: built from their Dockerfiles FROM debian:bookworm (the test cache's debootstrap image) --------


@pytest.mark.timeout(900)
def test_harbor_and_terminal_bench_tasks_run_unchanged(debian_yard):
    from envyard.envs import NoopPolicy, OraclePolicy, run_rollouts

    tasks = [FIXTURES / "harbor-hello", FIXTURES / "tbench-hello"]
    oracle = run_rollouts(debian_yard, tasks, OraclePolicy, concurrency=2)
    assert {e.task: (e.reward, e.infra_error) for e in oracle} == {"harbor-hello": (1.0, None),
                                                                   "tbench-hello": (1.0, None)}
    tb = next(e for e in oracle if e.task == "tbench-hello")
    assert tb.metrics["tests"] == {"passed": 2}
    noop = run_rollouts(debian_yard, tasks, NoopPolicy, concurrency=2)
    assert {e.task: (e.reward, e.infra_error) for e in noop} == {"harbor-hello": (0.0, None),
                                                                 "tbench-hello": (0.0, None)}


def test_the_image_workdir_and_env_reach_the_agent(debian_yard):
    from envyard.envs import TerminalEnv

    env = TerminalEnv(FIXTURES / "harbor-hello", yard=debian_yard)
    try:
        env.reset()
        obs, *_ = env.step("pwd; echo $GREETING_FILE")
        assert obs.startswith("/app\n/app/hello.txt\n")
    finally:
        env.close()
