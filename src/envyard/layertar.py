"""Layer tars ↔ layer directories.

A store layer is a directory in the kernel's overlayfs format; OCI and Docker layers are tar streams with
their own way of saying "deleted":

  OCI tar                  overlayfs directory
  .wh.<name>          <->  character device 0:0 called <name>
  <dir>/.wh..wh..opq  <->  xattrs user.overlay.opaque=y and trusted.overlay.opaque=y on <dir>

`untar` unpacks with the system tar (as root: owners, modes, xattrs, hard links survive) and
`convert_whiteouts` rewrites OCI whiteouts in place; `pack_layer` writes a directory back as an OCI tar.
Layer tars from a registry are untrusted: `scan_layer` reads one whole, hashes it and refuses anything that
could write outside the layer directory or exceed the bounds, before a single file is unpacked.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

from .errors import BadInput, BaseBuildError, UnsafeLayer
from .overlay import is_opaque, is_whiteout, make_whiteout, mark_opaque

MAGICS = {b"\x1f\x8b": "gzip", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}
MAGIC_LEN = 6
CHUNK = 1 << 20
_TAR_FLAGS = {None: [], "gzip": ["--gzip"], "xz": ["--xz"], "zstd": ["--zstd"]}
# overlayfs reads its own xattrs from lower layers (opaque, redirect, metacopy...): only envyard sets them.
_OVERLAY_XATTRS = ("user.overlay.", "trusted.overlay.")
_TAR_EXTRACT = ["tar", "--numeric-owner", "--xattrs", "--xattrs-include=*",
                *(f"--xattrs-exclude={p}*" for p in _OVERLAY_XATTRS), "-xp"]
OPAQUE_MARK = ".wh..wh..opq"
WHITEOUT_PREFIX = ".wh."

# tar/decompressor messages that mean the archive itself is bad, not the host.
_BAD_ARCHIVE_HINTS = (
    "Unexpected EOF",
    "does not look like a tar archive",
    "Skipping to next header",
    "unexpected end of file",
    "not in gzip format",
    "invalid compressed data",
    "Compressed data is corrupt",
    "File format not recognized",
    "Member name contains '..'",
    "Not a directory",  # a member placed under a non-directory, e.g. through a symlink
)
CORRUPT_FIX = "re-create or re-download the archive (a .tar, .tar.gz, .tar.xz, .tar.zst or `docker save` output)"


def compression_of(head: bytes) -> str | None:
    """Compression named by the magic bytes at the start of a stream (None = plain)."""
    for magic, kind in MAGICS.items():
        if head.startswith(magic):
            if kind == "zstd" and shutil.which("zstd") is None:
                raise BaseBuildError("zstd is not installed", fix="apt-get install -y zstd")
            return kind
    return None


# --- unpacking -------------------------------------------------------------


def untar(source: BinaryIO, dest: Path) -> None:
    """Pipe a (possibly compressed) tar stream into the system tar, unpacking into `dest`.

    GNU tar strips leading '/', refuses '..' members, and creates symlinks with absolute or '..' targets
    only after everything else is written, so no entry can be written outside `dest`. overlayfs's own xattrs
    are never taken from the archive."""
    head = source.read(MAGIC_LEN)
    cmd = [*_TAR_EXTRACT, *_TAR_FLAGS[compression_of(head)], "-f", "-", "-C", str(dest)]
    with tempfile.TemporaryFile() as errors:  # a file, so a chatty tar can't block on a full pipe
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=errors, bufsize=0)
        assert proc.stdin is not None
        try:
            try:
                proc.stdin.write(head)
                shutil.copyfileobj(source, proc.stdin, CHUNK)
            except BrokenPipeError:
                pass  # tar gave up early; its exit status and stderr say why
            finally:
                proc.stdin.close()
            proc.wait()
        finally:
            if proc.returncode is None:
                proc.kill()
                proc.wait()
        if proc.returncode != 0:
            errors.seek(0)
            raise _tar_failure(errors.read().decode(errors="replace"), dest)


def _tar_failure(stderr: str, dest: Path) -> Exception:
    """Classify a tar failure: a broken archive is bad input, anything else a build error."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    tail = " | ".join(lines[-3:])[-300:] or "no error output"
    if any(hint in stderr for hint in _BAD_ARCHIVE_HINTS):
        return BadInput(f"archive is truncated, corrupted or unsafe: {tail}", fix=CORRUPT_FIX)
    return BaseBuildError(
        f"tar failed to unpack a layer into {dest}: {tail}",
        fix="check free disk space and that the layer directory is writable",
    )


