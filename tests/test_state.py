"""Files, snapshot, fork and reset."""

from __future__ import annotations

import pytest

import envyard


def test_write_read_roundtrip_and_parents(sb):
    sb.write_file("/opt/a/b/c.txt", b"\x00\xffdata")
    assert sb.read_file("/opt/a/b/c.txt") == b"\x00\xffdata"
    sb.write_file("rel.txt", "relative to workdir /")
    assert sb.exec("cat /rel.txt").stdout == "relative to workdir /"
    sb.write_file("/tmp/x.sh", "echo run", mode=0o755)
    assert sb.exec("/tmp/x.sh").stdout == "run\n"
    with pytest.raises(FileNotFoundError):
        sb.read_file("/no/such/file")


@pytest.mark.parametrize("path", ["../../etc/passwd", "/../../x", "a/../../..", "/.envyard/x1.sh", ""])
def test_paths_outside_are_refused(sb, path):
    with pytest.raises(envyard.BadInput):
        sb.write_file(path, "x")
    with pytest.raises(envyard.BadInput):
        sb.read_file(path)


def test_symlinks_resolve_inside_the_sandbox(sb):
    sb.exec("mkdir -p /srv && echo sandbox-only > /srv/secret && ln -s /srv/secret /tmp/link && ln -s / /tmp/root")
    assert sb.read_file("/tmp/link") == b"sandbox-only\n"
    sb.write_file("/tmp/root/srv/new", "through a link")
    assert sb.exec("cat /srv/new").stdout == "through a link"


def test_upload_download(sb, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "f.txt").write_text("hello")
    (src / "top.bin").write_bytes(b"\x01\x02")
    sb.upload(src, "/work/in")
    assert sb.exec("cat /work/in/sub/f.txt").stdout == "hello"
    sb.download("/work/in", tmp_path / "back")
    assert (tmp_path / "back" / "sub" / "f.txt").read_text() == "hello"
    assert (tmp_path / "back" / "top.bin").read_bytes() == b"\x01\x02"
    sb.download("/work/in/top.bin", tmp_path / "one.bin")
    assert (tmp_path / "one.bin").read_bytes() == b"\x01\x02"
    with pytest.raises(envyard.BadInput):
        sb.upload(tmp_path / "missing", "/x")


def test_snapshot_fork_reset(yard, host):
    with yard.sandbox(host) as sb:
        sb.exec("mkdir -p /opt/app && echo v1 > /opt/app/state && echo gone > /opt/app/deleted && rm /opt/app/deleted")
        sb.exec("mkdir -p /opt/replaced && touch /opt/replaced/old")
        snap1 = sb.snapshot("test/snap:one")
        # Whiteouts and opaque directories must survive the snapshot.
        sb.exec("rm -rf /opt/replaced && mkdir /opt/replaced && touch /opt/replaced/new && rm /etc/hostname")
        snap2 = sb.snapshot()
        assert sb.exec("cat /opt/app/state").stdout == "v1\n"  # the sandbox keeps running
        # each snapshot is the image plus one layer holding all changes so far
        assert snap2.layers[:-1] == snap1.layers[:-1] == host.layers and len(snap2.layers) == len(host.layers) + 1

        kids = yard.fork(snap2, 3)
        try:
            for i, k in enumerate(kids):
                assert k.exec("cat /opt/app/state").stdout == "v1\n"
                assert k.exec("ls /opt/replaced").stdout == "new\n"
                assert k.exec("test -e /etc/hostname").exit_code == 1
                assert k.exec("test -e /opt/app/deleted").exit_code == 1
                k.write_file("/opt/app/state", f"child{i}")
            # Children are independent of each other and of the parent.
            assert [k.read_file("/opt/app/state") for k in kids] == [b"child0", b"child1", b"child2"]
            assert sb.read_file("/opt/app/state") == b"v1\n"
        finally:
            for k in kids:
                k.close()

        sb.exec("echo changed > /opt/app/state; touch /newfile")
        sb.reset()
        assert sb.exec("test -e /opt/app").exit_code == 1  # back to the *image*, not a snapshot
        assert sb.exec("test -e /newfile").exit_code == 1
        assert sb.exec("cat /etc/hostname").exit_code == 0
    with yard.sandbox(snap1) as again:
        assert again.exec("ls /opt/replaced").stdout == "old\n"
    yard.remove_image(snap1.name)
    yard.remove_image(snap2.name)


def test_sandbox_fork_method(yard, host):
    with yard.sandbox(host) as sb:
        sb.write_file("/root/marker", "m")
        kids = sb.fork(2)
        try:
            assert all(k.read_file("/root/marker") == b"m" for k in kids)
            assert all(k.image.name.startswith("snapshot/") for k in kids)
        finally:
            for k in kids:
                k.close()
            yard.remove_image(kids[0].image.name)


def test_image_errors(yard):
    with pytest.raises(envyard.ImageNotFound):
        yard.sandbox("no-such-image:v1")
    with pytest.raises(envyard.BadInput):
        yard.sandbox("Bad Name!")
    with pytest.raises(envyard.BadInput):
        yard.sandbox("host", network="bridge")
    with pytest.raises(envyard.BadInput):
        yard.sandbox("host", workdir="relative")
    with pytest.raises(envyard.BadInput):
        yard.sandbox("host", limits={"memory": "lots"})
    with pytest.raises(envyard.BadInput):
        yard.sandbox("host", limits={"swap": "1G"})
    with pytest.raises(envyard.BadInput):
        yard.fork("host", 0)
    assert yard.store.sandboxes() == [] or all(r.owner_alive() for r in yard.store.sandboxes())


def test_warm_pool_hands_over_ready_sandboxes(yard, host):
    import time as _time

    yard.keep_warm(host, 2, env={"POOL": "1"}, wait=True)
    try:
        start = _time.perf_counter()
        sb = yard.sandbox(host, env={"POOL": "1"})
        took = _time.perf_counter() - start
        with sb:
            assert sb.exec("echo $POOL").stdout == "1\n"
        assert took < 0.005  # a hand-over, not a bwrap start
        with yard.sandbox(host, env={"POOL": "other"}) as cold:  # another spec never gets a pooled sandbox
            assert cold.exec("echo $POOL").stdout == "other\n"
    finally:
        yard.keep_warm(host, 0, env={"POOL": "1"})
    yard.wait_closed()
    mine = [r for r in yard.store.sandboxes() if r.owner_pid == __import__("os").getpid()]
    assert mine == []
