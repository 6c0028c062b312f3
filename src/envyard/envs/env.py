"""TerminalEnv: a gymnasium environment where the agent types shell commands into a task's sandbox.

reset(options={"task": DIR or Task}) → the instruction. step(command) → the command's output. The action
`submit` (or the step or time budget running out) ends the episode: the verifier scores the final state in a
separate sandbox (see verify.py; it is started and prepared while the agent works, prepared.py), and the
reward arrives with `terminated` (or `truncated`). An infrastructure failure ends the episode with reward 0.0
and `info["infra_error"]` set, so a trainer can mask it.
"""

from __future__ import annotations

import string
import time
from pathlib import Path

import gymnasium as gym

from .. import validate
from ..errors import BadInput, EnvyardError, SandboxDied
from ..runtime.result import MAX_OUTPUT_CEILING, ExecResult
from ..yard import Sandbox, Yard
from .services import Services
from .prepared import PreparedVerifier
from .task import Task, load_task
from .verify import (INFRA_SANDBOX, INFRA_SETUP, InfraError, Verdict, sandbox_limits, service_image,
                     start_verifier, task_image, verify)

SUBMIT = "submit"
MAX_TEXT = 1 << 20
CHARSET = string.printable  # gymnasium Text spaces need a finite alphabet: observations are escaped to it
DEFAULT_OBSERVATION_BYTES = 16_000


def printable(text: str) -> str:
    """Escape everything outside string.printable so the observation lies in the observation space."""
    if all(c in CHARSET for c in text):
        return text
    return "".join(c if c in CHARSET else c.encode("unicode_escape").decode("ascii") for c in text)


def format_output(exit_code: int, stdout: str, stderr: str, timed_out: bool, limit: int) -> str:
    """What the agent sees: output (middle cut when long, so the end of a traceback survives) and the status."""
    body = stdout + (("\n[stderr]\n" + stderr) if stderr else "")
    if len(body) > limit:
        half = limit // 2
        body = body[:half] + f"\n[... {len(body) - limit} characters cut ...]\n" + body[-half:]
    status = "timed out" if timed_out else f"exit code {exit_code}"
    return printable(f"{body}\n[{status}]" if body else f"[{status}]")


