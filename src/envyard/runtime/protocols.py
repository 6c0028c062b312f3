"""The backend boundary as typing Protocols: `Backend` and `SandboxHandle` (and `Shell`). `envyard.Yard` and
`envyard.Sandbox` (and everything above them: envs/, serve/, the CLI) talk to a backend only through these
methods. They live apart from backend.py's data classes because `typing` is a cost (several ms) of every
`envyard run`, which needs the data but never the Protocols; backend.py hands them out on first use."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from .backend import Capabilities, SandboxSpec
from .result import ExecResult

if TYPE_CHECKING:
    from ..store import Image


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
