"""Snapshots on the disk-limit volume: a btrfs snapshot of the sandbox's subvolume becomes a read-only layer
without copying a file (runtime/volume.py, store.seal_layer), and gc treats such layers like any other.

Each test uses a store of its own: they unmount and inspect the store's volume.
"""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

import envyard
from envyard.runtime.volume import is_subvolume


@pytest.fixture
def yard(tmp_path):
    y = envyard.Yard(tmp_path / "home")
    if not y.can_limit_disk:
        pytest.skip("no disk-limit volume on this machine: snapshots are copies here")
    yield y
    y.close()
    y.gc()


def test_a_snapshot_is_a_read_only_subvolume_that_later_writes_do_not_change(yard):
    with yard.sandbox("host") as sb:
        sb.exec("mkdir -p /data && seq 1 2000 | sed 's|^|/data/f|' | xargs touch && echo one > /data/f1 "
                "&& rm /etc/motd && mkdir -p /opt/d && touch /opt/d/x", timeout=60)
        image = sb.snapshot("snap:one")
        layer = yard.store.layer(image.layers[-1])
        assert layer.path.parent.parent == yard.store.volume_layers_dir and layer.path.name == "upper"
        assert is_subvolume(layer.path.parent)
        assert not (layer.path / ".envyard").exists()  # bwrap's mount point is not content
        with pytest.raises(OSError) as e:
            (layer.path / "new").write_text("x")  # layers are immutable
        assert e.value.errno == errno.EROFS
        sb.exec("echo two > /data/f1 && rm /data/f2")  # the sandbox goes on; the layer holds still
        with yard.sandbox(image) as child:
            r = child.exec("cat /data/f1; ls /data | wc -l; test -e /etc/motd || echo motd-deleted; ls /opt/d")
            assert r.stdout == "one\n2000\nmotd-deleted\nx\n"
        assert sb.exec("cat /data/f1").stdout == "two\n"
    yard.wait_closed()
    assert yard.store.layer(image.layers[-1]).size > 0  # measured in the background


def test_rmi_and_gc_delete_snapshot_layers_abandoned_and_orphaned_ones(yard):
    store = yard.store
    with yard.sandbox("host") as sb:
        sb.exec("echo hi > /hi")
        kept = sb.snapshot("snap:kept")
        dropped = sb.snapshot("snap:dropped")
        # An owner that died between the snapshot and its sealing leaves a `.new-` subvolume naming it ...
        abandoned = yard.backend.volume.snapshot(sb._h.fs, f".new-{_dead_pid()}-1-abandoned")
        # ... and a subvolume whose row is gone is an orphan.
        orphan = yard.backend.volume.snapshot(sb._h.fs, "0" * 32)
    dropped_root = store.layer(dropped.layers[-1]).path.parent
    yard.remove_image("snap:dropped")
    assert not dropped_root.exists() and _layer_gone(store, dropped.layers[-1])
    report = _collect(store)
    assert not abandoned.exists() and not orphan.exists()
    assert {abandoned.name, orphan.name} <= set(report["partial_layers"])
    with yard.sandbox(kept) as sb:
        assert sb.exec("cat /hi").stdout == "hi\n"


def test_the_volume_is_mounted_again_for_a_snapshot_layer(yard):
    with yard.sandbox("host") as sb:
        sb.exec("echo kept > /kept")
        image = sb.snapshot("snap:remount")
    yard.wait_closed()
    yard.backend.volume.close()
    subprocess.run(["umount", str(yard.store.volume_dir)], check=True)  # as after a reboot
    assert not os.path.ismount(yard.store.volume_dir)
    with yard.sandbox(image) as sb:
        assert sb.exec("cat /kept").stdout == "kept\n"
    # gc keeps the volume mounted while an image stands on a layer there, and unmounts it once none does.
    assert yard.gc()["volume_unmounted"] is False and os.path.ismount(yard.store.volume_dir)
    yard.remove_image("snap:remount")
    yard.backend.volume.close()
    assert yard.gc()["volume_unmounted"] is True


def test_gc_gives_the_volumes_free_space_back_to_the_host(yard):
    """The volume is a sparse image file: blocks btrfs frees inside stay allocated on the host's disk until they
    are discarded (a test store's 2.2 GB image held 6 MB of data). gc trims them."""
    with yard.sandbox("host", limits={"disk": "1G"}):  # the volume is mounted while a sandbox uses it
        junk = yard.store.volume_dir / "junk"
        with open(junk, "wb") as f:
            for _ in range(50):
                f.write(os.urandom(4 << 20))  # 200 MiB allocated in the image file
        os.sync()
        junk.unlink()
        os.sync()
        image = yard.store.home / "volume.img"
        before = os.stat(image).st_blocks * 512
        trimmed = yard.gc()["volume_trimmed_bytes"]
        assert trimmed >= 150 << 20, trimmed
        assert os.stat(image).st_blocks * 512 <= before - (150 << 20)


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _layer_gone(store, layer_id: str) -> bool:
    return not store.db.query("SELECT 1 FROM layers WHERE id=?", (layer_id,))


def _collect(store):
    from envyard.gc import collect

    return collect(store)
