"""The backend boundary: what any sandbox substrate (local namespaces, a Docker engine, a Ray pool) provides.

`Backend` and `SandboxHandle` are typing Protocols: `envyard.Yard` and `envyard.Sandbox` (and everything above
them: envs/, serve/, the CLI) talk to a backend only through these methods. Backends declare what they can do
in `capabilities` instead of faking it; `Yard` checks a request against them before creating anything and
raises `BackendUnsupported` (naming the backend and the feature) for what the backend lacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from ..errors import BackendUnsupported
from .limits import Limits
from .result import ExecResult

if TYPE_CHECKING:
    from ..store import Image
    from .podnet import PodNetwork


@dataclass(frozen=True)
class Capabilities:
    snapshot: bool  # snapshot_layer(): a running sandbox's changes as a new layer
    fork: bool  # several sandboxes over one image (a snapshot)
    reset: bool
    network_policies: tuple[str, ...]  # of "none", "host", "pod"
    limits: tuple[str, ...]  # of "memory", "pids", "cpus", "disk"
    shell_sessions: bool  # shell(): a persistent session keeping cwd and variables
    binds: bool = True  # host directories bound into a sandbox
    attached: bool = True  # run_attached(): a command wired to the caller's terminal
    stop: bool = True  # stop() + upper_dir(): a stopped sandbox's changes, read by the verifier
    warm_pools: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)


# "default": the seccomp filter and masked kernel files; "relaxed": no seccomp filter (docs/security.md).
SECURITY_LEVELS = ("default", "relaxed")


@dataclass
class SandboxSpec:
    """Everything needed to start one sandbox."""

    image: "Image"
    network: "str | PodNetwork" = "none"  # "none", "host", or a PodNetwork shared with other sandboxes
    limits: Limits = field(default_factory=Limits)
    env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    # Host directories bound read-write into the sandbox (host path, sandbox path). Not for untrusted agents:
    # the setup engine uses it for a shared package-download cache.
    binds: tuple[tuple[str, str], ...] = ()
    ro_binds: tuple[tuple[str, str], ...] = ()  # the same, read-only (files or directories)
    security: str = "default"  # one of SECURITY_LEVELS
    hostname: str | None = None  # None: envyard-<id>


@runtime_checkable
class Shell(Protocol):
    """A persistent shell session (`Sandbox.shell()`)."""

    def run(self, command: str, *, timeout: float | None = None, max_output: int | None = ...,
            max_spill: int = ...) -> ExecResult: ...

    def interrupt(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class SandboxHandle(Protocol):
    """One running sandbox as a backend sees it. `envyard.Sandbox` wraps this with the public API (argument
    checks, path resolution); a handle receives paths already resolved and checked, as lists of parts below
    `/`."""

    id: str
    spec: SandboxSpec

    @property
    def alive(self) -> bool: ...

    @property
    def workdir(self) -> str: ...

    def exec(self, cmd: str | list[str], *, timeout: float | None = None, cwd: str | None = None,
             env: dict[str, str] | None = None, stdin: bytes | None = None, max_output: int | None = ...,
             max_spill: int = ..., cancel: Any = None, on_output: Callable[[str, bytes], None] | None = None,
             user: str | None = None) -> ExecResult: ...

    def shell(self, user: str | None = None) -> Shell: ...

    # files: `parts` is the resolved path inside the sandbox, split ("/a/b" -> ["a", "b"])
    def write_file(self, parts: list[str], data: bytes, mode: int | None) -> None: ...

    def read_file(self, parts: list[str], max_bytes: int) -> bytes: ...

    def upload(self, src: Path, parts: list[str]) -> None: ...

    def download(self, parts: list[str], dest: Path, max_bytes: int, max_entries: int) -> list[str]: ...

    # state
    def snapshot_layer(self) -> Path:
        """The sandbox's changes as a new layer directory (overlayfs format), not yet sealed in the store."""
        ...

    def snapshot_sealed(self, image: "Image") -> None:
        """Told the store's image made of snapshot_layer()'s layer (a backend may keep its own copy)."""
        ...

    def stop(self) -> None: ...

    @property
    def upper_dir(self) -> Path:
        """A stopped sandbox's changes as a directory in overlayfs format (whiteouts mark deletions)."""
        ...

    def reset(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class Backend(Protocol):
    name: str
    capabilities: Capabilities

    def create(self, spec: SandboxSpec) -> SandboxHandle: ...

    def check(self) -> dict:
        """Report what this backend found on the machine (and raise HostUnsupported if it cannot run)."""
        ...

    def run_attached(self, spec: SandboxSpec, argv: list[str], timeout: float | None = None) -> int:
        """Run `argv` in a throwaway sandbox wired to this terminal; its exit code (124 on timeout)."""
        ...

    def can_limit_disk(self) -> bool: ...

    def reap(self) -> dict:
        """Remove what sandboxes of dead owners left behind (gc); a report of what went."""
        ...

    def close(self) -> None:
        """Release what the backend holds (connections, mounts it keeps for its sandboxes)."""
        ...


def require(backend: Backend, feature: str, ok: bool, fix: str | None = None) -> None:
    """Raise BackendUnsupported when `ok` is false: `feature` is what was asked for."""
    if not ok:
        raise BackendUnsupported(backend.name, feature, fix=fix)


def check_spec(backend: Backend, spec: SandboxSpec) -> None:
    """Refuse, before anything starts, a sandbox spec asking for what `backend` cannot do."""
    caps = backend.capabilities
    network = spec.network if isinstance(spec.network, str) else "pod"
    require(backend, f"network {network!r}", network in caps.network_policies,
            fix=f"use one of: {', '.join(caps.network_policies)}")
    for name in ("memory", "pids", "cpus", "disk"):
        if getattr(spec.limits, name) is not None:
            require(backend, f"a {name} limit", name in caps.limits,
                    fix=f"leave {name} out, or use the local backend")
    if spec.binds or spec.ro_binds:
        require(backend, "bind mounts", caps.binds, fix="use the local backend")
