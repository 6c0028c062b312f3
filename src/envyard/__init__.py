"""envyard: executable environments for agents — verified images and fast, isolated, forkable sandboxes."""

from .errors import (BackendUnsupported, BadInput, BaseBuildError, ClusterError, DigestMismatch, EnvyardError, FileTooLarge, HostUnsupported, ImageNotFound,
                     NotFound, NotRegularFile, PathOutsideSandbox, PlatformNotFound, RegistryAuthError, RegistryError,
                     RegistryUnreachable, RemoteImageNotFound, SandboxClosed, SandboxDied, SandboxError, SandboxNotFound,
                     ServiceError, StoreError, UnsafeLayer, UnsupportedImage)
from .runtime.limits import Limits
from .runtime.podnet import PodNetwork
from .runtime.result import ExecResult
from .store import Image, ImageConfig
from .yard import Sandbox, Yard

# The asyncio API loads on first use: asyncio alone is a tenth of the CLI's start-up.
_LAZY = {"AsyncSandbox": "aio", "AsyncShell": "aio", "AsyncYard": "aio"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'envyard' has no attribute {name!r}")

__version__ = "0.1.0"

__all__ = [
    "AsyncSandbox", "AsyncShell", "AsyncYard", "BadInput", "BaseBuildError", "DigestMismatch", "EnvyardError", "ExecResult",
    "BackendUnsupported", "ClusterError", "FileTooLarge", "HostUnsupported", "Image", "ImageConfig", "ImageNotFound", "Limits", "NotFound", "NotRegularFile",
    "PathOutsideSandbox", "PodNetwork", "PlatformNotFound", "RegistryAuthError", "RegistryError", "RegistryUnreachable",
    "RemoteImageNotFound", "Sandbox", "SandboxClosed", "SandboxDied", "SandboxError", "SandboxNotFound", "ServiceError", "StoreError",
    "UnsafeLayer", "UnsupportedImage", "Yard", "__version__",
]
