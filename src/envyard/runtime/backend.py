"""The backend boundary: what any sandbox substrate (local namespaces, a Docker engine, a Ray pool) provides.

`Backend` and `SandboxHandle` are typing Protocols (defined in protocols.py, importable from here):
`envyard.Yard` and `envyard.Sandbox` (and everything above them: envs/, serve/, the CLI) talk to a backend only
through their methods. Backends declare what they can do in `capabilities` instead of faking it; `Yard` checks
a request against them before creating anything and raises `BackendUnsupported` (naming the backend and the
feature) for what the backend lacks.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import BackendUnsupported
from ..record import Record
from .limits import Limits

TYPE_CHECKING = False  # typing's own constant would import typing (see protocols.py)
if TYPE_CHECKING:
    from ..store import Image
    from .podnet import PodNetwork
    from .protocols import Backend


class Capabilities(Record, frozen=True):
    """What a backend can do. snapshot: snapshot_layer(), a running sandbox's changes as a new layer; fork:
    several sandboxes over one image (a snapshot); network_policies: of "none", "host", "pod"; limits: of
    "memory", "pids", "cpus", "disk"; shell_sessions: shell(), a persistent session keeping cwd and variables;
    binds: host directories bound into a sandbox; attached: run_attached(), a command wired to the caller's
    terminal; stop: stop() + upper_dir(), a stopped sandbox's changes, read by the verifier."""

    def __init__(self, snapshot: bool, fork: bool, reset: bool, network_policies: tuple[str, ...],
                 limits: tuple[str, ...], shell_sessions: bool, binds: bool = True, attached: bool = True,
                 stop: bool = True, warm_pools: bool = True, notes: tuple[str, ...] = ()):
        self._set(snapshot=snapshot, fork=fork, reset=reset, network_policies=network_policies, limits=limits,
                  shell_sessions=shell_sessions, binds=binds, attached=attached, stop=stop, warm_pools=warm_pools,
                  notes=notes)


# "default": the seccomp filter and masked kernel files; "relaxed": no seccomp filter (docs/security.md).
SECURITY_LEVELS = ("default", "relaxed")


class SandboxSpec(Record):
    """Everything needed to start one sandbox. network: "none", "host", or a PodNetwork shared with other
    sandboxes. binds: host directories bound read-write into the sandbox, (host path, sandbox path) pairs; not
    for untrusted agents (the setup engine uses it for a shared package-download cache). ro_binds: the same,
    read-only (files or directories). security: one of SECURITY_LEVELS. hostname None: envyard-<id>."""

    def __init__(self, image: "Image", network: "str | PodNetwork" = "none", limits: Limits | None = None,
                 env: dict[str, str] | None = None, workdir: str | None = None,
                 binds: tuple[tuple[str, str], ...] = (), ro_binds: tuple[tuple[str, str], ...] = (),
                 security: str = "default", hostname: str | None = None):
        self.image = image
        self.network = network
        self.limits = Limits() if limits is None else limits
        self.env = {} if env is None else env
        self.workdir = workdir
        self.binds = binds
        self.ro_binds = ro_binds
        self.security = security
        self.hostname = hostname


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


def __getattr__(name: str):
    """`Backend`, `SandboxHandle` and `Shell` are defined in protocols.py, imported when first asked for."""
    if name in ("Backend", "SandboxHandle", "Shell"):
        from . import protocols

        return getattr(protocols, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
