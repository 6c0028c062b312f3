"""The store side of images: the blobs table (schema 3) and its migration, layers found by digest, blob rows
going with their layer, old image rows read with the new config fields."""

from __future__ import annotations

import json
import sqlite3

from envyard import janitor
from envyard.store import BlobInfo, ImageConfig, Store
from envyard.store.db import SCHEMA_VERSION


def blob(n: int) -> BlobInfo:
    return BlobInfo(f"sha256:{n:064x}", f"sha256:{n + 1000:064x}", "application/vnd.oci.image.layer.v1.tar+gzip", n)


def test_an_older_store_gains_the_blobs_table(tmp_path):
    Store(tmp_path).db.close()
    with sqlite3.connect(tmp_path / "store.db") as c:  # make it a version-2 store again
        c.execute("DROP TABLE blobs")
        c.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    store = Store(tmp_path)
    assert SCHEMA_VERSION == 3
    assert store.db.query("SELECT value FROM meta WHERE key='schema_version'")[0]["value"] == "3"
    assert store.db.query("SELECT name FROM sqlite_master WHERE name='blobs'")


def test_layers_are_found_by_digest_and_diff_id_once_published(tmp_path):
    store = Store(tmp_path)
    built = store.new_layer_dir()
    (built / "f").write_text("x")
    assert store.layer_for_blob(digest=blob(1).digest) is None
    layer = store.seal_layer(built, {"provider": "test"}, blob=blob(1))
    assert store.layer_for_blob(digest=blob(1).digest).id == layer.id
    assert store.layer_for_blob(diff_id=blob(1).diff_id).id == layer.id

    # a second builder of the same blob gets the published layer, and its own directory goes
    other = store.new_layer_dir()
    assert store.seal_layer(other, {"provider": "test"}, blob=blob(1)).id == layer.id
    janitor.wait()
    assert not other.exists() and [p.name for p in store.layers_dir.iterdir()] == [layer.id]

    store.record_blob(layer.id, blob(2))  # e.g. after a push packed it
    assert {b.digest for b in store.blobs_of(layer.id)} == {blob(1).digest, blob(2).digest}
    store.remove_layer(layer.id)
    assert store.db.query("SELECT * FROM blobs") == []
    assert store.layer_for_blob(digest=blob(2).digest) is None


def test_a_row_whose_directory_is_missing_is_not_reused(tmp_path):
    store = Store(tmp_path)
    layer = store.seal_layer(store.new_layer_dir(), {}, blob=blob(3))
    layer.path.rename(tmp_path / "elsewhere")  # as if its builder died before publishing it
    assert store.layer_for_blob(digest=blob(3).digest) is None
    fresh = store.seal_layer(store.new_layer_dir(), {}, blob=blob(3))
    assert fresh.id != layer.id and store.layer_for_blob(digest=blob(3).digest).id == fresh.id


def test_image_rows_written_before_the_new_config_fields_still_read(tmp_path):
    old = {"env": {"A": "1"}, "workdir": "/w", "user": "root", "shell": "/bin/sh", "labels": {}, "provenance": {}}
    config = ImageConfig.from_json(json.dumps(old))
    assert (config.entrypoint, config.cmd, config.exposed_ports, config.healthcheck, config.stop_signal) == \
        (None, None, [], None, None)
    assert config.env == {"A": "1"} and config.workdir == "/w"


def test_short_names_find_pulled_images_but_base_pull_wants_its_own(tmp_path):
    store = Store(tmp_path)
    store.put_image("docker.io/library/debian:bookworm", [], ImageConfig())
    assert store.image("debian:bookworm").name == "docker.io/library/debian:bookworm"
    assert store.has_image("debian:bookworm") and not store.has_image("debian:bookworm", exact=True)
    store.put_image("debian:bookworm", [], ImageConfig(labels={"local": "yes"}))
    assert store.image("debian:bookworm").config.labels == {"local": "yes"}  # its own name wins
