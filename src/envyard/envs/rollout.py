"""Rollouts: run policies on tasks, concurrently, and record each episode as an OpenAI-style trajectory.

With an output directory, each episode is written twice: `<task>-<hex>.jsonl` (one message per line, with
envyard's timings, and the result) and one line of `episodes.jsonl`, the chat format training libraries load as
is: `{"messages": [...], "tools": [...], "reward": ..., "metadata": {...}}` (see `chat_record`).
"""

from __future__ import annotations

import json
import math
import os
import shlex
import statistics
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

from ..errors import BadInput
from ..yard import Yard
from .env import SUBMIT, TerminalEnv
from .openai_policy import DEFAULT_SYSTEM_PROMPT, TOOLS, PolicyError
from .task import Task, load_task

if TYPE_CHECKING:
    from .cluster import Cluster


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
    attempt: int = 0  # the how-manieth run of this task directory in the rollout (0-based)
    task_dir: str | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict) -> "Episode":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


EPISODES_FILE = "episodes.jsonl"


def chat_record(task: Task, policy: Policy, messages: list[dict], ep: Episode) -> dict:
    """One episode in the chat format SFT/RL libraries load as is (TRL, Hugging Face chat templates):
    `messages` (system prompt, the instruction, assistant turns with their text and tool calls, tool results),
    `tools` (the OpenAI function schemas offered), `reward`, `metadata`.

    A model policy's own conversation is used verbatim (`policy.messages`: its text, its tool-call ids, the tool
    results as it saw them, nudges); any other policy gets the same system prompt and tools, with its commands
    as `bash`/`submit` calls."""
    own = getattr(policy, "messages", None)
    if own:
        chat = [dict(m) for m in own]
    else:
        chat = [{"role": "system", "content": DEFAULT_SYSTEM_PROMPT.format(workdir=task.workdir_label,
                                                                           max_steps=task.max_steps)}]
        chat += [{k: v for k, v in m.items() if k != "envyard"} for m in messages]
    metadata = {**ep.to_dict(), "stop_reason": getattr(policy, "stop_reason", None)}
    return {"messages": chat, "tools": getattr(policy, "tools", TOOLS), "reward": ep.reward, "metadata": metadata}


def run_episode(yard: Yard, task: Task, policy: Policy, out_dir: Path | None = None, *, attempt: int = 0,
                episodes: "EpisodeWriter | None" = None) -> Episode:
    """One episode: reset, let the policy act until it submits or a budget runs out, verify, record.
    With `out_dir`, the per-message trajectory file; with `episodes`, also a line of its `episodes.jsonl`."""
    ep, messages = play_episode(yard, task, policy, attempt=attempt)
    if out_dir is not None:
        ep.trajectory = write_trajectory(out_dir, task.name, messages, getattr(policy, "messages", None), ep)
    if episodes is not None:
        episodes.write(chat_record(task, policy, messages, ep))
    return ep


def play_episode(yard: Yard, task: Task, policy: Policy, *, attempt: int = 0) -> tuple[Episode, list[dict]]:
    """Run one episode and return it with its messages, writing nothing (a cluster worker returns both to the
    driver, which records them)."""
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
                if name == "bash" and hasattr(policy, "finish"):  # the budget ran out: the last command's output
                    policy.finish(obs)
                break
        ep = Episode(task.name, policy.name, info.get("reward"), info.get("steps", 0), time.monotonic() - start,
                     info.get("infra_error"), info.get("infra_detail"), info.get("metrics") or {})
    except PolicyError as e:  # the model endpoint failed: an infrastructure failure, never a score of 0
        steps = sum(1 for m in messages if m["role"] == "tool" and m["content"] != "submitted")
        ep = Episode(task.name, policy.name, None, steps, time.monotonic() - start, PolicyError.infra_error, str(e))
    finally:
        env.close()
    ep.attempt, ep.task_dir = attempt, str(Path(task.root).resolve())
    if getattr(policy, "usage", None):
        ep.metrics = {**ep.metrics, "usage": policy.usage}
    return ep, messages


def write_trajectory(out_dir: Path, task_name: str, messages: list[dict], policy_messages: list[dict] | None,
                     ep: Episode) -> str:
    """`out_dir/<task>-<hex>.jsonl`: one message per line, what the model itself saw (a model policy), then
    the result. Returns its path."""
    path = out_dir / f"{task_name}-{uuid.uuid4().hex[:8]}.jsonl"
    with path.open("w") as f:
        for m in messages:
            f.write(json.dumps(m) + "\n")
        if policy_messages:
            f.write(json.dumps({"role": "envyard_policy_messages", "messages": policy_messages}) + "\n")
        f.write(json.dumps({"role": "envyard_result", **ep.to_dict()}) + "\n")
    return str(path)


