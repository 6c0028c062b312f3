"""Pull: an image from a registry (or an OCI layout, for `load`) into the store.

manifest (an index picks linux/<this machine's architecture>) → config → each layer: found in the store by
its blob digest or diff_id, else downloaded (resumable), verified (digest, diff_id, a scan of every tar
member), unpacked and sealed with its digest → the image row, last. A failure or Ctrl-C leaves no image:
sealed layers stay for the next try (and gc removes them once unused), unsealed ones are discarded, and a
partial download stays in downloads/ for the next pull to resume (gc removes those nobody is writing).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
from pathlib import Path
from typing import Callable, Iterator, Protocol

from ..errors import DigestMismatch, PlatformNotFound, UnsupportedImage
from ..layertar import scan_blob, unpack_blob
from ..store import BlobInfo, Image, Store, parse_reference
from .client import RegistryClient
from .oci import (INDEX_TYPES, MAX_CONFIG, Descriptor, Manifest, diff_ids, host_platform, image_config, media_type_of,
                  parse_json, parse_manifest, pick_platform)
from .progress import Progress, ProgressFn, report, short
from .registries import load_config

EMPTY_TAR = "sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"  # 1024 zero bytes


class ImageSource(Protocol):
    """Where an image's documents and blobs come from: a registry, or an OCI layout on disk."""

    origin: dict  # recorded in each new layer's origin

    def manifest(self, ref: str) -> tuple[bytes, str | None, str]: ...  # bytes, Content-Type, digest

    def blob(self, desc: Descriptor, max_size: int) -> bytes: ...

    def layer_file(self, desc: Descriptor, progress: ProgressFn,
                   stored: Callable[[], str | None]) -> contextlib.AbstractContextManager[Path | None]:
        """The blob as a local file, verified; None when `stored()` says the layer is in the store (checked
        first, and again after any wait for another process fetching the same blob)."""


def store_of(yard) -> Store:
    return yard if isinstance(yard, Store) else yard.store


def pull_image(yard, ref: str, *, on_progress: ProgressFn | None = None) -> Image:
    """Pull `ref` (e.g. `python:3.12-slim`, `127.0.0.1:5000/team/img:v1`, `name@sha256:...`) into the store
    of `yard` (a Yard or a Store) and return the image, named as `parse_reference(ref).name`."""
    store = store_of(yard)
    reference = parse_reference(ref)
    progress = report(on_progress)
    progress(Progress(f"resolving {reference}", phase="resolve"))
    with RegistryClient(load_config(store.home), reference.registry, reference.repository) as client:
        source = RegistrySource(store, client, reference.registry, reference.repository)
        return install_image(store, source, reference.manifest_ref, reference.name, progress,
                             {"provider": "registry", "reference": reference.name, "registry": reference.registry,
                              "repository": reference.repository})


def install_image(store: Store, source: ImageSource, ref: str, name: str, progress: ProgressFn,
                  provenance: dict) -> Image:
    manifest, digest = resolve(source, ref)
    config_doc = parse_json(source.blob(manifest.config, MAX_CONFIG), "image config")
    _check_platform(config_doc)
    ids = diff_ids(config_doc, len(manifest.layers))
    layers: list[str] = []
    for desc, diff_id in zip(manifest.layers, ids):
        layer = install_layer(store, source, desc, diff_id, progress)
        if layer in layers:  # overlayfs refuses a directory twice in one stack: this one gets a copy
            layer = private_copy(store, layer)
        if layer is not None:
            layers.append(layer)
    config = image_config(config_doc, {**provenance, "manifest_digest": digest,
                                       "config_digest": manifest.config.digest,
                                       "platform": "linux/" + "/".join(p for p in host_platform() if p)})
    image = store.put_image(name, layers, config)
    progress(Progress(f"{name} ({digest})", phase="done", digest=digest))
    return image


def resolve(source: ImageSource, ref: str) -> tuple[Manifest, str]:
    """The image manifest `ref` stands for, through an index if it names one, and its digest."""
    body, content_type, digest = source.manifest(ref)
    doc = parse_json(body, "manifest")
    media_type = media_type_of(doc, content_type)
    if media_type in INDEX_TYPES:
        entry = pick_platform(doc)
        body, content_type, digest = source.manifest(entry.digest)
        doc = parse_json(body, "manifest")
        media_type = media_type_of(doc, content_type or entry.media_type)
        if media_type in INDEX_TYPES:
            raise UnsupportedImage("the image index points at another index", fix="use the inner index's digest")
    return parse_manifest(doc, media_type), digest


def _check_platform(config_doc: dict) -> None:
    arch = config_doc.get("architecture")
    os_name = config_doc.get("os")
    want = host_platform()[0]
    if (os_name and os_name != "linux") or (arch and arch != want):
        raise PlatformNotFound(f"the image is for {os_name}/{arch}, not linux/{want}",
                               fix="use an image built for this machine's platform")


