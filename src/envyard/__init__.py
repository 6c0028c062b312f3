"""envyard: executable environments for agents — verified images and fast, isolated, forkable sandboxes."""

from .errors import (BadInput, BaseBuildError, EnvyardError, FileTooLarge, HostUnsupported, ImageNotFound, NotFound,
                     NotRegularFile, PathOutsideSandbox, SandboxClosed, SandboxDied, SandboxError, SandboxNotFound, StoreError)
from .runtime.limits import Limits
from .runtime.result import ExecResult
from .store import Image, ImageConfig
from .yard import Sandbox, Yard
from .aio import AsyncSandbox, AsyncShell, AsyncYard

__version__ = "0.1.0"

__all__ = [
    "AsyncSandbox", "AsyncShell", "AsyncYard", "BadInput", "BaseBuildError", "EnvyardError", "ExecResult", "FileTooLarge", "HostUnsupported", "Image", "ImageConfig",
    "ImageNotFound", "Limits", "NotFound", "NotRegularFile", "PathOutsideSandbox", "Sandbox", "SandboxClosed", "SandboxDied",
    "SandboxError", "SandboxNotFound", "StoreError", "Yard", "__version__",
]
