"""Rollouts: run policies on tasks, concurrently, and record each episode as an OpenAI-style trajectory."""

from __future__ import annotations

import json
import shlex
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from ..errors import BadInput
from ..yard import Yard
from .env import SUBMIT, TerminalEnv
from .openai_policy import PolicyError
from .task import Task, load_task


class Policy(Protocol):
    name: str

    def start(self, task: Task, instruction: str) -> None: ...

    def act(self, observation: str) -> str:
        """The next shell command, or `submit`."""

    # Optional: `prepare(sandbox)`, called once after start(), puts the policy's own files in place as the
    # owner (root) would — the oracle's solution; an agent's actions stay shell commands.


class OraclePolicy:
    """Runs the task's reference solution, then submits: solution/solve.sh with the rest of solution/ beside
    it at /solution (copied in by the owner, as Harbor's oracle has them uploaded, so an agent user that may
    not write / can still run them), Terminal-Bench's solution.sh, or the commands of its solution.yaml, one
    per step."""

    name = "oracle"

    def start(self, task: Task, instruction: str) -> None:
        self.task = task
        if task.solution_commands:
            self.actions = [*task.solution_commands, SUBMIT]
            return
        script = task.solution_script
        if script is None:
            raise BadInput(f"task {task.name} has no reference solution",
                           fix="the oracle policy needs solution/solve.sh (or solution.sh / solution.yaml)")
        cd = f"cd {shlex.quote(task.workdir)} && " if task.workdir else ""  # else the shell starts in the image's
        self.actions = [f"{cd}bash /solution/{shlex.quote(script.name)}", SUBMIT]

    def prepare(self, sandbox) -> None:
        """Before the first step: the solution's files at /solution, readable by any user."""
        script = self.task.solution_script
        if script is None:
            return
        folder = script.parent
        if folder == self.task.root:  # Terminal-Bench: the script alone, not the whole task
            sandbox.write_file(f"/solution/{script.name}", script.read_bytes(), mode=0o755)
        else:
            sandbox.upload(folder, "/solution")
        sandbox.exec(["chmod", "-R", "a+rX", "/solution"])

    def act(self, observation: str) -> str:
        return self.actions.pop(0) if self.actions else SUBMIT


class NoopPolicy:
    """Submits at once: the do-nothing baseline every verifier must score 0."""

    name = "noop"

    def start(self, task: Task, instruction: str) -> None:
        pass

    def act(self, observation: str) -> str:
        return SUBMIT


class ReplayPolicy:
    """Replays commands from a file: JSON list, JSONL of strings or {"command": ...}, or one command per line."""

    name = "replay"

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise BadInput(f"replay file {self.path} does not exist")
        try:
            text = self.path.read_text()
        except UnicodeDecodeError:
            raise BadInput(f"replay file {self.path} is not UTF-8 text") from None
        try:
            data = json.loads(text)
            commands = data if isinstance(data, list) else None
        except ValueError:
            commands = None
        if commands is None:
            commands = []
            for line in filter(str.strip, text.splitlines()):
                try:
                    item = json.loads(line)
                except ValueError:
                    item = line
                commands.append(item.get("command") if isinstance(item, dict) else item)
        if not all(isinstance(c, str) for c in commands):
            raise BadInput(f"replay file {self.path}: every entry must be a command string or {{\"command\": ...}}")
        self.commands = commands

    def start(self, task: Task, instruction: str) -> None:
        self.queue = list(self.commands)

    def act(self, observation: str) -> str:
        return self.queue.pop(0) if self.queue else SUBMIT


def make_policy(spec: str, *, base_url: str | None = None, api_key: str | None = None) -> Callable[[], Policy]:
    """`oracle`, `noop`, `replay:FILE` or `openai:MODEL` → a factory (each episode gets its own policy object).
    `openai:` talks to any OpenAI-compatible endpoint (`base_url`, else $OPENAI_BASE_URL)."""
    if spec.startswith("openai:"):
        from .openai_policy import OpenAIPolicy

        model = spec.split(":", 1)[1]
        if not model:
            raise BadInput("openai: needs a model name, e.g. openai:gpt-4o-mini")
        OpenAIPolicy(model, base_url=base_url, api_key=api_key)  # validate now (key, URL), not in every episode
        return lambda: OpenAIPolicy(model, base_url=base_url, api_key=api_key)
    if spec == "oracle":
        return OraclePolicy
    if spec == "noop":
        return NoopPolicy
    if spec.startswith("replay:"):
        path = spec.split(":", 1)[1]
        ReplayPolicy(path)  # validate now, not in every episode
        return lambda: ReplayPolicy(path)
    raise BadInput(f"unknown policy {spec!r}", fix="use oracle, noop, replay:FILE or openai:MODEL")