def convert_whiteouts(layer: Path) -> None:
    """Rewrite OCI whiteout files in `layer` into overlayfs whiteouts."""
    for dirpath, dirnames, filenames in os.walk(layer):
        for name in [n for n in dirnames + filenames if n.startswith(WHITEOUT_PREFIX)]:
            full = os.path.join(dirpath, name)
            if name in dirnames:
                dirnames.remove(name)  # don't descend into what we are about to delete
            if os.path.isdir(full) and not os.path.islink(full):
                shutil.rmtree(full)
            else:
                os.unlink(full)
            if name == OPAQUE_MARK:
                mark_opaque(dirpath)
            elif not name.startswith(".wh..wh."):  # other .wh..wh.* are AUFS bookkeeping
                _make_whiteout(os.path.join(dirpath, name[len(WHITEOUT_PREFIX):]))


def _make_whiteout(path: str) -> None:
    # OCI: a whiteout hides only lower layers, so an entry of the same name in
    # this layer wins and needs nothing more.
    if os.path.basename(path) and not os.path.lexists(path):
        make_whiteout(path)


# --- checking an untrusted layer -------------------------------------------


@dataclass(frozen=True)
class LayerLimits:
    """Bounds on one layer from a registry, checked while it is scanned (before anything is unpacked)."""

    max_bytes: int = 64 << 30  # uncompressed tar bytes
    max_entries: int = 2_000_000
    max_path: int = 4096


# Character devices an image may carry (debootstrap's /dev); anything else could reach the host's hardware
# through the layer directory. 0:0 is an overlayfs whiteout.
SAFE_DEVICES = {(0, 0), (1, 3), (1, 5), (1, 7), (1, 8), (1, 9), (5, 0), (5, 1), (5, 2)}
_FILE_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE, tarfile.GNUTYPE_SPARSE)


@dataclass(frozen=True)
class LayerScan:
    diff_id: str  # sha256 of the uncompressed tar
    size: int
    entries: int  # not counting the root directory: 0 means an empty layer


class _HashingReader:
    """Reads a stream through sha256, refusing to read past `limit` bytes."""

    def __init__(self, raw: BinaryIO, limit: int):
        self.raw, self.limit = raw, limit
        self.hash = hashlib.sha256()
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(CHUNK if n is None or n < 0 else n)
        self.count += len(data)
        if self.count > self.limit:
            raise UnsafeLayer(f"layer unpacks to more than {self.limit} bytes",
                              fix="this is the per-layer bound; the image is too large or a decompression bomb")
        self.hash.update(data)
        return data

    def drain(self) -> None:
        while self.read(CHUNK):
            pass


def scan_layer(stream: BinaryIO, limits: LayerLimits = LayerLimits()) -> LayerScan:
    """Read an uncompressed layer tar to its end: its sha256 (the diff_id) and a check of every member.

    Refused: absolute names, '..' components, members under a symlink of the same layer (GNU tar would not
    follow one out, but no honest layer has them), hard links to anything but an earlier file of the layer,
    device nodes outside SAFE_DEVICES, overlayfs xattrs, unknown member types, and more entries or bytes than
    `limits`. GNU tar's own protections still apply when the layer is unpacked."""
    reader = _HashingReader(stream, limits.max_bytes)
    files: set[str] = set()
    symlinks: set[str] = set()
    members = entries = 0
    try:
        with tarfile.open(fileobj=reader, mode="r|", bufsize=CHUNK) as tf:
            for member in tf:
                members += 1
                if members > limits.max_entries:
                    raise UnsafeLayer(f"layer has more than {limits.max_entries} entries",
                                      fix="this is the per-layer bound; the image is unusually large")
                entries += _check_member(member, files, symlinks, limits)
        reader.drain()  # the end-of-archive blocks count in the digest
    except (tarfile.TarError, EOFError, OSError, ValueError) as e:
        raise UnsafeLayer(f"layer is not a readable tar: {e}", fix="the registry served a broken layer") from e
    return LayerScan("sha256:" + reader.hash.hexdigest(), reader.count, entries)


def _member_path(raw: str, what: str, limits: LayerLimits) -> str:
    name = raw
    while name.startswith("./"):
        name = name[2:]
    name = name.rstrip("/")
    if len(raw) > limits.max_path or "\0" in raw:
        raise UnsafeLayer(f"layer has an overlong or binary {what}: {raw[:80]!r}…", fix=_UNSAFE_FIX)
    if name.startswith("/"):
        raise UnsafeLayer(f"layer has an absolute {what}: {raw!r}", fix=_UNSAFE_FIX)
    if ".." in name.split("/"):
        raise UnsafeLayer(f"layer has a {what} with '..': {raw!r}", fix=_UNSAFE_FIX)
    return name


