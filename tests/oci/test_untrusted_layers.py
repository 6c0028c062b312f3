"""Layers from a registry are untrusted: crafted tars that try to write outside their layer directory, reach
devices or overlayfs internals, or exhaust the disk are refused before anything is unpacked."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from envyard.errors import BadInput, UnsafeLayer
from envyard.layertar import LayerLimits, scan_layer, untar

from .registry import Raw, tar_layer


def entry(name: str, kind=tarfile.REGTYPE, *, data: bytes = b"", link: str = "", dev=(0, 0), pax=None):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o644
    info.devmajor, info.devminor = dev
    if kind == tarfile.REGTYPE:
        info.size = len(data)
    if pax:
        info.pax_headers = pax
    return info, data


CANARY = "/tmp/envyard-oci-canary"  # what the escapes aim at; must never appear

ATTACKS = {
    "absolute path": [entry(f"{CANARY}/abs", data=b"x")],
    "dot-dot": [entry("../../../../tmp/envyard-oci-canary/dd", data=b"x")],
    "dot-dot inside": [entry("a/../../escape", data=b"x")],
    "write through an absolute symlink": [entry("link", tarfile.SYMTYPE, link="/tmp"),
                                          entry("link/envyard-oci-canary", data=b"x")],
    "write through a relative symlink": [entry("up", tarfile.SYMTYPE, link="../../../../../../tmp"),
                                         entry("up/envyard-oci-canary", data=b"x")],
    "symlink replaced by a directory": [entry("d", tarfile.SYMTYPE, link="/tmp"), entry("d", tarfile.DIRTYPE)],
    "hard link to a host file": [entry("shadow", tarfile.LNKTYPE, link="/etc/shadow")],
    "hard link out with dot-dot": [entry("h", tarfile.LNKTYPE, link="../../../../etc/passwd")],
    "hard link through a symlink": [entry("etc", tarfile.SYMTYPE, link="/etc"),
                                    entry("pw", tarfile.LNKTYPE, link="etc/passwd")],
    "hard link to a name not in the layer": [entry("h", tarfile.LNKTYPE, link="bin/sh")],
    "block device": [entry("disk", tarfile.BLKTYPE, dev=(8, 0))],
    "kernel memory device": [entry("mem", tarfile.CHRTYPE, dev=(1, 1))],
    "overlayfs xattr": [entry("dir", tarfile.DIRTYPE, pax={"SCHILY.xattr.trusted.overlay.redirect": "/etc"})],
    "user overlayfs xattr": [entry("f", data=b"1", pax={"SCHILY.xattr.user.overlay.metacopy": ""})],
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_crafted_layers_are_refused(name):
    with pytest.raises(UnsafeLayer):
        scan_layer(io.BytesIO(tar_layer(ATTACKS[name])))


def test_bounds():
    many = tar_layer([(f"f{i}", b"") for i in range(10)])
    with pytest.raises(UnsafeLayer, match="more than 5 entries"):
        scan_layer(io.BytesIO(many), LayerLimits(max_entries=5))
    big = tar_layer([("big", b"0" * 100_000)])
    with pytest.raises(UnsafeLayer, match="more than 50000 bytes"):
        scan_layer(io.BytesIO(big), LayerLimits(max_bytes=50_000))
    with pytest.raises(UnsafeLayer, match="overlong"):
        scan_layer(io.BytesIO(tar_layer([("d/" * 30 + "f", b"")])), LayerLimits(max_path=40))
    with pytest.raises(UnsafeLayer, match="not a readable tar"):
        scan_layer(io.BytesIO(b"this is no tar" * 100))


def test_an_ordinary_layer_passes():
    ok = tar_layer([("bin/", None), ("bin/busybox", b"\x7fELF"), entry("bin/sh", tarfile.LNKTYPE, link="bin/busybox"),
                    entry("dev/null", tarfile.CHRTYPE, dev=(1, 3)), entry("lib", tarfile.SYMTYPE, link="/usr/lib"),
                    entry("etc/.wh.motd", data=b""), entry("var/cache/.wh..wh..opq", data=b""),
                    entry("usr/bin/ping", data=b"p", pax={"SCHILY.xattr.security.capability": "\x01\x00"})])
    scan = scan_layer(io.BytesIO(ok))
    assert scan.entries == 8 and scan.diff_id.startswith("sha256:") and scan.size == len(ok)


@pytest.mark.parametrize("name", ["write through an absolute symlink", "write through a relative symlink",
                                  "dot-dot", "absolute path"])
def test_gnu_tar_alone_does_not_escape_either(name, tmp_path):
    """The second line of defence, should the scan ever miss something: the system tar itself."""
    dest = tmp_path / "layer"
    dest.mkdir()
    try:
        untar(io.BytesIO(tar_layer(ATTACKS[name])), dest)
    except BadInput:
        pass
    assert not os.path.lexists(CANARY) and not os.path.lexists(tmp_path / "escape")


def test_a_malicious_image_from_a_registry_leaves_nothing(registry, make_yard):
    ok = tar_layer([("fine", b"ok")])
    evil = tar_layer(ATTACKS["write through an absolute symlink"])
    Raw(registry.url).image("evil/img", "v1", [(ok, "gzip"), (evil, "gzip")])
    yard = make_yard()
    with pytest.raises(UnsafeLayer, match="symlink") as e:
        yard.pull_image(f"{registry.host}/evil/img:v1")
    assert e.value.exit_code == 20
    assert not os.path.lexists(CANARY)
    assert yard.images() == [] and list(yard.store.downloads_dir.iterdir()) == []
    assert not [p for p in yard.store.layers_dir.iterdir() if p.name.startswith(".new-")]
