"""Harbor's task layout, read as it is: task.toml (schema 1.x), instruction.md, environment/ (a Dockerfile, a
docker-compose.yaml whose `main` service the agent works in, or `[environment].docker_image`), tests/test.sh
writing /logs/verifier/reward.txt or reward.json, and solution/solve.sh.

Harbor runs the agent and then the tests in one container. envyard verifies in a fresh sandbox; to keep the
meaning of Harbor's tests (they may check anything the agent changed: a package installed, a service
configured), everything the agent changed is carried to the verifier, through the filter of carry.py.
Fields envyard does not use are kept in the task's metadata and reported by `envyard task check`, never fatal;
what cannot be honoured (GPUs, a network allowlist, an agent running as another user) is a problem.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from ..errors import EnvyardError
from ..runtime.limits import Limits
from .foreign import compose_build, compose_environment, expand_host_env, slug, unknown_fields
from .services import load_compose
from .task import DEFAULT_MAX_CARRY, Task

KNOWN = {
    "": {"version", "schema_version", "task", "metadata", "verifier", "agent", "environment", "solution", "source"},
    "task": {"name", "description", "authors", "keywords"},
    "verifier": {"timeout_sec", "env", "user", "network_mode", "allowed_hosts"},
    "agent": {"timeout_sec", "user", "network_mode", "allowed_hosts"},
    "environment": {"build_timeout_sec", "docker_image", "cpus", "memory_mb", "storage_mb", "gpus", "gpu_types",
                    "allow_internet", "network_mode", "allowed_hosts", "env", "memory", "storage", "healthcheck",
                    "mcp_servers", "skills_dir"},
    "solution": {"env"},
}
IGNORED = {("environment", "mcp_servers"), ("environment", "skills_dir"), ("environment", "healthcheck"),
           ("environment", "gpu_types")}
DEFAULT_AGENT_TIMEOUT = 600.0
DEFAULT_VERIFIER_TIMEOUT = 600.0


def load_harbor(root: Path) -> tuple[list[str], Task | None]:
    """(problems, task): the task, or every problem found (each 'file: field: why')."""
    toml_path = root / "task.toml"
    try:
        data = tomllib.loads(toml_path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        return [f"{toml_path}: not a readable TOML file: {e}"], None
    problems: list[str] = []
    notes: list[str] = []
    tables = {}
    for section in ("task", "verifier", "agent", "environment", "solution"):
        table = data.get(section, {})
        if not isinstance(table, dict):
            problems.append(f"{toml_path}: [{section}]: must be a table")
            table = {}
        tables[section] = table
    for section, known in KNOWN.items():
        table = data if not section else tables[section]
        notes += unknown_fields(f"{toml_path}: {section or 'top level'}", table, known)
    notes += [f"{toml_path}: {s}.{k}: recorded, not acted on" for s, k in sorted(IGNORED) if k in tables[s]]
    task_t, ver, agent, env = tables["task"], tables["verifier"], tables["agent"], tables["environment"]

    instruction = root / "instruction.md"
    if not instruction.is_file() or not instruction.read_text(errors="replace").strip():
        problems.append(f"{instruction}: missing or empty (the agent's instruction)")
    if not (root / "tests" / "test.sh").is_file():
        problems.append(f"{root / 'tests' / 'test.sh'}: missing (Harbor's verifier entry point)")

    dockerfile = context = image = project = None
    env_vars = {str(k): expand_host_env(str(v)) for k, v in _table(env, "env", toml_path, problems).items()}
    verifier_env = {str(k): expand_host_env(str(v)) for k, v in _table(ver, "env", toml_path, problems).items()}
    compose = root / "environment" / "docker-compose.yaml"
    if env.get("docker_image"):
        image = str(env["docker_image"])
    elif compose.is_file():
        project, found, found_notes = load_compose(compose, "main")
        problems += found
        notes += found_notes
        if project is not None:
            dockerfile, context, image = compose_build(project.main, compose.parent)
            env_vars = {**compose_environment(project.main), **env_vars}
    elif (root / "environment" / "Dockerfile").is_file():
        dockerfile, context = root / "environment" / "Dockerfile", root / "environment"
    else:
        problems.append(f"{root / 'environment'}: needs a Dockerfile or a docker-compose.yaml, "
                        "or [environment].docker_image in task.toml")
    if dockerfile is not None and not dockerfile.is_file():
        problems.append(f"{dockerfile}: missing (named by the task's environment)")

    if int(env.get("gpus", 0) or 0) > 0:
        problems.append(f"{toml_path}: environment.gpus: GPUs are not supported by envyard's sandboxes")
    for where, table in (("agent", agent), ("verifier", ver)):
        user = table.get("user")
        if user not in (None, "root", 0, "0"):
            problems.append(f"{toml_path}: {where}.user: running the {where} as {user!r} is not supported yet")
    try:
        network = _network(env, env.get("allow_internet", True))
        verifier_network = _network(ver, network == "host")
        agent_network = _network(agent, network == "host")
    except ValueError as e:
        problems.append(f"{toml_path}: {e}")
        network = verifier_network = agent_network = "none"
    try:
        limits = Limits.coerce(_limits(env))
    except (EnvyardError, ValueError, TypeError) as e:
        problems.append(f"{toml_path}: environment: {getattr(e, 'message', e)}")
        limits = Limits()
    if problems:
        return problems, None

    name = slug(str(task_t.get("name") or root.name))
    return [], Task(
        root=root.resolve(), name=name, description=str(task_t.get("description", "")),
        instruction=instruction.read_text(), metadata={**data.get("metadata", {}), "harbor": data},
        image="", workdir=None, agent_network=agent_network, limits=limits,
        agent_timeout=float(agent.get("timeout_sec") or DEFAULT_AGENT_TIMEOUT), max_steps=10_000,
        verifier_timeout=float(ver.get("timeout_sec") or DEFAULT_VERIFIER_TIMEOUT), verifier_network=verifier_network,
        carry=["/"], max_carry_bytes=DEFAULT_MAX_CARRY, format="harbor", dockerfile=dockerfile,
        build_context=context, docker_image=image, build_timeout=float(env.get("build_timeout_sec") or 600),
        env=env_vars, verifier_env=verifier_env, test_command="bash /tests/test.sh", notes=notes,
        compose=project,
    )



def _table(table: dict, key: str, where: Path, problems: list[str]) -> dict:
    value = table.get(key, {})
    if not isinstance(value, dict):
        problems.append(f"{where}: {key}: must be a table of strings")
        return {}
    return value


def _network(table: dict, default_public: bool) -> str:
    """Harbor's network_mode (public, no-network; an allowlist cannot be honoured) → envyard's host / none."""
    mode = table.get("network_mode")
    if mode is None:
        return "host" if default_public else "none"
    if mode == "public":
        return "host"
    if mode == "no-network":
        return "none"
    raise ValueError(f"network_mode {mode!r}: envyard gives a sandbox the host's network or none, "
                     "not an allowlist of hosts")


def _limits(env: dict) -> dict:
    """Harbor's resources (cpus, memory_mb, storage_mb; the older memory/storage strings) as envyard limits,
    with Harbor's defaults (1 CPU, 2 GiB of memory, 10 GiB of disk) where the task says nothing."""
    memory = f"{int(env['memory_mb'])}M" if env.get("memory_mb") is not None else env.get("memory") or "2048M"
    disk = f"{int(env['storage_mb'])}M" if env.get("storage_mb") is not None else env.get("storage") or "10240M"
    return {"cpus": float(env.get("cpus") or 1), "memory": str(memory), "disk": str(disk)}
