"""Terminal-Bench 1's task layout, read as it is: task.yaml (instruction, metadata, timeouts, the test output
parser), a Dockerfile at the top (or the `build` of the one service in docker-compose.yaml), run-tests.sh and
tests/ (both copied to /tests when the tests run, with TEST_DIR=/tests), solution.sh or solution.yaml.

The score follows Terminal-Bench: the task is solved when run-tests.sh exits 0 and, with the pytest parser,
pytest reports no failed or erroring test. As for Harbor, everything the agent changed is carried to the
verifier (through carry.py's filter): the tests may check anything in the container.
"""

from __future__ import annotations

from pathlib import Path

from .foreign import compose_build, compose_environment, read_yaml, slug, unknown_fields
from .services import load_compose
from .task import DEFAULT_MAX_CARRY, Task

KNOWN = {"instruction", "author_name", "author_email", "difficulty", "category", "tags", "parser_name",
         "max_agent_timeout_sec", "max_test_timeout_sec", "run_tests_in_same_shell", "disable_asciinema",
         "estimated_duration_sec", "expert_time_estimate_min", "junior_time_estimate_min"}
METADATA = ("author_name", "author_email", "difficulty", "category", "tags", "estimated_duration_sec",
            "expert_time_estimate_min", "junior_time_estimate_min")
PARSERS = {"pytest": "pytest"}  # Terminal-Bench's parser names → envyard's reward_from
DEFAULT_AGENT_TIMEOUT = 360.0
DEFAULT_TEST_TIMEOUT = 60.0


def load_tbench(root: Path) -> tuple[list[str], Task | None]:
    """(problems, task): the task, or every problem found (each 'file: field: why')."""
    yaml_path = root / "task.yaml"
    data, problem = read_yaml(yaml_path)
    if problem:
        return [problem], None
    if not isinstance(data, dict):
        return [f"{yaml_path}: must be a mapping"], None
    problems: list[str] = []
    notes = unknown_fields(f"{yaml_path}: top level", data, KNOWN)
    instruction = data.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        problems.append(f"{yaml_path}: instruction: required, the agent's instruction")
    parser = str(data.get("parser_name", "pytest"))
    if parser not in PARSERS:
        problems.append(f"{yaml_path}: parser_name: {parser!r} is not supported (envyard reads pytest's summary)")
    if data.get("run_tests_in_same_shell"):
        notes.append(f"{yaml_path}: run_tests_in_same_shell: envyard always verifies in a fresh sandbox")
    for key, default in (("max_agent_timeout_sec", DEFAULT_AGENT_TIMEOUT), ("max_test_timeout_sec", DEFAULT_TEST_TIMEOUT)):
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            problems.append(f"{yaml_path}: {key}: must be a positive number of seconds")

    dockerfile, context, image, env, project = root / "Dockerfile", root, None, {}, None
    compose = root / "docker-compose.yaml"
    if compose.is_file():
        project, found, found_notes = load_compose(compose, None)
        problems += found
        notes += found_notes
        if project is not None:
            built = compose_build(project.main, root)
            if built != (None, None, None):
                dockerfile, context, image = built
            env = compose_environment(project.main)
    if image is None and not dockerfile.is_file():
        problems.append(f"{dockerfile}: missing (the task's environment)")
    run_tests = root / "run-tests.sh"
    if not run_tests.is_file():
        problems.append(f"{run_tests}: missing (Terminal-Bench runs it to test the agent's work)")
    solution, commands = root / "solution.sh", []
    if not solution.is_file():
        solution = None
        if (root / "solution.yaml").is_file():
            commands, found = _solution_commands(root / "solution.yaml")
            problems += found
    if problems:
        return problems, None

    env = {**{k: v for k, v in env.items() if k != "TEST_DIR"}, "TEST_DIR": "/tests"}
    files = [(run_tests, "/tests/run-tests.sh")]
    if (root / "tests").is_dir():
        files.insert(0, (root / "tests", "/tests"))
    return [], Task(
        root=root.resolve(), name=slug(root.name), description="", instruction=instruction,
        metadata={k: data[k] for k in METADATA if k in data}, image="", workdir=None, agent_network="host",
        agent_timeout=float(data.get("max_agent_timeout_sec", DEFAULT_AGENT_TIMEOUT)), max_steps=10_000,
        verifier_timeout=float(data.get("max_test_timeout_sec", DEFAULT_TEST_TIMEOUT)), verifier_network="host",
        carry=["/"], max_carry_bytes=DEFAULT_MAX_CARRY, format="terminal-bench",
        dockerfile=None if image else dockerfile, build_context=None if image else context, docker_image=image,
        env=env, verifier_files=files, test_command="bash /tests/run-tests.sh", reward_from=PARSERS[parser],
        solution_script=solution, solution_commands=commands, notes=notes, compose=project,
    )


def _solution_commands(path: Path) -> tuple[list[str], list[str]]:
    """solution.yaml: a list of {command: ..., min_timeout_sec, block, append_enter} (tmux keystrokes in
    Terminal-Bench); envyard runs each command in the agent's shell."""
    data, problem = read_yaml(path)
    if problem:
        return [], [problem]
    if not isinstance(data, list) or not all(isinstance(x, dict) and isinstance(x.get("command"), str) for x in data):
        return [], [f"{path}: must be a list of entries with a `command` string"]
    return [x["command"] for x in data], []
