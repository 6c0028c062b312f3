"""Yard: the Python entry point. A handle on a store plus a backend that runs sandboxes over its images."""

from __future__ import annotations

import io
import tarfile
import threading
import time
from pathlib import Path, PurePosixPath
from typing import Callable

from . import gc as gc_mod
from . import janitor
from .bases.host import (HOST_IMAGE, HOST_ROOT_LAYER, ensure_host_image, host_root_view, refresh_host_mask,
                         with_current_mask)
from .errors import BadInput, EnvyardError, PathOutsideSandbox, SandboxError
from .runtime.backend import SandboxSpec
from .runtime.holder import IPC_MOUNT
from .runtime.limits import Limits
from .runtime.local import SECURITY_LEVELS, LocalBackend, LocalSandbox, LocalShell
from .runtime.result import DEFAULT_MAX_OUTPUT, ExecResult
from .runtime.warm import WarmPool
from .store import Image, Store, parse_image_name

NETWORKS = ("none", "host")


def check_security(level: str) -> str:
    if level not in SECURITY_LEVELS:
        raise BadInput(f"unknown security level {level!r}",
                       fix="use 'default', or 'relaxed' to drop the seccomp filter (see docs/security.md)")
    return level


class Yard:
    """A store of images and the sandboxes running over them.

    >>> with Yard() as yard, yard.sandbox("host") as sb:
    ...     sb.exec("echo hi").stdout
    'hi\\n'
    """

    def __init__(self, home: str | Path | None = None, *, reap: bool = True):
        self.store = Store(home)
        self._backend: LocalBackend | None = None
        self._backend_lock = threading.Lock()
        self._open: set[Sandbox] = set()
        self._pools: dict[tuple, WarmPool] = {}
        self._open_lock = threading.Lock()
        if reap:
            gc_mod.reap_dead_sandboxes(self.store)

    @property
    def backend(self) -> LocalBackend:
        with self._backend_lock:
            if self._backend is None:
                self._backend = LocalBackend(self.store)
            return self._backend

    # ---- images -------------------------------------------------------------------------------------------

    def image(self, ref: str | Image) -> Image:
        if isinstance(ref, Image):
            img = ref
        else:
            name = parse_image_name(ref)
            if name == HOST_IMAGE:
                return ensure_host_image(self.store)
            img = self.store.image(name)
        if HOST_ROOT_LAYER in img.layers:
            host_root_view(self.store)  # gc may have unmounted it since the Image was fetched
            refresh_host_mask(self.store)  # the machine may have changed (a new store, a new secret)
            img = with_current_mask(img)
        return img

    def images(self) -> list[Image]:
        return self.store.images()

    def remove_image(self, ref: str) -> Image:
        return self.store.remove_image(ref)

    def pull(self, spec: str, *, on_progress: Callable[[str], None] | None = None) -> Image:
        """Make a base image: `host` or `debian:<suite>`."""
        from .bases import pull

        return pull(self.store, spec, on_progress=on_progress)

    def import_image(self, path: str | Path, name: str, *, on_progress: Callable[[str], None] | None = None) -> Image:
        """Import a rootfs tarball or a `docker save` archive as image `name`."""
        from .bases import import_image

        return import_image(self.store, Path(path), name, on_progress=on_progress)

    # ---- sandboxes ----------------------------------------------------------------------------------------

    def sandbox(self, image: str | Image = "host", *, network: str = "none", limits: Limits | dict | None = None,
                env: dict[str, str] | None = None, workdir: str | None = None,
                binds: dict[str, str] | None = None, ro_binds: dict[str, str] | None = None,
                security: str = "default") -> "Sandbox":
        """Start a sandbox over `image`. `binds` maps host directories to paths inside, bound read-write
        (for trusted uses such as a shared download cache; agents' sandboxes should not get them);
        `ro_binds` maps host files or directories read-only (e.g. the machine's CA bundle, or a path the
        `host` image hides). `security="relaxed"` drops the seccomp filter (docs/security.md)."""
        if network not in NETWORKS:
            raise BadInput(f"unknown network policy {network!r}", fix="use 'none' (default) or 'host'")
        if workdir is not None and not workdir.startswith("/"):
            raise BadInput(f"workdir must be an absolute path, not {workdir!r}")
        for host_path, inside in (binds or {}).items():
            if not Path(host_path).is_dir() or not inside.startswith("/"):
                raise BadInput(f"bind {host_path} -> {inside}: needs an existing host directory and an absolute path")
        for host_path, inside in (ro_binds or {}).items():
            if not Path(host_path).exists() or not inside.startswith("/"):
                raise BadInput(f"bind {host_path} -> {inside}: needs an existing host path and an absolute path")
        img = self.image(image)
        spec = SandboxSpec(image=img, network=network, limits=Limits.coerce(limits), env=env or {}, workdir=workdir,
                           binds=tuple(sorted((binds or {}).items())), ro_binds=tuple(sorted((ro_binds or {}).items())),
                           security=check_security(security))
        pool = self._pools.get(_pool_key(spec))
        handle = pool.take() if pool else None
        sb = Sandbox(self, handle or self.backend.create(spec))
        with self._open_lock:
            self._open.add(sb)
        return sb

    def keep_warm(self, image: str | Image = "host", size: int = 4, *, network: str = "none",
                  limits: Limits | dict | None = None, env: dict[str, str] | None = None,
                  workdir: str | None = None, security: str = "default", wait: bool = False) -> None:
        """Keep `size` sandboxes of exactly this spec started in the background; `sandbox()` calls with the same
        spec then take one instead of starting bwrap (create becomes a hand-over). `size=0` stops the pool."""
        if size < 0:
            raise BadInput(f"pool size must be >= 0, got {size}")
        img = self.image(image)
        spec = SandboxSpec(image=img, network=network, limits=Limits.coerce(limits), env=env or {}, workdir=workdir,
                           security=check_security(security))
        key = _pool_key(spec)
        old = self._pools.pop(key, None)
        if old:
            old.close()
        if size:
            backend = self.backend
            self._pools[key] = pool = WarmPool(lambda: backend.create(spec), size)
            if wait:
                pool.wait_full()

    def fork(self, image: str | Image, n: int, **kwargs) -> list["Sandbox"]:
        """Start `n` sandboxes over the same image (e.g. a snapshot): a GRPO group, a search frontier."""
        if n < 1:
            raise BadInput(f"fork needs n >= 1, got {n}")
        img = self.image(image)
        made: list[Sandbox] = []
        try:
            for _ in range(n):
                made.append(self.sandbox(img, **kwargs))
        except BaseException:
            for sb in made:
                sb.close()
            raise
        return made

    def sandboxes(self):
        """Lease records of every sandbox in the store (any owner process)."""
        return self.store.sandboxes()

    def gc(self) -> dict:
        return gc_mod.collect(self.store)

    def close(self) -> None:
        """Close every sandbox this Yard opened, and its warm pools."""
        for pool in list(self._pools.values()):
            pool.close()
        self._pools.clear()
        with self._open_lock:
            open_now = list(self._open)
        for sb in open_now:
            sb.close()
        self.wait_closed()

    @staticmethod
    def wait_closed() -> None:
        """Block until closed sandboxes are fully torn down (close() returns once they are killed)."""
        janitor.wait()

    def _forget(self, sb: "Sandbox") -> None:
        with self._open_lock:
            self._open.discard(sb)

    def __enter__(self) -> "Yard":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _pool_key(spec: SandboxSpec) -> tuple:
    return (spec.image.name, tuple(spec.image.layers), spec.network, spec.limits, tuple(sorted(spec.env.items())),
            spec.workdir, spec.binds, spec.ro_binds, spec.security)


