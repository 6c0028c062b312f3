"""Where Pythons come from: interpreter providers, and the shared base image each one sets up once.

A provider names a base image and the interpreter in it. `host` is the machine's own /usr/bin/python3 (no
build needed); `debian:<suite>` gives Debian's python3 of that suite (bullseye 3.9, bookworm 3.11, trixie
3.13) on a debootstrap base. Each provider's *setup base* is built once per store and shared by every setup
and every branch of a search: the interpreter, venv support, a C toolchain, and `uv` at TOOLS_BIN. Its
commands are written at the top of setup.sh, so a replay on a plain base rebuilds the same starting point.

More providers (uv-managed CPython builds, deadsnakes-like archives) plug in as more `Interpreter` entries.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from dataclasses import dataclass
from typing import Callable

from ..bases.debian import SUITE_PYTHON
from ..errors import EnvyardError
from ..store import ImageConfig
from ..yard import Yard

SETUP_DISK = "64G"  # what one setup step may write (an ML stack with its compiled parts), where disks are limited

TOOLS_BIN = "/opt/envyard/bin"
# What a Debian setup base adds to debootstrap's minbase: the interpreter, venv, headers and a toolchain.
DEBIAN_PACKAGES = ("python3", "python3-venv", "python3-dev", "build-essential", "pkg-config", "ca-certificates",
                   "git", "locales-all")
BASE_TAG = "2"  # bump when what a setup base contains changes


class NoPython(EnvyardError):
    """No interpreter this machine can provide satisfies the project's Python constraint."""

    exit_code = 1


@dataclass(frozen=True)
class Interpreter:
    provider: str  # "host" or "debian:<suite>"
    base: str  # the base image the provider starts from
    path: str  # the interpreter inside that base
    version: str  # major.minor(.micro)

    @property
    def label(self) -> str:
        return f"{self.version} ({self.provider})"

    @property
    def setup_base_name(self) -> str:
        return f"setup-base/{self.provider.replace(':', '-')}:{BASE_TAG}"

    def base_commands(self) -> list[str]:
        """Shell commands that turn the plain base into the setup base (setup.sh's prelude, idempotent)."""
        cmds = []
        if self.provider.startswith("debian:"):
            cmds.append("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
                        "--no-install-recommends " + " ".join(DEBIAN_PACKAGES))
        cmds.append(f"command -v uv >/dev/null 2>&1 || [ -x {TOOLS_BIN}/uv ] || {{ {self.path} -m venv /opt/envyard/uv"
                    f" && /opt/envyard/uv/bin/pip install -q uv && mkdir -p {TOOLS_BIN}"
                    f" && ln -sf /opt/envyard/uv/bin/uv {TOOLS_BIN}/uv; }}")
        return cmds


def host_interpreter() -> Interpreter | None:
    try:
        out = subprocess.run(["/usr/bin/python3", "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return Interpreter("host", "host", "/usr/bin/python3", out.stdout.strip())


def debian_interpreters() -> list[Interpreter]:
    return [Interpreter(f"debian:{suite}", f"debian:{suite}", "/usr/bin/python3", version)
            for suite, version in SUITE_PYTHON.items()]


def available() -> list[Interpreter]:
    """Every interpreter this machine can provide, the host's first (it needs no base build)."""
    host = host_interpreter()
    return ([host] if host else []) + debian_interpreters()


def uv_binary() -> str:
    """The uv executable that ships with envyard (the `uv` wheel), copied into every setup base."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if not found:
            raise SetupBaseError("uv is not installed", fix="pip install uv (envyard depends on it)") from None
        return found


def minor(version: str) -> tuple[int, int]:
    major, mnr = version.split(".")[:2]
    return int(major), int(mnr)


_build_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def setup_base(yard: Yard, interp: Interpreter, on_progress: Callable[[str], None] | None = None,
               track: Callable | None = None):
    """The provider's shared setup base image, built on first use (concurrent branches wait for one build).
    `track(sandbox, alive)` hears of the build sandbox, so a caller can stop it on Ctrl-C."""
    say = on_progress or (lambda _m: None)
    name = interp.setup_base_name
    with _locks_guard:
        lock = _build_locks.setdefault(name, threading.Lock())
    with lock:
        if yard.store.has_image(name):
            return yard.image(name)
        say(f"building the {interp.provider} setup base (once per store)")
        base = yard.pull(interp.base, on_progress=lambda m: say(f"{interp.base}: {m}"))
        track = track or (lambda _sb, _alive: None)
        limits = {"disk": SETUP_DISK} if yard.can_limit_disk else None
        with yard.sandbox(base, network="host", workdir="/", limits=limits) as sb:
            track(sb, True)
            sb.upload(uv_binary(), f"{TOOLS_BIN}/uv")
            for cmd in interp.base_commands():
                r = sb.exec(cmd, timeout=1800, env={"DEBIAN_FRONTEND": "noninteractive"}, max_output=100_000)
                if r.exit_code != 0:
                    tail = (r.stderr or r.stdout).strip()[-400:]
                    raise SetupBaseError(f"building the {interp.provider} setup base failed (exit {r.exit_code}): {tail}",
                                         fix="check the network and the Debian archive; then run setup again")
            snap = sb.snapshot()
            track(sb, False)
        config = ImageConfig(env={**snap.config.env, "LANG": "C.UTF-8"}, workdir="/",
                             provenance={"provider": "setup-base", "interpreter": interp.label})
        image = yard.store.put_image(name, snap.layers, config)
        yard.store.remove_image(snap.name)
        return image


class SetupBaseError(EnvyardError):
    """A provider's setup base could not be built (network, archive): not the project's fault."""

    exit_code = 6
