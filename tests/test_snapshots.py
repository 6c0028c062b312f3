"""Snapshots on the disk-limit volume: a btrfs snapshot of the sandbox's subvolume becomes a read-only layer
without copying a file (runtime/volume.py, store.seal_layer), and gc treats such layers like any other.

Each test uses a store of its own: they unmount and inspect the store's volume.
"""

from __future__ import annotations

import errno
import logging
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


# Every file of the stack as (path, device, inode), and cp, mv and the dynamic loader's view of "the same file".
SAME_FILE_PROBE = r"""
for f in /base1 /base2 /l1/* /l2/* /l3/* /l3b/* /up/*; do stat -c "%n %d %i" "$f"; done
cp /l1/a /up/copy && mv /up/copy /up/moved && echo copied
"""


def test_files_of_stacked_snapshot_layers_and_the_upper_dir_never_share_an_inode(yard):
    """A file's (device, inode) must name it alone in a sandbox. Each layer made by a snapshot is a btrfs
    subvolume, and overlayfs shows one device for them all; every subvolume numbers inodes from 257, so files
    of different layers came out as the same file: scipy's `_csparsetools` and pandas' `internals` (the loader
    returned the module it had already loaded), and `cp`/`mv` refused to copy one over the other."""
    with yard.sandbox("host") as sb:
        sb.exec("echo base1 > /base1; echo base2 > /base2; mkdir /l1; for i in a b c d; do echo 1$i > /l1/$i; done")
        one = sb.snapshot("stack:one")
    with yard.sandbox(one) as sb:
        sb.exec("mkdir /l2; for i in a b c d; do echo 2$i > /l2/$i; done; rm /base2")
        two = sb.snapshot("stack:two")
    with yard.sandbox(two) as sb:  # two children of one image, one of them reset first
        sb.exec("mkdir /l3b; echo x > /l3b/x")
        sb.reset()
        sb.exec("mkdir /l3; for i in a b c d; do echo 3$i > /l3/$i; done")
        three = sb.snapshot("stack:three")
    with yard.sandbox(three) as sb:
        r = sb.exec("mkdir /up /l3b; for i in a b c d e f g h; do echo u$i > /up/$i; done; " + SAME_FILE_PROBE)
    assert r.exit_code == 0 and r.stdout.endswith("copied\n"), r.stdout + r.stderr
    files = [line.split() for line in r.stdout.splitlines()[:-1]]
    assert len(files) == 1 + 4 * 3 + 8, files  # /base2 is deleted, /l3b empty (the reset dropped /l3b/x)
    ids = [(dev, ino) for _, dev, ino in files]
    assert len(set(ids)) == len(ids), sorted(files, key=lambda f: f[1:])
    first, *later = [p for p in yard.store.layer_paths(three.layers) if yard.store.volume_layer_root(p)]
    assert not (first.parent / "attic").exists()  # made over the host's root: began as an empty subvolume
    assert len(later) == 2 and all((p.parent / "attic").is_dir() for p in later)  # began as snapshots


def test_an_image_whose_layers_were_made_before_the_numbering_is_named_when_used(yard, monkeypatch, caplog):
    """Layers made by sandboxes that started from an empty subvolume (before volume._numbered_after) keep
    their colliding inode numbers: a sandbox over them says so, and says to rebuild the image."""
    from envyard.runtime import local

    with yard.sandbox("host") as sb:
        sb.exec("mkdir /l1; for i in a b c; do echo 1$i > /l1/$i; done")
        one = sb.snapshot("legacy:one")
    monkeypatch.setattr(local, "top_volume_layer", lambda store, paths: None)  # how sandboxes began before
    with yard.sandbox(one) as sb:
        sb.exec("mkdir /l2; for i in a b c; do echo 2$i > /l2/$i; done")
        two = sb.snapshot("legacy:two")
    monkeypatch.undo()
    with yard.sandbox(one) as sb:
        fresh = sb.snapshot("numbered:two")
    with caplog.at_level(logging.WARNING, logger="envyard"):
        for image in (one, fresh):
            with yard.sandbox(image):
                pass
        assert "legacy:one" not in caplog.text  # one layer on the volume: nothing to collide with
        assert "numbered:two" not in caplog.text  # made since
        with yard.sandbox(two) as sb:
            ids = sb.exec("stat -c '%d %i' /l1/* /l2/*").stdout.splitlines()
    assert len(ids) == 6 and len(set(ids)) < 6  # what the warning is about
    assert "image legacy:two" in caplog.text and "rebuild it" in caplog.text
    assert local.images_to_rebuild(yard.store) == ["legacy:two"]  # what `envyard doctor` lists


def test_what_a_sandbox_starts_from_does_not_count_against_its_disk_limit(yard):
    """The subvolume of a sandbox over a snapshot layer is a snapshot of that layer's subvolume: the layer's
    bytes in it are shared, and only what the sandbox writes counts against its limit."""
    with yard.sandbox("host") as sb:
        sb.exec("head -c 48M /dev/urandom > /big")
        image = sb.snapshot("big:one")
    with yard.sandbox(image, limits={"disk": "32M"}) as sb:
        assert sb.exec("head -c 16M /dev/zero > /more && sync && cmp -n 1M /big /big && echo ok").stdout == "ok\n"
        r = sb.exec("head -c 24M /dev/zero > /past && sync")
        assert r.exit_code != 0 and "quota" in r.stderr.lower(), r.stderr


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
