"""Building a task's image, and tamper-proof verification of an agent's final state.

Verification never runs where the agent ran. The agent's processes are killed first (none survives into
verification), then only the paths the task says the agent produces are carried, filtered (see carry.py), into
a verifier sandbox over the task's image: one prepared ahead with /tests in place (prepared.py), into which the
carried layer is merged, or else a fresh one over image + carried layer, into which the tests are copied.
Either way the tests run from /tests with the image's own tools.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EnvyardError, FileTooLarge
from ..overlay import mark_opaque
from ..runtime.holder import ROOT_USERS
from ..runtime.limits import Limits
from ..store import Image
from ..store.store import remove_tree
from ..yard import Sandbox, Yard
from .carry import MAX_ENTRIES, NEVER_CARRIED, carry_changes
from .foreign import slug
from .prepared import PreparedVerifier
from .services import Services
from .task import Task

log = logging.getLogger("envyard")

# The verifier's environment on top of the image's. Git runs code named in a repository's own config
# (core.fsmonitor, hooks, a pager) even for read-only commands; settings given this way win over the
# repository's, so a verifier that inspects the agent's repository does not run the agent's programs.
VERIFIER_ENV = {
    "TEST_DIR": "/tests",
    "GIT_CONFIG_COUNT": "3",
    "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": "false",
    "GIT_CONFIG_KEY_1": "core.hooksPath", "GIT_CONFIG_VALUE_1": "/dev/null",
    "GIT_CONFIG_KEY_2": "core.pager", "GIT_CONFIG_VALUE_2": "cat",
}

INFRA_SETUP = "setup_failed"
INFRA_SANDBOX = "sandbox_died"
INFRA_VERIFIER_CRASH = "verifier_crashed"


class InfraError(EnvyardError):
    """A failure of the machinery, not of the agent: results carry its `kind` so trainers can mask it."""

    exit_code = 5

    def __init__(self, kind: str, message: str, fix: str | None = None):
        super().__init__(message, fix=fix)
        self.kind = kind


@dataclass
class Verdict:
    reward: float | None
    metrics: dict = field(default_factory=dict)
    exit_code: int | None = None
    output: str = ""
    duration: float = 0.0
    infra_error: str | None = None
    infra_detail: str | None = None
    dropped: list[str] = field(default_factory=list)  # agent changes the filter removed (the first 100)
    dropped_count: int = 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


# ---- the task's image ----------------------------------------------------------------------------------------


def task_image(yard: Yard, task: Task) -> Image:
    """The image a task's agent starts in: built from its Dockerfile, pulled, or (envyard's own layout) made
    from a base image, environment/files and environment/setup.sh, cached by the digest of them all."""
    if task.dockerfile is None and task.docker_image is None:
        return _setup_image(yard, task)
    return _built_or_pulled(yard, task, f"task/{task.name}:latest", task.dockerfile, task.build_context,
                            task.docker_image, "its environment")


def service_image(yard: Yard, task: Task, service) -> Image:
    """The image of one of a task's compose services (envs/services.py)."""
    tag = f"task/{task.name}-{slug(service.name)}:latest"
    return _built_or_pulled(yard, task, tag, service.dockerfile, service.context, service.image,
                            f"its service {service.name!r}")


def _built_or_pulled(yard: Yard, task: Task, tag: str, dockerfile, context, ref, what: str) -> Image:
    try:
        if dockerfile is not None:
            from ..build import build_image

            return build_image(yard, context, dockerfile=dockerfile, tag=tag, timeout=task.build_timeout)
        if _in_store(yard, ref):
            return yard.image(ref)
        from ..images import pull_image

        return pull_image(yard, ref)
    except ImportError as e:
        raise InfraError(INFRA_SETUP, f"task {task.name}: this envyard cannot build or pull images ({e})") from e
    except EnvyardError as e:
        raise InfraError(INFRA_SETUP, f"task {task.name}: preparing {what} failed: {e}") from e


def _in_store(yard: Yard, ref: str) -> bool:
    try:
        return yard.store.has_image(ref)
    except EnvyardError:  # a reference that is not an envyard image name
        return False


