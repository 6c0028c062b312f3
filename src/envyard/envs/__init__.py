"""Agent environments: tasks, tamper-proof verification, a gymnasium env and rollouts."""

from .env import SUBMIT, TerminalEnv
from .rollout import Episode, NoopPolicy, OraclePolicy, ReplayPolicy, make_policy, run_episode, run_rollouts
from .task import Task, TaskError, check_task, find_tasks, load_task
from .vector import AsyncTerminalEnv, VectorTerminalEnv
from .carry import carry_changes
from .verify import Verdict, task_image, verify

__all__ = [
    "AsyncTerminalEnv", "VectorTerminalEnv", "Episode", "NoopPolicy", "OraclePolicy", "ReplayPolicy", "SUBMIT", "Task", "TaskError", "TerminalEnv", "Verdict",
    "carry_changes", "check_task", "find_tasks", "load_task", "make_policy", "run_episode", "run_rollouts",
    "task_image", "verify",
]
