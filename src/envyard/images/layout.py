"""save and load: images as OCI image layouts (a directory, or a tar of one), and `docker save` archives.

`save` writes oci-layout, index.json, blobs/sha256/* and, for Docker before version 25, a `docker save`
style manifest.json beside them. `load` reads an OCI layout (directory or tar) through the same checks as a
pull (digests, diff_ids, the layer scan); a `docker save` archive without index.json goes to the archive
importer (bases/archive.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tarfile
import uuid
from pathlib import Path
from typing import BinaryIO, Iterator

from ..errors import BadInput, DigestMismatch
from ..layertar import pack_blob
from ..store import BlobInfo, Image, Store, parse_image_name, parse_reference
from .oci import (MAX_CONFIG, MAX_MANIFEST, OCI_CONFIG, OCI_INDEX, OCI_LAYER_GZIP, OCI_MANIFEST, Descriptor,
                  canonical_json, descriptor, parse_json, pick_platform)
from .progress import Progress, ProgressFn, report, short
from .pull import install_image, store_of
from .push import exportable_image, image_document, scratch_file

NAME_ANNOTATION = "io.containerd.image.name"  # the full name (what Docker and containerd write)
REF_ANNOTATION = "org.opencontainers.image.ref.name"  # OCI's: often just the tag
_LAYOUT_FIX = "give an OCI image layout (a directory or tar with oci-layout and index.json) or `docker save` output"


# --- save ------------------------------------------------------------------


def save_image(yard, name: str, path: str | Path, *, directory: bool = False,
               on_progress: ProgressFn | None = None) -> dict:
    """Write image `name` to `path` as an OCI layout: a tar file, or with `directory` a new directory."""
    store = store_of(yard)
    image = exportable_image(store, name)
    path = Path(path)
    if path.exists() and (not directory or not path.is_dir() or any(path.iterdir())):
        raise BadInput(f"{path} already exists", fix="give a new path (save never overwrites)")
    progress = report(on_progress)
    work = path.parent / f".{path.name}.envyard-{uuid.uuid4().hex[:8]}"
    try:
        work.mkdir(parents=True)
        digest = _write_layout(store, image, work, progress)
        if directory:
            if path.exists():
                path.rmdir()
            os.rename(work, path)
        else:
            partial = path.with_name(path.name + ".partial")
            with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tf:
                for item in sorted(work.rglob("*")):
                    tf.add(item, arcname=str(item.relative_to(work)), recursive=False, filter=_plain_member)
            os.rename(partial, path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        path.with_name(path.name + ".partial").unlink(missing_ok=True)
    progress(Progress(f"saved {image.name} to {path}", phase="done", digest=digest))
    return {"name": image.name, "path": str(path), "digest": digest, "format": "oci-dir" if directory else "oci-tar"}


def _plain_member(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _write_layout(store: Store, image: Image, root: Path, progress: ProgressFn) -> str:
    blobs = root / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    layers = []
    for layer_id in image.layers:
        progress(Progress(f"layer {layer_id[:12]}: packing", phase="pack"))
        tmp = blobs / f".{layer_id}.tmp"
        packed = pack_blob(store.layer(layer_id).path, tmp)
        os.replace(tmp, blobs / packed.digest.split(":")[1])
        blob_info = Descriptor(OCI_LAYER_GZIP, packed.digest, packed.size)
        layers.append((blob_info, packed.diff_id))
        store.record_blob(layer_id, BlobInfo(packed.digest, packed.diff_id, OCI_LAYER_GZIP, packed.size))
        progress(Progress(f"{short(packed.digest)}: written", phase="done", digest=packed.digest,
                          done=packed.size, total=packed.size))
    config = canonical_json(image_document(store, image, [diff_id for _, diff_id in layers]))
    config_desc = _write_blob(blobs, OCI_CONFIG, config)
    manifest = canonical_json({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config_desc.to_json(),
                               "layers": [d.to_json() for d, _ in layers]})
    manifest_desc = _write_blob(blobs, OCI_MANIFEST, manifest)
    notes = {NAME_ANNOTATION: image.name}
    if ":" in image.name.rsplit("/", 1)[-1] and "@" not in image.name:
        notes[REF_ANNOTATION] = image.name.rsplit(":", 1)[1]
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX,
             "manifests": [{**manifest_desc.to_json(), "annotations": notes}]}
    (root / "index.json").write_bytes(canonical_json(index))
    (root / "oci-layout").write_bytes(canonical_json({"imageLayoutVersion": "1.0.0"}))
    docker = [{"Config": f"blobs/sha256/{config_desc.digest[7:]}",
               "RepoTags": [] if "@" in image.name else [image.name],
               "Layers": [f"blobs/sha256/{d.digest[7:]}" for d, _ in layers]}]
    (root / "manifest.json").write_bytes(canonical_json(docker))
    return manifest_desc.digest


def _write_blob(blobs: Path, media_type: str, data: bytes) -> Descriptor:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    (blobs / digest[7:]).write_bytes(data)
    return Descriptor(media_type, digest, len(data))


# --- load ------------------------------------------------------------------


def load_image(yard, path: str | Path, *, name: str | None = None, on_progress: ProgressFn | None = None) -> Image:
    """Load an OCI layout (directory or tar) or a `docker save` archive; `name` overrides the name it carries."""
    from ..bases import import_image

    store = store_of(yard)
    path = Path(path)
    if name is not None:
        name = parse_image_name(name)
    progress = report(on_progress)
    if path.is_dir():
        return _load_layout(store, _DirFiles(path), path, name, progress)
    if not path.is_file():
        raise BadInput(f"no such file or directory: {path}", fix=_LAYOUT_FIX)
    try:
        tf = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError) as e:
        raise BadInput(f"{path} is not a tar archive: {e}", fix=_LAYOUT_FIX) from e
    with tf:
        files = _TarFiles(tf)
        if files.has("index.json") and files.has("oci-layout"):
            return _load_layout(store, files, path, name, progress)
        if not files.has("manifest.json"):
            raise BadInput(f"{path} is neither an OCI image layout nor `docker save` output", fix=_LAYOUT_FIX)
        name = name or _docker_save_name(files, path)
    progress(Progress(f"importing the docker save archive {path.name}", phase="extract"))
    return import_image(store, path, name, on_progress=lambda line: progress(Progress(line, phase="extract")))


def _docker_save_name(files: "_TarFiles", path: Path) -> str:
    try:
        entries = json.loads(files.read("manifest.json", MAX_MANIFEST))
        tag = entries[0]["RepoTags"][0]
    except (ValueError, LookupError, TypeError) as e:
        raise BadInput(f"{path} names no image (no RepoTags in manifest.json)",
                       fix="give a name: envyard load FILE --name NAME") from e
    return parse_reference(tag).name


def _load_layout(store: Store, files, path: Path, name: str | None, progress: ProgressFn) -> Image:
    if b"imageLayoutVersion" not in files.read("oci-layout", 4096):
        raise BadInput(f"{path}: oci-layout is not an OCI layout marker", fix=_LAYOUT_FIX)
    index = parse_json(files.read("index.json", MAX_MANIFEST), "index.json")
    raw = index.get("manifests")
    if not isinstance(raw, list) or not raw:
        raise BadInput(f"{path}: index.json lists no images", fix=_LAYOUT_FIX)
    entries = [descriptor(item, f"index.json entry {i + 1}") for i, item in enumerate(raw)]
    entry = pick_platform(index) if any(e.platform for e in entries) else entries[0]
    notes = entry.annotations or {}
    name = name or _layout_name(notes, path)
    source = LayoutSource(store, files, path)
    return install_image(store, source, entry.digest, name, progress, {"provider": "load", "source": str(path)})


def _layout_name(notes: dict, path: Path) -> str:
    """The name the layout gives its image: containerd's full-name annotation, else OCI's ref.name when it is
    more than a bare tag."""
    for candidate in (notes.get(NAME_ANNOTATION), notes.get(REF_ANNOTATION)):
        if isinstance(candidate, str) and (":" in candidate or "/" in candidate):
            return parse_image_name(candidate)
    raise BadInput(f"{path} does not name its image", fix="give a name: envyard load PATH --name NAME")


class LayoutSource:
    """An image's documents and blobs from an OCI layout, each verified against its digest."""

    def __init__(self, store: Store, files, path: Path):
        self.store, self.files = store, files
        self.origin = {"provider": "load", "source": str(path)}

    def manifest(self, ref: str) -> tuple[bytes, str | None, str]:
        data = self.files.read(_blob_name(ref), MAX_MANIFEST)
        _verify(hashlib.sha256(data), ref)
        return data, None, ref

    def blob(self, desc: Descriptor, max_size: int) -> bytes:
        data = self.files.read(_blob_name(desc.digest), max(max_size, MAX_CONFIG))
        _verify(hashlib.sha256(data), desc.digest)
        return data

    @contextlib.contextmanager
    def layer_file(self, desc: Descriptor, progress: ProgressFn, stored) -> Iterator[Path | None]:
        if stored():
            yield None
            return
        name = _blob_name(desc.digest)
        progress(Progress(f"{short(desc.digest)}: reading", phase="download", digest=desc.digest, total=desc.size))
        direct = self.files.path(name)
        if direct is not None:
            _verify(_hash_stream(self.files.open(name), desc.size), desc.digest)
            yield direct
            return
        with scratch_file(self.store, "load") as scratch:
            with self.files.open(name) as src, open(scratch, "wb") as dst:
                hasher = _hash_stream(src, desc.size, copy_to=dst)
            _verify(hasher, desc.digest)
            yield scratch


