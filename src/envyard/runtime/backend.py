"""The backend interface: what any sandbox substrate (local namespaces, a Docker engine, a Ray pool) provides.

Backends declare what they can do instead of faking it; callers check `capabilities` before relying on
snapshot, fork, network policies or limits.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .limits import Limits
from .result import ExecResult

if TYPE_CHECKING:
    from ..store import Image


@dataclass(frozen=True)
class Capabilities:
    snapshot: bool
    fork: bool
    reset: bool
    network_policies: tuple[str, ...]
    limits: tuple[str, ...]
    shell_sessions: bool
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


class SandboxHandle(abc.ABC):
    """One running sandbox as a backend sees it. `envyard.Sandbox` wraps this with the public API."""

    id: str

    @abc.abstractmethod
    def exec(self, argv_or_script: str | list[str], *, timeout: float | None, cwd: str | None,
             env: dict[str, str] | None, stdin: bytes | None, max_output: int | None) -> ExecResult: ...

    @abc.abstractmethod
    def shell(self): ...

    @abc.abstractmethod
    def snapshot_layer(self): ...

    @abc.abstractmethod
    def reset(self) -> None: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    @property
    @abc.abstractmethod
    def alive(self) -> bool: ...


class Backend(abc.ABC):
    name: str
    capabilities: Capabilities

    @abc.abstractmethod
    def create(self, spec: SandboxSpec) -> SandboxHandle: ...

    @abc.abstractmethod
    def check(self) -> dict:
        """Report what this backend found on the machine (and raise HostUnsupported if it cannot run)."""
