"""envyard: executable environments for agents — verified images and fast, isolated, forkable sandboxes."""

from .errors import (BackendUnsupported, BadInput, BaseBuildError, ClusterError, DigestMismatch, EnvyardError, FileTooLarge, HostUnsupported, ImageNotFound,
                     NotFound, NotRegularFile, PathOutsideSandbox, PlatformNotFound, RegistryAuthError, RegistryError,
                     RegistryUnreachable, RemoteImageNotFound, SandboxClosed, SandboxDied, SandboxError, SandboxNotFound,
                     ServiceError, StoreError, UnsafeLayer, UnsupportedImage)
# Everything but the errors loads on first use (PEP 562): `import envyard.cli.entry` or `envyard.errors` must not
# pay for the store, the runtime and asyncio (the CLI's start-up time; issue #12).
_LAZY = {"Limits": "runtime.limits", "PodNetwork": "runtime.podnet", "ExecResult": "runtime.result",
         "Image": "store", "ImageConfig": "store", "Sandbox": "yard", "Yard": "yard",
         "AsyncSandbox": "aio", "AsyncShell": "aio", "AsyncYard": "aio"}


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
