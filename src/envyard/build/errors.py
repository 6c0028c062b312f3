"""Typed build errors: each has a one-line cause, a fix and its own CLI exit code."""

from __future__ import annotations

from ..errors import EnvyardError


class BuildError(EnvyardError):
    """A build failed for a reason of its own (a download, a user switch, a layer that could not be written)."""

    exit_code = 8


class DockerfileError(BuildError):
    """The Dockerfile is malformed or asks for something envyard does not do (an unknown instruction, a flag,
    a platform). `line` is the Dockerfile line, when known."""

    exit_code = 9

    def __init__(self, message: str, *, fix: str | None = None, line: int | None = None):
        super().__init__(message if line is None else f"Dockerfile line {line}: {message}", fix=fix)
        self.line = line


class ContextError(BuildError):
    """A file the Dockerfile reads is not in the build context (missing, ignored, outside it)."""

    exit_code = 10


class RunFailed(BuildError):
    """A RUN step exited non-zero. Carries the step, its Dockerfile line, the exit code and the output's tail."""

    exit_code = 11

    def __init__(self, message: str, *, fix: str | None = None, step: str = "", line: int = 0,
                 returncode: int = 0, output: str = ""):
        super().__init__(message, fix=fix)
        self.step, self.line, self.returncode, self.output = step, line, returncode, output


class BuildTimeout(BuildError):
    """The build ran past its time limit; the step running then was killed."""

    exit_code = 12