_UNSAFE_FIX = "do not use this image: its layer tries to write outside its directory or holds unsafe entries"


def _check_member(member: tarfile.TarInfo, files: set[str], symlinks: set[str], limits: LayerLimits) -> bool:
    """Raise UnsafeLayer if `member` is refused; False for the root directory's own entry."""
    name = _member_path(member.name, "path", limits)
    if name in ("", "."):
        return False
    parts = name.split("/")
    for i in range(1, len(parts) + 1):
        if "/".join(parts[:i]) in symlinks:
            raise UnsafeLayer(f"layer entry {name!r} lies under (or replaces) a symlink of the same layer",
                              fix=_UNSAFE_FIX)
    for key in member.pax_headers:
        if key.startswith("SCHILY.xattr.") and key[len("SCHILY.xattr."):].startswith(_OVERLAY_XATTRS):
            raise UnsafeLayer(f"layer entry {name!r} sets overlayfs's own xattr {key[13:]}", fix=_UNSAFE_FIX)
    if member.type in _FILE_TYPES:
        files.add(name)
    elif member.type == tarfile.SYMTYPE:
        symlinks.add(name)
    elif member.type == tarfile.LNKTYPE:
        target = _member_path(member.linkname, "hard link target", limits)
        if target not in files:
            raise UnsafeLayer(f"layer entry {name!r} is a hard link to {member.linkname!r}, which is not a file "
                              "earlier in the layer", fix=_UNSAFE_FIX)
    elif member.type in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        if member.type == tarfile.BLKTYPE or (member.devmajor, member.devminor) not in SAFE_DEVICES:
            kind = "block" if member.type == tarfile.BLKTYPE else "character"
            raise UnsafeLayer(f"layer entry {name!r} is a {kind} device {member.devmajor}:{member.devminor}",
                              fix="envyard takes only /dev/null, zero, full, random, urandom, tty, console and "
                                  "ptmx from images")
    elif member.type not in (tarfile.DIRTYPE, tarfile.FIFOTYPE):
        raise UnsafeLayer(f"layer entry {name!r} has an unsupported tar type {member.type!r}", fix=_UNSAFE_FIX)
    return True


# --- layer blobs (a registry's files: plain, gzip or zstd) ------------------


def blob_compression(path: Path) -> str | None:
    """gzip, zstd or None (plain tar), by content; anything else is refused."""
    with open(path, "rb") as f:
        head = f.read(MAGIC_LEN)
    kind = next((k for magic, k in MAGICS.items() if head.startswith(magic)), None)
    if kind not in (None, "gzip", "zstd"):
        raise UnsafeLayer(f"layer blob is {kind}-compressed; OCI layers are plain, gzip or zstd",
                          fix="re-push the image with a current tool")
    return kind


@contextlib.contextmanager
def open_blob(path: Path) -> Iterator[BinaryIO]:
    """A layer blob's uncompressed tar stream (decompressed in this process: no zstd program needed)."""
    kind = blob_compression(path)
    with open(path, "rb") as raw:
        if kind == "gzip":
            with gzip.GzipFile(fileobj=raw) as stream:
                yield stream
        elif kind == "zstd":
            import zstandard

            with zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as stream:
                yield stream
        else:
            yield raw


def scan_blob(path: Path, limits: LayerLimits = LayerLimits()) -> LayerScan:
    import zstandard

    try:
        with open_blob(path) as stream:
            return scan_layer(stream, limits)
    except (OSError, EOFError, ValueError, zstandard.ZstdError) as e:  # a broken gzip or zstd stream
        raise UnsafeLayer(f"layer blob does not decompress: {e}", fix="the registry served a broken layer") from e


def unpack_blob(path: Path, dest: Path) -> None:
    """Unpack a (scanned) layer blob into `dest` and turn its OCI whiteouts into overlayfs ones."""
    if blob_compression(path) == "zstd":
        with open_blob(path) as stream:
            untar(stream, dest)
    else:
        with open(path, "rb") as raw:  # tar runs gzip itself: decompression overlaps unpacking
            untar(raw, dest)
    convert_whiteouts(dest)


# --- packing ---------------------------------------------------------------

GZIP_LEVEL = 1  # a quarter of level 6's time for ~10% more bytes; pushes are frequent, storage is cheap


class _HashingWriter:
    def __init__(self, out: BinaryIO):
        self.out, self.hash, self.count = out, hashlib.sha256(), 0

    def write(self, data) -> int:
        self.hash.update(data)
        self.count += len(data)
        return self.out.write(data)

    def flush(self) -> None:
        self.out.flush()


