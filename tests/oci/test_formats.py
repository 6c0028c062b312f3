"""What envyard reads and writes: indexes, manifest kinds, compressions, the image config, whiteouts, OCI
layouts, `docker save` archives, image names."""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile

import httpx
import pytest

from envyard.errors import BadInput, PlatformNotFound
from envyard.images import load_image, push_image, save_image
from envyard.images.oci import DOCKER_LIST, OCI_INDEX, host_platform
from envyard.store import parse_image_name, parse_reference

from .registry import Raw, compress, digest_of, free_port, tar_layer

HERE = host_platform()[0]
OTHER = "arm64" if HERE != "arm64" else "amd64"


def marker_image(raw: Raw, repo: str, arch: str) -> dict:
    return raw.image(repo, None, [(tar_layer([("etc/", None), ("etc/arch", arch.encode())]), "gzip")], arch=arch)


@pytest.mark.parametrize("index_type", [OCI_INDEX, DOCKER_LIST])
def test_an_index_resolves_to_this_machines_platform(registry, make_yard, index_type):
    raw = Raw(registry.url)
    ours, theirs = marker_image(raw, "multi/arch", HERE), marker_image(raw, "multi/arch", OTHER)
    index = {"schemaVersion": 2, "mediaType": index_type, "manifests": [
        {**theirs, "platform": {"os": "linux", "architecture": OTHER, "variant": "v8"}},
        {**ours, "platform": {"os": "linux", "architecture": HERE}},
        {**theirs, "platform": {"os": "unknown", "architecture": "unknown"}},  # e.g. an attestation
    ]}
    raw.manifest("multi/arch", "v1", index, index_type)
    yard = make_yard()
    img = yard.pull_image(f"{registry.host}/multi/arch:v1")
    assert (yard.store.layer(img.layers[0]).path / "etc/arch").read_text() == HERE
    assert img.config.provenance["manifest_digest"] == ours["digest"]


def test_an_index_without_this_platform_is_refused(registry, make_yard):
    raw = Raw(registry.url)
    theirs = marker_image(raw, "multi/foreign", OTHER)
    raw.manifest("multi/foreign", "v1", {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {**theirs, "platform": {"os": "linux", "architecture": OTHER, "variant": "v8"}}]}, OCI_INDEX)
    yard = make_yard()
    with pytest.raises(PlatformNotFound, match=f"offers linux/{OTHER}/v8") as e:
        yard.pull_image(f"{registry.host}/multi/foreign:v1")
    assert e.value.exit_code == 18
    assert yard.images() == [] and list(yard.store.layers_dir.iterdir()) == []


CONFIG = {"Entrypoint": ["/usr/bin/tini", "--"], "Cmd": ["python3", "-m", "http.server"], "WorkingDir": "/app",
          "User": "1000:1000", "Labels": {"org.example": "yes"}, "ExposedPorts": {"8000/tcp": {}, "53/udp": {}},
          "Healthcheck": {"Test": ["CMD", "true"], "Interval": 30000000000}, "StopSignal": "SIGINT"}


@pytest.mark.parametrize("docker", [False, True], ids=["oci", "docker-schema2"])
def test_gzip_zstd_and_plain_layers_and_the_image_config(registry, make_yard, docker):
    kinds = ["gzip", "gzip", "gzip"] if docker else ["gzip", "zstd", "plain"]  # schema 2 knows gzip only
    layers = [tar_layer([("app/", None), ("app/one", b"1")]), tar_layer([("app/two", b"2")]),
              tar_layer([("app/three", b"3")])]
    repo = f"kinds/{'docker' if docker else 'oci'}"
    Raw(registry.url).image(repo, "v1", list(zip(layers, kinds)), docker=docker, config_extra=CONFIG)
    yard = make_yard()
    img = yard.pull_image(f"{registry.host}/{repo}:v1")
    contents = [{p.name: p.read_bytes() for p in (yard.store.layer(i).path / "app").iterdir()} for i in img.layers]
    assert contents == [{"one": b"1"}, {"two": b"2"}, {"three": b"3"}]
    c = img.config
    assert c.env == {"PATH": "/usr/local/bin:/usr/bin:/bin", "HELLO": "world"}
    assert (c.entrypoint, c.cmd, c.workdir, c.user) == (CONFIG["Entrypoint"], CONFIG["Cmd"], "/app", "1000:1000")
    assert (c.labels, c.exposed_ports, c.stop_signal) == ({"org.example": "yes"}, ["53/udp", "8000/tcp"], "SIGINT")
    assert c.healthcheck == CONFIG["Healthcheck"]
    blobs = [b.media_type for i in img.layers for b in yard.store.blobs_of(i)]
    assert len(blobs) == 3 and all(t.startswith("application/vnd.") for t in blobs)


