"""Push: an envyard image to a registry.

Each layer goes up as a gzip-compressed OCI tar (layertar.pack_blob: overlayfs whiteouts back to `.wh.`
entries). A layer whose blob digest the store knows (it was pulled, pushed or saved before) is first looked
for in the target repository, then mounted from the repository it was pulled from on the same registry;
only when neither works is it packed and uploaded, and the digest is remembered for next time. Then the
config and the manifest (OCI by default, Docker schema 2 on request).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

from ..errors import BadInput
from ..layertar import pack_blob
from ..bases.host import HOST_IMAGE, HOST_ROOT_LAYER
from ..store import BlobInfo, Image, Reference, Store, parse_image_name, parse_reference
from .client import RegistryClient
from .oci import (DOCKER_CONFIG, DOCKER_LAYER_GZIP, DOCKER_MANIFEST, LAYER_TYPES, OCI_CONFIG, OCI_LAYER_GZIP,
                  OCI_MANIFEST, canonical_json, config_document)
from .progress import Progress, ProgressFn, report, short
from .pull import store_of
from .registries import load_config

FORMATS = ("oci", "docker")
_GZIP_TYPES = (OCI_LAYER_GZIP, DOCKER_LAYER_GZIP)


@dataclass
class PushResult:
    reference: str  # where it went, e.g. 127.0.0.1:5000/team/img:v1
    digest: str  # the manifest's digest
    layers: list[dict] = field(default_factory=list)  # digest, size, and "exists", "mounted" or "uploaded"

    def to_dict(self) -> dict:
        return asdict(self)


def push_image(yard, name: str, ref: str | None = None, *, on_progress: ProgressFn | None = None,
               format: str = "oci") -> PushResult:
    """Push image `name` to `ref` (default: the image's own name, e.g. a pulled image back to its registry).
    `format="docker"` writes Docker schema 2 media types, for registries that take nothing else."""
    if format not in FORMATS:
        raise BadInput(f"unknown manifest format {format!r}", fix="use 'oci' (default) or 'docker'")
    store = store_of(yard)
    target = _push_target(ref) if ref else None
    image = exportable_image(store, name)
    target = target or _push_target(image.name)
    progress = report(on_progress)
    result = PushResult(target.name, "")
    with RegistryClient(load_config(store.home), target.registry, target.repository, push=True) as client:
        blobs = []
        for layer_id in image.layers:
            blob, action = push_layer(store, client, layer_id, format, progress)
            blobs.append(blob)
            result.layers.append({"digest": blob.digest, "size": blob.size, "action": action})
        docker = format == "docker"
        config = canonical_json(image_document(store, image, [b.diff_id for b in blobs]))
        config_digest = _digest(config)
        if not client.blob_exists(config_digest):
            client.upload_bytes(config_digest, config)
        layer_type = DOCKER_LAYER_GZIP if docker else None
        manifest = {
            "schemaVersion": 2, "mediaType": DOCKER_MANIFEST if docker else OCI_MANIFEST,
            "config": {"mediaType": DOCKER_CONFIG if docker else OCI_CONFIG, "digest": config_digest,
                       "size": len(config)},
            "layers": [{"mediaType": layer_type or b.media_type, "digest": b.digest, "size": b.size} for b in blobs],
        }
        result.digest = client.put_manifest(target.tag, canonical_json(manifest), manifest["mediaType"])
    progress(Progress(f"pushed {target.name} ({result.digest})", phase="done", digest=result.digest))
    return result


def _push_target(ref: str) -> Reference:
    target = parse_reference(ref)
    if target.digest:
        raise BadInput(f"cannot push to a digest ({ref})", fix="give a tag, e.g. REGISTRY/REPO:TAG")
    return target


def exportable_image(store: Store, name: str) -> Image:
    """Image `name`, if all its layers are the store's own: not the host's root (nor its mask), which cannot
    leave this machine."""
    image = None if parse_image_name(name) == HOST_IMAGE else store.image(name)
    for layer_id in image.layers if image else [HOST_ROOT_LAYER]:
        if image is None or not store.owns_layer_dir(store.layer(layer_id).path):
            raise BadInput(f"image {name} stands on the host's root filesystem, which cannot leave this machine",
                           fix="push or save an image built on a Debian, pulled, loaded or imported base")
    return image


def image_document(store: Store, image: Image, diff_ids: list[str]) -> dict:
    history = []
    for layer_id in image.layers:
        origin = store.layer(layer_id).origin
        history.append("envyard: " + ", ".join(f"{k}={origin[k]}" for k in sorted(origin) if k != "diff_id"))
    return config_document(image.config, diff_ids, image.created, history)


def push_layer(store: Store, client: RegistryClient, layer_id: str, format: str,
               progress: ProgressFn) -> tuple[BlobInfo, str]:
    """Make sure the registry has a blob of this layer: (the blob, what it took)."""
    layer = store.layer(layer_id)
    usable = _GZIP_TYPES if format == "docker" else LAYER_TYPES
    for blob in store.blobs_of(layer_id):
        if blob.media_type not in usable:
            continue
        if client.blob_exists(blob.digest):
            progress(Progress(f"{short(blob.digest)}: already in the registry", phase="exists",
                              digest=blob.digest, total=blob.size))
            return blob, "exists"
        origin = layer.origin
        if (origin.get("registry") == client.registry and origin.get("repository") not in (None, client.repository)
                and origin.get("digest") == blob.digest and client.mount_blob(blob.digest, origin["repository"])):
            progress(Progress(f"{short(blob.digest)}: mounted from {origin['repository']}", phase="mounted",
                              digest=blob.digest, total=blob.size))
            return blob, "mounted"
    progress(Progress(f"layer {layer_id[:12]}: packing", phase="pack", digest=None))
    with scratch_file(store, "push") as path:
        packed = pack_blob(layer.path, path)
        blob = BlobInfo(packed.digest, packed.diff_id, OCI_LAYER_GZIP, packed.size)
        action = "exists"
        if not client.blob_exists(blob.digest):
            def on_bytes(n: int) -> None:
                progress(Progress(f"{short(blob.digest)}: {n}/{blob.size} bytes", phase="upload",
                                  digest=blob.digest, done=n, total=blob.size))

            client.upload_blob(blob.digest, path, on_bytes)
            action = "uploaded"
    store.record_blob(layer_id, blob)
    progress(Progress(f"{short(blob.digest)}: {action}", phase="done" if action == "uploaded" else "exists",
                      digest=blob.digest, done=blob.size, total=blob.size))
    return blob, action


@contextlib.contextmanager
def scratch_file(store: Store, kind: str) -> Iterator[Path]:
    """A file in the store's downloads/ for a packed blob, locked (so gc leaves it) and deleted after use."""
    path = store.downloads_dir / f"{kind}-{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp"
    with open(path, "xb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield path
        finally:
            path.unlink(missing_ok=True)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