def install_layer(store: Store, source: ImageSource, desc: Descriptor, diff_id: str,
                  progress: ProgressFn) -> str | None:
    """The store layer for one manifest layer (None for an empty layer: nothing to stack): one already stored
    for the same blob or the same content, else a new one, recorded by its digest."""
    tag = short(desc.digest)
    if diff_id == EMPTY_TAR:
        progress(Progress(f"{tag}: empty layer", phase="skip", digest=desc.digest))
        return None
    blob = BlobInfo(desc.digest, diff_id, desc.media_type, desc.size)
    with source.layer_file(desc, progress, lambda: _stored(store, blob)) as path:
        if path is None:
            progress(Progress(f"{tag}: already stored", phase="exists", digest=desc.digest, total=desc.size))
            return _stored(store, blob)
        progress(Progress(f"{tag}: verifying", phase="verify", digest=desc.digest, total=desc.size))
        scan = scan_blob(path)
        if scan.diff_id != diff_id:
            raise DigestMismatch(f"layer {desc.digest} unpacks to {scan.diff_id}, not the {diff_id} its image "
                                 "config names", fix="the image is inconsistent or was tampered with")
        if scan.entries == 0:
            progress(Progress(f"{tag}: empty layer", phase="skip", digest=desc.digest))
            return None
        progress(Progress(f"{tag}: unpacking", phase="extract", digest=desc.digest, total=desc.size))
        built = store.new_layer_dir()
        try:
            unpack_blob(path, built)
            layer = store.seal_layer(built, {**source.origin, "digest": desc.digest, "diff_id": diff_id}, blob=blob)
        except BaseException:
            store.discard_dir(built)
            raise
    progress(Progress(f"{tag}: done", phase="done", digest=desc.digest, done=desc.size, total=desc.size))
    return layer.id


def private_copy(store: Store, layer_id: str) -> str:
    """A copy of a layer under a new id (not found by digest), for an image that stacks the layer twice."""
    built = store.new_layer_dir()
    try:
        subprocess.run(["cp", "-a", "--reflink=auto", f"{store.layer(layer_id).path}/.", str(built)], check=True,
                       capture_output=True)
        return store.seal_layer(built, {**store.layer(layer_id).origin, "copy_of": layer_id}).id
    except BaseException:
        store.discard_dir(built)
        raise


def _stored(store: Store, blob: BlobInfo) -> str | None:
    found = store.layer_for_blob(digest=blob.digest, diff_id=blob.diff_id)
    if found is None:
        return None
    if not any(b.digest == blob.digest for b in store.blobs_of(found.id)):
        store.record_blob(found.id, blob)  # the same content compressed another way: find it directly next time
    return found.id


class RegistrySource:
    """An image's documents and blobs from a registry; layer blobs land in the store's downloads/."""

    def __init__(self, store: Store, client: RegistryClient, registry: str, repository: str):
        self.store, self.client = store, client
        self.origin = {"provider": "registry", "registry": registry, "repository": repository}

    def manifest(self, ref: str) -> tuple[bytes, str | None, str]:
        return self.client.get_manifest(ref)

    def blob(self, desc: Descriptor, max_size: int) -> bytes:
        return self.client.get_blob(desc.digest, max_size)

    @contextlib.contextmanager
    def layer_file(self, desc: Descriptor, progress: ProgressFn,
                   stored: Callable[[], str | None]) -> Iterator[Path | None]:
        """Download the blob into downloads/<hex>.part (continuing what an interrupted pull left there) under
        an exclusive lock, so two pulls of one blob take turns and gc leaves it alone; deleted after use."""
        if stored():
            yield None
            return
        with locked_download(self.store, desc.digest) as (path, part):
            if stored():  # another pull stored it while we waited for its lock
                yield None
                return
            tag = short(desc.digest)
            start = os.fstat(part.fileno()).st_size
            what = f"{tag}: resuming at {start} bytes" if start else f"{tag}: downloading"
            progress(Progress(what, phase="download", digest=desc.digest, done=start, total=desc.size))

            def on_bytes(n: int) -> None:
                progress(Progress(f"{tag}: {n}/{desc.size} bytes", phase="download", digest=desc.digest,
                                  done=n, total=desc.size))

            try:
                self.client.download_blob(desc.digest, desc.size, part, on_bytes)
            except DigestMismatch:
                path.unlink(missing_ok=True)  # wrong content: nothing worth resuming
                raise
            try:
                yield path
            finally:
                path.unlink(missing_ok=True)


@contextlib.contextmanager
def locked_download(store: Store, digest: str):
    """(path, open file) of the partial download of `digest`, locked exclusively. A file that was deleted
    while we waited for its lock (its pull finished) is not reused: we open the new one."""
    path = store.downloads_dir / (digest.split(":", 1)[1] + ".part")
    while True:
        part = open(path, "a+b")
        try:
            fcntl.flock(part, fcntl.LOCK_EX)
            if os.path.exists(path) and os.path.samestat(os.fstat(part.fileno()), os.stat(path)):
                break
        except BaseException:
            part.close()
            raise
        part.close()
    with part:
        yield path, part