class TerminalEnv(gym.Env):
    metadata = {"render_modes": ["ansi"]}

    def __init__(self, task: str | Path | Task | None = None, *, yard: Yard | None = None,
                 step_timeout: float = 60.0, observation_bytes: int = DEFAULT_OBSERVATION_BYTES,
                 render_mode: str | None = None, prepare_verifier: bool = True):
        self.yard = yard or Yard()
        self._own_yard = yard is None
        self.default_task = task
        # Checked here, so that a BadInput from a step can only be about the agent's command.
        self.step_timeout = validate.timeout(step_timeout, "step_timeout")
        self.observation_bytes = validate.integer(observation_bytes, "observation_bytes", minimum=1,
                                                  maximum=MAX_OUTPUT_CEILING // 4)
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Text(max_length=MAX_TEXT, charset=CHARSET)
        self.action_space = gym.spaces.Text(max_length=4096, charset=CHARSET)
        self.task: Task | None = None
        self.sandbox: Sandbox | None = None
        self.services: Services | None = None
        self._shell = None
        self._steps = 0
        self._started = 0.0
        self._last = ""
        self.verdict: Verdict | None = None
        self._verifier: PreparedVerifier | None = None
        # Each episode's verifier is started and prepared while the agent works (envs/prepared.py); False
        # starts it only at submit.
        self.prepare_verifier = prepare_verifier

    # ---- gymnasium API ------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._close_sandbox()
        spec = (options or {}).get("task", self.default_task)
        if spec is None:
            raise EnvyardError("no task given", fix='pass TerminalEnv(task=DIR) or reset(options={"task": DIR})')
        self.task = spec if isinstance(spec, Task) else load_task(spec)
        self.verdict = None
        self._steps = 0
        info = {"task": self.task.name, "infra_error": None}
        try:
            self.image = task_image(self.yard, self.task)
            network, hostname = self.task.agent_network, None
            if self.task.services:  # a compose task's databases, web servers...: started first, on one pod
                self.services = Services(self.yard, self.task.compose, internet=self.task.agent_network == "host",
                                         image_for=lambda service: service_image(self.yard, self.task, service),
                                         completion_timeout=self.task.build_timeout)
                self.services.start()
                network, hostname = self.services.network, self.services.main_hostname
            self.sandbox = self.yard.sandbox(self.image, network=network, hostname=hostname,
                                             limits=sandbox_limits(self.yard, self.task), env=self.task.env,
                                             workdir=self.task.workdir)
            self._shell = self.sandbox.shell(user=self.image.config.user)  # the image's USER, as Docker runs it
            # a verifier prepared ahead needs a backend that can merge the agent's work into it at submit
            if not self.task.services and self.prepare_verifier and self.sandbox.can_apply_layer:
                task, image = self.task, self.image
                self._verifier = PreparedVerifier(self.yard, lambda: start_verifier(self.yard, task, image))
        except InfraError as e:
            info.update(infra_error=e.kind, infra_detail=str(e))
        except EnvyardError as e:
            info.update(infra_error=INFRA_SETUP, infra_detail=str(e))
        if self.sandbox is None:
            self._close_services()
        self._started = time.monotonic()
        self._last = printable(self.task.instruction)
        return self._last, info

    def step(self, action: str, on_output=None):
        """gymnasium's step; `on_output(stream, chunk)` (not part of gymnasium) streams the command's output."""
        if self.task is None:
            raise EnvyardError("step() before reset()", fix="call reset() first")
        if not isinstance(action, str):
            raise BadInput(f"action must be a str, not {type(action).__name__}", fix="pass the command as a string")
        if self.verdict is not None or self.sandbox is None:  # finished, or the sandbox never started
            return self._last, 0.0, True, False, {"infra_error": INFRA_SETUP if self.sandbox is None else None,
                                                  "note": "episode is over; call reset()"}
        if action.strip() == SUBMIT:
            return self._finish(terminated=True)
        self._steps += 1
        info: dict = {"step": self._steps}
        try:
            r = self._shell.run(action, timeout=self.step_timeout, max_output=self.observation_bytes * 4,
                                on_output=on_output)
            if not self.sandbox.alive:
                # `kill -9 -1` spares the shell that runs it: it can answer while the sandbox, its resident
                # shell gone, is already going down. The episode ends here, as for any stopped sandbox.
                raise SandboxDied("the sandbox's resident shell was killed by the agent's command")
            note = self._replace_exited_shell()
        except BadInput as e:  # the command itself is malformed (a NUL byte): the agent is told, as a shell would
            r, note = ExecResult(2, b"", f"envyard: command refused: {e.message}\n".encode(), 0.0), ""
        except EnvyardError as e:
            if self.sandbox.alive:
                self.verdict = Verdict(None, infra_error=INFRA_SANDBOX, infra_detail=str(e))
                self._close_sandbox()
                return self._last, 0.0, True, False, {**info, **self._verdict_info()}
            # The agent's sandbox died under its own command (it killed the sandbox's shell, exhausted its
            # memory): not the machinery's fault, and not a way to escape a score. Verify what it left.
            self._last = printable(f"[the sandbox stopped: {e.message}; the episode ends here]")
            obs, reward, _, _, vinfo = self._finish(terminated=True)
            return self._last, reward, True, False, {**info, "sandbox_stopped": True, **vinfo}
        info.update(exit_code=r.exit_code, timed_out=r.timed_out)  # no timings: info must be deterministic
        self._last = format_output(r.exit_code, r.stdout, r.stderr + note, r.timed_out, self.observation_bytes)
        if self._steps >= self.task.max_steps or time.monotonic() - self._started >= self.task.agent_timeout:
            obs, reward, _, _, vinfo = self._finish(terminated=False)
            return self._last, reward, False, True, {**info, **vinfo}
        return self._last, 0.0, False, False, info

    def render(self):
        return self._last if self.render_mode == "ansi" else None

    def close(self):
        self._close_sandbox()
        if self._own_yard:
            self.yard.close()

    # ---- helpers ------------------------------------------------------------------------------------------

    def _finish(self, terminated: bool):
        self._shell = None
        # verify() closes the agent's sandbox; the services stay up until the tests are done with them
        prepared, self._verifier = self._verifier, None
        self.verdict = verify(self.yard, self.task, self.image, self.sandbox, self.services, prepared)
        self.sandbox = None
        self._close_services()
        reward = self.verdict.reward if self.verdict.reward is not None else 0.0
        return self._last, reward, terminated, not terminated, self._verdict_info()

    def _replace_exited_shell(self) -> str:
        """After a command that ended the shell itself (`exit`, `exec`), start a new one: the episode goes on.
        Returns a note for the agent, or ''."""
        if self._shell.alive:
            return ""
        self._shell = self.sandbox.shell(user=self.image.config.user)
        return (f"\n[envyard: the shell exited; a new shell was started in {self.sandbox.workdir}: "
                "variables and the current directory were reset]")

    def _verdict_info(self) -> dict:
        v = self.verdict
        return {"reward": v.reward, "metrics": v.metrics, "infra_error": v.infra_error, "infra_detail": v.infra_detail,
                "verifier_exit_code": v.exit_code, "verifier_output": v.output, "dropped": v.dropped,
                "dropped_count": v.dropped_count, "steps": self._steps}

    def _close_sandbox(self):
        if self._verifier is not None:
            self._verifier.close()
            self._verifier = None
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
        self._shell = None
        self._close_services()

    def _close_services(self):
        if self.services is not None:
            self.services.close()
            self.services = None