class EpisodeWriter:
    """Appends chat records to `DIR/episodes.jsonl`, one line each, from many threads; each line is flushed
    and fsynced as it is written, so an interrupted run loses at most the episodes in flight."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def write(self, record: dict) -> None:
        line = json.dumps(record) + "\n"
        with self._lock, self.path.open("a") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())


def read_episodes(path: Path) -> list[dict]:
    """The complete records of an `episodes.jsonl`. A last line cut short by an interruption is dropped from
    the file (rewritten in place), so that appending goes on from a clean line."""
    if not path.is_file():
        return []
    records, good, lines = [], [], path.read_text().splitlines(keepends=True)
    for n, line in enumerate(lines):
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("metadata"), dict):
                raise ValueError("not an episode record")
        except ValueError:
            if n == len(lines) - 1:  # the interrupted write
                break
            raise BadInput(f"{path}: line {n + 1} is not an episode record",
                           fix="--resume continues a directory written by `envyard rollout --out`") from None
        records.append(record)
        good.append(line if line.endswith("\n") else line + "\n")
    if len(good) != len(lines) or (lines and not lines[-1].endswith("\n")):
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(good))
        tmp.replace(path)
    return records


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator (Chen et al., 2021) for c successes among n attempts: 1 - C(n-c,k)/C(n,k).
    With fewer than k attempts, whether any of them passed."""
    if c == 0:
        return 0.0
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def summarize(episodes: list[Episode], policy: str, attempts: int = 1) -> dict:
    """The rollout's summary. pass@1 and pass@k (k = `attempts`) are averaged over tasks (task directories)
    with at least one scored attempt; infrastructure failures count as neither a pass nor a fail."""
    scored = [e.reward for e in episodes if e.infra_error is None and e.reward is not None]
    by_task: dict[str, list[float]] = {}
    for e in episodes:
        key = e.task_dir or e.task
        by_task.setdefault(key, [])
        if e.infra_error is None and e.reward is not None:
            by_task[key].append(e.reward)
    rated = {t: r for t, r in by_task.items() if r}

    def pass_at(k: int) -> float | None:
        if not rated:
            return None
        return round(statistics.mean(pass_at_k(len(r), sum(1 for x in r if x >= 1.0), k) for r in rated.values()), 4)

    summary = {
        "episodes": len(episodes), "policy": policy,
        "mean_reward": round(statistics.mean(scored), 4) if scored else None,
        "solved": sum(1 for r in scored if r >= 1.0),
        "infra_failures": sum(1 for e in episodes if e.infra_error),
        "median_wall_time": round(statistics.median(e.wall_time for e in episodes), 3) if episodes else None,
        "tasks": len(by_task), "attempts": attempts, "pass@1": pass_at(1),
    }
    if attempts > 1:
        summary[f"pass@{attempts}"] = pass_at(attempts)
    return summary


def run_rollouts(yard: Yard | None, tasks: list[Path], make: Callable[[], Policy], *, concurrency: int = 4,
                 out_dir: Path | None = None, on_done: Callable[[Episode], None] | None = None,
                 attempts: int = 1, resume: bool = False, cluster: "Cluster | None" = None) -> list[Episode]:
    """Run `make()` on every task `attempts` times (a task listed twice runs 2 × attempts times), `concurrency`
    episodes at once — or, with `cluster` (envs/cluster.py), on the nodes of a Ray cluster, each in its own
    store, `cluster.per_node` at once per node (`yard` and `concurrency` are then unused). With `out_dir`:
    trajectories and `out_dir/episodes.jsonl`. `resume=True` continues an interrupted `out_dir`: the episodes its `episodes.jsonl` already holds (matched by task directory and
    attempt number) are not run again, and come back in the result with the new ones, in job order.
    `on_done(ep)` is called for each episode as it ends (and for each resumed one)."""
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise BadInput(f"attempts must be a positive int, got {attempts!r}")
    if resume and out_dir is None:
        raise BadInput("resume needs an output directory", fix="pass --out DIR of the run to resume")
    loaded = [load_task(t) for t in tasks]  # fail fast on a malformed task, before any sandbox starts
    name = make().name
    if name == "oracle":
        missing = [t.name for t in loaded if t.solution is None and not t.solution_commands]
        if missing:
            raise BadInput(f"no reference solution in: {', '.join(missing)}",
                           fix="the oracle policy needs solution/solve.sh (Terminal-Bench: solution.sh or "
                               "solution.yaml) in each task")
    done: dict[tuple[str, int], Episode] = {}
    writer = None
    if out_dir is not None:
        if out_dir.exists() and not out_dir.is_dir():
            raise BadInput(f"--out {out_dir} exists and is not a directory")
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / EPISODES_FILE
        if resume:
            for record in read_episodes(path):
                ep = Episode.from_dict(record["metadata"])
                if ep.policy != name:
                    raise BadInput(f"{path} holds episodes of policy {ep.policy!r}, not {name!r}",
                                   fix="resume with the same --policy, or choose another --out")
                done[(ep.task_dir or ep.task, ep.attempt)] = ep
        elif path.exists() and path.stat().st_size:
            raise BadInput(f"{path} already holds episodes of an earlier rollout",
                           fix="pass --resume to continue that run, or choose another --out")
        writer = EpisodeWriter(path)

    jobs: list[tuple[Task, int]] = []
    count: dict[str, int] = {}
    for task in loaded:
        key = str(Path(task.root).resolve())
        for _ in range(attempts):
            n = count.get(key, 0)
            count[key] = n + 1
            jobs.append((task, n))

    if cluster is not None:
        from .cluster import run_on_cluster

        return run_on_cluster(cluster, jobs, make, done=done, out_dir=out_dir, writer=writer, on_done=on_done)

    def one(job: tuple[Task, int]) -> Episode:
        task, attempt = job
        ep = done.get((str(Path(task.root).resolve()), attempt))
        if ep is None:
            ep = run_episode(yard, task, make(), out_dir, attempt=attempt, episodes=writer)
        if on_done:
            on_done(ep)
        return ep

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        return list(pool.map(one, jobs))
