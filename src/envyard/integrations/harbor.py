"""Harbor's environment on envyard sandboxes, with no Docker daemon:

    harbor run -p path/to/tasks -a oracle --env envyard.integrations.harbor:EnvyardEnvironment

Harbor (PyPI `harbor`, Python >= 3.12) loads this class by its import path and drives it as it drives its
Docker environment. `start` builds the task's environment/Dockerfile with envyard's daemonless builder (or
takes `[environment].docker_image` from the store, or pulls it when this envyard has `envyard.images`) and
starts one sandbox over the image, with the task's limits and network policy (and the compose file's other
services beside it, on a private pod network); `exec` runs each command with
bash, as the image's USER unless Harbor names a user; file transfers use envyard's host-side file API, so
Harbor reads /logs/verifier and /logs/agent back with `download_dir`; `stop` closes the sandbox.
What is supported and what is not: docs/harbor.md.
"""

from __future__ import annotations

import asyncio
import atexit
import codecs
import shutil
import threading
from pathlib import Path, PurePosixPath
from typing import Literal

try:
    from harbor.environments.base import BaseEnvironment, ExecResult, SandboxBuildFailedError
    from harbor.environments.capabilities import EnvironmentCapabilities, EnvironmentResourceCapabilities
    from harbor.environments.definition import require_agent_environment_definition, should_use_prebuilt_docker_image
    from harbor.environments.options import EnvironmentOptions
    from harbor.models.task.config import NetworkMode
    from harbor.models.trial.config import ResourceMode
    from pydantic import Field
except ImportError as e:
    raise ImportError(
        f"envyard.integrations.harbor needs Harbor, which cannot be imported here ({e}); install it beside envyard "
        "in a Python >= 3.12 environment: pip install harbor") from e

from ..aio import AsyncSandbox, AsyncYard
from ..build import build_image
from ..envs.foreign import compose_build, compose_environment, slug
from ..envs.services import ComposeProject, Service, Services, load_compose
from ..errors import BadInput, EnvyardError, NotRegularFile, ServiceError
from ..store import Image
from ..yard import Yard

ENVIRONMENT_TYPE = "envyard"
NETWORKS = {NetworkMode.PUBLIC: "host", NetworkMode.NO_NETWORK: "none"}
# What of a docker-compose.yaml's `main` service envyard honours; anything else is refused, not ignored. Its
# `command` (Harbor's templates keep the container alive with it) is not needed: a sandbox stays up by itself.
COMPOSE_KEYS = {"build", "image", "environment", "command", "depends_on"}
# Harbor's Docker environment runs every command with `bash -c`; an image without bash gets /bin/sh.
RUN_WITH_BASH = 'if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; fi; exec /bin/sh -c "$1"'


class EnvyardOptions(EnvironmentOptions):
    """`--ek KEY=VALUE` options of `harbor run`."""

    home: str | None = Field(default=None, description="envyard store directory (default: $ENVYARD_HOME, "
                             "else envyard's default, /var/lib/envyard for root)")
    security: Literal["default", "relaxed"] = Field(default="default", description="'relaxed' drops envyard's "
                                                    "seccomp filter, for tasks that nest sandboxes or containers")


# ---- one Yard per store and process --------------------------------------------------------------------------

_yards: dict[str | None, AsyncYard] = {}
_yards_lock = threading.Lock()
_build_locks: dict[str, threading.Lock] = {}


def async_yard(home: str | None = None) -> AsyncYard:
    """The process's Yard on store `home` (None: envyard's default), shared by every trial of a job."""
    with _yards_lock:
        if home not in _yards:
            if not _yards:
                atexit.register(_close_yards)  # sandboxes a crashed trial left open go down with the process
            _yards[home] = AsyncYard(yard=Yard(home))
        return _yards[home]


def _close_yards() -> None:
    for ayard in _yards.values():
        ayard.yard.close()


def _build_lock(tag: str) -> threading.Lock:
    """Concurrent trials of one task wait for the first build, then hit its cache."""
    with _yards_lock:
        return _build_locks.setdefault(tag, threading.Lock())


# ---- the environment -------------------------------------------------------------------------------------------


