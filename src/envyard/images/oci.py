"""OCI and Docker image documents: media types, manifests and indexes, platforms, and the image config.

Everything here reads untrusted JSON, so each accessor checks the shape it relies on and says what is wrong.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass

from ..errors import PlatformNotFound, RegistryError, UnsupportedImage
from ..store import ImageConfig
from ..store.names import DIGEST_RE

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
OCI_LAYER_GZIP = OCI_LAYER + "+gzip"
OCI_LAYER_ZSTD = OCI_LAYER + "+zstd"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"

INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
CONFIG_TYPES = (OCI_CONFIG, DOCKER_CONFIG)
LAYER_TYPES = (OCI_LAYER, OCI_LAYER_GZIP, OCI_LAYER_ZSTD, DOCKER_LAYER_GZIP)
# What a registry is asked for, best first.
ACCEPT = ", ".join((OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST))

MAX_MANIFEST = 4 << 20  # bytes; the distribution registry itself refuses manifests over 4 MiB
MAX_CONFIG = 16 << 20
MAX_LAYERS = 500  # overlayfs stacks at most 500 lower directories

# platform.machine() → OCI architecture (and variant)
_ARCH = {"x86_64": ("amd64", None), "amd64": ("amd64", None), "aarch64": ("arm64", None),
         "arm64": ("arm64", None), "armv7l": ("arm", "v7"), "ppc64le": ("ppc64le", None),
         "s390x": ("s390x", None), "riscv64": ("riscv64", None), "i686": ("386", None)}


def host_platform() -> tuple[str, str | None]:
    """This machine's OCI architecture and variant, e.g. ("amd64", None)."""
    machine = platform.machine().lower()
    return _ARCH.get(machine, (machine, None))


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int
    platform: dict | None = None
    annotations: dict | None = None

    def to_json(self) -> dict:
        d = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        if self.annotations:
            d["annotations"] = self.annotations
        return d


@dataclass(frozen=True)
class Manifest:
    media_type: str
    config: Descriptor
    layers: list[Descriptor]


def parse_json(data: bytes, what: str) -> dict:
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RegistryError(f"the {what} is not valid JSON: {e}", fix="the registry served a broken document") from e
    if not isinstance(doc, dict):
        raise RegistryError(f"the {what} is not a JSON object", fix="the registry served a broken document")
    return doc


def media_type_of(doc: dict, header: str | None) -> str:
    """A manifest's media type: its own field, else the Content-Type it came with, else its shape."""
    declared = doc.get("mediaType")
    if isinstance(declared, str) and declared:
        return declared
    header = (header or "").split(";")[0].strip()
    if header and header not in ("application/json", "application/octet-stream", "text/plain"):
        return header
    if doc.get("schemaVersion") == 1:
        return "application/vnd.docker.distribution.manifest.v1+json"
    return OCI_INDEX if "manifests" in doc else OCI_MANIFEST


def descriptor(raw, what: str) -> Descriptor:
    if not isinstance(raw, dict):
        raise RegistryError(f"{what} is not a descriptor object", fix="the registry served a broken manifest")
    media, digest, size = raw.get("mediaType"), raw.get("digest"), raw.get("size")
    if not isinstance(digest, str) or not DIGEST_RE.fullmatch(digest):
        raise UnsupportedImage(f"{what} has digest {digest!r}; envyard reads sha256 digests only",
                               fix="use an image whose content is addressed by sha256")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise RegistryError(f"{what} has no valid size", fix="the registry served a broken manifest")
    plat, notes = raw.get("platform"), raw.get("annotations")
    return Descriptor(media if isinstance(media, str) else "", digest, size,
                      plat if isinstance(plat, dict) else None, notes if isinstance(notes, dict) else None)


def parse_manifest(doc: dict, media_type: str) -> Manifest:
    """An image manifest (not an index): its config and layers, with their media types checked."""
    if media_type not in MANIFEST_TYPES:
        raise UnsupportedImage(f"unsupported manifest media type {media_type!r}", fix=_TYPES_FIX)
    config = descriptor(doc.get("config"), "the manifest's config")
    if config.media_type not in CONFIG_TYPES:
        raise UnsupportedImage(f"not a container image: its config has media type {config.media_type!r}",
                               fix="pull a container image (an OCI or Docker image), not another artifact")
    raw_layers = doc.get("layers")
    if not isinstance(raw_layers, list):
        raise RegistryError("the manifest has no layer list", fix="the registry served a broken manifest")
    if len(raw_layers) > MAX_LAYERS:
        raise UnsupportedImage(f"the image has {len(raw_layers)} layers; overlayfs stacks at most {MAX_LAYERS}",
                               fix="squash the image into fewer layers")
    layers = [descriptor(raw, f"layer {i + 1}") for i, raw in enumerate(raw_layers)]
    for layer in layers:
        if layer.media_type not in LAYER_TYPES:
            raise UnsupportedImage(f"unsupported layer media type {layer.media_type!r}", fix=_TYPES_FIX)
    return Manifest(media_type, config, layers)