def _setup_image(yard: Yard, task: Task) -> Image:
    base = yard.image(task.image)
    name = f"task/{task.name}:{task.environment_digest(base.layers)}"
    if yard.store.has_image(name):
        return yard.image(name)
    try:
        with yard.sandbox(base, network="host", workdir="/") as sb:
            r = sb.exec(["mkdir", "-p", task.workdir])
            env = task.environment_dir
            if env and (env / "files").is_dir():
                sb.upload(env / "files", task.workdir)
            if env and (env / "setup.sh").is_file():
                sb.write_file("/tmp/envyard-task-setup.sh", (env / "setup.sh").read_bytes())
                r = sb.exec("bash /tmp/envyard-task-setup.sh; rc=$?; rm -f /tmp/envyard-task-setup.sh; exit $rc",
                            cwd=task.workdir, timeout=1800)
                if r.exit_code != 0:
                    raise InfraError(INFRA_SETUP, f"task {task.name}: environment/setup.sh exited {r.exit_code}: "
                                     f"{r.stderr.strip()[-500:]}")
            return sb.snapshot(name)
    except InfraError:
        raise
    except EnvyardError as e:
        raise InfraError(INFRA_SETUP, f"task {task.name}: building its environment failed: {e}") from e


# ---- running the verifier -----------------------------------------------------------------------------------


def verify(yard: Yard, task: Task, image: Image, agent: Sandbox, services: Services | None = None,
           prepared: PreparedVerifier | None = None) -> Verdict:
    """Score the agent's final state (its sandbox may have died: its files are what counts). Closes `agent`.
    With `services` (a compose task's), the verifier joins their pod network, as tests run beside the
    services under Docker Compose. With `prepared` (a verifier started ahead for this episode, envs/prepared.py),
    the carried work is merged into it instead of starting a fresh one; if it cannot be used, a fresh one is.
    Infrastructure failures come back as `infra_error`; nothing the agent can do makes one."""
    store = yard.store
    dest = store.new_layer_dir()
    try:
        agent.stop()
        carried = carry_changes(agent.upper_dir(), dest, task.carry, store.layer_paths(image.layers),
                                task.protected, task.max_carry_bytes)
    except EnvyardError as e:
        store.discard_dir(dest)
        if prepared is not None:
            prepared.close()
        return Verdict(None, infra_error=INFRA_SANDBOX, infra_detail=f"could not copy the agent's work: {e}")
    finally:
        agent.close()
    dropped = {"dropped": carried.dropped, "dropped_count": carried.dropped_count}
    if carried.too_large:
        store.discard_dir(dest)
        if prepared is not None:
            prepared.close()
        return Verdict(0.0, {"rejected": f"the agent's work under {', '.join(task.carry)} is too large: "
                                         f"{carried.size} bytes in {carried.entries} entries (limits: "
                                         f"max_carry_size {task.max_carry_bytes} bytes, {MAX_ENTRIES} entries)"})
    v = None
    if prepared is not None and services is None:
        v = _merged_into_prepared(prepared, dest)
    elif prepared is not None:
        prepared.close()  # a compose task's verifier must join the services' network: started fresh below
    if v is not None:
        store.discard_dir(dest, background=True)  # merged: its deletion is off the episode's path
        try:
            with v:
                return _run_tests(v, task, image, dropped)
        except EnvyardError as e:
            return Verdict(None, infra_error=INFRA_VERIFIER_CRASH, infra_detail=str(e), **dropped)
    layer = store.seal_layer(dest, {"verifier_view": task.name})
    view = Image(name=image.name, layers=[*image.layers, layer.id], config=image.config, created=image.created)
    network, hostname = task.verifier_network, None
    if services is not None:
        network, hostname = services.network, services.main_hostname
        if task.verifier_network == "host":
            network.connect_internet()  # the tests may fetch what they need, as the task allows
    try:
        with _verifier_sandbox(yard, task, view, network, hostname) as v:
            problem = _prepare(v, task, image)
            if problem:
                return Verdict(None, infra_error=INFRA_VERIFIER_CRASH, infra_detail=problem, **dropped)
            return _run_tests(v, task, image, dropped)
    except EnvyardError as e:
        return Verdict(None, infra_error=INFRA_VERIFIER_CRASH, infra_detail=str(e), **dropped)
    finally:
        store.remove_layer(layer.id)


