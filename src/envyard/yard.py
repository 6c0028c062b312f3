"""Yard: the Python entry point. A handle on a store plus a backend that runs sandboxes over its images."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from . import gc as gc_mod
from . import janitor, validate
from .bases.host import (HOST_IMAGE, HOST_ROOT_LAYER, ensure_host_image, host_root_view, refresh_host_mask,
                         with_current_mask)
from .errors import BadInput, ImageNotFound, PathOutsideSandbox, SandboxError
from .gc import TEMPORARY_FOR, this_process
from .runtime.backend import SandboxSpec, require
from .runtime.holder import IPC_MOUNT
from .runtime.limits import Limits
from .runtime.podnet import PodNetwork
from .runtime.result import (DEFAULT_MAX_DOWNLOAD, DEFAULT_MAX_ENTRIES, DEFAULT_MAX_OUTPUT, DEFAULT_MAX_READ,
                             DEFAULT_MAX_SPILL, ExecResult)
from .store import Image, Store, parse_image_name

TYPE_CHECKING = False  # typing's own constant would import typing (runtime/protocols.py)
if TYPE_CHECKING:
    from .runtime.protocols import Backend, SandboxHandle, Shell
    from .runtime.warm import WarmPool

NETWORKS = ("none", "host")
BACKENDS = ("local", "docker")


class Yard:
    """A store of images and the sandboxes running over them.

    >>> with Yard() as yard, yard.sandbox("host") as sb:
    ...     sb.exec("echo hi").stdout
    'hi\\n'
    """

    def __init__(self, home: str | Path | None = None, *, reap: bool = True, backend: "str | Backend" = "local"):
        self.store = Store(home)
        if backend not in BACKENDS and not _is_backend(backend):
            raise BadInput(f"unknown backend {backend!r}", fix=f"use one of {', '.join(BACKENDS)}, or a Backend")
        self._backend_spec = backend
        self._backend: Backend | None = None if isinstance(backend, str) else backend
        self._backend_lock = threading.Lock()
        self._open: set[Sandbox] = set()
        self._pools: dict[tuple, WarmPool] = {}
        self._open_lock = threading.Lock()
        if reap:
            gc_mod.reap_dead_sandboxes(self.store)

    @property
    def backend(self) -> Backend:
        """The backend sandboxes run on (made on first use): `LocalBackend`, `DockerBackend`, or the one given."""
        with self._backend_lock:
            if self._backend is None:
                if self._backend_spec == "docker":
                    from .runtime.docker_backend import DockerBackend

                    self._backend = DockerBackend(self.store)
                else:
                    from .runtime.local import LocalBackend

                    self._backend = LocalBackend(self.store)
            return self._backend

    @property
    def backend_name(self) -> str:
        return self._backend.name if self._backend is not None else str(self._backend_spec)

    def run_attached(self, image: str | Image, argv: list[str], *, timeout: float | None = None,
                     network: str = "none", limits: Limits | dict | None = None, env: dict[str, str] | None = None,
                     workdir: str | None = None, security: str = "default") -> int:
        """Run `argv` in a throwaway sandbox wired to this terminal (`envyard run`/`shell`); its exit code."""
        validate.sandbox_options(network=network, limits=limits, env=env, workdir=workdir, binds=None, ro_binds=None,
                                 networks=NETWORKS)
        spec = SandboxSpec(image=self.image(image), network=network, limits=Limits.coerce(limits), env=env or {},
                           workdir=workdir, security=validate.security(security))
        backend = self.backend
        require(backend, "attaching a terminal", backend.capabilities.attached, fix="use --json")
        return backend.run_attached(spec, argv, timeout=timeout)

    # ---- images -------------------------------------------------------------------------------------------

    def image(self, ref: str | Image) -> Image:
        if not isinstance(ref, (str, Image)):
            raise BadInput(f"image must be an image name or an Image, not {type(ref).__name__}", fix='give e.g. "host"')
        if isinstance(ref, Image):
            img = ref
        else:
            name = parse_image_name(ref)
            if name == HOST_IMAGE:
                return ensure_host_image(self.store)
            try:
                img = self.store.image(name)
            except ImageNotFound:
                importer = getattr(self.backend, "import_engine_image", None) if self._backend_spec != "local" else None
                img = importer(self, ref) if importer else None  # an image only the Docker engine has
                if img is None:
                    raise
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

    def pull_image(self, ref: str, *, on_progress: Callable[[str], None] | None = None) -> Image:
        """Pull an image from a registry (`python:3.12-slim`, `127.0.0.1:5000/team/img:v1`); it is named in full
        (`docker.io/library/python:3.12-slim`) and found by its short name too. See docs/images.md."""
        from .images import pull_image

        return pull_image(self, ref, on_progress=on_progress)

    def push_image(self, name: str, ref: str | None = None, *, on_progress: Callable[[str], None] | None = None,
                   format: str = "oci"):
        """Push image `name` to registry reference `ref` (default: its own name); returns a PushResult."""
        from .images import push_image

        return push_image(self, name, ref, on_progress=on_progress, format=format)

    def save_image(self, name: str, path: str | Path, *, directory: bool = False,
                   on_progress: Callable[[str], None] | None = None) -> dict:
        """Write image `name` as an OCI image layout: a tar at `path`, or a directory with `directory=True`."""
        from .images import save_image

        return save_image(self, name, path, directory=directory, on_progress=on_progress)

    def load_image(self, path: str | Path, *, name: str | None = None,
                   on_progress: Callable[[str], None] | None = None) -> Image:
        """Load an OCI image layout (directory or tar) or `docker save` output; `name` overrides its own."""
        from .images import load_image

        return load_image(self, path, name=name, on_progress=on_progress)

    # ---- sandboxes ----------------------------------------------------------------------------------------

    def sandbox(self, image: str | Image = "host", *, network: "str | PodNetwork" = "none",
                limits: Limits | dict | None = None, env: dict[str, str] | None = None, workdir: str | None = None,
                binds: dict[str, str] | None = None, ro_binds: dict[str, str] | None = None,
                security: str = "default", hostname: str | None = None) -> "Sandbox":
        """Start a sandbox over `image`. `network` is "none" (default), "host", or a `PodNetwork` that the
        sandbox shares with others (their names resolve to each other). `binds` maps host directories to paths
        inside, bound read-write (for trusted uses such as a shared download cache; agents' sandboxes should
        not get them); `ro_binds` maps host files or directories read-only (e.g. the machine's CA bundle, or a
        path the `host` image hides). `security="relaxed"` drops the seccomp filter (docs/security.md).
        `hostname` defaults to envyard-<id>."""
        validate.sandbox_options(network=network, limits=limits, env=env, workdir=workdir, binds=binds,
                                 ro_binds=ro_binds, networks=NETWORKS)
        img = self.image(image)
        spec = SandboxSpec(image=img, network=network, limits=Limits.coerce(limits), env=env or {}, workdir=workdir,
                           binds=tuple(sorted((binds or {}).items())), ro_binds=tuple(sorted((ro_binds or {}).items())),
                           security=validate.security(security), hostname=validate.hostname(hostname))
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
        validate.integer(size, "size", minimum=0, fix="give the pool size as an int (0 stops the pool)")
        validate.sandbox_options(network=network, limits=limits, env=env, workdir=workdir, binds=None, ro_binds=None,
                                 networks=NETWORKS)
        img = self.image(image)
        spec = SandboxSpec(image=img, network=network, limits=Limits.coerce(limits), env=env or {}, workdir=workdir,
                           security=validate.security(security))
        key = _pool_key(spec)
        old = self._pools.pop(key, None)
        if old:
            old.close()
        if size:
            backend = self.backend
            require(backend, "warm pools", backend.capabilities.warm_pools)
            from .runtime.warm import WarmPool  # here: runtime/warm.py is not needed by most uses

            self._pools[key] = pool = WarmPool(lambda: backend.create(spec), size)
            if wait:
                pool.wait_full()

    def fork(self, image: str | Image, n: int, **kwargs) -> list["Sandbox"]:
        """Start `n` sandboxes over the same image (e.g. a snapshot): a GRPO group, a search frontier."""
        validate.count(n)
        require(self.backend, "fork", self.backend.capabilities.fork)
        img = self.image(image)
        if n == 1:
            return [self.sandbox(img, **kwargs)]
        # Started a few at a time: a sandbox's start is mostly waiting for its processes to be scheduled, so
        # overlapping the starts keeps the time per child low on a busy machine (issue #12: 50 ms at load 15).
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(n, FORK_PARALLEL), thread_name_prefix="envyard-fork") as pool:
            futures = [pool.submit(self.sandbox, img, **kwargs) for _ in range(n)]
        made, failure = [], None
        for f in futures:
            if f.exception() is None:
                made.append(f.result())
            elif failure is None:
                failure = f.exception()
        if failure is not None:
            for sb in made:
                sb.close()
            raise failure
        return made

    @property
    def can_limit_disk(self) -> bool:
        """Whether sandboxes here get disk limits (runtime/volume.py); without, `limits={"disk": ...}` is an
        error and sandboxes write without a bound."""
        return self.backend.can_limit_disk()

    def sandboxes(self):
        """Lease records of every sandbox in the store (any owner process)."""
        return self.store.sandboxes()

    def gc(self) -> dict:
        with self._open_lock:
            idle = not self._open and not self._pools
        if idle and self._backend is not None:
            self._backend.close()  # e.g. our handle would keep gc from unmounting an idle volume
        report = gc_mod.collect(self.store)
        if self._backend is not None and self._backend.name != "local":
            report.update(self._backend.reap())
        return report

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


def _is_backend(obj) -> bool:
    from .runtime.protocols import Backend  # here: typing's import is a cost every `envyard run` would pay

    return isinstance(obj, Backend)


def _pool_key(spec: SandboxSpec) -> tuple:
    return (spec.image.name, tuple(spec.image.layers), spec.network, spec.limits, tuple(sorted(spec.env.items())),
            spec.workdir, spec.binds, spec.ro_binds, spec.security)


class Sandbox:
    """One isolated, writable copy of an image. Close it (or use `with`) to kill and delete it."""

    def __init__(self, yard: Yard, handle: SandboxHandle):
        self.yard = yard
        self._h = handle
        self.id = handle.id
        self.image = handle.spec.image

    @property
    def backend(self) -> str:
        """The name of the backend this sandbox runs on ("local", "docker", ...)."""
        return self.yard.backend.name

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
             max_output: int | None = DEFAULT_MAX_OUTPUT, max_spill: int = DEFAULT_MAX_SPILL, cancel=None,
             on_output=None, user: str | int | None = None) -> ExecResult:
        """Run `cmd` (a shell string for /bin/sh, or an argv list) and wait for it.

        A timeout kills the command's whole process tree and sets `timed_out`. A missing program is exit code
        127, as in a shell. Output beyond `max_output` bytes per stream is cut from the middle; the stream's first
        `max_spill` bytes are kept in a file on the host (see ExecResult). `max_output=None` means the ceiling,
        256 MiB. `on_output(stream, chunk)`, if given, is called with each chunk of "stdout"/"stderr" as it arrives.
        `user` (a name or uid of the image's /etc/passwd) runs the command as that user, with its groups and
        HOME; by default commands run as root.
        """
        cmd = validate.command(cmd)
        options = validate.run_options(timeout, max_output, max_spill, on_output)
        return self._h.exec(cmd, cwd=self.resolve(cwd, "cwd") if cwd is not None else None,
                            env=validate.environment(env), stdin=validate.stdin(stdin), cancel=cancel,
                            user=validate.user(user), **options._asdict())

    def shell(self, user: str | int | None = None) -> Shell:
        """A persistent shell session: `run(cmd, timeout=...)` keeps cwd and variables between commands. With
        `user`, the session's shell runs as that user (see exec)."""
        backend = self.yard.backend
        require(backend, "shell sessions", backend.capabilities.shell_sessions, fix="use exec()")
        return self._h.shell(validate.user(user))

    # ---- files --------------------------------------------------------------------------------------------

    def resolve(self, path: str, what: str = "path") -> str:
        """`path` resolved (relative to the workdir) lexically, as the file methods see it; anything that climbs
        above `/` or names envyard's control directory raises PathOutsideSandbox."""
        validate.text(path, what, allow_empty=False)
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

    def _parts(self, path: str, what: str = "path") -> list[str]:
        return [p for p in self.resolve(path, what).split("/") if p]

    def write_file(self, path: str, data: bytes | str, *, mode: int | None = None) -> None:
        """Write a file inside the sandbox (parents created; `mode` applied exactly when given). Symlinks among
        the parents resolve inside the sandbox only; a symlink as the file itself is refused (NotRegularFile)."""
        parts = self._parts(path)
        data, mode = validate.data(data), validate.mode(mode)
        self._h.write_file(parts, data, mode)

    def read_file(self, path: str, *, max_bytes: int = DEFAULT_MAX_READ) -> bytes:
        """A regular file's bytes. Larger than `max_bytes` (64 MiB by default): FileTooLarge, before reading."""
        parts = self._parts(path)
        max_bytes = validate.integer(max_bytes, "max_bytes", minimum=0)
        return self._h.read_file(parts, max_bytes)

    def upload(self, src: str | Path, dest: str) -> None:
        """Copy a host file or directory into the sandbox at `dest` (a directory is merged into `dest`)."""
        src = validate.host_path(src, "src")
        if not src.exists():
            raise BadInput(f"no such file or directory on the host: {src}", fix="give an existing host path as src")
        parts = self._parts(dest, "dest")
        self._h.upload(src, parts)

    def download(self, src: str, dest: str | Path, *, max_bytes: int = DEFAULT_MAX_DOWNLOAD,
                 max_entries: int = DEFAULT_MAX_ENTRIES) -> list[str]:
        """Copy a file or directory out of the sandbox to the host path `dest`. Symlinks inside a directory are
        never followed: one is recreated only if it points inside the copied tree. Returns the sandbox paths
        not copied (other links, FIFOs, sockets, devices, mount points). More than `max_bytes` in all (1 GiB by
        default) raises FileTooLarge, more than `max_entries` entries BadInput; `dest` may then be partly
        written."""
        parts = self._parts(src, "src")
        dest = validate.host_path(dest, "dest")
        max_bytes = validate.integer(max_bytes, "max_bytes", minimum=0)
        max_entries = validate.integer(max_entries, "max_entries", minimum=1)
        return self._h.download(parts, dest, max_bytes, max_entries)

    @property
    def can_apply_layer(self) -> bool:
        """Whether this sandbox's backend can merge a layer into it while it runs (apply_layer)."""
        return getattr(self._h, "apply_layer", None) is not None

    def apply_layer(self, layer: str | Path) -> None:
        """Merge a layer dir (an overlay upper dir's format, e.g. a carried copy of another sandbox's changes)
        into this sandbox's files, as if the sandbox had started over it (runtime/applylayer.py). Only for a
        sandbox in which nothing untrusted has run yet; a local-backend feature."""
        apply = getattr(self._h, "apply_layer", None)
        require(self.yard.backend, "apply_layer", apply is not None)
        apply(Path(layer))

    # ---- state --------------------------------------------------------------------------------------------

    def snapshot(self, name: str | None = None, *, temporary: bool = False) -> Image:
        """Seal the sandbox's changes as a new layer on top of its image; returns the new image. The sandbox
        keeps running. `temporary`: the image is this process's intermediate state (a setup step, a derive
        validation): `envyard gc` removes it once this process has exited, so a run killed midway (SIGKILL, a
        benchmark timeout) leaves no image behind."""
        if name is not None:
            name = parse_image_name(validate.text(name, "name"))
        else:
            name = f"snapshot/{self.id}:{_next_snapshot_tag()}"
        backend = self.yard.backend
        require(backend, "snapshots", backend.capabilities.snapshot)
        built = self._h.snapshot_layer()
        store = self.yard.store
        layer = store.seal_layer(built, {"snapshot_of": self.id, "image": self.image.name})
        config = type(self.image.config)(**{**self.image.config.__dict__})
        config.provenance = {**config.provenance, "snapshot_of": self.id, "parent_image": self.image.name}
        config.provenance.pop(TEMPORARY_FOR, None)  # a snapshot of a temporary image is kept unless it says so
        if temporary:
            config.provenance[TEMPORARY_FOR] = this_process()
        image = store.put_image(name, [*self.image.layers, layer.id], config)
        self._h.snapshot_sealed(image)
        return image

    def fork(self, n: int, **kwargs) -> list["Sandbox"]:
        """Snapshot this sandbox and start `n` new sandboxes from that state."""
        validate.count(n)  # before the snapshot, which would be left behind
        require(self.yard.backend, "fork", self.yard.backend.capabilities.fork)
        return self.yard.fork(self.snapshot(), n, **kwargs)

    def stop(self) -> None:
        """Kill every process of the sandbox but keep its files, e.g. to inspect what it left (`upper_dir`).
        Only close() is allowed afterwards."""
        require(self.yard.backend, "stop", self.yard.backend.capabilities.stop)
        self._h.stop()

    def upper_dir(self) -> Path:
        """The host directory holding this sandbox's changes (its overlay upper dir: new and changed files,
        whiteouts for deletions). Only for a stopped sandbox: a running one changes it under the reader."""
        if self._h.alive:
            raise SandboxError(f"sandbox {self.id} is running", fix="call stop() before reading its changes")
        return self._h.upper_dir

    def reset(self) -> None:
        """Discard every change: back to the image this sandbox started from."""
        require(self.yard.backend, "reset", self.yard.backend.capabilities.reset)
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
FORK_PARALLEL = 4  # sandboxes started at once by fork(); more only adds contention on a few cores


def _next_snapshot_tag() -> str:
    with _snap_lock:
        return f"{int(time.time() * 1000)}-{next(_snap_counter)}"

