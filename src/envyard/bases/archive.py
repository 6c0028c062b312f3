"""Import an image from a `docker save` archive or a plain rootfs tarball.

Every layer is unpacked by the system `tar` (as root, so owners, modes,
xattrs, device nodes and hard links survive) into a fresh directory supplied
by the caller. Docker/OCI whiteouts are then rewritten into the kernel
overlayfs format (layertar.py), so each directory can be used directly as an
overlay lower dir.

The archive format is recognised by content, never by file name.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import lzma
import shutil
import subprocess
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from envyard.errors import BadInput
from envyard.layertar import CHUNK, CORRUPT_FIX, MAGIC_LEN, compression_of, convert_whiteouts, untar

# No docker-save layout nests deeper than blobs/sha256/<digest>; a deeper
# member name proves the archive is a rootfs, so detection can stop early.
_DOCKER_MAX_DEPTH = 3
# Errors raised while reading a broken or non-tar archive in Python.
_READ_ERRORS = (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile)
ProgressFn = Callable[[str], None]


@dataclass
class ImportedImage:
    """Layer directories, bottom first, and the image config.

    config keys: env (dict), workdir, user (str or None), cmd (list or None),
    labels (dict), source ("rootfs-tar" or "docker-save").
    """

    layer_dirs: list[Path]
    config: dict


def import_archive(
    path: Path,
    new_layer_dir: Callable[[], Path],
    *,
    on_progress: ProgressFn | None = None,
) -> ImportedImage:
    """Unpack `path` into layer dirs obtained from `new_layer_dir()`, one per layer.

    On failure every layer dir handed out during this call is removed.
    """
    path = Path(path)
    progress = on_progress or (lambda _msg: None)
    _check_path(path)
    created: list[Path] = []

    def fresh_dir() -> Path:
        layer = Path(new_layer_dir())
        created.append(layer)
        return layer

    try:
        try:
            compression = _compression_of_file(path)
            if _is_docker_save(path, compression):
                return _import_docker_save(path, compression, fresh_dir, progress)
            return _import_rootfs(path, fresh_dir, progress)
        except _READ_ERRORS as exc:
            raise BadInput(f"{path} is not a readable tar archive: {exc}", fix=CORRUPT_FIX) from exc
    except BaseException:
        for layer in created:
            shutil.rmtree(layer, ignore_errors=True)
        raise


def _check_path(path: Path) -> None:
    if not path.exists():
        raise BadInput(f"no such file: {path}", fix="check the archive path")
    if not path.is_file():
        raise BadInput(f"not a regular file: {path}", fix="pass a tar archive, not a directory")


def _empty_config(source: str) -> dict:
    return {"env": {}, "workdir": None, "user": None, "cmd": None, "labels": {}, "source": source}


# --- format detection -------------------------------------------------------


def _compression_of_file(path: Path) -> str | None:
    with open(path, "rb") as f:
        return compression_of(f.read(MAGIC_LEN))


@contextlib.contextmanager
def _decompressed(path: Path, compression: str | None) -> Iterator[BinaryIO]:
    """The archive's uncompressed bytes as a readable stream."""
    if compression == "zstd":
        proc = subprocess.Popen(
            ["zstd", "-dcq", "--", str(path)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert proc.stdout is not None
        try:
            yield proc.stdout
        finally:
            proc.stdout.close()
            proc.kill()  # we may stop reading early; zstd need not finish
            proc.wait()
        return
    opener = {None: open, "gzip": gzip.open, "xz": lzma.open}[compression]
    with opener(path, "rb") as f:
        yield f


def _is_docker_save(path: Path, compression: str | None) -> bool:
    """True if manifest.json sits at the archive root; stop early on rootfs-deep names."""
    names: set[str] = set()
    with contextlib.ExitStack() as stack:
        if compression is None:
            tf = stack.enter_context(tarfile.open(path, "r:"))  # seeks over member data
        else:
            stream = stack.enter_context(_decompressed(path, compression))
            tf = stack.enter_context(tarfile.open(fileobj=stream, mode="r|"))
        for member in tf:
            name = _normalize(member.name)
            if name.count("/") >= _DOCKER_MAX_DEPTH:
                return False
            names.add(name)
    if "manifest.json" in names:
        return True
    if not names - {""}:
        raise BadInput(f"archive is empty: {path}", fix=CORRUPT_FIX)
    if "index.json" in names and "oci-layout" in names:
        raise BadInput(
            f"{path} is an OCI image layout without manifest.json",
            fix="export it with `docker save` or `podman save --format docker-archive`",
        )
    return False


def _normalize(name: str) -> str:
    """Member name without leading './' or '/' and trailing '/'."""
    while name.startswith("./"):
        name = name[2:]
    return name.strip("/") if name != "." else ""


# --- rootfs tarball ---------------------------------------------------------


def _import_rootfs(path: Path, fresh_dir: Callable[[], Path], progress: ProgressFn) -> ImportedImage:
    progress(f"extracting rootfs tarball {path.name}")
    layer = fresh_dir()
    with open(path, "rb") as f:
        untar(f, layer)
    return ImportedImage([layer], _empty_config("rootfs-tar"))


# --- docker save ------------------------------------------------------------


def _import_docker_save(
    path: Path, compression: str | None, fresh_dir: Callable[[], Path], progress: ProgressFn
) -> ImportedImage:
    with _seekable_tar(path, compression, progress) as tar_path, tarfile.open(tar_path, "r:") as tf:
        entry = _pick_image(_read_json(tf, "manifest.json"), progress)
        config = _docker_config(_read_json(tf, entry["Config"]))
        layers: list[Path] = []
        for index, name in enumerate(entry["Layers"], 1):
            progress(f"extracting layer {index}/{len(entry['Layers'])}")
            layer = fresh_dir()
            with _member_file(tf, name) as blob:
                untar(blob, layer)
            convert_whiteouts(layer)
            layers.append(layer)
    return ImportedImage(layers, config)


@contextlib.contextmanager
def _seekable_tar(path: Path, compression: str | None, progress: ProgressFn) -> Iterator[Path]:
    """An uncompressed copy of the archive (the archive itself if it is plain).

    Random access into a compressed stream would re-decompress from the start
    for every layer, so a compressed docker-save is unpacked to a temp file once.
    """
    if compression is None:
        yield path
        return
    progress(f"decompressing {path.name}")
    with tempfile.NamedTemporaryFile(prefix="envyard-import-", suffix=".tar") as tmp:
        with _decompressed(path, compression) as stream:
            shutil.copyfileobj(stream, tmp, CHUNK)
        tmp.flush()
        yield Path(tmp.name)


def _member_file(tf: tarfile.TarFile, name: str) -> BinaryIO:
    """Open archive member `name`; docker may store it as a symlink to a blob."""
    for candidate in (name, "./" + name):
        try:
            member = tf.getmember(candidate)
        except KeyError:
            continue
        f = tf.extractfile(member)  # follows in-archive symlinks and hard links
        if f is not None:
            return f
    raise BadInput(f"docker-save archive lacks the file {name!r}", fix=CORRUPT_FIX)


def _read_json(tf: tarfile.TarFile, name: str):
    with _member_file(tf, name) as f:
        try:
            return json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadInput(f"{name} in docker-save archive is not valid JSON: {exc}", fix=CORRUPT_FIX)


def _pick_image(manifest, progress: ProgressFn) -> dict:
    """The first image of manifest.json, checked for the fields we use."""
    if not isinstance(manifest, list) or not manifest:
        raise BadInput("manifest.json lists no images", fix=CORRUPT_FIX)
    entry = manifest[0]
    if not (
        isinstance(entry, dict)
        and isinstance(entry.get("Config"), str)
        and isinstance(entry.get("Layers"), list)
        and entry["Layers"]
        and all(isinstance(layer, str) for layer in entry["Layers"])
    ):
        raise BadInput("manifest.json has no usable Config/Layers for its first image", fix=CORRUPT_FIX)
    if len(manifest) > 1:
        tags = ", ".join(entry.get("RepoTags") or []) or "untagged"
        progress(f"archive holds {len(manifest)} images; importing only the first ({tags})")
    return entry


def _docker_config(image_config) -> dict:
    """Pick env/workdir/user/cmd/labels out of an image config JSON."""
    raw = image_config.get("config") if isinstance(image_config, dict) else None
    raw = raw if isinstance(raw, dict) else {}
    config = _empty_config("docker-save")
    for item in raw.get("Env") or []:
        key, _, value = str(item).partition("=")
        config["env"][key] = value
    config["workdir"] = raw.get("WorkingDir") or None
    config["user"] = raw.get("User") or None
    cmd = raw.get("Cmd")
    config["cmd"] = [str(arg) for arg in cmd] if isinstance(cmd, list) else None
    labels = raw.get("Labels")
    config["labels"] = dict(labels) if isinstance(labels, dict) else {}
    return config
