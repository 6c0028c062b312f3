"""What goes wrong, and what is left afterwards: unknown images, unreachable registries, unsupported content,
tampered content, interrupted pulls (killed mid-blob: the next pull resumes), Ctrl-C, authentication."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from envyard.errors import (DigestMismatch, RegistryAuthError, RegistryUnreachable, RemoteImageNotFound,
                            UnsupportedImage)
from envyard.images import pull_image, push_image

from .registry import Raw, Registry, StallingProxy, TokenService, digest_of, free_port, htpasswd_line, tar_layer


def nothing_left(yard) -> None:
    """No image, no layer (sealed or being built), no download."""
    assert yard.images() == []
    assert list(yard.store.layers_dir.iterdir()) == []
    assert yard.store.db.query("SELECT * FROM layers") == []
    assert list(yard.store.downloads_dir.iterdir()) == []


def test_unknown_repository_and_tag(registry, make_yard):
    Raw(registry.url).image("known/repo", "v1", [(tar_layer([("f", b"1")]), "gzip")])
    yard = make_yard()
    for ref in (f"{registry.host}/known/repo:nope", f"{registry.host}/no/such:v1"):
        with pytest.raises(RemoteImageNotFound, match="MANIFEST_UNKNOWN|NAME_UNKNOWN") as e:
            yard.pull_image(ref)
        assert e.value.exit_code == 14
    nothing_left(yard)


def test_unreachable_registries_say_so(make_yard):
    yard = make_yard()
    with pytest.raises(RegistryUnreachable, match="cannot reach registry 127.0.0.1") as e:
        yard.pull_image(f"127.0.0.1:{free_port()}/x/y:1")
    assert e.value.exit_code == 16
    started = time.monotonic()
    with pytest.raises(RegistryUnreachable, match="cannot reach Docker Hub .* no route to public registries") as e:
        yard.pull_image("debian:bookworm-slim")
    assert "registry-mirrors" in e.value.fix
    assert time.monotonic() - started < 30
    nothing_left(yard)


def test_not_a_container_image(registry, make_yard):
    Raw(registry.url).image("not/image", "v1", [(tar_layer([("f", b"1")]), "gzip")],
                            config_type="application/vnd.cncf.helm.config.v1+json")
    yard = make_yard()
    with pytest.raises(UnsupportedImage, match="not a container image") as e:
        yard.pull_image(f"{registry.host}/not/image:v1")
    assert e.value.exit_code == 17
    nothing_left(yard)


def test_a_corrupted_blob_is_refused_and_leaves_nothing(make_yard, tmp_path):
    reg = Registry(tmp_path / "reg")  # its own storage: the test corrupts it
    try:
        raw = Raw(reg.url)
        good = tar_layer([("ok", b"fine")])
        bad = tar_layer([("bad", b"x" * 10000)])
        manifest = raw.image("tampered/img", "v1", [(good, "gzip"), (bad, "gzip")])
        layer_digest = [d for d in _layer_digests(reg, manifest)][1]
        blob = reg.blob_file(layer_digest)
        data = bytearray(blob.read_bytes())
        data[len(data) // 2] ^= 0xFF
        blob.write_bytes(bytes(data))
        yard = make_yard()
        with pytest.raises(DigestMismatch, match="not " + layer_digest) as e:
            yard.pull_image(f"{reg.host}/tampered/img:v1")
        assert e.value.exit_code == 19
        assert yard.images() == [] and list(yard.store.downloads_dir.iterdir()) == []
        assert not [p for p in yard.store.layers_dir.iterdir() if p.name.startswith(".new-")]

        # a manifest altered in storage: refused whether pulled by tag or by digest
        mblob = reg.blob_file(manifest["digest"])
        mblob.write_bytes(mblob.read_bytes().replace(b'"schemaVersion": 2', b'"schemaVersion":  2'))
        for ref in (f"{reg.host}/tampered/img:v1", f"{reg.host}/tampered/img@{manifest['digest']}"):
            with pytest.raises(DigestMismatch, match="manifest"):
                yard.pull_image(ref)
    finally:
        reg.stop()


def _layer_digests(reg: Registry, manifest: dict) -> list[str]:
    doc = json.loads(reg.blob_file(manifest["digest"]).read_bytes())
    return [layer["digest"] for layer in doc["layers"]]


def test_a_config_that_lies_about_its_layers(registry, make_yard):
    tar = tar_layer([("f", b"1")])
    Raw(registry.url).image("lying/config", "v1", [(tar, "gzip")], diff_ids=[digest_of(b"something else")])
    yard = make_yard()
    with pytest.raises(DigestMismatch, match="unpacks to"):
        yard.pull_image(f"{registry.host}/lying/config:v1")
    nothing_left(yard)


def test_ctrl_c_leaves_no_image(registry, make_yard):
    Raw(registry.url).image("interrupt/me", "v1", [(tar_layer([("a", b"1")]), "gzip"),
                                                   (tar_layer([("b", b"2")]), "gzip")])
    yard = make_yard()

    def interrupt_at(phase):
        def on_progress(report):
            if report.phase == phase:
                raise KeyboardInterrupt
        return on_progress

    with pytest.raises(KeyboardInterrupt):
        yard.pull_image(f"{registry.host}/interrupt/me:v1", on_progress=interrupt_at("extract"))
    assert yard.images() == [] and list(yard.store.layers_dir.iterdir()) == []
    with pytest.raises(KeyboardInterrupt):
        yard.pull_image(f"{registry.host}/interrupt/me:v1", on_progress=interrupt_at("download"))
    assert yard.images() == [] and list(yard.store.layers_dir.iterdir()) == []
    # a download interrupted before it finished stays for the next pull; gc removes it when nobody holds it
    assert len(list(yard.store.downloads_dir.iterdir())) == 1
    img = yard.pull_image(f"{registry.host}/interrupt/me:v1")
    assert len(img.layers) == 2 and list(yard.store.downloads_dir.iterdir()) == []


def test_gc_removes_downloads_nobody_holds(make_yard):
    yard = make_yard()
    held, abandoned = yard.store.downloads_dir / "a.part", yard.store.downloads_dir / "b.part"
    held.write_bytes(b"1")
    abandoned.write_bytes(b"2")
    with open(held, "rb") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        assert yard.gc()["partial_downloads"] == ["b.part"]
    assert [p.name for p in yard.store.downloads_dir.iterdir()] == ["a.part"]


def test_a_pull_killed_mid_blob_resumes_where_it_stopped(registry, make_yard):
    size = 24 << 20
    payload = os.urandom(size)  # incompressible: the blob is as large as the file
    manifest = Raw(registry.url).image("big/blob", "v1", [(tar_layer([("big", payload)]), "gzip")])
    proxy = StallingProxy(registry.port, budget=8 << 20)
    yard = make_yard()
    try:
        env = {**os.environ, "ENVYARD_HOME": str(yard.store.home)}
        proc = subprocess.Popen([sys.executable, "-m", "envyard.cli.main", "pull", "--json",
                                 f"127.0.0.1:{proxy.port}/big/blob:v1"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        partial = _wait_for_stalled_download(yard.store.downloads_dir, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        proxy.stop()
    have = partial.stat().st_size
    assert 0 < have < size
    assert yard.images() == []

    events = []
    img = pull_image(yard, f"{registry.host}/big/blob:v1", on_progress=events.append)
    starts = [e for e in events if e.phase == "download" and "resuming" in e]
    assert len(starts) == 1 and starts[0].done == have
    assert (yard.store.layer(img.layers[0]).path / "big").read_bytes() == payload
    assert img.config.provenance["manifest_digest"] == manifest["digest"]
    assert list(yard.store.downloads_dir.iterdir()) == []


def _wait_for_stalled_download(downloads, proc, timeout: float = 60):
    """The .part file once it has stopped growing (the proxy stalls the transfer)."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode()
        parts = list(downloads.glob("*.part"))
        size = parts[0].stat().st_size if parts else -1
        if size != last:
            last, since = size, time.monotonic()
        elif size > 0 and time.monotonic() - since > 0.5:
            return parts[0]
        time.sleep(0.05)
    raise AssertionError("the download never stalled")


