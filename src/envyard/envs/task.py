"""Task directories: envyard's own layout, Harbor's and Terminal-Bench 1's (harbor.py, tbench.py), loaded into
one Task; validation with precise errors."""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BadInput, EnvyardError
from ..runtime.limits import Limits, parse_bytes
from .carry import NEVER_CARRIED

if TYPE_CHECKING:
    from .services import ComposeProject

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
NETWORKS = ("none", "host")
LIMIT_KEYS = ("memory", "pids", "cpus", "disk")
HARBOR_ONLY_KEYS = ("version", "schema_version", "task", "solution", "source")
HARBOR_ENVIRONMENT_KEYS = ("docker_image", "build_timeout_sec", "memory_mb", "storage_mb", "gpus", "allow_internet")
DEFAULT_MAX_CARRY = 1 << 30  # bytes of the agent's work the verifier gets; more scores 0


class TaskError(BadInput):
    """A malformed task: names the file, the field and why."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems) if len(problems) <= 3 else f"{problems[0]} (and {len(problems) - 1} more)",
                         fix="see docs/tasks.md for the task format; `envyard task check DIR` lists every problem")


@dataclass
class Task:
    root: Path
    name: str
    description: str
    instruction: str
    metadata: dict
    image: str = "host"
    workdir: str | None = "/app"  # None: the image's WORKDIR
    agent_network: str = "none"
    limits: Limits = field(default_factory=Limits)
    agent_timeout: float = 600.0
    max_steps: int = 50
    verifier_timeout: float = 120.0
    verifier_network: str = "none"
    protected: list[str] = field(default_factory=list)
    carry: list[str] = field(default_factory=list)  # what of the agent's work reaches the verifier; [] = workdir
    max_carry_bytes: int = DEFAULT_MAX_CARRY
    # Foreign formats (Harbor, Terminal-Bench 1) describe more than envyard's own layout does:
    format: str = "envyard"  # "envyard", "harbor" or "terminal-bench"
    dockerfile: Path | None = None  # the environment is built from this Dockerfile, with build_context ...
    build_context: Path | None = None
    docker_image: str | None = None  # ... or pulled from a registry
    build_timeout: float = 1800.0
    env: dict[str, str] = field(default_factory=dict)  # in the agent's and the verifier's sandboxes
    verifier_env: dict[str, str] = field(default_factory=dict)
    verifier_files: list[tuple[Path, str]] = field(default_factory=list)  # copied in at verification; [] = tests/
    test_command: str | None = None  # None: tests/test.sh, else unittest over tests/test*.py
    reward_from: str = "files"  # "files": reward.json/reward.txt, else the exit code; "pytest": its summary too
    solution_script: Path | None = None  # the oracle runs it (with its directory's other files beside it) ...
    solution_commands: list[str] = field(default_factory=list)  # ... or these commands, one per step
    notes: list[str] = field(default_factory=list)  # fields kept but not used: `task check` reports them
    # A compose task's services (envs/services.py): those besides the agent's run beside it on one pod network
    compose: "ComposeProject | None" = None

    def __post_init__(self):
        self.carry = self.carry or [self.workdir or "/"]
        if not self.verifier_files:
            self.verifier_files = [(self.tests_dir, "/tests")]
        if self.solution_script is None and not self.solution_commands:
            p = self.root / "solution" / "solve.sh"
            self.solution_script = p if p.is_file() else None

    @property
    def services(self) -> list:
        """The compose services that run beside the agent's sandbox ([] for most tasks)."""
        return self.compose.services if self.compose is not None else []

    @property
    def workdir_label(self) -> str:
        """The workdir for messages: known only from the image when the task does not name it."""
        return self.workdir or "the image's working directory"

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    @property
    def solution(self) -> Path | None:
        return self.solution_script

    @property
    def environment_dir(self) -> Path | None:
        p = self.root / "environment"
        return p if p.is_dir() else None

    def environment_digest(self, base_layers: list[str]) -> str:
        """Changes whenever the base image or anything under environment/ changes."""
        h = hashlib.sha256("\0".join(base_layers).encode())
        h.update(self.workdir.encode())
        env = self.environment_dir
        if env:
            for p in sorted(env.rglob("*")):
                h.update(str(p.relative_to(env)).encode())
                if p.is_file():
                    h.update(p.read_bytes())
        return h.hexdigest()[:16]


