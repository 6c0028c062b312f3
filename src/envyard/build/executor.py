"""Running a Dockerfile: stages in order, each instruction applied to the stage's image and config.

RUN runs in a sandbox over the image so far (network on, the host's CA bundle bound in for the step only, the
image's env/workdir/user/shell applied as Docker applies them) and its changes become one layer. COPY, ADD and
a WORKDIR that must be made write their layer host-side (layer.py). Every other instruction changes only the
config. Each step that makes a layer is looked up in the build cache first (cache.py).
"""

from __future__ import annotations

import copy
import hashlib
import os
import platform
import posixpath
import re
import shutil
import ssl
import stat
import subprocess
import tarfile
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import diskspace, tls
from ..errors import BadInput, ImageNotFound
from ..runtime.holder import ENV_NAME
from ..store import Image, ImageConfig, parse_image_name
from . import cache
from .context import MAGIC, HostTree, ImageTree, clean_source, digest, glob
from .errors import BuildError, BuildTimeout, ContextError, DockerfileError, RunFailed
from .ignore import Ignore
from .layer import LayerWriter, layer_from_upper
from .parse import HEREDOC, Dockerfile, Instruction, Stage, parse
from .rootfs import Entry, LayerView, User, chown_ids, resolve_user
from .words import expand, expand_vars, expand_words

Progress = Callable[[dict], None]

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEFAULT_SHELL = ["/bin/sh", "-c"]
# Docker passes these through --build-arg to RUN without an ARG line, and keeps them out of the cache key.
PROXY_ARGS = {"HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "ALL_PROXY",
              "http_proxy", "https_proxy", "ftp_proxy", "no_proxy", "all_proxy"}
BUILD_DISK = "64G"  # what one RUN may write, where disk limits work (as `envyard setup` steps)
# Mount points bubblewrap makes in a sandbox's upper dir when the image lacks them: not the step's work.
MOUNT_POINTS = ["/.envyard", "/proc", "/sys", "/dev", "/etc/resolv.conf"]
# Where tools look for a CA bundle: all pointed at the host's for RUN steps (never recorded in the image).
TRUST_VARS = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "NODE_EXTRA_CA_CERTS",
              "GIT_SSL_CAINFO")
OUTPUT_TAIL = 4000  # characters of a failing RUN's output kept for the error
MAX_URL_BYTES = 4 << 30