def start_verifier(yard: Yard, task: Task, image: Image) -> Sandbox:
    """A verifier over the task's image alone with /tests and /logs in place: what PreparedVerifier makes ahead
    (only for tasks without services, whose pod network exists only during the episode)."""
    v = _verifier_sandbox(yard, task, image, task.verifier_network, None)
    try:
        problem = _prepare(v, task, image)
        if problem:
            raise InfraError(INFRA_VERIFIER_CRASH, problem)
    except BaseException:
        v.close()
        raise
    return v


def _verifier_sandbox(yard: Yard, task: Task, image: Image, network, hostname) -> Sandbox:
    return yard.sandbox(image, network=network, limits=sandbox_limits(yard, task), workdir="/",
                        env={**task.env, **task.verifier_env, **VERIFIER_ENV}, hostname=hostname)


def _merged_into_prepared(prepared: PreparedVerifier, carried: Path) -> Sandbox | None:
    """The prepared verifier with the carried work merged in, or None (then a fresh verifier is used)."""
    v = prepared.take()
    if v is None:
        return None
    try:
        for name in NEVER_CARRIED:  # its /tests and /logs are in place: nothing carried may land there
            remove_tree(carried / name.lstrip("/"))
        v.apply_layer(carried)
        if not _has_shell(v):
            # The agent's work deleted the verifier's shell. A fresh verifier reports that as it always did.
            raise EnvyardError("the carried work leaves the verifier without /bin/sh")
    except (EnvyardError, OSError) as e:
        log.info("merging into the prepared verifier failed (a fresh one is used): %s", e)
        v.close()
        return None
    return v


def _has_shell(v: Sandbox) -> bool:
    try:
        v.read_file("/bin/sh", max_bytes=0)
    except FileTooLarge:
        return True  # a regular file, resolved inside the sandbox
    except (FileNotFoundError, EnvyardError):
        return False
    return False  # empty


def _prepare(v: Sandbox, task: Task, image: Image) -> str | None:
    """Put /tests and /logs in place; a problem's description, or None."""
    # /tests and /logs are never carried; the tests are copied in by the owner, not by a program inside.
    if v.can_apply_layer and all(inside == "/tests" or inside.startswith("/tests/")
                                    for _, inside in task.verifier_files):
        # The usual case, without running anything in the sandbox: a small layer holding /tests and /logs as
        # opaque directories (what `rm -rf` + copy would leave), merged from the host.
        store = v.yard.store
        layer = store.new_layer_dir()
        try:
            _tests_layer(layer, task, open_to_all=image.config.user not in ROOT_USERS)
            v.apply_layer(layer)
        except OSError as e:
            return f"could not prepare /tests and /logs: {e}"
        finally:
            store.discard_dir(layer, background=True)
        # what the `sh -c` of the other way would have found out: the carried work can delete the shell
        return None if _has_shell(v) else "could not prepare /tests and /logs: the verifier has no /bin/sh"
    prep = v.exec(["/bin/sh", "-c", "rm -rf /tests /logs && mkdir -p /tests /logs/verifier /logs/agent"],
                  max_output=1 << 16)
    if prep.exit_code != 0:
        return f"could not prepare /tests and /logs: {prep.stderr.strip()[-300:]}"
    for host_path, inside in task.verifier_files:
        if host_path.exists():
            v.upload(host_path, inside)
    if image.config.user not in ROOT_USERS:
        v.exec(["chmod", "-R", "a+rwX", "/tests", "/logs"], max_output=1 << 16)
    return None


def _tests_layer(layer: Path, task: Task, open_to_all: bool) -> None:
    """Fill `layer` with opaque /tests (the task's verifier files) and /logs/{verifier,agent}. Files belong to
    root; with `open_to_all` (tests run as a non-root USER) everything is made a+rwX, as `chmod -R` would."""
    for name in ("tests", "logs/verifier", "logs/agent"):
        (layer / name).mkdir(parents=True, exist_ok=True)
    mark_opaque(layer / "tests")
    mark_opaque(layer / "logs")
    for host_path, inside in task.verifier_files:
        if not host_path.exists():
            continue
        target = layer / inside.lstrip("/")
        if host_path.is_dir():
            shutil.copytree(host_path, target, symlinks=True, dirs_exist_ok=True, ignore=_not_copied)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(host_path, target)
    for path in (layer / "tests", layer / "logs"):
        for entry in [path, *path.rglob("*")]:
            st = os.lstat(entry)
            if stat.S_ISLNK(st.st_mode):
                continue
            os.chown(entry, 0, 0)
            if open_to_all:
                execute = 0o111 if stat.S_ISDIR(st.st_mode) or st.st_mode & 0o111 else 0
                os.chmod(entry, stat.S_IMODE(st.st_mode) | 0o666 | execute)