_TYPES_FIX = ("envyard reads OCI and Docker schema 2 images with tar, gzip or zstd layers (not Docker schema 1, "
              "Windows or non-distributable layers); re-push the image with a current tool")


def pick_platform(doc: dict) -> Descriptor:
    """The entry of an index (manifest list) for linux on this machine's architecture."""
    raw = doc.get("manifests")
    if not isinstance(raw, list):
        raise RegistryError("the image index has no manifest list", fix="the registry served a broken index")
    entries = [descriptor(item, f"index entry {i + 1}") for i, item in enumerate(raw)]
    arch, variant = host_platform()
    candidates = [e for e in entries if (e.platform or {}).get("os") == "linux"
                  and (e.platform or {}).get("architecture") == arch]
    if variant:
        exact = [e for e in candidates if e.platform.get("variant") == variant]
        candidates = exact or candidates
    if not candidates:
        offered = sorted({platform_name(e.platform) for e in entries if e.platform}) or ["none named"]
        raise PlatformNotFound(
            f"the image has no variant for linux/{arch}{'/' + variant if variant else ''}; it offers "
            + ", ".join(offered),
            fix="use an image built for this machine's platform",
        )
    return candidates[0]


def platform_name(plat: dict | None) -> str:
    plat = plat or {}
    parts = [str(plat.get("os", "?")), str(plat.get("architecture", "?"))]
    if plat.get("variant"):
        parts.append(str(plat["variant"]))
    return "/".join(parts)


# --- the image config ------------------------------------------------------


def diff_ids(doc: dict, layers: int) -> list[str]:
    rootfs = doc.get("rootfs")
    ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, str) and DIGEST_RE.fullmatch(i) for i in ids):
        raise RegistryError("the image config has no valid rootfs.diff_ids", fix="the registry served a broken image")
    if len(ids) != layers:
        raise RegistryError(f"the image config lists {len(ids)} layer digests for {layers} layers",
                            fix="the registry served an inconsistent image")
    return ids


def _strings(value) -> list[str] | None:
    return [str(v) for v in value] if isinstance(value, list) else None


def image_config(doc: dict, provenance: dict) -> ImageConfig:
    """envyard's ImageConfig from an OCI/Docker image config's `config` section."""
    raw = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    env = {}
    for item in raw.get("Env") or []:
        key, _, value = str(item).partition("=")
        if key:
            env[key] = value
    labels, ports, health = raw.get("Labels"), raw.get("ExposedPorts"), raw.get("Healthcheck")
    return ImageConfig(
        env=env,
        workdir=str(raw.get("WorkingDir") or "/"),
        user=str(raw.get("User") or "root"),
        labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
        entrypoint=_strings(raw.get("Entrypoint")),
        cmd=_strings(raw.get("Cmd")),
        exposed_ports=sorted(str(p) for p in ports) if isinstance(ports, dict) else [],
        healthcheck=health if isinstance(health, dict) else None,
        stop_signal=str(raw["StopSignal"]) if raw.get("StopSignal") else None,
        provenance=provenance,
    )


def config_document(config: ImageConfig, ids: list[str], created: float, history: list[str]) -> dict:
    """An OCI image config for an envyard image whose layers have uncompressed digests `ids`."""
    arch, variant = host_platform()
    section: dict = {}
    if config.env:
        section["Env"] = [f"{k}={v}" for k, v in config.env.items()]
    if config.workdir and config.workdir != "/":
        section["WorkingDir"] = config.workdir
    if config.user and config.user != "root":
        section["User"] = config.user
    for key, value in (("Entrypoint", config.entrypoint), ("Cmd", config.cmd), ("Labels", config.labels or None),
                       ("Healthcheck", config.healthcheck), ("StopSignal", config.stop_signal)):
        if value is not None:
            section[key] = value
    if config.exposed_ports:
        section["ExposedPorts"] = {port: {} for port in config.exposed_ports}
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))
    doc = {"architecture": arch, "os": "linux", "created": stamp, "config": section,
           "rootfs": {"type": "layers", "diff_ids": ids},
           "history": [{"created": stamp, "created_by": line} for line in history]}
    if variant:
        doc["variant"] = variant
    return doc


def canonical_json(doc: dict) -> bytes:
    """The bytes envyard writes for a document it makes (stable, so the same image has the same digest)."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
