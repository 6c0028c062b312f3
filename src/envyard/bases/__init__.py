"""Base providers: where an image's bottom layers come from (host root, debootstrap, archives)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ..errors import BadInput
from ..store import Image, ImageConfig, Store, parse_image_name
from .host import HOST_IMAGE, ensure_host_image

# debootstrap and archive import load when used: the CLI and every Yard import this package for `host`.
_LAZY = {"DEFAULT_MIRROR": "debian", "SUITE_PYTHON": "debian", "debootstrap_rootfs": "debian",
         "import_archive": "archive"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

Progress = Callable[[str], None] | None
DEBIAN_RE = re.compile(r"^debian:([a-z]+)$")


def pull(store: Store, spec: str, *, on_progress: Progress = None, mirror: str | None = None) -> Image:
    """Build (or return the cached) base image for `spec`: `host` or `debian:<suite>` (from `mirror`, by default
    debian.DEFAULT_MIRROR)."""
    from .debian import DEFAULT_MIRROR, SUITE_PYTHON, debootstrap_rootfs

    mirror = mirror or DEFAULT_MIRROR
    if spec in ("host", HOST_IMAGE):
        return ensure_host_image(store)
    m = DEBIAN_RE.match(spec)
    if not m:
        raise BadInput(f"unknown base {spec!r}", fix="use `host` or `debian:<suite>` (bullseye, bookworm, trixie)")
    if store.has_image(spec, exact=True):  # a pulled docker.io/library/debian:<suite> is another image
        return store.image(spec)
    suite = m.group(1)
    built = store.new_layer_dir()
    try:
        meta = debootstrap_rootfs(suite, built, mirror=mirror, on_progress=on_progress)
    except BaseException:
        store.discard_dir(built)
        raise
    layer = store.seal_layer(built, {"provider": "debian", **meta})
    config = ImageConfig(
        env={"LANG": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive"},
        provenance={"provider": "debian", "suite": suite, "mirror": mirror, "python": SUITE_PYTHON.get(suite)},
    )
    return store.put_image(spec, [layer.id], config)


def import_image(store: Store, path: Path, name: str, *, on_progress: Progress = None) -> Image:
    """Import a rootfs tarball or `docker save` archive as image `name` (one store layer per archive layer)."""
    from .archive import import_archive

    name = parse_image_name(name)
    imported = import_archive(path, store.new_layer_dir, on_progress=on_progress)
    layers = [store.seal_layer(d, {"provider": "import", "source": str(path)}).id for d in imported.layer_dirs]
    c = imported.config
    config = ImageConfig(
        env=c.get("env") or {}, workdir=c.get("workdir") or "/", user=c.get("user") or "root",
        labels=c.get("labels") or {},
        provenance={"provider": "import", "source": str(path), "format": c.get("source"), "cmd": c.get("cmd")},
    )
    return store.put_image(name, layers, config)


__all__ = ["HOST_IMAGE", "SUITE_PYTHON", "ensure_host_image", "import_image", "pull"]