@dataclass(frozen=True)
class PackedBlob:
    digest: str  # sha256 of the gzip file
    diff_id: str  # sha256 of the tar inside
    size: int


def pack_blob(layer: Path, dest: Path) -> PackedBlob:
    """Pack layer directory `layer` into `dest` as a gzip-compressed OCI layer tar (the same directory always
    gives the same bytes: sorted entries, no timestamp in the gzip header)."""
    with open(dest, "wb") as f:
        compressed = _HashingWriter(f)
        with gzip.GzipFile(filename="", fileobj=compressed, mode="wb", compresslevel=GZIP_LEVEL, mtime=0) as gz:
            plain = _HashingWriter(gz)
            pack_layer(layer, plain)
    return PackedBlob("sha256:" + compressed.hash.hexdigest(), "sha256:" + plain.hash.hexdigest(), compressed.count)



def pack_layer(layer: Path, out: BinaryIO) -> None:
    """Write layer directory `layer` to `out` as an uncompressed OCI layer tar: overlayfs whiteouts become
    `.wh.` files, opaque directories get a `.wh..wh..opq` entry, overlayfs's xattrs are left out. Entries are
    sorted and numeric-owned, so the same directory always packs to the same bytes."""
    links: dict[tuple[int, int], str] = {}
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT, bufsize=CHUNK) as tf:
        if is_opaque(str(layer)):
            tf.addfile(_marker(OPAQUE_MARK))
        for rel, full, st in _walk(str(layer), ""):
            _add_entry(tf, rel, full, st, links)


def _walk(root: str, prefix: str):
    """(relative name, full path, lstat) of every entry under `root`, sorted, each directory before its
    contents; never follows symlinks."""
    with os.scandir(root) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        rel = prefix + entry.name
        st = entry.stat(follow_symlinks=False)
        yield rel, entry.path, st
        if stat.S_ISDIR(st.st_mode):
            yield from _walk(entry.path, rel + "/")


def _marker(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode, info.mtime = 0o644, 0
    return info


def _add_entry(tf: tarfile.TarFile, rel: str, full: str, st: os.stat_result, links: dict) -> None:
    mode = st.st_mode
    if is_whiteout(st):
        head, _, base = rel.rpartition("/")
        tf.addfile(_marker(f"{head}/{WHITEOUT_PREFIX}{base}" if head else WHITEOUT_PREFIX + base))
        return
    if stat.S_ISSOCK(mode):
        return  # tar has no sockets; a program makes them afresh
    info = tarfile.TarInfo(rel)
    info.mode, info.uid, info.gid, info.mtime = stat.S_IMODE(mode), st.st_uid, st.st_gid, int(st.st_mtime)
    info.uname = info.gname = ""
    info.pax_headers = _xattrs(full)
    key = (st.st_dev, st.st_ino)
    if not stat.S_ISDIR(mode) and st.st_nlink > 1 and key in links:
        info.type, info.linkname = tarfile.LNKTYPE, links[key]
        tf.addfile(info)
        return
    if not stat.S_ISDIR(mode) and st.st_nlink > 1:
        links[key] = rel
    if stat.S_ISREG(mode):
        info.size = st.st_size
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            tf.addfile(info, f)
        return
    if stat.S_ISDIR(mode):
        info.type = tarfile.DIRTYPE
        tf.addfile(info)
        if is_opaque(full):
            tf.addfile(_marker(f"{rel}/{OPAQUE_MARK}"))
        return
    if stat.S_ISLNK(mode):
        info.type, info.linkname = tarfile.SYMTYPE, os.readlink(full)
    elif stat.S_ISFIFO(mode):
        info.type = tarfile.FIFOTYPE
    else:
        info.type = tarfile.CHRTYPE if stat.S_ISCHR(mode) else tarfile.BLKTYPE
        info.devmajor, info.devminor = os.major(st.st_rdev), os.minor(st.st_rdev)
    tf.addfile(info)


def _xattrs(path: str) -> dict[str, str]:
    """An entry's xattrs as pax records, overlayfs's own left out. Values are bytes; tarfile writes a string
    with surrogates back as the original bytes."""
    records = {}
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return records
    for name in sorted(names):
        if name.startswith(_OVERLAY_XATTRS):
            continue
        try:
            value = os.getxattr(path, name, follow_symlinks=False)
        except OSError:
            continue
        records[f"SCHILY.xattr.{name}"] = value.decode("utf-8", "surrogateescape")
    return records
