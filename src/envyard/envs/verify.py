"""Building a task's image, and tamper-proof verification of an agent's final state.

Verification never runs where the agent ran. The agent's changes are copied out (processes frozen), the
agent's sandbox is closed (no agent process survives), the copy is filtered so it cannot replace the tools the
verifier relies on, and the tests enter a fresh sandbox over image + filtered changes only then.
"""

from __future__ import annotations

import fnmatch
import io
import json
import os
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EnvyardError, SandboxError
from ..store import Image
from ..store.store import remove_tree
from ..yard import Sandbox, Yard
from .task import Task

# Files of the image under these paths may not be replaced or deleted by the agent (new files are kept, so
# installing a package still counts). Tasks may add paths with [verifier].protected.
DEFAULT_PROTECTED = (
    "/bin/*", "/sbin/*", "/usr/bin/*", "/usr/sbin/*", "/usr/local/bin/*", "/usr/local/sbin/*",
    "/usr/lib/python3*", "/usr/local/lib/python3*", "/etc/python3*", "/root/.local/lib/python3*",
    "/lib64/ld-linux*", "/usr/lib64/ld-linux*", "/lib/*-linux-gnu/ld-linux*", "/usr/lib/*-linux-gnu/ld-linux*",
    "/lib/*-linux-gnu/libc.so*", "/usr/lib/*-linux-gnu/libc.so*", "/etc/ld.so.*", "/etc/environment",
)
# Directories that come before the system's on PATH: a new file there must not shadow an image command.
SHADOWING_DIRS = ("/usr/local/sbin", "/usr/local/bin")
SYSTEM_BIN_DIRS = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
# Nothing the agent leaves here reaches the verifier.
DROPPED = ("/tests", "/logs", "/solution", "/.envyard")
# Files that change what an interpreter does at start-up; added under a protected path, they are dropped.
STARTUP_HOOKS = ("sitecustomize.py", "usercustomize.py", "*.pth")
OPAQUE_XATTRS = ("user.overlay.opaque", "trusted.overlay.opaque")

INFRA_SETUP = "setup_failed"
INFRA_SANDBOX = "sandbox_died"
INFRA_VERIFIER_TIMEOUT = "verifier_timeout"
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
    dropped: list[str] = field(default_factory=list)  # agent changes the filter removed

    def to_dict(self) -> dict:
        return dict(self.__dict__)


# ---- the task's image ----------------------------------------------------------------------------------------


def task_image(yard: Yard, task: Task) -> Image:
    """The image a task's agent starts in, built once and cached by the digest of base + environment/."""
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


# ---- filtering the agent's changes --------------------------------------------------------------------------


def _is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _matches(path: str, patterns) -> bool:
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) or "/" for i in range(2, len(parts) + 1)]
    return any(fnmatch.fnmatchcase(p, pat) for p in prefixes for pat in patterns)


def _in_image(path: str, lowers: list[Path]) -> bool:
    rel = path.lstrip("/")
    for layer in reversed(lowers):  # topmost first
        candidate = layer / rel
        try:
            st = os.lstat(candidate)
        except OSError:
            continue
        return not _is_whiteout(st)
    return False


def filter_agent_changes(layer: Path, lowers: list[Path], protected: list[str]) -> list[str]:
    """Edit a copied upper dir in place so the verifier sees the agent's work but not its tampering.
    Returns the paths that were dropped."""
    patterns = (*DEFAULT_PROTECTED, *protected)
    dropped: list[str] = []
    for dirpath, dirnames, filenames in os.walk(layer, topdown=True):
        rel_dir = "/" + os.path.relpath(dirpath, layer).lstrip(".")
        rel_dir = "/" if rel_dir in ("/", "/.") else rel_dir.rstrip("/")
        for name in list(dirnames) + filenames:
            full = os.path.join(dirpath, name)
            path = (rel_dir.rstrip("/") + "/" + name)
            if any(path == d or path.startswith(d + "/") for d in DROPPED):
                remove_tree(Path(full))
                dropped.append(path)
                if name in dirnames:
                    dirnames.remove(name)
                continue
            if not _matches(path, patterns):
                continue
            st = os.lstat(full)
            is_dir = stat.S_ISDIR(st.st_mode)
            if is_dir:
                for x in OPAQUE_XATTRS:  # an opaque dir would hide the image's files below it
                    try:
                        os.removexattr(full, x)
                        dropped.append(path + "/ (opaque)")
                    except OSError:
                        pass
                continue
            hook = any(fnmatch.fnmatchcase(name, h) for h in STARTUP_HOOKS)
            shadows = rel_dir in SHADOWING_DIRS and any(_in_image(f"{d}/{name}", lowers) for d in SYSTEM_BIN_DIRS)
            if _is_whiteout(st) or _in_image(path, lowers) or hook or shadows:
                os.unlink(full)
                dropped.append(path)
    return dropped


