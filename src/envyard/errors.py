"""Typed errors. Each carries a one-line cause, a fix, and a distinct CLI exit code."""

from __future__ import annotations


class Terminated(KeyboardInterrupt):
    """SIGTERM, turned by the CLI (cli/entry.py) into Ctrl-C's exception so that commands clean up the same way;
    the CLI then exits 143 (128 + SIGTERM) instead of 130."""


class EnvyardError(Exception):
    """Base class. `exit_code` is what the CLI exits with; `fix` tells the user what to do."""

    exit_code = 1

    def __init__(self, message: str, *, fix: str | None = None):
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return self.message if not self.fix else f"{self.message} (fix: {self.fix})"


class BadInput(EnvyardError):
    """The caller asked for something malformed (bad name, bad path, bad option)."""

    exit_code = 2


class NotFound(EnvyardError):
    """An image, layer or sandbox that does not exist."""

    exit_code = 3


class ImageNotFound(NotFound):
    pass


class SandboxNotFound(NotFound):
    pass


class HostUnsupported(EnvyardError):
    """This machine lacks something the backend needs (bwrap, overlayfs, namespaces)."""

    exit_code = 4


class SandboxError(EnvyardError):
    """An infrastructure failure of a sandbox: it died, could not start, or was closed."""

    exit_code = 5


class SandboxClosed(SandboxError):
    pass


class SandboxDied(SandboxError):
    pass


class PathOutsideSandbox(BadInput):
    """A file path that would resolve outside the sandbox's root."""


class FileTooLarge(BadInput):
    """A file (or a tree) bigger than the byte cap the caller gave (or the default cap)."""

    def __init__(self, message: str, *, size: int, limit: int, fix: str | None = None):
        super().__init__(message, fix=fix)
        self.size = size
        self.limit = limit


class NotRegularFile(BadInput):
    """A path that names a directory, FIFO, socket, device or symlink where a regular file is needed."""


class BaseBuildError(EnvyardError):
    """Building or importing a base image failed."""

    exit_code = 6


class StoreError(EnvyardError):
    """The store is unreadable, locked or inconsistent."""

    exit_code = 7


class DiskFull(EnvyardError):
    """The disk holding the store, or a sandbox's disk limit, ran out: the machine's problem, never the
    project's (setup reports it as such instead of a failed install)."""

    exit_code = 25


class RegistryError(EnvyardError):
    """A registry answered in a way envyard cannot use (a server error, a broken answer)."""

    exit_code = 13


class RemoteImageNotFound(RegistryError):
    """The registry has no such repository, tag or digest (HTTP 404)."""

    exit_code = 14


class RegistryAuthError(RegistryError):
    """The registry refused the credentials, or asked for some and none were configured (HTTP 401/403)."""

    exit_code = 15


class RegistryUnreachable(RegistryError):
    """No connection to the registry (DNS, refused, timed out, TLS handshake)."""

    exit_code = 16


class UnsupportedImage(RegistryError):
    """A manifest or layer media type envyard does not read (Docker schema 1, Windows layers, ...)."""

    exit_code = 17


class PlatformNotFound(RegistryError):
    """A multi-platform image without a variant for this machine's platform."""

    exit_code = 18


class DigestMismatch(RegistryError):
    """Content whose sha256 is not the digest that names it: corrupted in transit or tampered with."""

    exit_code = 19


class ServiceError(EnvyardError):
    """A task's compose service could not be built, started, or made healthy in time."""

    exit_code = 21


class BackendUnsupported(EnvyardError):
    """A sandbox backend asked for something it cannot do (a disk limit, a pod network, a shell session...).
    `.backend` names the backend, `.feature` what was asked."""

    exit_code = 22

    def __init__(self, backend: str, feature: str, *, fix: str | None = None):
        super().__init__(f"the {backend} backend does not support {feature}", fix=fix)
        self.backend = backend
        self.feature = feature


class ClusterError(EnvyardError):
    """A Ray cluster that cannot be used: ray not installed, no cluster at the address, no node to run on."""

    exit_code = 23


class UnsafeLayer(EnvyardError):
    """A layer tar that would write outside its directory, holds forbidden entries, or exceeds the bounds."""

    exit_code = 20


class NotASetupImage(BadInput):
    """`envyard derive` was given an image that is not a verified `envyard setup` image: tasks derived from it
    would have no baseline to be fair against."""

    exit_code = 24
