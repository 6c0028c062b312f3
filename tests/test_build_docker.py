"""Side by side with Docker: `docker build` and `envyard build` of the same fixture give the same file tree
(names, types, modes, owners, sizes, link targets; not times).

Needs Debian's docker.io (`apt-get install docker.io`): a private dockerd is started for the module (its own
socket and data root, no bridge, no iptables) and stopped after. Docker's legacy builder is used (the daemon
is 20.10 and no buildx plugin is installed), so the fixtures compared are those it can build: no heredocs,
no --chmod. Skipped, with the reason, when dockerd cannot run here.
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

import envyard
from envyard.build import build_image
from envyard.build.rootfs import LayerView

from test_build import fixture
from dockerd import docker  # the `dockerd` fixture is in conftest.py

# what `docker create` adds to every container's filesystem
DOCKER_ONLY = {".dockerenv", "etc/hostname", "etc/hosts", "etc/resolv.conf", "etc/mtab", "dev", "proc", "sys"}


@pytest.fixture(scope="module")
def docker_debian(dockerd, debian_yard, debian):
    """debian:bookworm in Docker: the very layer envyard's image stands on, imported."""
    if docker("image", "inspect", "debian:bookworm", check=False).returncode != 0:
        layer = debian_yard.store.layer(debian.layers[0]).path
        tar = subprocess.Popen(["tar", "-C", layer, "--numeric-owner", "-cf", "-", "."], stdout=subprocess.PIPE)
        docker("import", "-", "debian:bookworm", stdin=tar.stdout)
        assert tar.wait() == 0


def docker_tree(image: str, prefixes: list[str]) -> dict:
    cid = docker("create", image, "/none").stdout.decode().strip()
    try:
        export = docker("export", cid).stdout
    finally:
        docker("rm", cid)
    out = {}
    with tarfile.open(fileobj=io.BytesIO(export)) as tf:
        for m in tf.getmembers():
            name = m.name.strip("/").removeprefix("./")
            if not name or name.split("/")[0] in DOCKER_ONLY or name in DOCKER_ONLY or not _wanted(name, prefixes):
                continue
            kind = "dir" if m.isdir() else "link" if m.issym() else "file" if m.isfile() else "other"
            out[name] = (kind, m.mode & 0o7777, m.uid, m.gid, m.size if kind == "file" else 0,
                         m.linkname if kind == "link" else "")
    if "etc" in out and not any(k.startswith("etc/") for k in out):
        del out["etc"]  # made by docker only to hold its /etc/hosts and friends
    return out


def envyard_tree(yard, image, prefixes: list[str]) -> dict:
    view = LayerView(list(reversed(yard.store.layer_paths(image.layers))))
    out = {}

    def walk(path: str) -> None:
        for name in view.listdir(path):
            sub = f"{path.rstrip('/')}/{name}"
            entry = view.get(sub, follow=False)
            rel = sub.lstrip("/")
            if rel.split("/")[0] in DOCKER_ONLY or rel in DOCKER_ONLY:
                continue
            st = entry.st
            kind = "dir" if entry.is_dir else "link" if entry.is_link else "file" if entry.is_file else "other"
            if _wanted(rel, prefixes):
                out[rel] = (kind, st.st_mode & 0o7777, st.st_uid, st.st_gid, st.st_size if kind == "file" else 0,
                            os.readlink(entry.host) if kind == "link" else "")
            if entry.is_dir and (not prefixes or any(p.startswith(rel + "/") or _wanted(rel, [p]) for p in prefixes)):
                walk(sub)

    walk("/")
    return out


def _wanted(name: str, prefixes: list[str]) -> bool:
    return not prefixes or any(name == p or name.startswith(p + "/") for p in prefixes)


@pytest.fixture(scope="module")
def yard(tmp_path_factory, debian_yard, debian):
    y = envyard.Yard(tmp_path_factory.mktemp("build-docker-home"))
    for layer_id in debian.layers:
        y.store.add_external_layer(layer_id, debian_yard.store.layer(layer_id).path, {"linked_from": "test cache"})
    y.store.put_image("debian:bookworm", debian.layers, debian.config)
    yield y
    y.close()
    y.gc()


@pytest.mark.parametrize("name, prefixes", [
    ("scratch", []),
    ("ignore", []),
    ("cache", ["app", "one.txt", "mode.txt"]),
])
def test_same_tree_as_docker_build(dockerd, docker_debian, yard, tmp_path, name, prefixes):
    ctx = fixture(tmp_path, name)
    docker("build", "-q", "-t", f"envyard-test/{name}", ctx)
    img = build_image(yard, ctx, tag=f"docker-check/{name}")
    ours, theirs = envyard_tree(yard, img, prefixes), docker_tree(f"envyard-test/{name}", prefixes)
    assert theirs, "docker's image is empty: the comparison would prove nothing"
    differ = {k: (ours.get(k), theirs.get(k)) for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k)}
    assert differ == {}