class Sandbox:
    """One isolated, writable copy of an image. Close it (or use `with`) to kill and delete it."""

    def __init__(self, yard: Yard, handle: LocalSandbox):
        self.yard = yard
        self._h = handle
        self.id = handle.id
        self.image = handle.spec.image

    def __repr__(self) -> str:
        return f"<Sandbox {self.id} image={self.image.name} {'alive' if self.alive else 'closed'}>"

    @property
    def alive(self) -> bool:
        return self._h.alive

    @property
    def workdir(self) -> str:
        return self._h.workdir

    def exec(self, cmd: str | list[str], *, timeout: float | None = None, cwd: str | None = None,
             env: dict[str, str] | None = None, stdin: bytes | str | None = None,
             max_output: int | None = DEFAULT_MAX_OUTPUT, cancel=None, on_output=None) -> ExecResult:
        """Run `cmd` (a shell string for /bin/sh, or an argv list) and wait for it.

        A timeout kills the command's whole process tree and sets `timed_out`. A missing program is exit code
        127, as in a shell. Output beyond `max_output` bytes per stream is cut from the middle (see ExecResult).
        `on_output(stream, chunk)`, if given, is called with each chunk of "stdout"/"stderr" as it arrives.
        """
        if not isinstance(cmd, (str, list)):
            raise BadInput("cmd must be a shell string or a list of arguments")
        if timeout is not None and timeout <= 0:
            raise BadInput(f"timeout must be positive, got {timeout}")
        return self._h.exec(cmd, timeout=timeout, cwd=self._path(cwd) if cwd else None, env=env, stdin=stdin,
                            max_output=max_output, cancel=cancel, on_output=on_output)

    def shell(self) -> LocalShell:
        """A persistent shell session: `run(cmd, timeout=...)` keeps cwd and variables between commands."""
        return self._h.shell()

    # ---- files --------------------------------------------------------------------------------------------

    def _path(self, path: str) -> str:
        """Resolve `path` (relative to the workdir) lexically; refuse anything that climbs above `/`."""
        if not isinstance(path, str) or not path or "\0" in path:
            raise BadInput(f"invalid sandbox path {path!r}")
        full = path if path.startswith("/") else f"{self.workdir.rstrip('/')}/{path}"
        parts: list[str] = []
        for seg in full.split("/"):
            if seg in ("", "."):
                continue
            if seg == "..":
                if not parts:
                    raise PathOutsideSandbox(f"path {path!r} points outside the sandbox", fix="use a path inside /")
                parts.pop()
            else:
                parts.append(seg)
        resolved = "/" + "/".join(parts)
        if resolved == IPC_MOUNT or resolved.startswith(IPC_MOUNT + "/"):
            raise PathOutsideSandbox(f"path {path!r} is envyard's control directory")
        return resolved

    def write_file(self, path: str, data: bytes | str, *, mode: int | None = None) -> None:
        """Write a file inside the sandbox (parents created). Symlinks resolve inside the sandbox only."""
        target = self._path(path)
        script = 'd=${1%/*}; [ -z "$d" ] || mkdir -p -- "$d" && cat > "$1"'
        if mode is not None:
            script += f' && chmod {mode:o} "$1"'
        r = self._h.exec(["/bin/sh", "-c", script, "sh", target], timeout=None, cwd="/", env=None,
                         stdin=data if isinstance(data, bytes) else data.encode(), max_output=1 << 16)
        if r.exit_code != 0:
            raise EnvyardError(f"cannot write {target} in sandbox {self.id}: {r.stderr.strip()}")

    def read_file(self, path: str) -> bytes:
        target = self._path(path)
        r = self._h.exec(["cat", "--", target], timeout=None, cwd="/", env=None, stdin=None, max_output=None)
        if r.exit_code != 0:
            if "No such file" in r.stderr:
                raise FileNotFoundError(f"{target} does not exist in sandbox {self.id}")
            raise EnvyardError(f"cannot read {target} in sandbox {self.id}: {r.stderr.strip()}")
        return r.stdout_bytes

    def upload(self, src: str | Path, dest: str) -> None:
        """Copy a host file or directory into the sandbox at `dest`."""
        src = Path(src)
        if not src.exists():
            raise BadInput(f"no such file or directory on the host: {src}")
        target = self._path(dest)
        if src.is_file():
            self.write_file(target, src.read_bytes(), mode=src.stat().st_mode & 0o777)
            return
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(src, arcname=".")
        r = self._h.exec(["/bin/sh", "-c", 'mkdir -p -- "$1" && tar -x -f - -C "$1"', "sh", target], timeout=None,
                         cwd="/", env=None, stdin=buf.getvalue(), max_output=1 << 16)
        if r.exit_code != 0:
            raise EnvyardError(f"cannot upload {src} to {target}: {r.stderr.strip()}")

    def download(self, src: str, dest: str | Path) -> None:
        """Copy a file or directory out of the sandbox to the host path `dest`."""
        source = self._path(src)
        dest = Path(dest)
        path = PurePosixPath(source)
        r = self._h.exec(["tar", "-c", "-f", "-", "-C", str(path.parent), path.name], timeout=None, cwd="/",
                         env=None, stdin=None, max_output=None)
        if r.exit_code != 0:
            if "No such file" in r.stderr:
                raise FileNotFoundError(f"{source} does not exist in sandbox {self.id}")
            raise EnvyardError(f"cannot download {source}: {r.stderr.strip()}")
        with tarfile.open(fileobj=io.BytesIO(r.stdout_bytes)) as tar:
            members = tar.getmembers()
            if len(members) == 1 and members[0].isfile():
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(tar.extractfile(members[0]).read())
                return
            dest.mkdir(parents=True, exist_ok=True)
            prefix = path.name + "/"
            for m in members:
                m.name = m.name[len(prefix):] if m.name.startswith(prefix) else ("." if m.name == path.name else m.name)
            tar.extractall(dest, members=members, filter="data")

    # ---- state --------------------------------------------------------------------------------------------

    def snapshot(self, name: str | None = None) -> Image:
        """Seal the sandbox's changes as a new layer on top of its image; returns the new image. The sandbox
        keeps running."""
        name = parse_image_name(name) if name else f"snapshot/{self.id}:{_next_snapshot_tag()}"
        built = self._h.snapshot_layer()
        store = self.yard.store
        layer = store.seal_layer(built, {"snapshot_of": self.id, "image": self.image.name})
        config = type(self.image.config)(**{**self.image.config.__dict__})
        config.provenance = {**config.provenance, "snapshot_of": self.id, "parent_image": self.image.name}
        return store.put_image(name, [*self.image.layers, layer.id], config)

    def fork(self, n: int, **kwargs) -> list["Sandbox"]:
        """Snapshot this sandbox and start `n` new sandboxes from that state."""
        return self.yard.fork(self.snapshot(), n, **kwargs)

    def stop(self) -> None:
        """Kill every process of the sandbox but keep its files, e.g. to inspect what it left (`upper_dir`).
        Only close() is allowed afterwards."""
        self._h.stop()

    def upper_dir(self) -> Path:
        """The host directory holding this sandbox's changes (its overlay upper dir: new and changed files,
        whiteouts for deletions). Only for a stopped sandbox: a running one changes it under the reader."""
        if self._h.alive:
            raise SandboxError(f"sandbox {self.id} is running", fix="call stop() before reading its changes")
        return self._h.upper_dir

    def reset(self) -> None:
        """Discard every change: back to the image this sandbox started from."""
        self._h.reset()

    def close(self) -> None:
        """Kill all processes, delete the writable layer, release the lease. Safe to call twice."""
        try:
            self._h.close()
        finally:
            self.yard._forget(self)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_snap_counter = iter(range(1, 1 << 62))
_snap_lock = threading.Lock()


def _next_snapshot_tag() -> str:
    with _snap_lock:
        return f"{int(time.time() * 1000)}-{next(_snap_counter)}"