@dataclass
class Episode:
    task: str
    policy: str
    reward: float | None
    steps: int
    wall_time: float
    infra_error: str | None
    infra_detail: str | None = None
    metrics: dict = field(default_factory=dict)
    trajectory: str | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def run_episode(yard: Yard, task: Task, policy: Policy, out_dir: Path | None = None) -> Episode:
    """One episode: reset, let the policy act until it submits or a budget runs out, verify, record."""
    env = TerminalEnv(task, yard=yard)
    start = time.monotonic()
    messages: list[dict] = []
    try:
        obs, info = env.reset()
        messages.append({"role": "user", "content": task.instruction})
        if not info.get("infra_error"):
            policy.start(task, obs)
            if hasattr(policy, "prepare"):  # a policy's own files, put in place by the owner (the oracle's)
                policy.prepare(env.sandbox)
        while not info.get("infra_error"):
            action = policy.act(obs)
            call_id = f"call_{uuid.uuid4().hex[:12]}"
            t0 = time.monotonic()
            name = "submit" if action.strip() == SUBMIT else "bash"
            arguments = {} if name == "submit" else {"command": action}
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]})
            obs, reward, terminated, truncated, info = env.step(action)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": obs if name == "bash" else "submitted",
                             "envyard": {"seconds": round(time.monotonic() - t0, 4), "exit_code": info.get("exit_code")}})
            if terminated or truncated:
                break
        ep = Episode(task.name, policy.name, info.get("reward"), info.get("steps", 0), time.monotonic() - start,
                     info.get("infra_error"), info.get("infra_detail"), info.get("metrics") or {})
    except PolicyError as e:  # the model endpoint failed: an infrastructure failure, never a score of 0
        steps = sum(1 for m in messages if m["role"] == "tool" and m["content"] != "submitted")
        ep = Episode(task.name, policy.name, None, steps, time.monotonic() - start, PolicyError.infra_error, str(e))
    finally:
        env.close()
    if getattr(policy, "usage", None):
        ep.metrics = {**ep.metrics, "usage": policy.usage}
    if out_dir is not None:
        path = out_dir / f"{task.name}-{uuid.uuid4().hex[:8]}.jsonl"
        with path.open("w") as f:
            for m in messages:
                f.write(json.dumps(m) + "\n")
            if getattr(policy, "messages", None):  # what the model itself saw, when the policy is a model
                f.write(json.dumps({"role": "envyard_policy_messages", "messages": policy.messages}) + "\n")
            f.write(json.dumps({"role": "envyard_result", **ep.to_dict()}) + "\n")
        ep.trajectory = str(path)
    return ep


def run_rollouts(yard: Yard, tasks: list[Path], make: Callable[[], Policy], *, concurrency: int = 4,
                 out_dir: Path | None = None, on_done: Callable[[Episode], None] | None = None) -> list[Episode]:
    loaded = [load_task(t) for t in tasks]  # fail fast on a malformed task, before any sandbox starts
    if make().name == "oracle":
        missing = [t.name for t in loaded if t.solution is None and not t.solution_commands]
        if missing:
            raise BadInput(f"no reference solution in: {', '.join(missing)}",
                           fix="the oracle policy needs solution/solve.sh (Terminal-Bench: solution.sh or "
                               "solution.yaml) in each task")
    if out_dir is not None:
        if out_dir.exists() and not out_dir.is_dir():
            raise BadInput(f"--out {out_dir} exists and is not a directory")
        out_dir.mkdir(parents=True, exist_ok=True)

    def one(task: Task) -> Episode:
        ep = run_episode(yard, task, make(), out_dir)
        if on_done:
            on_done(ep)
        return ep

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        return list(pool.map(one, loaded))
