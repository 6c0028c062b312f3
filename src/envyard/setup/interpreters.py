"""Where Pythons come from: interpreter providers, and the shared base image each one sets up once.

A provider names a base image and the interpreter in it. `host` is the machine's own /usr/bin/python3 (no
build needed); `debian:<suite>` gives Debian's python3 of that suite (bullseye 3.9, bookworm 3.11, trixie
3.13) on a debootstrap base. Interpreters installed on the host come over the `host` image too:
`pyenv:<version>` (every `$(pyenv root)/versions/*/bin/python3`), `uv:<key>` (uv-managed CPython builds, as
`uv python list --only-installed` sees them) and `system:python3.X` / `system:local-python3.X` (/usr/bin and
/usr/local/bin). A pyenv or uv prefix is *copied* into its setup base at the same path (the host image hides
/root, and a prefix may later be upgraded or removed), so images built on it keep working without the host's
copy; /usr and /usr/local are shown by the host image as they are. Each provider's *setup base* is built once
per store and shared by every setup and every branch of a search: the interpreter, venv support, a C
toolchain, and `uv` at TOOLS_BIN. Its commands are written at the top of setup.sh, so a replay on a plain base
rebuilds the same starting point; for a host-installed interpreter the first one checks that it is there, is
the version recorded and has what a venv needs, and the build also makes a venv with it inside the sandbox.

Where none fits, `uv python install X.Y` is the last resort (`install_with_uv`); it needs python-build-
standalone's downloads from GitHub, and a failure is remembered for a day so setups do not wait on it again.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import glob
import hashlib
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from ..bases.debian import SUITE_PYTHON
from ..bases.hostmask import HIDDEN_DIRS
from ..errors import EnvyardError
from ..store import ImageConfig
from ..yard import Yard
from . import hosts

SETUP_DISK = "64G"  # what one setup step may write (an ML stack with its compiled parts), where disks are limited

TOOLS_BIN = "/opt/envyard/bin"
# What a Debian setup base adds to debootstrap's minbase: the interpreter, venv, headers and a toolchain.
DEBIAN_PACKAGES = ("python3", "python3-venv", "python3-dev", "build-essential", "pkg-config", "ca-certificates",
                   "git", "locales-all")
BASE_TAG = "3"  # bump when what a setup base contains changes
# apt-get as setup runs it: quiet, never asks, deletes the .debs it downloaded once they are installed (kept,
# they were ~110 MB of every Debian setup base and of each image whose recipe installs packages), and dpkg does
# not fsync each file it unpacks (--force-unsafe-io, as Docker's Debian images do: the sandbox's writes become
# a layer only when it is snapshotted, and an fsync per file on its overlay doubled an install's time: measured)
APT_INSTALL = ("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq"
               " -oAPT::Keep-Downloaded-Packages=false -oDPkg::Options::=--force-unsafe-io")


class NoPython(EnvyardError):
    """No interpreter this machine can provide satisfies the project's Python constraint."""

    exit_code = 1


