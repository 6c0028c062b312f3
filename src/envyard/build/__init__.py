"""Daemonless Dockerfile builds: `build_image(yard, context, tag=...)` → an image in the store.

parse.py (Docker's parser → stages) · words.py ($VAR substitution) · ignore.py (.dockerignore) · context.py
(what COPY reads, digests) · rootfs.py (an image's files read from its layers) · layer.py (writing a layer
host-side; a RUN's upper dir as a layer) · cache.py (step keys → layers) · executor.py (running the stages).
See docs/build.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from .errors import BuildError, BuildTimeout, ContextError, DockerfileError, RunFailed


def build_image(yard, context: str | Path, *, dockerfile: str | Path | None = None, tag: str,
                build_args: dict[str, str] | None = None, target: str | None = None, no_cache: bool = False,
                on_progress: Callable[[dict], None] | None = None, timeout: float | None = None):
    """Build the Dockerfile (default `<context>/Dockerfile`) into image `tag`; returns the Image.

    `on_progress(event)` gets dicts: {"event": "step", "n", "total", "stage", "line", "instruction"},
    {"event": "cached", "n"}, {"event": "output", "n", "stream", "text"}, {"event": "done", "n", "seconds",
    "cached", "layer"}, {"event": "warning", "message"}. `timeout` bounds the whole build in seconds."""
    from .executor import Builder

    return Builder(yard, context, dockerfile=dockerfile, tag=tag, build_args=build_args, target=target,
                   no_cache=no_cache, on_progress=on_progress, timeout=timeout).build()


__all__ = ["BuildError", "BuildTimeout", "ContextError", "DockerfileError", "RunFailed", "build_image"]