# ---- running the verifier -----------------------------------------------------------------------------------


def verify(yard: Yard, task: Task, image: Image, agent: Sandbox) -> Verdict:
    """Score the agent's final state. Closes `agent`. Infrastructure failures come back as `infra_error`."""
    store = yard.store
    try:
        built = agent._h.snapshot_layer()
    except SandboxError as e:
        agent.close()
        return Verdict(None, infra_error=INFRA_SANDBOX, infra_detail=str(e))
    agent.close()
    dropped = filter_agent_changes(built, store.layer_paths(image.layers), task.protected)
    layer = store.seal_layer(built, {"verifier_view": task.name})
    view = Image(name=image.name, layers=[*image.layers, layer.id], config=image.config, created=image.created)
    try:
        with yard.sandbox(view, network=task.verifier_network, limits=task.limits, workdir=task.workdir) as v:
            # One exec prepares /logs and unpacks the tests (each exec costs a few ms).
            prep = v.exec(["/bin/sh", "-c", "rm -rf /tests /logs && mkdir -p /tests /logs/verifier /logs/agent"
                           " && tar -x -f - -C /tests"], stdin=_tar_of(task.tests_dir), max_output=1 << 16)
            if prep.exit_code != 0:
                return Verdict(None, infra_error=INFRA_VERIFIER_CRASH, dropped=dropped,
                               infra_detail=f"could not install the tests: {prep.stderr.strip()[-300:]}")
            command = ("bash /tests/test.sh" if (task.tests_dir / "test.sh").is_file()
                       else "python3 -m unittest discover -s /tests -p 'test*.py'")
            r = v.exec(command, cwd=task.workdir, timeout=task.verifier_timeout, max_output=64_000)
            out = (r.stdout + r.stderr)[-8000:]
            if r.timed_out:
                return Verdict(None, exit_code=r.exit_code, output=out, duration=r.duration, dropped=dropped,
                               infra_error=INFRA_VERIFIER_TIMEOUT,
                               infra_detail=f"verifier ran past {task.verifier_timeout:.0f}s")
            reward, metrics = _read_reward(v, r.exit_code)
            if reward is None:
                return Verdict(None, metrics, r.exit_code, out, r.duration, dropped=dropped,
                               infra_error=INFRA_VERIFIER_CRASH, infra_detail=metrics["reward_error"])
            return Verdict(reward, metrics, r.exit_code, out, r.duration, dropped=dropped)
    except EnvyardError as e:
        return Verdict(None, infra_error=INFRA_VERIFIER_CRASH, infra_detail=str(e), dropped=dropped)
    finally:
        store.remove_layer(layer.id)


def _tar_of(directory: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(directory, arcname=".")
    return buf.getvalue()


def _read_reward(v: Sandbox, exit_code: int) -> tuple[float | None, dict]:
    """reward.json, else reward.txt, else the verifier's exit code — read in one exec. None when the file holds
    no number: a broken verifier is the task's fault, not the agent's."""
    r = v.exec(["/bin/sh", "-c", "cd /logs/verifier 2>/dev/null || exit 0; for f in reward.json reward.txt; do"
                " if [ -f $f ]; then printf '%s\\n' $f; cat $f; exit 0; fi; done"], max_output=1 << 20)
    name, _, body = r.stdout.partition("\n")
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
    if name == "reward.txt":
        try:
            return float(body.strip()), {}
        except ValueError:
            return None, {"reward_error": f"reward.txt is not a number: {body.strip()[:80]!r}"}
    return (1.0 if exit_code == 0 else 0.0), {"reward_from": "exit_code"}