@dataclass(frozen=True)
class Interpreter:
    provider: str  # "host", "debian:<suite>", "pyenv:<name>", "uv:<key>" or "system:<name>"
    base: str  # the base image the provider starts from
    path: str  # the interpreter inside that base
    version: str  # major.minor(.micro)
    prefix: str = ""  # a host directory copied into the setup base at the same path (pyenv and uv installs)
    origin: str = ""  # where a host-installed interpreter came from, for the contract
    forced: bool = False  # chosen with `envyard setup --python`: used even where the project's constraint excludes it

    @property
    def label(self) -> str:
        return f"{self.version} ({self.provider})"

    @property
    def host_installed(self) -> bool:
        """Installed on the host beside its /usr/bin/python3 (pyenv, uv, another /usr/bin/python3.X)."""
        return self.base == "host" and self.provider != "host"

    def docker_base(self) -> str:
        """The Dockerfile's FROM: the same Debian suite; for a host-installed interpreter the official python
        image of the same release, whose python3.X stands in for the host's copy."""
        if self.provider.startswith("debian:"):
            return "debian:" + self.provider.split(":", 1)[1]
        if self.host_installed:
            return f"python:{self.version}-slim"
        return "debian:bookworm"  # the host's python3 is bookworm's 3.11

    def docker_commands(self) -> list[str]:
        """Dockerfile RUN commands that put the docker base's interpreter where the recipe expects this one."""
        if not self.host_installed:
            return []
        stand_in = f"/usr/local/bin/python{'.'.join(self.version.split('.')[:2])}"
        if self.path == stand_in:
            return []
        return [f"mkdir -p {shlex.quote(os.path.dirname(self.path))} && ln -sf {stand_in} {shlex.quote(self.path)}"]

    @property
    def setup_base_name(self) -> str:
        # A host-installed one's name also says where it lives: two pyenv roots may both have a 3.8.18.
        where = f"-{hashlib.sha256(self.path.encode()).hexdigest()[:8]}" if self.host_installed else ""
        return f"setup-base/{self.provider.replace(':', '-')}{where}:{BASE_TAG}-uv{uv_version()}"

    def base_commands(self) -> list[str]:
        """Shell commands that turn the plain base into the setup base (setup.sh's prelude, idempotent)."""
        cmds = []
        if self.host_installed:
            cmds.append(self.check_command())
        if self.provider.startswith("debian:"):
            cmds.append(f"{APT_INSTALL} --no-install-recommends " + " ".join(DEBIAN_PACKAGES))
        cmds.append(f"command -v uv >/dev/null 2>&1 || [ -x {TOOLS_BIN}/uv ] || {{ {self.path} -m venv /opt/envyard/uv"
                    f" && /opt/envyard/uv/bin/pip install -q uv && mkdir -p {TOOLS_BIN}"
                    f" && ln -sf /opt/envyard/uv/bin/uv {TOOLS_BIN}/uv; }}")
        return cmds

    def check_command(self) -> str:
        """Fails unless this interpreter is at its path, is the version recorded and has what a venv needs."""
        want = tuple(int(x) for x in self.version.split(".")[:3])
        code = (f"import sys, venv, zlib; v = tuple(sys.version_info[:{len(want)}]); "
                f"assert v == {want}, 'found %s' % (v,)")
        msg = f"setup.sh needs Python {self.version} at {self.path} ({self.origin or self.provider})"
        return f"{self.path} -c {shlex.quote(code)} || {{ echo {shlex.quote(msg)} >&2; exit 1; }}"


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


MIN_VERSION = (3, 6)  # the oldest uv still makes a venv and installs for
# Prints what a candidate interpreter is; runs under every Python from 3.6 on.
PROBE = r"""import json, os, sys
from importlib.util import find_spec
print(json.dumps({"implementation": sys.implementation.name, "version": "%d.%d.%d" % sys.version_info[:3],
                  "final": sys.version_info[3] == "final", "prefix": os.path.realpath(sys.base_prefix),
                  "modules": {m: find_spec(m) is not None for m in ("venv", "zlib", "ensurepip", "ssl", "ctypes")}}))
"""