class EnvyardEnvironment(BaseEnvironment):
    """One envyard sandbox per Harbor environment: Harbor's `main` container, without a daemon."""

    options_model = EnvyardOptions
    options: EnvyardOptions

    def __init__(self, *args, **kwargs):
        self._sandbox: AsyncSandbox | None = None
        self._image: Image | None = None
        self._services: Services | None = None  # the compose file's other services, while running
        super().__init__(*args, **kwargs)  # calls _validate_definition

    @staticmethod
    def type() -> str:
        return ENVIRONMENT_TYPE

    @classmethod
    def resource_capabilities(cls) -> EnvironmentResourceCapabilities:
        return EnvironmentResourceCapabilities(cpu_limit=True, memory_limit=True, fractional_cpus=True)

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        # No allowlists (a sandbox has the host's network or none), no GPUs, no Windows.
        # `mounted`: host directories can be bound in (`--mounts`, `--ek auto_mounting=true`).
        return EnvironmentCapabilities(disable_internet=True, mounted=True)

    @classmethod
    def preflight(cls, kwargs: dict | None = None) -> None:
        super().preflight(kwargs)
        options = cls.parse_options(kwargs)
        try:
            async_yard(options.home).yard.backend.check()
        except EnvyardError as e:
            raise SystemExit(f"envyard cannot run sandboxes on this machine: {e}") from e

    def _validate_definition(self) -> None:
        require_agent_environment_definition(self.environment_dir, docker_image=self.task_env_config.docker_image,
                                             extra_docker_compose_paths=self.extra_docker_compose_paths)
        self._project = self._compose_project()
        self._compose = self._project.main if self._project else None
        for mount in self._host_mounts:
            if mount.get("type") != "bind":
                raise ValueError(f"mount {mount.get('source')} -> {mount.get('target')}: envyard binds host "
                                 f"directories only, not {mount.get('type')!r} mounts")

    def _compose_project(self) -> ComposeProject | None:
        """environment/docker-compose.yaml, when there is one and envyard can honour its `main` service."""
        path = self.environment_dir / "docker-compose.yaml"
        if not path.is_file():
            return None
        project, problems, _ = load_compose(path, "main")
        if problems:
            raise ValueError(f"{problems[0]}; run this task with Harbor's docker environment")
        unsupported = sorted(set(project.main) - COMPOSE_KEYS)
        if unsupported:
            raise ValueError(f"{path}: services.main: {', '.join(unsupported)}: not supported by envyard, which "
                             f"honours only {', '.join(sorted(COMPOSE_KEYS))}; run this task with Harbor's docker "
                             "environment")
        return project

    # ---- start / stop ----------------------------------------------------------------------------------------

    async def start(self, force_build: bool) -> None:
        ayard = await asyncio.to_thread(async_yard, self.options.home)
        self._image = await asyncio.to_thread(self._prepare_image, ayard.yard, force_build)
        options = self._sandbox_options(ayard.yard)
        if self._project is not None and self._project.services:
            # The other services first, on a pod network that main's sandbox then joins (docs/tasks.md)
            services = Services(ayard.yard, self._project, internet=options["network"] == "host",
                                image_for=lambda service: self._service_image(ayard.yard, service),
                                completion_timeout=self.task_env_config.build_timeout_sec)
            self._services = services
            starting = asyncio.ensure_future(asyncio.to_thread(services.start))
            try:
                await asyncio.shield(starting)
            except asyncio.CancelledError:  # Harbor gave up: take them down once the start thread is done
                starting.add_done_callback(lambda _: services.close())
                self._services = None
                raise
            except ServiceError as e:  # start() has already stopped what it started
                self._services = None
                raise SandboxBuildFailedError(f"envyard could not start the task's services: {e}") from e
            options.update(network=services.network, hostname=services.main_hostname)
        # If Harbor gives up on start (its build timeout) while the sandbox is being made, close it once made.
        making = asyncio.ensure_future(ayard.sandbox(self._image, **options))
        try:
            self._sandbox = await asyncio.shield(making)
        except asyncio.CancelledError:
            making.add_done_callback(_close_when_made)
            await asyncio.to_thread(self._close_services)
            raise
        except BaseException:
            await asyncio.to_thread(self._close_services)
            raise
        try:
            await self._upload_environment_dir_after_start()
            await self.ensure_dirs(self._mount_targets(writable_only=True))  # /logs/agent, /logs/verifier, ...
        except BaseException:
            await asyncio.shield(self.stop(delete=True))
            raise

    async def stop(self, delete: bool) -> None:
        # Closing deletes the sandbox whatever `delete` says (a stopped sandbox keeps nothing Harbor could reuse);
        # images stay in the store, where the next trial of the task finds them.
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            await sandbox.close()
        await asyncio.to_thread(self._close_services)

    def _close_services(self) -> None:
        services, self._services = self._services, None
        if services is not None:
            services.close()

    def _prepare_image(self, yard: Yard, force_build: bool) -> Image:
        """The image to start: the prebuilt `docker_image` as Harbor's Docker environment would choose it, else
        the compose service's build or image, else environment/Dockerfile."""
        config = self.task_env_config
        if should_use_prebuilt_docker_image(self.environment_dir, docker_image=config.docker_image,
                                            force_build=force_build):
            return self._pull(yard, config.docker_image)
        compose = self._compose or {}
        dockerfile, context, image = compose_build(compose, self.environment_dir)
        if dockerfile is None and image is not None and not (self.environment_dir / "Dockerfile").is_file():
            return self._pull(yard, image)
        if dockerfile is None:
            dockerfile, context = self.environment_dir / "Dockerfile", self.environment_dir
        return self._build(yard, dockerfile, context)

    def _service_image(self, yard: Yard, service: Service) -> Image:
        if service.dockerfile is not None:
            return self._build(yard, service.dockerfile, service.context, suffix=f"-{slug(service.name)}")
        return self._pull(yard, service.image)

    def _build(self, yard: Yard, dockerfile: Path, context: Path, suffix: str = "") -> Image:
        tag = f"harbor/{slug(self.environment_name)}{suffix}:{self.environment_id[:12]}"
        with _build_lock(tag):
            try:
                return build_image(yard, context, dockerfile=dockerfile, tag=tag, on_progress=self._log_build,
                                   timeout=self.task_env_config.build_timeout_sec)
            except EnvyardError as e:
                # Harbor's type for a broken environment definition: not graded, not retried blindly.
                raise SandboxBuildFailedError(f"envyard could not build {dockerfile}: {e}") from e

    def _log_build(self, event: dict) -> None:
        if event["event"] == "step":
            self.logger.debug(f"envyard build step {event['n']}/{event['total']}: {event['instruction']}")
        elif event["event"] == "output":
            self.logger.debug(event["text"].rstrip("\n"))
        elif event["event"] == "warning":
            self.logger.warning(f"envyard build: {event['message']}")

    def _pull(self, yard: Yard, ref: str) -> Image:
        try:
            if yard.store.has_image(ref):
                return yard.image(ref)
        except BadInput:
            pass  # not a name envyard stores images under (e.g. name@sha256:...): only a registry has it
        try:
            from ..images import pull_image
        except ImportError:
            raise SandboxBuildFailedError(
                f"image {ref} is not in the envyard store {yard.store.home}, and this envyard cannot pull from "
                f"registries (fix: import it with `envyard base import FILE --name {ref}` or build it with "
                f"`envyard build -t {ref}`, or pass --force-build to build the task's environment/Dockerfile)"
            ) from None
        try:
            return pull_image(yard, ref)
        except EnvyardError as e:
            raise SandboxBuildFailedError(f"envyard could not pull {ref}: {e}") from e

    def _sandbox_options(self, yard: Yard) -> dict:
        limits: dict = {}
        cpus = self._resource_limit_value("cpu", auto_mode=ResourceMode.LIMIT)
        memory_mb = self._resource_limit_value("memory", auto_mode=ResourceMode.LIMIT)
        if cpus:
            limits["cpus"] = float(cpus)
        if memory_mb:
            limits["memory"] = f"{memory_mb}M"
        if storage_mb := self._effective_storage_mb:
            if yard.can_limit_disk:
                limits["disk"] = f"{storage_mb}M"
            else:
                self.logger.warning(f"storage_mb={storage_mb} is not enforced: this machine gives envyard "
                                    "sandboxes no disk limits (`envyard doctor` says why)")
        network = NETWORKS.get(self.network_policy.network_mode)
        if network is None:  # Harbor refuses it first, from our capabilities; this is the backstop
            raise ValueError(f"network_mode={self.network_policy.network_mode.value!r}: an envyard sandbox has "
                             "the host's network or none")
        binds, ro_binds = {}, {}
        for mount in self._host_mounts:
            source = Path(mount["source"]).resolve()
            if mount.get("read_only"):
                ro_binds[str(source)] = mount["target"]
            else:
                source.mkdir(parents=True, exist_ok=True)  # as Docker does for a missing bind source
                binds[str(source)] = mount["target"]
        compose_env = compose_environment(self._compose) if self._compose else {}
        return {"network": network, "limits": limits, "env": {**compose_env, **self._startup_env()},
                "workdir": self.task_env_config.workdir, "binds": binds, "ro_binds": ro_binds,
                "security": self.options.security}

    def _running(self) -> AsyncSandbox:
        if self._sandbox is None:
            raise RuntimeError(f"the envyard environment {self.session_id} is not running (start() it first)")
        return self._sandbox

    # ---- commands --------------------------------------------------------------------------------------------

    async def exec(self, command: str, cwd: str | None = None, env: dict[str, str] | None = None,
                   timeout_sec: int | None = None, user: str | int | None = None) -> ExecResult:
        sandbox = self._running()
        user = self._resolve_user(user)
        if user is None:
            user = self._image.config.user  # as `docker exec` without -u: the image's USER
        callback = self._output_callback()
        stream = _Relay(callback) if callback else None
        try:
            result = await sandbox.exec(
                ["/bin/sh", "-c", RUN_WITH_BASH, "sh", command], cwd=cwd, env=self._merge_env(env),
                timeout=timeout_sec or None, user=user, max_output=None, max_spill=0,
                on_output=stream.feed if stream else None)
        finally:
            if stream:
                await stream.drain()
        if result.timed_out:
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds")
        return ExecResult(stdout=result.stdout or None, stderr=result.stderr or None, return_code=result.exit_code)

    # ---- files -------------------------------------------------------------------------------------------------

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        source = Path(source_path)
        if target_path.endswith("/"):
            target_path += source.name
        await asyncio.to_thread(self._upload, source, target_path)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        await asyncio.to_thread(self._upload, Path(source_dir), target_dir)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        await asyncio.to_thread(self._download, source_path, Path(target_path))

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        await asyncio.to_thread(self._download, source_dir, Path(target_dir))

    def _upload(self, source: Path, target: str) -> None:
        bound = self._bound(target)
        if bound is not None:
            host, read_only = bound
            if read_only:
                raise PermissionError(f"{target} is in a read-only mount")
            return _copy(source, host)
        sandbox = self._running().sync
        try:
            sandbox.upload(source, target)
        except NotRegularFile:
            if not source.is_file():
                raise
            sandbox.upload(source, f"{target.rstrip('/')}/{source.name}")  # a directory: the file goes in, as cp

    def _download(self, source: str, target: Path) -> None:
        bound = self._bound(source)
        if bound is not None:
            return _copy(bound[0], target)
        skipped = self._running().sync.download(source, target)
        if skipped:
            self.logger.debug(f"not copied from {source} (links out of the tree, special files): {skipped[:20]}")

    def _bound(self, path: str) -> tuple[Path, bool] | None:
        """(host path, read-only) when `path` lies in a host mount: the file API stops at mount points, so those
        files are copied on the host side."""
        inside = PurePosixPath(path)
        best = None
        for mount in self._host_mounts:
            target = PurePosixPath(mount["target"])
            if inside.is_relative_to(target) and (best is None or len(target.parts) > len(best[0].parts)):
                best = (target, mount)
        if best is None:
            return None
        target, mount = best
        return Path(mount["source"]).resolve().joinpath(*inside.relative_to(target).parts), bool(mount.get("read_only"))


def _copy(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def _close_when_made(making: asyncio.Future) -> None:
    if not making.cancelled() and making.exception() is None:
        making.result().sync.close()


class _Relay:
    """Hands a command's output, chunk by chunk and in order, from envyard's worker thread to Harbor's async
    output callback (Harbor's opt-in live log streaming)."""

    def __init__(self, callback):
        self.callback = callback
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue = asyncio.Queue()
        self.decoders = {name: codecs.getincrementaldecoder("utf-8")(errors="replace") for name in ("stdout", "stderr")}
        self.task = self.loop.create_task(self._pump())

    def feed(self, stream: str, chunk: bytes) -> None:  # on the worker thread
        text = self.decoders[stream].decode(chunk)
        if text:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, (text, stream))

    async def _pump(self) -> None:
        while (item := await self.queue.get()) is not None:
            await self.callback(*item)

    async def drain(self) -> None:
        for stream, decoder in self.decoders.items():
            if text := decoder.decode(b"", final=True):  # a character cut at the end of the output
                self.queue.put_nowait((text, stream))
        self.queue.put_nowait(None)  # after every chunk: the worker queued them before its result came back
        await self.task
