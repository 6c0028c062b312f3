"""Tests for envyard.bases: archive import (rootfs tarballs, docker save) and debootstrap.

They run the real system tar and need root (device nodes, ownership, trusted.* xattrs).
The full debootstrap build runs only with ENVYARD_TEST_DEBOOTSTRAP=1.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import lzma
import os
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from envyard.bases.archive import ImportedImage, import_archive
from envyard.bases.debian import SUITE_PYTHON, debootstrap_rootfs
from envyard.errors import BadInput, BaseBuildError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mknod, chown, trusted.* xattrs)")


# --- helpers ----------------------------------------------------------------


class LayerDirs:
    """Stands in for the store: hands out fresh numbered dirs under one root."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir()

    def __call__(self) -> Path:
        path = self.root / str(len(list(self.root.iterdir())))
        path.mkdir()
        return path

    def leftovers(self) -> list[Path]:
        return list(self.root.iterdir())


@pytest.fixture
def layers(tmp_path: Path) -> LayerDirs:
    return LayerDirs(tmp_path / "layers")


def tar_bytes(entries: list[tuple[str, bytes | None]]) -> bytes:
    """A tar of (name, data) entries; data None means a directory."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tf.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def add_bytes(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tf.addfile(info, io.BytesIO(data))


def add_symlink(tf: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    tf.addfile(info)


LAYER1 = [
    ("etc", None),
    ("etc/keep", b"kept\n"),
    ("somefile", b"to be deleted\n"),
    ("opaquedir", None),
    ("opaquedir/old", b"hidden by opaque\n"),
]
LAYER2 = [
    (".wh.somefile", b""),
    ("opaquedir", None),
    ("opaquedir/.wh..wh..opq", b""),
    ("opaquedir/new", b"new\n"),
    ("etc", None),
    ("etc/added", b"added\n"),
]
IMAGE_CONFIG = {
    "architecture": "amd64",
    "os": "linux",
    "config": {
        "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "GREETING=a=b", "EMPTY="],
        "WorkingDir": "/app",
        "User": "1000:1000",
        "Cmd": ["python3", "-c", "print(1)"],
        "Labels": {"maintainer": "me"},
    },
    "rootfs": {"type": "layers", "diff_ids": []},
}


def write_docker_legacy(path: Path) -> None:
    """`docker save` legacy layout: <id>/layer.tar, <hex>.json config, manifest.json."""
    cfg = json.dumps(IMAGE_CONFIG).encode()
    cfg_name = hashlib.sha256(cfg).hexdigest() + ".json"
    ids = ["1" * 64, "2" * 64]
    with tarfile.open(path, "w") as tf:
        for layer_id, entries in zip(ids, [LAYER1, LAYER2]):
            add_bytes(tf, f"{layer_id}/VERSION", b"1.0")
            add_bytes(tf, f"{layer_id}/json", b"{}")
            add_bytes(tf, f"{layer_id}/layer.tar", tar_bytes(entries))
        add_bytes(tf, cfg_name, cfg)
        manifest = [{"Config": cfg_name, "RepoTags": ["demo:1"], "Layers": [f"{i}/layer.tar" for i in ids]}]
        add_bytes(tf, "manifest.json", json.dumps(manifest).encode())
        add_bytes(tf, "repositories", b"{}")


def write_docker_oci(path: Path, *, images: int = 1, legacy_symlinks: bool = False) -> None:
    """Newer `docker save` OCI layout: blobs/sha256/<digest>, gzip layer blobs."""
    blobs: dict[str, bytes] = {}

    def blob(data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return digest

    layer_digests = [blob(gzip.compress(tar_bytes(LAYER1))), blob(gzip.compress(tar_bytes(LAYER2)))]
    config_digest = blob(json.dumps(IMAGE_CONFIG).encode())
    if legacy_symlinks:
        layer_paths = [f"{d}/layer.tar" for d in layer_digests]
    else:
        layer_paths = [f"blobs/sha256/{d}" for d in layer_digests]
    entry = {"Config": f"blobs/sha256/{config_digest}", "RepoTags": ["demo:oci"], "Layers": layer_paths}
    manifest = [entry] + [dict(entry, RepoTags=[f"other:{i}"]) for i in range(images - 1)]
    with tarfile.open(path, "w") as tf:
        add_bytes(tf, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        for digest, data in blobs.items():
            add_bytes(tf, f"blobs/sha256/{digest}", data)
        if legacy_symlinks:
            for d in layer_digests:
                add_symlink(tf, f"{d}/layer.tar", f"../blobs/sha256/{d}")
        add_bytes(tf, "index.json", b'{"schemaVersion": 2, "manifests": []}')
        add_bytes(tf, "manifest.json", json.dumps(manifest).encode())


def make_rootfs_tree(root: Path) -> None:
    (root / "etc").mkdir(parents=True)
    (root / "etc/hostname").write_text("box\n")
    (root / "usr/bin").mkdir(parents=True)
    tool = root / "usr/bin/tool"
    tool.write_text("#!/bin/sh\necho hi\n")
    os.chmod(tool, 0o4755)  # setuid must survive
    secret = root / "etc/secret"
    secret.write_text("s\n")
    os.chmod(secret, 0o600)
    os.chown(secret, 1234, 5678)  # numeric owner with no passwd entry
    os.link(secret, root / "etc/secret.hardlink")
    (root / "bin").symlink_to("usr/bin")
    (root / "tmp").mkdir()
    os.chmod(root / "tmp", 0o1777)
    os.mknod(root / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))


def check_rootfs_layer(layer: Path) -> None:
    assert (layer / "etc/hostname").read_text() == "box\n"
    assert stat.S_IMODE(os.lstat(layer / "usr/bin/tool").st_mode) == 0o4755
    st = os.lstat(layer / "etc/secret")
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o600, 1234, 5678)
    assert os.lstat(layer / "etc/secret.hardlink").st_ino == st.st_ino
    assert os.readlink(layer / "bin") == "usr/bin"
    assert stat.S_IMODE(os.lstat(layer / "tmp").st_mode) == 0o1777
    null = os.lstat(layer / "null")
    assert stat.S_ISCHR(null.st_mode) and null.st_rdev == os.makedev(1, 3)


def check_two_layers(image: ImportedImage) -> None:
    bottom, top = image.layer_dirs
    assert (bottom / "etc/keep").read_text() == "kept\n"
    assert (bottom / "somefile").is_file()
    assert (top / "etc/added").read_text() == "added\n"
    # .wh.somefile became an overlayfs whiteout: char device 0:0
    whiteout = os.lstat(top / "somefile")
    assert stat.S_ISCHR(whiteout.st_mode) and whiteout.st_rdev == os.makedev(0, 0)
    assert not (top / ".wh.somefile").exists()
    # .wh..wh..opq became the opaque xattr on its directory
    assert os.getxattr(top / "opaquedir", "trusted.overlay.opaque") == b"y"
    assert sorted(os.listdir(top / "opaquedir")) == ["new"]
    with pytest.raises(OSError):
        os.getxattr(bottom / "opaquedir", "trusted.overlay.opaque")


def check_config(config: dict) -> None:
    assert config["env"] == {"PATH": "/usr/local/bin:/usr/bin:/bin", "GREETING": "a=b", "EMPTY": ""}
    assert config["workdir"] == "/app"
    assert config["user"] == "1000:1000"
    assert config["cmd"] == ["python3", "-c", "print(1)"]
    assert config["labels"] == {"maintainer": "me"}
    assert config["source"] == "docker-save"


# --- rootfs tarballs ----------------------------------------------------------


@pytest.mark.parametrize("compression", [None, "gzip", "xz", "zstd"])
def test_import_rootfs_tarball(tmp_path: Path, layers: LayerDirs, compression: str | None) -> None:
    if compression == "zstd" and shutil.which("zstd") is None:
        pytest.skip("zstd binary not installed")
    tree = tmp_path / "tree"
    make_rootfs_tree(tree)
    plain = tmp_path / "rootfs.tar"
    with tarfile.open(plain, "w", format=tarfile.PAX_FORMAT) as tf:
        tf.add(tree, arcname=".")
    # A misleading name: the format must be detected from content.
    archive = tmp_path / "rootfs.bin"
    data = plain.read_bytes()
    if compression == "gzip":
        data = gzip.compress(data)
    elif compression == "xz":
        data = lzma.compress(data)
    elif compression == "zstd":
        data = subprocess.run(["zstd", "-q", "-c"], input=data, capture_output=True, check=True).stdout
    archive.write_bytes(data)

    messages: list[str] = []
    image = import_archive(archive, layers, on_progress=messages.append)

    assert len(image.layer_dirs) == 1
    check_rootfs_layer(image.layer_dirs[0])
    assert image.config == {
        "env": {}, "workdir": None, "user": None, "cmd": None, "labels": {}, "source": "rootfs-tar",
    }
    assert messages


# --- docker save --------------------------------------------------------------


def test_import_docker_save_legacy(tmp_path: Path, layers: LayerDirs) -> None:
    archive = tmp_path / "image.tar"
    write_docker_legacy(archive)
    image = import_archive(archive, layers)
    check_two_layers(image)
    check_config(image.config)


def test_import_docker_save_oci_layout(tmp_path: Path, layers: LayerDirs) -> None:
    archive = tmp_path / "image.tar"
    write_docker_oci(archive)
    image = import_archive(archive, layers)
    check_two_layers(image)
    check_config(image.config)


def test_import_docker_save_layer_symlinks(tmp_path: Path, layers: LayerDirs) -> None:
    archive = tmp_path / "image.tar"
    write_docker_oci(archive, legacy_symlinks=True)
    check_two_layers(import_archive(archive, layers))


def test_import_gzipped_docker_save_with_several_images(tmp_path: Path, layers: LayerDirs) -> None:
    plain = tmp_path / "image.tar"
    write_docker_oci(plain, images=2)
    archive = tmp_path / "image.tar.gz"
    archive.write_bytes(gzip.compress(plain.read_bytes()))
    messages: list[str] = []
    image = import_archive(archive, layers, on_progress=messages.append)
    check_two_layers(image)
    assert any("2 images" in m and "demo:oci" in m for m in messages)


# --- bad input ----------------------------------------------------------------


def test_missing_path(tmp_path: Path, layers: LayerDirs) -> None:
    with pytest.raises(BadInput, match="no such file"):
        import_archive(tmp_path / "nope.tar", layers)
    assert layers.leftovers() == []


@pytest.mark.parametrize("content", [b"just some text, not a tar\n" * 100, b"", gzip.compress(b"not a tar" * 100)])
def test_not_a_tar(tmp_path: Path, layers: LayerDirs, content: bytes) -> None:
    bogus = tmp_path / "bogus.tar"
    bogus.write_bytes(content)
    with pytest.raises(BadInput):
        import_archive(bogus, layers)
    assert layers.leftovers() == []


@pytest.mark.parametrize("compress", [False, True])
def test_truncated_rootfs_tar(tmp_path: Path, layers: LayerDirs, compress: bool) -> None:
    data = tar_bytes([("etc", None), ("etc/big", os.urandom(200_000)), ("etc/after", b"x")])
    if compress:
        data = gzip.compress(data)
    truncated = tmp_path / "truncated.tar"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadInput):
        import_archive(truncated, layers)
    assert layers.leftovers() == []


def test_docker_save_missing_layer_cleans_all_layers(tmp_path: Path, layers: LayerDirs) -> None:
    archive = tmp_path / "image.tar"
    write_docker_legacy(archive)
    layer_names = ["1" * 64 + "/layer.tar", "2" * 64 + "/layer.tar", "missing/layer.tar"]
    manifest = json.dumps([{"Config": "x.json", "Layers": layer_names}])
    with tarfile.open(archive, "a") as tf:  # a later manifest.json entry wins
        add_bytes(tf, "x.json", b"{}")
        add_bytes(tf, "manifest.json", manifest.encode())
    with pytest.raises(BadInput, match="missing/layer.tar"):
        import_archive(archive, layers)
    assert layers.leftovers() == []


def test_truncated_docker_save(tmp_path: Path, layers: LayerDirs) -> None:
    archive = tmp_path / "image.tar"
    write_docker_legacy(archive)
    with tarfile.open(archive) as tf:
        blob = tf.getmember("2" * 64 + "/layer.tar")
    with open(archive, "r+b") as f:
        f.truncate(blob.offset_data + blob.size // 2)  # cut inside the second layer
    with pytest.raises(BadInput):
        import_archive(archive, layers)
    assert layers.leftovers() == []


def test_member_escaping_layer_is_rejected(tmp_path: Path, layers: LayerDirs) -> None:
    archive = tmp_path / "evil.tar"
    archive.write_bytes(tar_bytes([("ok", b"fine"), ("../escaped", b"bad")]))
    with pytest.raises(BadInput):
        import_archive(archive, layers)
    assert not (tmp_path / "escaped").exists()
    assert layers.leftovers() == []


def test_symlink_cannot_redirect_writes(tmp_path: Path, layers: LayerDirs) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    archive = tmp_path / "evil.tar"
    with tarfile.open(archive, "w") as tf:
        add_symlink(tf, "link", str(victim))
        add_bytes(tf, "link/pwned", b"bad")
    with pytest.raises(BadInput):
        import_archive(archive, layers)
    assert list(victim.iterdir()) == []
    assert layers.leftovers() == []


# --- debootstrap --------------------------------------------------------------


def test_debootstrap_missing_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr("envyard.bases.debian.SYSTEM_SBIN", str(empty))
    with pytest.raises(BaseBuildError, match="debootstrap is not installed") as info:
        debootstrap_rootfs("bookworm", tmp_path / "root")
    assert info.value.fix == "apt-get install -y debootstrap"
    assert not (tmp_path / "root").exists()


@pytest.mark.parametrize("suite", ["Bookworm", "book-worm", "../x", ""])
def test_debootstrap_rejects_bad_suite_name(tmp_path: Path, suite: str) -> None:
    with pytest.raises(BadInput):
        debootstrap_rootfs(suite, tmp_path / "root")


def test_debootstrap_rejects_nonempty_dest(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "root/precious").write_text("keep me")
    with pytest.raises(BadInput, match="not an empty directory"):
        debootstrap_rootfs("bookworm", tmp_path / "root")
    assert (tmp_path / "root/precious").read_text() == "keep me"


needs_debootstrap = pytest.mark.skipif(shutil.which("debootstrap") is None, reason="debootstrap not installed")


@needs_debootstrap
def test_debootstrap_unknown_suite(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="does not know the suite"):
        debootstrap_rootfs("nosuchsuite", tmp_path / "root")


@needs_debootstrap
def test_debootstrap_failure_removes_dest(tmp_path: Path) -> None:
    # Port 9 (discard) on localhost refuses connections: debootstrap fails fast.
    with pytest.raises(BaseBuildError, match="debootstrap of bookworm failed"):
        debootstrap_rootfs("bookworm", tmp_path / "root", mirror="http://127.0.0.1:9/debian", timeout=120)
    assert not (tmp_path / "root").exists()


@needs_debootstrap
@pytest.mark.skipif(
    os.environ.get("ENVYARD_TEST_DEBOOTSTRAP") != "1",
    reason="slow and needs network: set ENVYARD_TEST_DEBOOTSTRAP=1 to build a real Debian rootfs",
)
def test_debootstrap_bookworm(tmp_path: Path) -> None:
    dest = tmp_path / "bookworm"
    progress: list[str] = []
    meta = debootstrap_rootfs("bookworm", dest, on_progress=progress.append)
    assert (dest / "etc/debian_version").is_file()
    assert stat.S_IMODE(os.lstat(dest / "tmp").st_mode) == 0o1777
    assert not list((dest / "var/cache/apt/archives").glob("*.deb"))
    assert "bookworm-updates" in (dest / "etc/apt/sources.list").read_text()
    assert meta["suite"] == "bookworm" and meta["python"] == SUITE_PYTHON["bookworm"]
    assert meta["size_bytes"] > 50_000_000
    assert any("Base system installed successfully" in line for line in progress)