def test_the_same_content_compressed_differently_is_stored_once(registry, make_yard):
    tar = tar_layer([("shared/", None), ("shared/data", os.urandom(4096))])
    raw = Raw(registry.url)
    raw.image("dedup/gz", "v1", [(tar, "gzip")])
    raw.image("dedup/zst", "v1", [(tar, "zstd")])
    yard = make_yard()
    a = yard.pull_image(f"{registry.host}/dedup/gz:v1")
    b = yard.pull_image(f"{registry.host}/dedup/zst:v1")
    assert a.layers == b.layers
    assert {x.digest for x in yard.store.blobs_of(a.layers[0])} == {digest_of(compress(tar, "gzip")),
                                                                     digest_of(compress(tar, "zstd"))}


def test_empty_and_repeated_layers(registry, make_yard):
    """Docker images often carry empty layers (not stacked) and may repeat one (overlayfs refuses a directory
    twice in a stack, so the repeat gets a copy of its own)."""
    same = tar_layer([("x", b"again")])
    empty = tar_layer([])
    Raw(registry.url).image("odd/layers", "v1", [(same, "gzip"), (empty, "gzip"), (tar_layer([("x", b"mid")]), "gzip"),
                                                 (same, "gzip")])
    yard = make_yard()
    img = yard.pull_image(f"{registry.host}/odd/layers:v1")
    assert len(img.layers) == len(set(img.layers)) == 3
    paths = [yard.store.layer(i).path / "x" for i in img.layers]
    assert [p.read_bytes() for p in paths] == [b"again", b"mid", b"again"]


def is_whiteout(path) -> bool:
    st = os.lstat(path)
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def test_whiteouts_and_opaque_directories_survive_push_and_pull(pushed_debian, registry, make_yard):
    yard = make_yard()
    base = yard.pull_image(pushed_debian)
    with yard.sandbox(base) as sb:
        assert sb.exec("mkdir -p /srv/keep /srv/emptied && echo k > /srv/keep/file && echo g > /srv/gone"
                       " && echo x > /srv/emptied/x").exit_code == 0
        mid = sb.snapshot("wh/mid:1")
    with yard.sandbox(mid) as sb:
        assert sb.exec("rm /srv/gone && rm -rf /srv/emptied && mkdir /srv/emptied && echo n > /srv/emptied/new"
                       ).exit_code == 0
        top = sb.snapshot("wh/top:1")
    made = yard.store.layer(top.layers[-1]).path
    assert is_whiteout(made / "srv/gone") and os.getxattr(made / "srv/emptied", "user.overlay.opaque") == b"y"

    ref = f"{registry.host}/wh/top:1"
    push_image(yard, "wh/top:1", ref)
    blob = yard.store.blobs_of(top.layers[-1])[0].digest
    data = httpx.get(f"{registry.url}/v2/wh/top/blobs/{blob}").content
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        names = set(tf.getnames())
    assert {"srv/.wh.gone", "srv/emptied/.wh..wh..opq", "srv/emptied/new"} <= names

    other = make_yard()
    pulled = other.pull_image(ref)
    got = other.store.layer(pulled.layers[-1]).path
    assert is_whiteout(got / "srv/gone") and os.getxattr(got / "srv/emptied", "user.overlay.opaque") == b"y"
    with other.sandbox(pulled) as sb:
        r = sb.exec("ls -A /srv/emptied; test -e /srv/gone || echo gone; cat /srv/keep/file")
        assert r.stdout == "new\ngone\nk\n"


def test_save_and_load_an_oci_layout_tar(pushed_debian, make_yard, tmp_path):
    yard = make_yard()
    img = yard.pull_image(pushed_debian)
    with yard.sandbox(img) as sb:
        sb.write_file("/root/note", "saved\n")
        snap = sb.snapshot("saved/img:v2")
    out = tmp_path / "img.tar"
    info = save_image(yard, "saved/img:v2", out)
    assert info["digest"].startswith("sha256:") and info["format"] == "oci-tar"
    with pytest.raises(BadInput, match="already exists"):
        save_image(yard, "saved/img:v2", out)
    other = make_yard()
    loaded = load_image(other, out)
    assert loaded.name == "saved/img:v2" and len(loaded.layers) == 2 and loaded.config.env == snap.config.env
    with other.sandbox(loaded) as sb:
        assert sb.read_file("/root/note") == b"saved\n"
    again = load_image(other, out, name="renamed:v1")  # layers stored once, by digest
    assert again.name == "renamed:v1" and again.layers == loaded.layers


def test_save_and_load_an_oci_layout_directory(registry, make_yard, tmp_path):
    layers = [tar_layer([("data/", None), ("data/a", b"A")]), tar_layer([("data/.wh.a", b""), ("data/b", b"B")])]
    Raw(registry.url).image("layout/dir", "v1", [(t, "gzip") for t in layers], config_extra={"Cmd": ["run"]})
    yard = make_yard()
    img = yard.pull_image(f"{registry.host}/layout/dir:v1")
    out = tmp_path / "layout"
    out.mkdir()  # an empty directory is fine
    save_image(yard, img.name, out, directory=True)
    assert {p.name for p in out.iterdir()} == {"oci-layout", "index.json", "manifest.json", "blobs"}
    other = make_yard()
    loaded = load_image(other, out)
    assert loaded.name == img.name and loaded.config.cmd == ["run"]
    top = other.store.layer(loaded.layers[1]).path / "data"
    assert is_whiteout(top / "a") and (top / "b").read_bytes() == b"B"