def probe(path: str, timeout: float = 20) -> dict | None:
    """What the interpreter at `path` is (see PROBE), or None when it does not run or is unusable here:
    not CPython, a pre-release, older than MIN_VERSION, or without venv or zlib."""
    try:
        out = subprocess.run([path, "-I", "-S", "-c", PROBE], capture_output=True, text=True, timeout=timeout,
                             env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"})
        info = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None
    if not isinstance(info, dict) or info.get("implementation") != "cpython" or info.get("final") is False:
        return None  # another implementation, or a pre-release
    if not re.fullmatch(r"\d+\.\d+\.\d+", str(info.get("version"))) or minor(info["version"]) < MIN_VERSION:
        return None
    if not all(info.get("modules", {}).get(m) for m in ("venv", "zlib")):
        return None
    return info


def _hidden_by_host_mask(path: str) -> bool:
    rel = path.strip("/")
    return any(rel == d or rel.startswith(d + "/") for d in HIDDEN_DIRS)


def pyenv_roots() -> list[Path]:
    """$PYENV_ROOT, `pyenv root` and ~/.pyenv: wherever pyenv keeps its versions."""
    roots = [os.environ.get("PYENV_ROOT", "")]
    exe = shutil.which("pyenv")
    if exe:
        try:
            roots.append(subprocess.run([exe, "root"], capture_output=True, text=True, timeout=10).stdout.strip())
        except (OSError, subprocess.TimeoutExpired):
            pass
    roots.append(os.path.expanduser("~/.pyenv"))
    out: list[Path] = []
    for r in roots:
        if r and os.path.isdir(os.path.join(r, "versions")):
            p = Path(os.path.realpath(r))
            if p not in out:
                out.append(p)
    return out


def _probe_all(paths: list[str]) -> dict[str, dict | None]:
    """probe() each path, in parallel (an interpreter takes a few hundred ms to start cold)."""
    if not paths:
        return {}
    with cf.ThreadPoolExecutor(max_workers=min(8, len(paths))) as pool:
        return dict(zip(paths, pool.map(probe, paths)))


def _versions_in(directory: Path, pattern: str) -> list[str]:
    """`directory/<version>/bin/python3` for each version directory that is not an alias (a symlink)."""
    return [exe for exe in sorted(glob.glob(str(directory / pattern / "bin" / "python3")))
            if not Path(exe).parent.parent.is_symlink()]


def pyenv_interpreters(roots: list[Path] | None = None) -> list[Interpreter]:
    """Every usable `<root>/versions/*/bin/python3` (aliases, which are symlinks to versions, left out)."""
    exes = [exe for root in (pyenv_roots() if roots is None else roots) for exe in _versions_in(root / "versions", "*")]
    found = []
    for exe, info in _probe_all(exes).items():
        if info:
            vdir = Path(exe).parent.parent
            found.append(Interpreter(f"pyenv:{_slug(vdir.name)}", "host", exe, info["version"], prefix=str(vdir),
                                     origin=f"from pyenv on the host: {vdir}"))
    return found


def uv_python_dir(uv: str | None = None) -> Path | None:
    """Where uv keeps the Pythons it manages ($UV_PYTHON_INSTALL_DIR, else `uv python dir`)."""
    if os.environ.get("UV_PYTHON_INSTALL_DIR"):
        return Path(os.environ["UV_PYTHON_INSTALL_DIR"])
    try:
        out = subprocess.run([uv or uv_binary(), "python", "dir"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired, EnvyardError):
        return None
    return Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None


def uv_interpreters(uv: str | None = None, directory: Path | None = None) -> list[Interpreter]:
    """uv-managed CPython builds already installed: `<uv python dir>/cpython-*/bin/python3`. (Listing the
    directory, not `uv python list --only-installed`, which probes every interpreter on PATH: seconds.)"""
    directory = directory or uv_python_dir(uv)
    if directory is None or not directory.is_dir():
        return []
    found = []
    for exe, info in _probe_all(_versions_in(directory, "cpython-*")).items():
        if info:
            prefix = Path(exe).parent.parent
            found.append(Interpreter(f"uv:{_slug(prefix.name)}", "host", exe, info["version"], prefix=str(prefix),
                                     origin=f"from uv on the host: {prefix}"))
    return found


def system_interpreters(dirs=("/usr/bin", "/usr/local/bin")) -> list[Interpreter]:
    """/usr/bin/python3.X and /usr/local/bin/python3.X (a distribution's other versions, `make altinstall`).
    Their prefix is copied only when the host image hides it."""
    exes = [exe for d in dirs for exe in sorted(glob.glob(os.path.join(d, "python3.*")))
            if re.search(r"/python3\.\d+$", exe)]
    found = []
    for exe, info in _probe_all(exes).items():
        if info:
            where = "local-" if exe.startswith("/usr/local/") else ""
            prefix = info["prefix"] if _hidden_by_host_mask(info["prefix"]) else ""
            found.append(Interpreter(f"system:{where}python{'.'.join(info['version'].split('.')[:2])}", "host",
                                     exe, info["version"], prefix=prefix, origin=f"installed on the host: {exe}"))
    return found


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9._-]", "-", name.lower()).strip("-.") or "python"


def host_installed() -> list[Interpreter]:
    """Every usable interpreter installed on the host beside /usr/bin/python3, one per executable and provider
    name (the first pyenv root's 3.8.18 if two have one)."""
    seen = {os.path.realpath("/usr/bin/python3")}
    out = []
    with cf.ThreadPoolExecutor(max_workers=3) as pool:
        kinds = [pool.submit(f) for f in (system_interpreters, pyenv_interpreters, uv_interpreters)]
        every = [i for k in kinds for i in k.result()]
    for i in every:
        real = os.path.realpath(i.path)
        if real not in seen and i.provider not in seen:
            seen.update((real, i.provider))
            out.append(i)
    return out


def available() -> list[Interpreter]:
    """Every interpreter this machine can provide: the host's first (it needs no base build), the Debian
    suites', then the ones installed on the host (/usr/bin/python3.X, pyenv, uv)."""
    host = host_interpreter()
    return ([host] if host else []) + debian_interpreters() + host_installed()


def select(interps: list[Interpreter], want: str) -> list[Interpreter]:
    """The interpreters of release `want` (X.Y, or X.Y.Z for an exact one), marked as forced."""
    parts = want.strip().split(".")
    return [replace(i, forced=True) for i in interps if i.version.split(".")[:len(parts)] == parts]


INSTALL_NEGATIVE_TTL = 24 * 3600  # a failed `uv python install` is not tried again for this long
INSTALL_RECORD = "uv-python-install.json"


def install_with_uv(version: str, cache_dir: Path, *, uv: str | None = None, timeout: float = 300) -> Interpreter | None:
    """The last resort: `uv python install X.Y`, then the installed build as a provider, or None. Downloads come
    from GitHub (python-build-standalone); a failure is recorded in `cache_dir` and not retried for a day
    (`install_failure` says why)."""
    if not re.fullmatch(r"3\.\d+(\.\d+)?", version):
        return None
    cache_dir.mkdir(parents=True, exist_ok=True)
    record = cache_dir / INSTALL_RECORD
    try:
        failed = json.loads(record.read_text())
    except (OSError, ValueError):
        failed = {}
    failed = failed if isinstance(failed, dict) else {}
    last = failed.get(version)
    if isinstance(last, dict) and time.time() - float(last.get("at", 0)) < INSTALL_NEGATIVE_TTL:
        return None
    try:
        uv = uv or uv_binary()
        r = subprocess.run([uv, "python", "install", version], capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "UV_NO_PROGRESS": "1"})
        ok, why = r.returncode == 0, (r.stderr or r.stdout).strip()
    except (OSError, subprocess.TimeoutExpired, EnvyardError) as e:
        ok, why = False, str(e)
    if ok:
        for i in uv_interpreters(uv, uv_python_dir(uv)):
            if i.version.split(".")[:len(version.split("."))] == version.split("."):
                failed.pop(version, None)
                _write_json(record, failed)
                return i
        why = "uv installed it but does not list it"
    lines = [l for l in why.splitlines() if l.strip()]
    failed[version] = {"at": time.time(), "error": (lines[0] + (" … " + lines[-1].strip() if len(lines) > 1 else ""))[:400]
                       if lines else "failed"}
    _write_json(record, failed)
    return None