def _not_copied(directory: str, names: list[str]) -> list[str]:
    """FIFOs, sockets and devices in a task's tests are skipped (as Sandbox.upload skips them)."""
    skip = []
    for name in names:
        mode = os.lstat(os.path.join(directory, name)).st_mode
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            skip.append(name)
    return skip


def _run_tests(v: Sandbox, task: Task, image: Image, dropped: dict) -> Verdict:
    user = image.config.user  # the tests run as the image's USER, as in the container the task came from
    command = task.test_command or ("bash /tests/test.sh" if (task.tests_dir / "test.sh").is_file()
                                    else "python3 -m unittest discover -s /tests -p 'test*.py'")
    r = v.exec(command, cwd="/tests", timeout=task.verifier_timeout, max_output=64_000, user=user)
    out = (r.stdout + r.stderr)[-8000:]
    if r.timed_out:
        # Not an infrastructure error: the agent's work can stall a verifier (an endless answer, a
        # program that hangs), and a masked episode would teach it to do so.
        return Verdict(0.0, {"verifier_timed_out": True}, r.exit_code, out, r.duration, **dropped)
    reward, metrics = (pytest_reward(r.exit_code, r.stdout + r.stderr) if task.reward_from == "pytest"
                       else _read_reward(v, r.exit_code))
    if reward is None:
        return Verdict(None, metrics, r.exit_code, out, r.duration, **dropped,
                       infra_error=INFRA_VERIFIER_CRASH, infra_detail=metrics["reward_error"])
    return Verdict(reward, metrics, r.exit_code, out, r.duration, **dropped)


def sandbox_limits(yard: Yard, task: Task) -> Limits:
    """The task's limits as this machine can apply them: a disk limit is dropped where disk limits do not work
    (Harbor tasks always name one; a task must not fail for it)."""
    if task.limits.disk is not None and not yard.can_limit_disk:
        return task.limits.replace(disk=None)
    return task.limits


def _read_reward(v: Sandbox, exit_code: int) -> tuple[float | None, dict]:
    """reward.json, else reward.txt, else the verifier's exit code — read by the owner, capped. None when the
    file holds no number: a broken verifier is the task's fault, not the agent's."""
    for name in ("reward.json", "reward.txt"):
        try:
            body = v.read_file(f"/logs/verifier/{name}", max_bytes=1 << 20).decode(errors="replace")
        except (FileNotFoundError, EnvyardError):
            continue
        if name == "reward.json":
            try:
                data = json.loads(body)
            except ValueError:
                data = None
            if isinstance(data, dict) and isinstance(data.get("reward"), (int, float)):
                return float(data["reward"]), {k: val for k, val in data.items() if k != "reward"}
            if isinstance(data, (int, float)):
                return float(data), {}
            return None, {"reward_error": "reward.json holds no number under 'reward'"}
        try:
            return float(body.strip()), {}
        except ValueError:
            return None, {"reward_error": f"reward.txt is not a number: {body.strip()[:80]!r}"}
    return (1.0 if exit_code == 0 else 0.0), {"reward_from": "exit_code"}


PYTEST_SUMMARY = re.compile(r"=+ (.*?) in [\d.]+s(?: \([^)]*\))? =+\s*$", re.M)


def pytest_reward(exit_code: int, output: str) -> tuple[float, dict]:
    """Terminal-Bench's rule: solved when the test script exits 0 and pytest reports no failure or error.
    The counts of pytest's last summary line become metrics."""
    counts: dict[str, int] = {}
    summaries = PYTEST_SUMMARY.findall(output)
    if summaries:
        for part in summaries[-1].split(","):
            number, _, what = part.strip().partition(" ")
            if number.isdigit():
                counts[what] = int(number)
    failed = counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)
    solved = exit_code == 0 and failed == 0 and bool(summaries)
    return (1.0 if solved else 0.0), {"tests": counts, "test_script_exit_code": exit_code}