def test_load_reads_docker_save_output(make_yard, tmp_path):
    layer = tar_layer([("hello.txt", b"from docker\n")])
    config = json.dumps({"architecture": HERE, "os": "linux", "config": {"Env": ["A=1"]},
                         "rootfs": {"type": "layers", "diff_ids": [digest_of(layer)]}}).encode()
    path = tmp_path / "saved.tar"
    with tarfile.open(path, "w") as tf:
        for name, data in (("abc/layer.tar", layer), ("cfg.json", config),
                           ("manifest.json", json.dumps([{"Config": "cfg.json", "RepoTags": ["hello:1"],
                                                          "Layers": ["abc/layer.tar"]}]).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    yard = make_yard()
    img = load_image(yard, path)
    assert img.name == "docker.io/library/hello:1" and img.config.env == {"A": "1"}
    assert yard.image("hello:1").name == img.name
    assert (yard.store.layer(img.layers[0]).path / "hello.txt").read_bytes() == b"from docker\n"


def test_mirrors_serve_docker_hub_names_and_short_names_find_them(registry, make_yard, _registry_config):
    Raw(registry.url).image("library/tiny", "v1", [(tar_layer([("tiny", b"t")]), "gzip")])
    closed = f"http://127.0.0.1:{free_port()}"
    _registry_config.write_text(json.dumps({"registry-mirrors": [closed, registry.url]}))
    yard = make_yard()
    img = yard.pull_image("tiny:v1")  # Docker Hub's library/tiny, served by the second mirror
    assert img.name == "docker.io/library/tiny:v1"
    assert yard.image("tiny:v1").name == yard.image("docker.io/library/tiny:v1").name == img.name
    assert yard.remove_image("tiny:v1").name == img.name
    assert yard.images() == []


@pytest.mark.parametrize("ref,name", [
    ("python:3.12-slim", "python:3.12-slim"),
    ("127.0.0.1:5000/team/img", "127.0.0.1:5000/team/img:latest"),
    ("localhost:5000/img:v1", "localhost:5000/img:v1"),
    ("ghcr.io/org/img:v1", "ghcr.io/org/img:v1"),
    ("img@sha256:" + "a" * 64, "img@sha256:" + "a" * 64),
    ("img:v1@sha256:" + "b" * 64, "img@sha256:" + "b" * 64),
])
def test_image_names_with_registries(ref, name):
    assert parse_image_name(ref) == name


@pytest.mark.parametrize("bad", ["Upper/case", "host:port/x", "x:y:z", "a//b", "x@sha256:short", "x@y@z", "a/", ""])
def test_bad_image_names(bad):
    with pytest.raises(Exception, match="invalid image name"):
        parse_image_name(bad)


@pytest.mark.parametrize("ref,parts", [
    ("python:3.12-slim", ("docker.io", "library/python", "3.12-slim", "docker.io/library/python:3.12-slim")),
    ("user/app", ("docker.io", "user/app", "latest", "docker.io/user/app:latest")),
    ("index.docker.io/library/debian:12", ("docker.io", "library/debian", "12", "docker.io/library/debian:12")),
    ("127.0.0.1:5000/team/img:v1", ("127.0.0.1:5000", "team/img", "v1", "127.0.0.1:5000/team/img:v1")),
    ("localhost/img", ("localhost", "img", "latest", "localhost/img:latest")),
])
def test_references_follow_dockers_normalisation(ref, parts):
    r = parse_reference(ref)
    assert (r.registry, r.repository, r.tag, r.name) == parts


def test_push_in_docker_schema_2(registry, make_yard):
    """Docker's media types know gzip layers only: a zstd or plain layer is packed again as gzip."""
    layers = [tar_layer([("app/", None), ("app/one", b"1")]), tar_layer([("app/two", b"2")]),
              tar_layer([("app/three", b"3")])]
    Raw(registry.url).image("schema2/src", "v1", list(zip(layers, ["gzip", "zstd", "plain"])))
    yard = make_yard()
    img = yard.pull_image(f"{registry.host}/schema2/src:v1")
    ref = f"{registry.host}/schema2/out:v1"
    result = push_image(yard, img.name, ref, format="docker")
    assert [layer["action"] for layer in result.layers] == ["mounted", "uploaded", "uploaded"]
    doc = httpx.get(f"{registry.url}/v2/schema2/out/manifests/v1",
                    headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"}).json()
    assert doc["mediaType"] == "application/vnd.docker.distribution.manifest.v2+json"
    assert {layer["mediaType"] for layer in doc["layers"]} == {"application/vnd.docker.image.rootfs.diff.tar.gzip"}
    other = make_yard()
    again = other.pull_image(ref)
    contents = [sorted(p.name for p in (other.store.layer(i).path / "app").iterdir()) for i in again.layers]
    assert contents == [["one"], ["two"], ["three"]]
