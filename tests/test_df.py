"""`envyard df` and `envyard gc --cache`: real disk use of a store, and pruning its package cache.

One store for the module, with the `host` image (its view of `/` is mounted inside the store: df must never
walk into it) and two images sharing a snapshot layer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import envyard
from envyard.diskuse import Walker, usage

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the host image needs root (it mounts a view of /)")

SRC = Path(__file__).resolve().parents[1] / "src"
MB = 1_000_000


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    home = tmp_path_factory.mktemp("df-home")
    yard = envyard.Yard(home)
    with yard.sandbox("host") as sb:
        sb.exec("head -c 5000000 /dev/urandom > /opt/five.bin && sync")
        first = sb.snapshot("df/first")
    with yard.sandbox(first) as sb:
        sb.exec("head -c 1000000 /dev/urandom > /opt/one.bin && sync")
        second = sb.snapshot("df/second")
    yield yard, first, second
    for name in ("df/second", "df/first"):
        yard.remove_image(name)
    yard.close()
    yard.gc()


def cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ENVYARD_HOME": str(home), "PYTHONPATH": str(SRC), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "envyard.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_shared_layers_count_once_and_unique_bytes_are_what_rmi_frees(store):
    yard, first, second = store
    u = usage(yard.store)
    layers = {layer["id"]: layer for layer in u["layers"]}
    shared = first.layers[-1]
    assert sorted(layers[shared]["images"]) == ["df/first:latest", "df/second:latest"]
    assert 5 * MB <= layers[shared]["bytes"] < 7 * MB
    assert 1 * MB <= layers[second.layers[-1]]["bytes"] < 2 * MB
    assert u["parts"]["layers"] == sum(layer["bytes"] for layer in u["layers"])  # each layer once
    images = {i["name"]: i for i in u["images"]}
    assert images["df/first:latest"]["unique_bytes"] == 0  # all its layers are also df/second's
    assert images["df/second:latest"]["unique_bytes"] == layers[second.layers[-1]]["bytes"]
    assert images["df/second:latest"]["bytes"] > images["df/first:latest"]["bytes"]


def test_a_sandbox_counts_what_it_wrote_not_the_layer_it_started_from(store):
    """A sandbox over a snapshot layer starts from a snapshot of it whose files sit in `attic/`: shared with
    the layer, they are not the sandbox's."""
    yard, first, second = store
    with yard.sandbox(second) as sb:
        sb.exec("head -c 2000000 /dev/urandom > /opt/two.bin && sync")
        if not (sb._h.fs / "attic").is_dir():
            pytest.skip("no disk-limit volume here: the sandbox does not start from a snapshot")
        mine = next(s for s in usage(yard.store)["sandboxes"] if s["id"] == sb.id)
    assert 2 * MB <= mine["bytes"] < 3 * MB  # not the 1 MB + 5 MB of the layers below it


def test_the_host_view_inside_the_store_is_never_entered(store):
    yard, *_ = store
    host_root = yard.store.home / "host" / "root"
    assert os.path.ismount(host_root), "the host view should be mounted while its image is in use"
    u = usage(yard.store)
    assert next(layer for layer in u["layers"] if layer["id"] == "host-root")["bytes"] == 0
    # The store holds a few MB of layers plus its volume file; the host's disk would be gigabytes.
    assert u["total_bytes"] < u["volume"]["allocated_bytes"] + 200 * MB
    assert Walker().size(yard.store.home / "host")[0] < 50 * MB


def test_hard_links_count_once(tmp_path):
    (tmp_path / "a").write_bytes(os.urandom(400_000))
    os.link(tmp_path / "a", tmp_path / "b")
    w = Walker()
    total, fresh = w.size(tmp_path)
    assert 400_000 <= total < 500_000
    assert w.size(tmp_path) == (total, 0)  # a second walk finds nothing new


def test_df_cli_table_and_json(store):
    yard, *_ = store
    r = cli(yard.store.home, "df", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert {"total_bytes", "parts", "images", "layers", "sandboxes", "volume"} <= set(data)
    r = cli(yard.store.home, "df", "-v")
    assert r.returncode == 0, r.stderr
    assert "df/second:latest" in r.stdout and "package cache" in r.stdout and "host-root" in r.stdout


def test_gc_cache_prunes_the_package_cache_down_to_the_bound(store):
    yard, *_ = store
    from envyard.setup import pkgcache

    cache = pkgcache.scope_dir(yard.store.home, "dir:/some/project")
    (cache / "archive-v0").mkdir(exist_ok=True)
    (cache / "archive-v0" / "blob").write_bytes(os.urandom(2 * MB))
    kept = cli(yard.store.home, "gc", "--json", "--cache", "--cache-max", "100M")
    assert kept.returncode == 0, kept.stderr
    assert json.loads(kept.stdout)["package_cache"]["steps"] == []  # under the bound: nothing to do
    assert (cache / "archive-v0" / "blob").exists()
    bad = cli(yard.store.home, "gc", "--cache", "--cache-max", "lots")
    assert bad.returncode == 2 and "not a size" in bad.stderr
    assert (cache / "archive-v0" / "blob").exists()
    pruned = cli(yard.store.home, "gc", "--json", "--cache")
    assert pruned.returncode == 0, pruned.stderr
    report = json.loads(pruned.stdout)["package_cache"]
    assert report["before_bytes"] >= 2 * MB and report["after_bytes"] < 100_000
    assert not (cache / "archive-v0" / "blob").exists()
    assert usage(yard.store)["parts"]["package_cache"] < 100_000