_SCHEMA: dict[str, dict[str, type | tuple]] = {
    "": {"name": str, "description": str, "metadata": dict, "environment": dict, "agent": dict, "verifier": dict},
    "environment": {"image": str, "workdir": str, "network": str, "memory": (str, int), "pids": int, "cpus": (int, float),
                    "disk": (str, int)},
    "agent": {"timeout_sec": (int, float), "max_steps": int},
    "verifier": {"timeout_sec": (int, float), "network": str, "protected": list, "carry": list,
                 "max_carry_size": (str, int)},
}


def task_format(root: str | Path) -> str:
    """Which layout a task directory uses: Terminal-Bench 1 has a task.yaml; Harbor's task.toml has keys of
    its own (`version`, `[task]`, `environment.docker_image`, `memory_mb`...) or an environment/ built from a
    Dockerfile or a compose file; the rest is envyard's own."""
    root = Path(root)
    if (root / "task.yaml").is_file() and not (root / "task.toml").is_file():
        return "terminal-bench"
    try:
        data = tomllib.loads((root / "task.toml").read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return "envyard"  # check_task says what is wrong with it
    env = data.get("environment") if isinstance(data.get("environment"), dict) else {}
    if any(k in data for k in HARBOR_ONLY_KEYS) or any(k in env for k in HARBOR_ENVIRONMENT_KEYS):
        return "harbor"
    built = any((root / "environment" / f).is_file() for f in ("Dockerfile", "docker-compose.yaml"))
    return "harbor" if built and "name" not in data else "envyard"


def load_task(path: str | Path) -> Task:
    """Load and validate a task directory of any supported layout; raises TaskError listing every problem."""
    root = Path(path)
    problems, task = inspect_task(root)
    if problems:
        raise TaskError(problems)
    return task


def inspect_task(root: str | Path) -> tuple[list[str], Task | None]:
    """(problems, the task when there are none). Notes about fields kept but unused are in `task.notes`."""
    root = Path(root)  # str too, as load_task takes
    if not root.is_dir():
        return [f"{root}: not a directory"], None
    kind = task_format(root)
    if kind == "harbor":
        from .harbor import load_harbor

        return load_harbor(root)
    if kind == "terminal-bench":
        from .tbench import load_tbench

        return load_tbench(root)
    problems = check_task(root)
    return (problems, None) if problems else ([], _build(root, tomllib.loads((root / "task.toml").read_text())))


def check_task(root: str | Path) -> list[str]:
    """Every problem with a task directory, each as 'file: field: why'. Empty when the task is valid."""
    root = Path(root)  # str too, as load_task takes
    if not root.is_dir():
        return [f"{root}: not a directory"]
    if task_format(root) != "envyard":
        return inspect_task(root)[0]
    toml_path = root / "task.toml"
    if not toml_path.is_file():
        return [f"{toml_path}: missing (every task needs a task.toml)"]
    try:
        data = tomllib.loads(toml_path.read_text())
    except tomllib.TOMLDecodeError as e:
        return [f"{toml_path}: not valid TOML: {e}"]
    except UnicodeDecodeError:
        return [f"{toml_path}: not UTF-8 text"]
    problems = []
    for section, fields in _SCHEMA.items():
        table = data if not section else data.get(section, {})
        if not isinstance(table, dict):
            problems.append(f"{toml_path}: [{section}]: must be a table")
            continue
        for key, value in table.items():
            where = f"{section}.{key}" if section else key
            if key not in fields:
                problems.append(f"{toml_path}: {where}: unknown field")
            elif not isinstance(value, fields[key]) or isinstance(value, bool):
                problems.append(f"{toml_path}: {where}: expected {_type_name(fields[key])}, got {type(value).__name__}")
    name = data.get("name")
    if name is None:
        problems.append(f"{toml_path}: name: required")
    elif isinstance(name, str) and not NAME_RE.match(name):
        problems.append(f"{toml_path}: name: {name!r} must be lowercase letters, digits and '-'")
    env, agent, ver = (data.get(k, {}) if isinstance(data.get(k, {}), dict) else {} for k in ("environment", "agent", "verifier"))
    for where, value in (("environment.network", env.get("network")), ("verifier.network", ver.get("network"))):
        if isinstance(value, str) and value not in NETWORKS:
            problems.append(f"{toml_path}: {where}: {value!r} is not one of {', '.join(NETWORKS)}")
    workdir = env.get("workdir")
    if isinstance(workdir, str) and not workdir.startswith("/"):
        problems.append(f"{toml_path}: environment.workdir: must be an absolute path")
    for where, value in (("agent.timeout_sec", agent.get("timeout_sec")), ("verifier.timeout_sec", ver.get("timeout_sec")),
                         ("agent.max_steps", agent.get("max_steps"))):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0:
            problems.append(f"{toml_path}: {where}: must be positive")
    for key in ("protected", "carry"):
        for i, p in enumerate(ver.get(key) or [] if isinstance(ver.get(key), list) else []):
            if not isinstance(p, str) or not p.startswith("/"):
                problems.append(f"{toml_path}: verifier.{key}[{i}]: must be an absolute path")
            elif key == "carry" and any(p.rstrip("/") == d or p.startswith(d + "/") for d in NEVER_CARRIED):
                problems.append(f"{toml_path}: verifier.carry[{i}]: {p} is the verifier's own, never carried")
    if "max_carry_size" in ver:
        try:
            if parse_bytes(ver["max_carry_size"]) <= 0:
                problems.append(f"{toml_path}: verifier.max_carry_size: must be positive")
        except EnvyardError as e:
            problems.append(f"{toml_path}: verifier.max_carry_size: {e.message}")
    try:
        Limits.coerce({k: env[k] for k in LIMIT_KEYS if k in env})
    except EnvyardError as e:
        problems.append(f"{toml_path}: environment: {e.message}")
    instruction = root / "instruction.md"
    if not instruction.is_file():
        problems.append(f"{instruction}: missing (the agent's instruction)")
    elif not instruction.read_text(errors="replace").strip():
        problems.append(f"{instruction}: empty")
    tests = root / "tests"
    if not (tests / "test.sh").is_file() and not list(tests.glob("test*.py")):
        problems.append(f"{tests}: needs test.sh or test_*.py (the verifier)")
    setup = root / "environment" / "setup.sh"
    if (root / "environment").exists() and not (root / "environment").is_dir():
        problems.append(f"{root / 'environment'}: must be a directory")
    elif (root / "environment").is_dir() and not setup.exists() and not (root / "environment" / "files").is_dir():
        problems.append(f"{root / 'environment'}: needs files/ or setup.sh")
    return problems


def _type_name(t) -> str:
    types = t if isinstance(t, tuple) else (t,)
    names = {str: "a string", int: "an integer", float: "a number", dict: "a table", list: "a list"}
    return " or ".join(names[x] for x in types)


def _build(root: Path, data: dict) -> Task:
    env, agent, ver = data.get("environment", {}), data.get("agent", {}), data.get("verifier", {})
    return Task(
        root=root.resolve(), name=data["name"], description=data.get("description", ""),
        instruction=(root / "instruction.md").read_text(), metadata=data.get("metadata", {}),
        image=env.get("image", "host"), workdir=env.get("workdir", "/app"), agent_network=env.get("network", "none"),
        limits=Limits.coerce({k: env[k] for k in LIMIT_KEYS if k in env}),
        agent_timeout=float(agent.get("timeout_sec", 600)), max_steps=int(agent.get("max_steps", 50)),
        verifier_timeout=float(ver.get("timeout_sec", 120)), verifier_network=ver.get("network", "none"),
        protected=list(ver.get("protected", [])), carry=list(ver.get("carry", [])),
        max_carry_bytes=parse_bytes(ver.get("max_carry_size", DEFAULT_MAX_CARRY)),
    )


def is_task_dir(p: Path) -> bool:
    return (p / "task.toml").is_file() or (p / "task.yaml").is_file()


def find_tasks(paths: list[str | Path]) -> list[Path]:
    """Task directories named directly, or found one level below a directory of tasks."""
    found = []
    for p in map(Path, paths):
        if is_task_dir(p):
            found.append(p)
        elif p.is_dir():
            found += sorted(d for d in p.iterdir() if is_task_dir(d))
        else:
            raise BadInput(f"{p}: not a task directory nor a directory of tasks")
    if not found:
        raise BadInput(f"no tasks found in {', '.join(map(str, paths))}",
                       fix="a task directory holds a task.toml (envyard, Harbor) or a task.yaml (Terminal-Bench 1)")
    return found