def _blob_name(digest: str) -> str:
    return f"blobs/sha256/{digest.split(':', 1)[1]}"  # digests are checked to be sha256:<64 hex> on parsing


def _verify(hasher, digest: str) -> None:
    got = "sha256:" + hasher.hexdigest()
    if got != digest:
        raise DigestMismatch(f"blob {digest} of the layout has digest {got}", fix="the layout is corrupted")


def _hash_stream(src: BinaryIO, limit: int, copy_to: BinaryIO | None = None):
    hasher, count = hashlib.sha256(), 0
    with src:
        while chunk := src.read(1 << 20):
            count += len(chunk)
            if count > limit:
                raise DigestMismatch("a blob of the layout is larger than its descriptor says",
                                     fix="the layout is corrupted")
            hasher.update(chunk)
            if copy_to is not None:
                copy_to.write(chunk)
    return hasher


class _DirFiles:
    def __init__(self, root: Path):
        self.root = root

    def path(self, name: str) -> Path | None:
        return self.root / name

    def open(self, name: str) -> BinaryIO:
        try:
            return open(self.root / name, "rb")
        except OSError as e:
            raise BadInput(f"{self.root}: cannot read {name}: {e.strerror}", fix=_LAYOUT_FIX) from e

    def read(self, name: str, limit: int) -> bytes:
        with self.open(name) as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise BadInput(f"{self.root}: {name} is larger than {limit} bytes", fix=_LAYOUT_FIX)
        return data


class _TarFiles:
    """Members of a tar of a layout; names may carry a leading './'."""

    def __init__(self, tf: tarfile.TarFile):
        self.tf = tf
        self.members = {m.name.removeprefix("./"): m for m in tf.getmembers()}

    def has(self, name: str) -> bool:
        return name in self.members

    def path(self, name: str) -> Path | None:
        return None

    def open(self, name: str) -> BinaryIO:
        member = self.members.get(name)
        f = self.tf.extractfile(member) if member is not None else None
        if f is None:
            raise BadInput(f"the archive has no file {name}", fix=_LAYOUT_FIX)
        return f

    def read(self, name: str, limit: int) -> bytes:
        with self.open(name) as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise BadInput(f"{name} in the archive is larger than {limit} bytes", fix=_LAYOUT_FIX)
        return data
