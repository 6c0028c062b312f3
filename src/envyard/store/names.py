"""Image names: how the store spells them, and which registry and repository a name stands for.

The store keys images by `name:tag`, or `name@sha256:<hex>` for an image pulled by digest. Images made here
have plain names (`debian:bookworm`, `setup/proj:2`). Images from a registry keep their registry in the
name, as Docker spells it in full: `python:3.12-slim` is pulled as `docker.io/library/python:3.12-slim`, and
`127.0.0.1:5000/team/img:v1` stays as written. A short name finds the full one when no image has the short
name itself (see `lookup_names`).
"""

from __future__ import annotations

import re

from ..errors import BadInput
from ..record import Record

# The path: what local names always allowed. A registry host (with a port) may come first.
PATH_RE = re.compile(r"[a-z0-9][a-z0-9._/-]{0,254}")
HOST_RE = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*:[0-9]{1,5}")
TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
MAX_NAME = 255  # Docker's limit for a full repository name

DOCKER_HUB = "docker.io"
_HUB_ALIASES = {"index.docker.io", "registry-1.docker.io", DOCKER_HUB}

_NAME_FIX = ("use lowercase letters, digits, '.', '_', '-', '/' (a registry host:port may come first) and an "
             "optional ':tag' or '@sha256:<digest>', e.g. myenv:v1 or 127.0.0.1:5000/team/env:v1")


def _split(ref: str) -> tuple[str, str | None, str | None]:
    """`name[:tag][@digest]` → (name, tag, digest). The tag's colon is the last one after the last '/', so a
    registry's port is never taken for a tag."""
    name, _, digest = ref.partition("@")
    colon, slash = name.rfind(":"), name.rfind("/")
    if colon > slash:
        return name[:colon], name[colon + 1:], digest or None
    return name, None, digest or None


def _valid_name(name: str) -> bool:
    if len(name) > MAX_NAME or "//" in name or name.endswith("/"):
        return False
    first, sep, rest = name.partition("/")
    if sep and HOST_RE.fullmatch(first):
        return bool(PATH_RE.fullmatch(rest))
    return bool(PATH_RE.fullmatch(name))


def parse_image_name(ref: str) -> str:
    """Normalise `name[:tag]` (default tag `latest`) or `name@sha256:<hex>`, or raise BadInput."""
    if not isinstance(ref, str):
        raise BadInput(f"image name must be a string, not {type(ref).__name__}", fix=_NAME_FIX)
    if "@" in ref and ref.count("@") == 1:
        name, _tag, digest = _split(ref)  # a tag beside a digest is ignored, as Docker does
        if not _valid_name(name) or not DIGEST_RE.fullmatch(digest or ""):
            raise BadInput(f"invalid image name {ref!r}", fix=_NAME_FIX)
        return f"{name}@{digest}"
    name, tag, _ = _split(ref)
    tag = "latest" if tag is None else tag
    if "@" in ref or not _valid_name(name) or not TAG_RE.fullmatch(tag):
        raise BadInput(f"invalid image name {ref!r}", fix=_NAME_FIX)
    return f"{name}:{tag}"


class Reference(Record, frozen=True):
    """A registry reference, Docker's normalisation applied: `python` is docker.io/library/python:latest.
    registry: "docker.io", "127.0.0.1:5000", "ghcr.io"; repository: "library/python", "team/img"."""

    def __init__(self, registry: str, repository: str, tag: str | None, digest: str | None):
        self._set(registry=registry, repository=repository, tag=tag, digest=digest)

    @property
    def name(self) -> str:
        """The store name an image pulled from here gets."""
        base = f"{self.registry}/{self.repository}"
        return f"{base}@{self.digest}" if self.digest else f"{base}:{self.tag}"

    @property
    def manifest_ref(self) -> str:
        """What follows /manifests/ in the registry's URL: the digest when there is one."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        return self.name


def parse_reference(ref: str) -> Reference:
    """Which registry and repository `ref` names. The first path component is a registry when it has a '.'
    or a ':' or is `localhost` (Docker's rule); otherwise the registry is Docker Hub."""
    parse_image_name(ref)  # validates
    name, tag, digest = _split(ref)
    first, sep, rest = name.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        registry, repository = first, rest
    else:
        registry, repository = DOCKER_HUB, name
    if registry in _HUB_ALIASES:
        registry = DOCKER_HUB
        if "/" not in repository:
            repository = f"library/{repository}"
    if digest is None and tag is None:
        tag = "latest"
    return Reference(registry, repository, None if digest else tag, digest)


def lookup_names(ref: str) -> list[str]:
    """Store names to try for `ref`, in order: the name as given, then its full registry spelling (so
    `python:3.12-slim` finds `docker.io/library/python:3.12-slim`, while a local `debian:bookworm` keeps
    precedence over a pulled one)."""
    name = parse_image_name(ref)
    full = parse_reference(name).name
    return [name] if full == name else [name, full]