# --- authentication ------------------------------------------------------------------------------------------


@pytest.fixture
def tiny(registry, make_yard):
    """A store holding a small image to push (pulled from the open registry)."""
    Raw(registry.url).image("auth/src", "v1", [(tar_layer([("secret", b"s3")]), "gzip")])
    yard = make_yard()
    yard.pull_image(f"{registry.host}/auth/src:v1")
    return yard


def write_auths(config_path, host, user, password) -> None:
    config_path.write_text(json.dumps({"auths": {host: {"username": user, "password": password}}}))


def test_basic_auth_registry(tiny, make_yard, tmp_path, _registry_config):
    (tmp_path / "htpasswd").write_text(htpasswd_line("alice", "wonder"))
    reg = Registry(tmp_path / "basic", auth={"htpasswd": {"realm": "basic-realm", "path": str(tmp_path / "htpasswd")}})
    try:
        ref = f"{reg.host}/private/img:v1"
        with pytest.raises(RegistryAuthError, match="needs credentials and none are configured") as e:
            push_image(tiny, f"{tiny.images()[0].name}", ref)
        assert e.value.exit_code == 15
        write_auths(_registry_config, reg.host, "alice", "wrong")
        with pytest.raises(RegistryAuthError, match="for user alice"):
            push_image(tiny, tiny.images()[0].name, ref)
        write_auths(_registry_config, reg.host, "alice", "wonder")
        push_image(tiny, tiny.images()[0].name, ref)
        img = make_yard().pull_image(ref)
        assert img.name == ref
    finally:
        reg.stop()


def test_token_auth_registry(tiny, make_yard, tmp_path, _registry_config):
    tokens = TokenService(tmp_path, "bob", "builder")
    reg = Registry(tmp_path / "token", auth=tokens.registry_auth())
    try:
        ref = f"{reg.host}/team/img:v1"
        with pytest.raises(RegistryAuthError, match="refused anonymous access"):
            make_yard().pull_image(ref)
        write_auths(_registry_config, reg.host, "bob", "builder")
        result = push_image(tiny, tiny.images()[0].name, ref)
        assert [layer["action"] for layer in result.layers] == ["uploaded"]
        img = make_yard().pull_image(ref)
        assert img.name == ref
        scopes = [s for r in tokens.requests if r["authorized"] for s in r["scopes"]]
        assert "repository:team/img:pull,push" in scopes and "repository:team/img:pull" in scopes
    finally:
        reg.stop()
        tokens.stop()