def install_failure(version: str, cache_dir: Path) -> str:
    """Why the last `uv python install` of `version` failed, if it did."""
    try:
        return str(json.loads((cache_dir / INSTALL_RECORD).read_text())[version]["error"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def _write_json(path: Path, data) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


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


@functools.lru_cache(maxsize=1)
def uv_version() -> str:
    """The version of the uv a setup base gets. It is part of the base's name: a base keeps the uv it was built
    with, and the recipes of a newer envyard may use options an older uv lacks (--exclude-newer-package)."""
    try:
        version = importlib.metadata.version("uv")
    except importlib.metadata.PackageNotFoundError:
        r = subprocess.run([uv_binary(), "--version"], capture_output=True, text=True, timeout=30)
        m = re.search(r"\d+\.\d+\S*", r.stdout)
        version = m.group(0) if m else "unknown"
    return re.sub(r"[^A-Za-z0-9_.-]", "-", version)  # what an image tag may hold


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
        names = hosts.hosts_file(yard.store.home / "cache")  # its apt and uv runs look up the archives too
        with yard.sandbox(base, network="host", workdir="/", limits=limits,
                          ro_binds={str(names): "/etc/hosts"} if names else None) as sb:
            track(sb, True)
            sb.upload(uv_binary(), f"{TOOLS_BIN}/uv")
            if interp.prefix:
                say(f"copying {interp.prefix}")
                upload_prefix(sb, Path(interp.prefix))
            for cmd in interp.base_commands():
                r = sb.exec(cmd, timeout=1800, env={"DEBIAN_FRONTEND": "noninteractive", **hosts.res_options()},
                            max_output=100_000)
                if r.exit_code != 0:
                    tail = (r.stderr or r.stdout).strip()[-400:]
                    raise SetupBaseError(f"building the {interp.provider} setup base failed (exit {r.exit_code}): {tail}",
                                         fix="check the network and the Debian archive; then run setup again")
            if interp.host_installed:  # it must make a venv inside the sandbox, not just run on the host
                r = sb.exec(f"{TOOLS_BIN}/uv venv -q --python {shlex.quote(interp.path)} /tmp/envyard-probe && "
                            "/tmp/envyard-probe/bin/python -c 'import platform; print(platform.python_version())';"
                            " s=$?; rm -rf /tmp/envyard-probe; exit $s", timeout=300, max_output=20_000)
                if r.exit_code != 0 or r.stdout.strip() != interp.version:
                    tail = (r.stderr or r.stdout).strip()[-400:]
                    raise SetupBaseError(f"{interp.label} does not make a venv inside the sandbox: {tail}",
                                         fix="check the interpreter on the host, or choose another with --python")
            snap = sb.snapshot(temporary=True)
            track(sb, False)
        config = ImageConfig(env={**snap.config.env, "LANG": "C.UTF-8"}, workdir="/",
                             provenance={"provider": "setup-base", "interpreter": interp.label})
        image = yard.store.put_image(name, snap.layers, config)
        yard.store.remove_image(snap.name)
        return image


# Left out of a copied prefix: packages installed into the interpreter itself (a venv does not see them, and
# pyenv's can be gigabytes) and CPython's own test suite (Debian's python3 leaves it out too).
PREFIX_SKIP = re.compile(r"lib/python3\.\d+/(site-packages|test)")
PREFIX_DESCEND = re.compile(r"lib|lib/python3\.\d+")  # the directories above PREFIX_SKIP's


def upload_prefix(sb, prefix: Path, rel: str = "") -> None:
    """Copy an interpreter's prefix into the sandbox at the same path, PREFIX_SKIP's directories left empty."""
    here = prefix / rel if rel else prefix
    sb.exec(["mkdir", "-p", str(here)])
    for entry in sorted(os.listdir(here)):
        sub = f"{rel}/{entry}" if rel else entry
        src = here / entry
        if src.is_symlink():
            sb.exec(["ln", "-sfn", os.readlink(src), str(src)])
        elif PREFIX_SKIP.fullmatch(sub):
            sb.exec(["mkdir", "-p", str(src)])
        elif src.is_dir() and PREFIX_DESCEND.fullmatch(sub):
            upload_prefix(sb, prefix, sub)
        else:
            sb.upload(src, str(src))


class SetupBaseError(EnvyardError):
    """A provider's setup base could not be built (network, archive): not the project's fault."""

    exit_code = 6