def host_platform() -> str:
    machine = platform.machine()
    return "linux/" + {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def platform_args() -> dict[str, str]:
    """BuildKit's predefined platform ARGs; the build and target platforms are both this machine's."""
    plat = host_platform()
    os_, arch = plat.split("/")
    out = {}
    for prefix in ("TARGET", "BUILD"):
        out |= {f"{prefix}PLATFORM": plat, f"{prefix}OS": os_, f"{prefix}ARCH": arch, f"{prefix}VARIANT": ""}
    return out


@dataclass
class State:
    """A stage's image so far."""

    layers: list[str]
    config: ImageConfig
    shell: list[str]
    args: dict[str, str | None] = field(default_factory=dict)  # ARGs declared in the stage
    cmd_inherited: bool = True  # CMD came from the base image: ENTRYPOINT then resets it, as Docker does
    docker: dict = field(default_factory=dict)  # what the config has no field for: volumes, onbuild, author
    base: str = ""


class Builder:
    def __init__(self, yard, context, *, dockerfile, tag, build_args, target, no_cache, on_progress, timeout):
        self.yard = yard
        self.store = yard.store
        self.context = Path(context).resolve()
        if not self.context.is_dir():
            raise ContextError(f"build context {context} is not a directory", fix="give the directory to build from")
        self.dockerfile = Path(dockerfile).resolve() if dockerfile else self.context / "Dockerfile"
        if not self.dockerfile.is_file():
            raise ContextError(f"no Dockerfile at {self.dockerfile}", fix="give its path with -f / dockerfile=")
        self.tag = parse_image_name(tag)
        self.build_args = dict(build_args or {})
        for k, v in self.build_args.items():
            if not isinstance(k, str) or not ENV_NAME.match(k) or not isinstance(v, str) or "\0" in v:
                raise BadInput(f"bad build arg {k!r}", fix="give NAME=VALUE with a name of letters, digits and _")
        self.target = target
        self.no_cache = no_cache
        self.on_progress = on_progress
        if timeout is not None and not (isinstance(timeout, (int, float)) and 0 < timeout <= 1e6):
            raise BadInput(f"build timeout must be a positive number of seconds, not {timeout!r}")
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.timeout = timeout
        self.states: dict[int, State] = {}
        self.used_args: set[str] = set()
        self.n = 0
        self.total = 0
        self.cached = 0
        self._tmp: Path | None = None
        self._tree = HostTree(self.context, Ignore.load(self.context, self.dockerfile))

    # ---- plumbing -------------------------------------------------------------------------------------------

    def emit(self, **event) -> None:
        if self.on_progress is not None:
            self.on_progress(event)

    def remaining(self) -> float | None:
        if self.deadline is None:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise BuildTimeout(f"the build ran past its {self.timeout:g} s limit",
                               fix="raise the timeout, or make the slow step faster")
        return left

    def tmp(self) -> Path:
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="envyard-build-"))
        return self._tmp

    def view(self, layers: list[str]) -> LayerView:
        return LayerView(list(reversed(self.store.layer_paths(layers))))

    # ---- the whole build ------------------------------------------------------------------------------------

    def build(self) -> Image:
        started = time.monotonic()
        try:
            self.df = df = parse(self.dockerfile.read_text(errors="replace"))
            self.global_env = self._global_args(df.global_args)
            target = df.stages[-1]
            if self.target is not None:
                target = df.stage(self.target)
                if target is None or self.target.isdigit():
                    names = ", ".join(s.name for s in df.stages if s.name) or "none"
                    raise DockerfileError(f"no stage named {self.target!r} (stages: {names})",
                                          fix="give --target one of the FROM ... AS NAME names")
            stages = self._needed(df, target)
            self.total = sum(1 + len(s.instructions) for s in stages)
            for stage in stages:
                self.states[stage.index] = self._stage(df, stage)
            final = self.states[target.index]
            config = copy.deepcopy(final.config)
            config.provenance = {
                "provider": "build", "dockerfile": str(self.dockerfile), "context": str(self.context),
                "target": target.name or str(target.index), "base": final.base, "shell": final.shell,
                "build_args": sorted(self.build_args), "steps": self.total, "cached_steps": self.cached,
                "seconds": round(time.monotonic() - started, 3), **final.docker,
            }
            unused = sorted(set(self.build_args) - self.used_args - PROXY_ARGS)
            if unused:
                self.emit(event="warning", message=f"build args not used by any ARG: {', '.join(unused)}")
            return self.store.put_image(self.tag, final.layers, config)
        finally:
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)

    def _global_args(self, insts: list[Instruction]) -> dict[str, str]:
        scope = platform_args()
        for inst in insts:
            for name, value in self._arg_values(inst, scope, scope):
                if value is not None:
                    scope[name] = value
        return scope

    def _arg_values(self, inst: Instruction, env: dict[str, str], inherited: dict[str, str]):
        for word in inst.args:
            name, eq, default = word.partition("=")
            if not ENV_NAME.match(name):
                raise DockerfileError(f"ARG {word}: {name!r} is not a valid name", line=inst.line,
                                      fix="use letters, digits and _")
            if name in self.build_args:
                self.used_args.add(name)
                yield name, self.build_args[name]
            elif eq:
                yield name, expand(default, env, inst.line)
            else:
                yield name, inherited.get(name)

    def _needed(self, df: Dockerfile, target: Stage) -> list[Stage]:
        """The target and the stages it reads from (FROM a stage, COPY --from), as BuildKit builds only those."""
        need = {target.index}
        for s in reversed(df.stages[:target.index + 1]):
            if s.index not in need:
                continue
            refs = [expand(s.base, self.global_env, s.line)]
            refs += [f[len("--from="):] for i in s.instructions for f in i.flags if f.startswith("--from=")]
            for ref in refs:
                if "$" in ref:  # decided only while the stage runs: build everything before it
                    need.update(range(s.index))
                    continue
                dep = df.stage(ref)
                if dep is not None and dep.index < s.index:
                    need.add(dep.index)
        return [s for s in df.stages if s.index in need]

    # ---- one stage ------------------------------------------------------------------------------------------

    def _step(self, stage: Stage, inst: Instruction | None) -> float:
        self.n += 1
        text = (inst.original if inst else f"FROM {stage.base}").split("\n")[0].strip()
        self.emit(event="step", n=self.n, total=self.total, stage=stage.name or str(stage.index),
                  line=inst.line if inst else stage.line, instruction=text[:200])
        return time.monotonic()

    def _done(self, started: float, made: str | None = None) -> None:
        """`made`: what a step that touches files did ("layer", "cached", "none"); None for config-only steps."""
        self.cached += made == "cached"
        self.emit(event="done", n=self.n, seconds=round(time.monotonic() - started, 3), cached=made == "cached",
                  layer=made == "layer", touches_files=made is not None)

    def _stage(self, df: Dockerfile, stage: Stage) -> State:
        started = self._step(stage, None)
        base = expand(stage.base, self.global_env, stage.line)
        if stage.platform is not None:
            wanted = expand(stage.platform, self.global_env, stage.line)
            if wanted.rstrip("/") not in (host_platform(), host_platform().replace("amd64", "x86_64")):
                raise DockerfileError(f"FROM --platform={wanted}: envyard builds for this machine only "
                                      f"({host_platform()})", line=stage.line,
                                      fix=f"drop --platform or use --platform={host_platform()}")
        st = self._from(df, stage, base)
        self._done(started)
        for inst in stage.instructions:
            self.remaining()
            started = self._step(stage, inst)
            self._done(started, self._dispatch(stage, st, inst))
        return st

    def _from(self, df: Dockerfile, stage: Stage, base: str) -> State:
        if not base:
            raise DockerfileError("FROM names no image", line=stage.line, fix="e.g. FROM debian:bookworm")
        if base.lower() == "scratch":
            return State([], ImageConfig(env={"PATH": DEFAULT_PATH}, workdir="/"), list(DEFAULT_SHELL),
                         base="scratch")
        dep = df.stage(base)
        if dep is not None and dep.index < stage.index and not base.isdigit():
            prev = self.states[dep.index]
            return State(list(prev.layers), copy.deepcopy(prev.config), list(prev.shell),
                         docker=copy.deepcopy(prev.docker), base=prev.base)
        img = self._image(base, stage.line)
        config = copy.deepcopy(img.config)
        prov = config.provenance
        if prov.get("onbuild"):
            raise DockerfileError(f"{base} has ONBUILD triggers, which envyard records but does not run",
                                  line=stage.line, fix="copy the triggers into this Dockerfile instead")
        config.env.setdefault("PATH", DEFAULT_PATH)
        shell = prov.get("shell") if prov.get("provider") == "build" else None
        docker = {k: prov[k] for k in ("volumes",) if k in prov and prov.get("provider") == "build"}
        return State(list(img.layers), config, list(shell or [config.shell or "/bin/sh", "-c"]), docker=docker,
                     base=img.name)

    def _image(self, ref: str, line: int) -> Image:
        """An image from the store by that name, else a registry pull (envyard.images, when present)."""
        if ref in ("host", "host:latest"):
            return self.yard.image("host")
        try:
            name = parse_image_name(ref)
        except BadInput:
            name = None
        if name is not None and self.store.has_image(name):
            return self.yard.image(name)
        try:
            from ..images import pull_image  # written alongside: OCI registry pulls
        except ImportError:
            raise ImageNotFound(f"Dockerfile line {line}: no image {ref} in the store, and this envyard cannot "
                                "pull from registries", fix=f"pull or import it first (`envyard base pull`, "
                                f"`envyard base import FILE --name {ref}`), or build it with `envyard build -t "
                                f"{ref}`") from None
        announced: set[str] = set()

        def report(p) -> None:  # one line per step of the pull, not one per chunk downloaded
            if getattr(p, "phase", None) == "download":
                if p.digest in announced:
                    return
                announced.add(p.digest)
            self.emit(event="output", n=self.n, stream="stderr", text=p + "\n")

        return pull_image(self.yard, ref, on_progress=report)

    # ---- instructions ---------------------------------------------------------------------------------------

    def _env(self, st: State) -> dict[str, str]:
        """What $VAR means in an instruction: the stage's ARGs, overridden by ENV (Docker's rule)."""
        return {**{k: v for k, v in st.args.items() if v is not None}, **st.config.env}

    def _dispatch(self, stage: Stage, st: State, inst: Instruction) -> str | None:
        """Apply one instruction; returns "layer"/"cached"/"none" for steps that touch files, None otherwise."""
        kw, env, line = inst.keyword, self._env(st), inst.line
        if kw not in ("RUN", "COPY", "ADD", "HEALTHCHECK", "FROM") and inst.flags:
            raise DockerfileError(f"{kw} takes no flags ({' '.join(inst.flags)})", line=line, fix="remove them")
        if kw == "ARG":
            inherited = {**platform_args(), **self.global_env}
            for name, value in list(self._arg_values(inst, env, inherited)):
                st.args[name] = value
        elif kw in ("ENV", "LABEL"):
            target = st.config.env if kw == "ENV" else st.config.labels
            args = inst.args
            if len(args) % 2:
                raise DockerfileError(f"{kw} needs KEY=VALUE pairs", line=line, fix=f"e.g. {kw} KEY=value")
            for k, v in zip(args[::2], args[1::2]):
                key = expand(k, env, line)
                if not key or (kw == "ENV" and "=" in key):
                    raise DockerfileError(f"{kw}: bad name {k!r}", line=line, fix=f"e.g. {kw} KEY=value")
                target[key] = expand(v, env, line)
        elif kw == "WORKDIR":
            path = expand(inst.args[0] if inst.args else "", env, line)
            if not path:
                raise DockerfileError("WORKDIR needs a path", line=line, fix="e.g. WORKDIR /app")
            st.config.workdir = posixpath.normpath(posixpath.join(st.config.workdir or "/", path)).replace("//", "/")
            return self._workdir(st, inst)
        elif kw == "USER":
            user = expand(inst.args[0] if inst.args else "", env, line)
            if not user:
                raise DockerfileError("USER needs a user", line=line, fix="e.g. USER app or USER 1000:1000")
            st.config.user = user
        elif kw == "SHELL":
            if not inst.json or not inst.args:
                raise DockerfileError("SHELL takes a JSON array", line=line, fix='e.g. SHELL ["/bin/bash", "-c"]')
            st.shell = list(inst.args)
            st.config.shell = st.shell[0]
        elif kw == "EXPOSE":
            for port in expand_words(" ".join(inst.args), env, line):
                st.config.exposed_ports = _add_unique(st.config.exposed_ports, _port(port, line))
        elif kw == "VOLUME":
            paths = list(inst.args) if inst.json else expand_words(" ".join(inst.args), env, line)
            for p in paths:
                st.docker["volumes"] = _add_unique(st.docker.get("volumes", []), p)
        elif kw == "STOPSIGNAL":
            sig = expand(inst.args[0] if inst.args else "", env, line)
            if not re.fullmatch(r"(SIG)?[A-Z][A-Z0-9+-]*|\d+", sig):
                raise DockerfileError(f"STOPSIGNAL {sig!r} is not a signal", line=line, fix="e.g. STOPSIGNAL SIGTERM")
            st.config.stop_signal = sig
        elif kw == "HEALTHCHECK":
            st.config.healthcheck = _healthcheck(inst)
        elif kw in ("CMD", "ENTRYPOINT"):
            value = list(inst.args) if inst.json else [*st.shell, " ".join(inst.args)]
            if kw == "CMD":
                st.config.cmd, st.cmd_inherited = value, False
            else:
                st.config.entrypoint = value
                if st.cmd_inherited:
                    st.config.cmd = None
        elif kw == "ONBUILD":
            if inst.sub in ("ONBUILD", "FROM", "MAINTAINER"):
                raise DockerfileError(f"ONBUILD {inst.sub} is not allowed", line=line, fix="remove it")
            trigger = inst.original.split(None, 1)[1] if " " in inst.original.strip() else ""
            st.docker["onbuild"] = [*st.docker.get("onbuild", []), trigger]
        elif kw == "MAINTAINER":
            st.docker["author"] = " ".join(inst.args)
        elif kw == "RUN":
            return self._run(st, inst)
        elif kw in ("COPY", "ADD"):
            return self._copy(st, inst)
        return None

    # ---- steps that make layers -----------------------------------------------------------------------------

    def _cached(self, st: State, key: str) -> bool:
        if self.no_cache:
            return False
        hit = cache.get(self.store, key)
        if hit is None:
            return False
        cache.put(self.store, key, hit.layers, hit.config)  # refresh its time: prune keeps what is used
        st.layers = list(hit.layers)
        self.emit(event="cached", n=self.n)
        return True

    def _commit(self, st: State, key: str, built: Path | None, origin: dict) -> str:
        """Seal `built` (None: the step changed nothing) as the stage's next layer and record it in the cache."""
        if built is None:
            cache.put(self.store, key, st.layers, st.config)
            return "none"
        layer = self.store.seal_layer(built, {"build": origin})
        try:
            cache.put(self.store, key, [*st.layers, layer.id], st.config)
        except BaseException:
            self.store.remove_layer(layer.id)
            raise
        st.layers = [*st.layers, layer.id]
        return "layer"

    def _write_layer(self, st: State, fill: Callable[[LayerWriter], None]) -> Path | None:
        """A new layer directory filled host-side by `fill`; None when it stayed empty."""
        dest = self.store.new_layer_dir()
        try:
            writer = LayerWriter(dest, list(reversed(self.store.layer_paths(st.layers))))
            fill(writer)
            if writer.empty():
                self.store.discard_dir(dest)
                return None
            return dest
        except BaseException:
            self.store.discard_dir(dest)
            raise

    def _user(self, st: State, view: LayerView, line: int) -> User | None:
        """The USER to run as, or None for root."""
        if st.config.user in ("", "root", "0", "root:root", "0:0"):
            return None
        return resolve_user(view, st.config.user, line=line)

    def _workdir(self, st: State, inst: Instruction) -> str:
        """WORKDIR makes its directory when the image lacks it (owned by the USER, as BuildKit does)."""
        path = st.config.workdir
        view = self.view(st.layers)
        entry = view.get(path)
        if entry is not None and entry.is_dir:
            return "none"
        user = self._user(st, view, inst.line)
        owner = (user.uid, user.gid) if user else (0, 0)
        key = cache.key(st.layers, {"op": "WORKDIR", "path": path, "owner": owner})
        if self._cached(st, key):
            return "cached"
        built = self._write_layer(st, lambda w: w.ensure_dir(path, owner))
        return self._commit(st, key, built, {"line": inst.line, "op": "WORKDIR"})

    # RUN ----------------------------------------------------------------------------------------------------

    def _run_command(self, st: State, inst: Instruction) -> tuple[list[str], str | None]:
        """(argv, stdin) of a RUN: the exec form as is; the shell form through SHELL; heredocs as BuildKit runs
        them (a lone heredoc is the script: run by its #! line, else by the shell)."""
        if inst.json:
            return list(inst.args), None
        text = inst.args[0] if inst.args else ""
        if not text.strip():
            raise DockerfileError("RUN needs a command", line=inst.line, fix="e.g. RUN make")
        if not inst.heredocs:
            return [*st.shell, text], None
        if len(inst.heredocs) == 1 and HEREDOC.fullmatch(text.strip()):
            body = inst.heredocs[0].text()
            if body.startswith("#!"):
                interpreter = body.split("\n", 1)[0][2:].split()
                return [*interpreter, "/dev/stdin"], body
            return [*st.shell, body], None
        return [*st.shell, text + "\n" + "".join(h.content + h.name + "\n" for h in inst.heredocs)], None

    def _run_flags(self, inst: Instruction) -> str:
        flags = inst.flag_values({"mount": True, "network": True, "security": True})
        for mount in flags.get("mount", []):
            opts = dict(o.partition("=")[::2] for o in mount.split(","))
            kind = opts.get("type", "bind")
            if kind != "cache":
                raise DockerfileError(f"RUN --mount=type={kind} is not supported (type=cache runs as a plain RUN)",
                                      line=inst.line, fix="COPY the files in an earlier step instead")
        network = flags.get("network", ["default"])[-1]
        if network not in ("default", "host", "none"):
            raise DockerfileError(f"RUN --network={network} is not supported", line=inst.line,
                                  fix="use --network=default, host or none")
        if flags.get("security", ["sandbox"])[-1] != "sandbox":
            raise DockerfileError("RUN --security=insecure is not supported", line=inst.line, fix="remove the flag")
        return "none" if network == "none" else "host"

    def _run(self, st: State, inst: Instruction) -> str:
        network = self._run_flags(inst)
        argv, stdin = self._run_command(st, inst)
        declared = {k: v for k, v in st.args.items() if v is not None and k not in st.config.env}
        key = cache.key(st.layers, {"op": "RUN", "argv": argv, "stdin": stdin, "env": st.config.env,
                                    "args": declared, "workdir": st.config.workdir, "user": st.config.user,
                                    "network": network})
        if self._cached(st, key):
            return "cached"
        view = self.view(st.layers)
        if view.get("/bin/sh") is None:
            raise BuildError(f"Dockerfile line {inst.line}: RUN needs /bin/sh in the image (envyard's sandboxes "
                             "start one), and this image has none", fix="build FROM an image with a shell, or COPY "
                             "a static shell to /bin/sh first")
        env = {**declared, **{k: v for k, v in self.build_args.items() if k in PROXY_ARGS}}
        user = self._user(st, view, inst.line)
        if user is not None:
            argv = self._as_user(st, view, user, argv, inst.line)
            if "HOME" not in st.config.env:
                env["HOME"] = user.home
        ro_binds, trust_env = _host_trust()
        env.update({k: v for k, v in trust_env.items() if k not in st.config.env and k not in env})
        limits = {"disk": BUILD_DISK} if self.yard.can_limit_disk else None
        tail: deque[str] = deque()
        size = [0]

        def output(stream: str, chunk: bytes) -> None:
            text = chunk.decode(errors="replace")
            tail.append(text)
            size[0] += len(text)
            while size[0] > OUTPUT_TAIL and len(tail) > 1:
                size[0] -= len(tail.popleft())
            self.emit(event="output", n=self.n, stream=stream, text=text)

        image = Image(f"build/{self.tag}", list(st.layers), st.config, time.time())
        with self.yard.sandbox(image, network=network, workdir=st.config.workdir, env=env, ro_binds=ro_binds,
                               limits=limits) as sb:
            r = sb.exec(argv, stdin=stdin, timeout=self.remaining(), on_output=output, max_output=1 << 16,
                        max_spill=0)
            if r.timed_out:
                raise BuildTimeout(f"Dockerfile line {inst.line}: the build ran past its {self.timeout:g} s limit "
                                   "during this RUN", fix="raise the timeout, or make the step faster")
            if r.exit_code != 0:
                out = "".join(tail)
                full = diskspace.diagnose(self.store.home, out, limits and BUILD_DISK)
                if full is not None:
                    raise full  # the machine's disk (or the step's cap), not the Dockerfile's command
                last = next((ln for ln in reversed(out.splitlines()) if ln.strip()), "no output")
                raise RunFailed(f"step {self.n}/{self.total}, Dockerfile line {inst.line}: "
                                f"`{inst.original.splitlines()[0][:120]}` exited {r.exit_code}: {last.strip()[:200]}",
                                fix="fix the command (its output is above), then build again: the steps "
                                    "before it come from the cache",
                                step=inst.original, line=inst.line, returncode=r.exit_code, output=out)
            sb.stop()
            built = layer_from_upper(self.store, sb.upper_dir(), MOUNT_POINTS + list(ro_binds.values()), view)
        try:
            return self._commit(st, key, built, {"line": inst.line, "op": "RUN"})
        except BaseException:
            if built is not None and built.exists():
                self.store.discard_dir(built)
            raise

    def _as_user(self, st: State, view: LayerView, user: User, argv: list[str], line: int) -> list[str]:
        """Wrap `argv` to run as `user`: the image's setpriv (util-linux), else its runuser."""
        dirs = (st.config.env.get("PATH") or DEFAULT_PATH).split(":")

        def find(tool: str) -> str | None:
            for d in dirs:
                entry = view.get(f"{d}/{tool}")
                if entry is not None and entry.is_file and entry.st.st_mode & 0o111:
                    return f"{d}/{tool}"
            return None

        setpriv = find("setpriv")
        if setpriv:
            groups = "--init-groups" if user.name else "--clear-groups"
            return [setpriv, f"--reuid={user.uid}", f"--regid={user.gid}", groups, "--", *argv]
        runuser = find("runuser")
        if runuser and user.name and ":" not in st.config.user:
            return [runuser, "-u", user.name, "--", *argv]
        raise BuildError(f"Dockerfile line {line}: cannot run as USER {st.config.user}: the image has neither "
                         "setpriv nor runuser (util-linux) to switch users with",
                         fix="install util-linux in an earlier RUN (before USER), or run this step as root")

    # COPY / ADD ---------------------------------------------------------------------------------------------

    def _copy(self, st: State, inst: Instruction) -> str:
        add = inst.keyword == "ADD"
        allowed = {"chown": True, "chmod": True, "link": False}
        allowed |= {"checksum": True} if add else {"from": True}
        flags = inst.flag_values(allowed)
        env, line = self._env(st), inst.line
        if len(inst.args) < 2:
            raise DockerfileError(f"{inst.keyword} needs a source and a destination", line=line,
                                  fix=f"e.g. {inst.keyword} src/ /app/")
        raw_dest = expand(inst.args[-1], env, line)
        dest = posixpath.normpath(posixpath.join(st.config.workdir or "/", raw_dest)).replace("//", "/")
        dir_hint = raw_dest.endswith("/") or raw_dest in (".", "") or raw_dest.endswith("/.")
        if len(inst.args) > 2 and not dir_hint:
            raise DockerfileError(f"with several sources, the destination must be a directory ending in /: "
                                  f"{raw_dest!r}", line=line, fix=f"write {raw_dest}/")
        chown = expand(flags["chown"][-1], env, line) if "chown" in flags else None
        chmod = _chmod(expand(flags["chmod"][-1], env, line), line) if "chmod" in flags else None
        tree, origin = self._tree, "context"
        if "from" in flags:
            tree, origin = self._from_tree(expand(flags["from"][-1], env, line), line)
        sources = self._sources(inst, tree, env, add, flags.get("checksum", [None])[-1])
        h = hashlib.sha256()
        for src in sources:
            h.update(f"{src.kind}\0{src.path}\0".encode())
            if src.kind == "tree":
                digest(tree, src.real, src.entry, h)
            else:
                h.update(hashlib.sha256(src.data if src.data is not None else b"").digest())
                h.update(src.digest.encode())
        key = cache.key(st.layers, {"op": inst.keyword, "dest": dest, "dir": dir_hint, "chown": chown, "chmod": chmod,
                                    "from": origin, "sources": h.hexdigest()})
        if self._cached(st, key):
            return "cached"

        def fill(w: LayerWriter) -> None:
            fixed = chown_ids(w.view, chown, line) if chown else None
            as_dir = dir_hint or len(sources) > 1 or w.exists_as_dir(dest)
            for src in sources:
                self._place(w, tree, src, dest, as_dir, fixed, chmod, add)

        built = self._write_layer(st, fill)
        return self._commit(st, key, built, {"line": line, "op": inst.keyword})

    def _from_tree(self, ref: str, line: int) -> tuple[ImageTree, list[str]]:
        """COPY --from: an earlier stage (by name or index), else an image."""
        dep = self.df.stage(ref)
        if dep is not None:
            if dep.index not in self.states:
                raise DockerfileError(f"COPY --from={ref}: that stage is not built before this step", line=line,
                                      fix="copy from an earlier stage")
            layers = self.states[dep.index].layers
        else:
            layers = self._image(ref, line).layers
        return ImageTree(self.view(layers)), list(layers)

    def _sources(self, inst: Instruction, tree, env: dict[str, str], add: bool, checksum: str | None) -> list["Source"]:
        out: list[Source] = []
        for word in inst.args[:-1]:
            doc = inst.heredoc_named(word)
            if doc is not None:
                body = doc.text() if doc.quoted else expand_vars(doc.text(), env, inst.line)
                out.append(Source("heredoc", doc.name, data=body.encode()))
                continue
            src = expand(word, env, inst.line)
            if add and re.match(r"^https?://", src):
                out.append(self._download(src, checksum, inst.line))
                continue
            if add and (src.startswith("git@") or re.match(r"^[a-z]+://.*\.git(#.*)?$", src)):
                raise DockerfileError(f"ADD of a git repository ({src}) is not supported", line=inst.line,
                                      fix="RUN git clone ... instead")
            if checksum is not None:
                raise DockerfileError("ADD --checksum applies to URLs only", line=inst.line, fix="remove it")
            path = clean_source(src, inst.line)
            matches = glob(tree, path) if MAGIC & set(path) else [path]
            if not matches:
                raise ContextError(f"Dockerfile line {inst.line}: no files match {src}",
                                   fix="check the pattern against the context (and .dockerignore)")
            for m in matches:
                real, entry = tree.lookup(m, follow=True)
                if entry is None:
                    raise self._missing(src, tree, inst.line)
                out.append(Source("tree", m, real=real, entry=entry))
        return out

    def _missing(self, src: str, tree, line: int) -> ContextError:
        where = "the build context" if tree is self._tree else "the source image"
        why = ""
        if tree is self._tree:
            rel = clean_source(src, line).lstrip("/")
            if rel and (self.context / rel).exists() and tree.ignore.excluded(rel):
                why = " (it is excluded by .dockerignore)"
        return ContextError(f"Dockerfile line {line}: {src} is not in {where}{why}",
                            fix="check the path (relative to the context directory), or the .dockerignore")

    def _download(self, url: str, checksum: str | None, line: int) -> "Source":
        """ADD of a URL: fetched by the builder (with the host's CA bundle), digested, checked."""
        import httpx

        dest = self.tmp() / f"url-{hashlib.sha256(url.encode()).hexdigest()[:16]}"
        h = hashlib.sha256()
        try:
            with httpx.stream("GET", url, follow_redirects=True, timeout=min(self.remaining() or 600, 600),
                              verify=_ssl_context()) as r:
                if r.status_code != 200:
                    raise BuildError(f"Dockerfile line {line}: ADD {url}: HTTP {r.status_code}",
                                     fix="check the URL")
                size = 0
                with open(dest, "wb") as f:
                    for chunk in r.iter_bytes(1 << 20):
                        size += len(chunk)
                        if size > MAX_URL_BYTES:
                            raise BuildError(f"ADD {url}: larger than {MAX_URL_BYTES >> 30} GiB",
                                             fix="download it in a RUN step")
                        h.update(chunk)
                        f.write(chunk)
                modified = r.headers.get("last-modified")
        except httpx.HTTPError as e:
            raise BuildError(f"Dockerfile line {line}: ADD {url}: {e}", fix="check the URL and the network") from None
        got = "sha256:" + h.hexdigest()
        if checksum is not None and checksum != got:
            raise BuildError(f"Dockerfile line {line}: ADD {url}: checksum {got} does not match --checksum={checksum}",
                             fix="update --checksum, or check where the file comes from")
        mtime = None
        if modified:
            from email.utils import parsedate_to_datetime

            try:
                mtime = int(parsedate_to_datetime(modified).timestamp() * 1e9)
            except (TypeError, ValueError):
                pass
        name = posixpath.basename(httpx.URL(url).path.rstrip("/")) or "index.html"
        return Source("url", url, host=dest, digest=got, name=name, mtime=mtime)

    def _place(self, w: LayerWriter, tree, src: "Source", dest: str, as_dir: bool, fixed: tuple[int, int] | None,
               chmod: int | None, add: bool) -> None:
        keeps = tree.keeps_owner

        def owner_of(st: os.stat_result, keep: bool = keeps) -> tuple[int, int]:
            return fixed or ((st.st_uid, st.st_gid) if keep else (0, 0))

        def mode_of(st: os.stat_result) -> int:
            return chmod if chmod is not None else stat.S_IMODE(st.st_mode)

        made = fixed or (0, 0)
        if src.kind == "heredoc" or src.kind == "url":
            name = src.name if src.kind == "url" else src.path
            if as_dir:
                parent = w.ensure_dir(dest, made)
            else:
                parent, name = w.ensure_dir(posixpath.dirname(dest), made), posixpath.basename(dest)
            mode = chmod if chmod is not None else (0o600 if src.kind == "url" else 0o644)
            if src.kind == "url":
                w.put_file(parent, name, src.host, made, mode, src.mtime)
            else:
                w.put_bytes(parent, name, src.data, made, mode)
            return
        entry = src.entry
        if entry.is_dir:
            target = w.ensure_dir(dest, made)
            w.copy_contents(tree, src.real, target, owner_of, mode_of)
        elif add and entry.is_file and _is_tar(entry.host):
            target = w.ensure_dir(dest, made)
            unpacked = self._unpack(entry.host)
            try:
                w.copy_contents(HostTree(unpacked), "/", target, lambda st: owner_of(st, True), mode_of)
            finally:
                shutil.rmtree(unpacked, ignore_errors=True)
        else:
            if as_dir:
                parent, name = w.ensure_dir(dest, made), posixpath.basename(src.path)
            else:
                parent, name = w.ensure_dir(posixpath.dirname(dest), made), posixpath.basename(dest)
            w.copy_entry(tree, src.real, entry, parent, name, owner_of, mode_of)

    def _unpack(self, archive: Path) -> Path:
        """ADD of a local tar: GNU tar unpacks it (as root: owners and modes kept) into a scratch directory. It
        strips leading '/', refuses '..' members and writes links that point out only after everything else,
        so nothing lands outside; device nodes are then left out by the copy."""
        dest = Path(tempfile.mkdtemp(prefix="add-", dir=self.tmp()))
        done = subprocess.run(["tar", "--numeric-owner", "-xpf", str(archive), "-C", str(dest)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise ContextError(f"ADD: cannot unpack {archive.name}: {done.stderr.strip()[-300:]}",
                               fix="check the archive (tar, tar.gz, tar.bz2 or tar.xz)")
        return dest


@dataclass
class Source:
    kind: str  # tree | heredoc | url
    path: str  # the source as matched (tree), the heredoc's name, the URL
    real: str = ""
    entry: Entry | None = None
    data: bytes | None = None
    host: Path | None = None
    digest: str = ""
    name: str = ""
    mtime: int | None = None


# ---- helpers --------------------------------------------------------------------------------------------------


def _host_trust() -> tuple[dict[str, str], dict[str, str]]:
    """`envyard setup`'s binding of the machine's CA bundle, with every usual variable pointed at it."""
    from ..setup.search import host_trust

    ro, env = host_trust()
    if not ro:
        return {}, {}
    inside = next(iter(ro.values()))
    return ro, {name: inside for name in TRUST_VARS} | env


def _ssl_context() -> ssl.SSLContext:
    """The machine's CA bundle for ADD's downloads (this machine may intercept TLS), else Python's default."""
    return ssl.create_default_context(cafile=tls.ca_bundle())


def _is_tar(path: Path) -> bool:
    """Docker unpacks a local ADD source that is a tar archive, plain or compressed (gzip, bzip2, xz)."""
    try:
        return tarfile.is_tarfile(path)
    except (OSError, EOFError, tarfile.TarError):
        return False


def _add_unique(items: list[str], item: str) -> list[str]:
    return items if item in items else [*items, item]


def _port(spec: str, line: int) -> str:
    m = re.fullmatch(r"(\d+(?:-\d+)?)(?:/(tcp|udp|sctp))?", spec.lower())
    if not m:
        raise DockerfileError(f"EXPOSE {spec!r} is not a port", line=line, fix="e.g. EXPOSE 80 or EXPOSE 53/udp")
    return f"{m.group(1)}/{m.group(2) or 'tcp'}"


def _chmod(spec: str, line: int) -> int:
    if not re.fullmatch(r"[0-7]{3,4}", spec):
        raise DockerfileError(f"--chmod={spec}: give an octal mode", line=line, fix="e.g. --chmod=755")
    return int(spec, 8)


_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def _duration(text: str, line: int) -> int:
    """A Go duration ("30s", "1m30s", "500ms") in nanoseconds, as Docker records them."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise DockerfileError(f"{text!r} is not a duration", line=line, fix="e.g. 30s, 1m30s, 500ms")
    return int(sum(float(n) * _UNITS[u] for n, u in parts))


def _healthcheck(inst: Instruction) -> dict:
    args = inst.args
    if args and args[0].upper() == "NONE":
        if len(args) > 1 or inst.flags:
            raise DockerfileError("HEALTHCHECK NONE takes nothing else", line=inst.line, fix="write HEALTHCHECK NONE")
        return {"Test": ["NONE"]}
    if not args or args[0].upper() != "CMD" or len(args) < 2:
        raise DockerfileError("HEALTHCHECK takes [OPTIONS] CMD command, or NONE", line=inst.line,
                              fix="e.g. HEALTHCHECK --interval=30s CMD curl -f http://localhost/")
    flags = inst.flag_values({"interval": True, "timeout": True, "start-period": True, "start-interval": True,
                              "retries": True})
    check = {"Test": ["CMD", *args[1:]] if inst.json else ["CMD-SHELL", args[1]]}
    for flag, name in (("interval", "Interval"), ("timeout", "Timeout"), ("start-period", "StartPeriod"),
                       ("start-interval", "StartInterval")):
        if flag in flags:
            check[name] = _duration(flags[flag][-1], inst.line)
    if "retries" in flags:
        if not flags["retries"][-1].isdigit():
            raise DockerfileError("HEALTHCHECK --retries takes a number", line=inst.line, fix="e.g. --retries=3")
        check["Retries"] = int(flags["retries"][-1])
    return check
