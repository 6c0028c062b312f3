"""File methods work from the host through the sandbox's own root: attacks an agent can mount against them."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

import envyard


def quick(fn, seconds: float = 5.0):
    """Run `fn` on a thread; fail if it has not returned within `seconds` (the old code blocked forever on a FIFO).
    Returns what it raised, or None."""
    box = {}

    def run():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds}s"
    return box.get("error")


def peak_rss_reset() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM, the peak resident size


def peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.fixture
def host_marker(tmp_path):
    """A secret on the host, outside the store, under /tmp (which sandboxes of the host image do not see)."""
    d = tmp_path / "hostonly"
    d.mkdir()
    (d / "secret").write_text("HOST-SECRET\n")
    return d / "secret"


def test_symlinks_out_of_the_sandbox_read_the_sandboxs_files_never_the_hosts(sb, host_marker, tmp_path):
    shadow_before = hashlib.sha256(Path("/etc/shadow").read_bytes()).hexdigest()
    up = "../" * 12 + str(host_marker).lstrip("/")
    sb.exec(f"mkdir -p /work/t && cd /work/t && ln -s {host_marker} abs && ln -s {up} up && ln -s /etc/shadow shadow"
            " && ln -s / root && echo sandbox-shadow > /etc/shadow")
    for link in ("/work/t/abs", "/work/t/up", "/work/t/root" + str(host_marker)):
        with pytest.raises(FileNotFoundError):  # the sandbox has no such file; the host's is never reached
            sb.read_file(link)
        with pytest.raises(FileNotFoundError):
            sb.download(link, tmp_path / "out.txt")
    assert sb.read_file("/work/t/shadow") == b"sandbox-shadow\n"
    sb.download("/work/t/shadow", tmp_path / "shadow")
    assert (tmp_path / "shadow").read_bytes() == b"sandbox-shadow\n"

    # Once the sandbox has a file of that name, that is what the links give.
    sb.exec(f"mkdir -p {host_marker.parent} && echo sandbox-copy > {host_marker}")
    assert sb.read_file("/work/t/abs") == sb.read_file("/work/t/up") == b"sandbox-copy\n"

    # Writing through the links changes the sandbox only.
    sb.write_file("/work/t/root" + str(host_marker), "written")
    with pytest.raises(envyard.NotRegularFile):  # the final component may not be a link for writes
        sb.write_file("/work/t/up", "x")
    assert host_marker.read_text() == "HOST-SECRET\n"
    assert hashlib.sha256(Path("/etc/shadow").read_bytes()).hexdigest() == shadow_before


def test_download_never_follows_or_recreates_links_out_of_the_tree(sb, host_marker, tmp_path):
    up = "../" * 12 + str(host_marker).lstrip("/")
    sb.exec(f"""set -e; mkdir -p /work/d/sub && cd /work/d && echo data > sub/f
        ln -s {host_marker} abs; ln -s {up} up; ln -s /etc/shadow shadow; ln -s sub/f ok; ln -s ../sub sub/self
        ln -s . here; ln -s here/.. climb; ln -s climb/etc/passwd via; ln -s /proc/self/environ env; mkfifo fifo""")
    skipped = sb.download("/work/d", tmp_path / "out")
    out = tmp_path / "out"
    assert (out / "sub" / "f").read_text() == "data\n"
    assert os.readlink(out / "ok") == "sub/f" and (out / "ok").read_text() == "data\n"
    assert os.readlink(out / "sub" / "self") == "../sub"
    for name in ("abs", "up", "shadow", "climb", "env", "fifo"):
        assert not os.path.lexists(out / name), name
        assert any(s.startswith(f"/work/d/{name}") for s in skipped), (name, skipped)
    # Every link that was recreated resolves inside `out` on the host.
    for dirpath, dirnames, filenames in os.walk(out):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink():
                assert Path(os.path.realpath(p)).is_relative_to(out), p
    assert {p.name for p in tmp_path.iterdir()} == {"hostonly", "out"}  # nothing written beside `out`


@pytest.mark.parametrize("kind", ["fifo", "socket", "dev-zero", "dev-zero-link", "proc", "directory"])
def test_special_files_raise_at_once(sb, kind, tmp_path):
    sb.exec("mkdir -p /work/s && cd /work/s && mkfifo fifo && ln -s /dev/zero zero"
            " && python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('/work/s/sock')\" && mkdir dir")
    path = {"fifo": "/work/s/fifo", "socket": "/work/s/sock", "dev-zero": "/dev/zero", "dev-zero-link": "/work/s/zero",
            "proc": "/proc/self/environ", "directory": "/work/s/dir"}[kind]
    calls = [lambda: sb.read_file(path), lambda: sb.write_file(path, "x")]
    if kind != "directory":  # downloading a directory is what download is for
        calls.append(lambda: sb.download(path, tmp_path / "x"))
    for call in calls:
        start = time.monotonic()
        err = quick(call)
        assert isinstance(err, envyard.BadInput), repr(err)  # NotRegularFile, or PathOutsideSandbox off the root fs
        assert time.monotonic() - start < 1
    assert sb.exec("echo alive").stdout == "alive\n"


def test_huge_sparse_file_is_refused_at_once_without_using_memory(sb, tmp_path):
    sb.exec("truncate -s 2G /work-big && truncate -s 2G /tmp/big2")
    peak_rss_reset()
    base = peak_rss()
    start = time.monotonic()
    err = quick(lambda: sb.read_file("/work-big"), 10)
    assert isinstance(err, envyard.FileTooLarge) and err.size == 2 << 30 and err.limit == 64 << 20
    assert "max_bytes" in err.fix
    err = quick(lambda: sb.download("/tmp", tmp_path / "dl"), 10)
    assert isinstance(err, envyard.FileTooLarge)
    assert time.monotonic() - start < 2
    assert peak_rss() - base < 32 << 20
    sb.exec("printf 12345 > /tmp/five")
    assert sb.read_file("/tmp/five", max_bytes=5) == b"12345"
    with pytest.raises(envyard.FileTooLarge):
        sb.read_file("/tmp/five", max_bytes=4)


def test_replaced_binaries_cannot_lie_about_files(sb, tmp_path):
    liar = "#!/bin/sh\necho LIE\nexit 0\n"
    sb.exec(" && ".join(f"printf '%s' '{liar}' > {b}" for b in ("/usr/bin/cat", "/usr/bin/tar", "/bin/mkdir",
                                                             "/usr/bin/chmod")))
    assert sb.exec("cat /etc/hostname").stdout == "LIE\n"  # the agent's replacements are in place

    sb.write_file("/work/new/dir/f.bin", b"\x00true\xff", mode=0o640)
    check = sb.exec("sha256sum /work/new/dir/f.bin; stat -c %a /work/new/dir/f.bin").stdout.split()
    assert check[0] == hashlib.sha256(b"\x00true\xff").hexdigest() and check[-1] == "640"
    assert sb.read_file("/work/new/dir/f.bin") == b"\x00true\xff"
    assert sb.read_file("/etc/hostname") == Path("/etc/hostname").read_bytes()

    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "a" / "b" / "deep.txt").write_text("deep")
    (src / "run.sh").write_text("echo ran")
    os.chmod(src / "run.sh", 0o755)
    os.symlink("a/b/deep.txt", src / "link")
    sb.upload(src, "/work/up")
    assert sb.exec("sha256sum /work/up/a/b/deep.txt").stdout.split()[0] == hashlib.sha256(b"deep").hexdigest()
    assert sb.exec("sh /work/up/run.sh; stat -c %a /work/up/run.sh; readlink /work/up/link").stdout == \
        "ran\n755\na/b/deep.txt\n"
    sb.upload(src / "run.sh", "/work/single/run.sh")
    assert sb.exec("/work/single/run.sh").stdout == "ran\n"

    sb.download("/work/up", tmp_path / "back")
    assert (tmp_path / "back" / "a" / "b" / "deep.txt").read_text() == "deep"
    assert os.readlink(tmp_path / "back" / "link") == "a/b/deep.txt"
    assert os.stat(tmp_path / "back" / "run.sh").st_mode & 0o777 == 0o755
    sb.download("/work/new/dir/f.bin", tmp_path / "one" / "f.bin")
    assert (tmp_path / "one" / "f.bin").read_bytes() == b"\x00true\xff"


def test_write_keeps_mode_semantics_and_replaces_content(sb):
    sb.write_file("/work/m/x", "long original content")
    sb.write_file("/work/m/x", "short")
    assert sb.read_file("/work/m/x") == b"short"
    assert sb.exec("stat -c %a /work/m/x").stdout == "644\n"  # 0666 less the umask, as `cat >` made it
    sb.write_file("/work/m/x", "x", mode=0o4711)  # applied exactly, after the data
    assert sb.exec("stat -c %a /work/m/x").stdout == "4711\n"
    sb.write_file("/work/m/x", "x", mode=0o751)
    sb.write_file("/work/m/x", "y")  # an existing file keeps its mode when none is given
    assert sb.exec("stat -c %a /work/m/x").stdout == "751\n"
    sb.exec("ln -s /work/m /work/mlink && touch /work/m/file-not-dir")
    sb.write_file("/work/mlink/deeper/new", "through a link among the parents")
    assert sb.exec("cat /work/m/deeper/new").stdout == "through a link among the parents"
    with pytest.raises(envyard.BadInput):
        sb.write_file("/work/m/file-not-dir/child", "x")


def test_file_methods_on_a_closed_sandbox(yard, host):
    s = yard.sandbox(host)
    s.close()
    with pytest.raises(envyard.SandboxClosed):
        s.read_file("/etc/hostname")
    with pytest.raises(envyard.SandboxClosed):
        s.write_file("/tmp/x", "x")


def test_file_methods_follow_a_reset(sb):
    sb.write_file("/tmp/before", "1")
    sb.reset()
    with pytest.raises(FileNotFoundError):
        sb.read_file("/tmp/before")
    sb.write_file("/tmp/after", "2")
    assert sb.exec("cat /tmp/after").stdout == "2"


def test_a_lease_inside_the_sandbox_does_not_stall_the_owner(sb):
    """A write lease whose holder ignores the break signal makes a blocking open() wait lease-break-time (45 s);
    the owner must not wait."""
    sb.write_file("/tmp/leased", "data")
    holder = threading.Thread(target=sb.exec, args=(
        "python3 -c \"import fcntl, os, signal, time; signal.signal(signal.SIGIO, signal.SIG_IGN); "
        "fd = os.open('/tmp/leased', os.O_RDONLY); "
        "fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK); open('/tmp/ready', 'w').close(); time.sleep(5)\"",),
        kwargs={"timeout": 20}, daemon=True)
    holder.start()
    deadline = time.monotonic() + 10
    while sb.exec("test -e /tmp/ready").exit_code != 0:
        assert time.monotonic() < deadline, "the lease was never taken"
        time.sleep(0.05)
    for call in (lambda: sb.read_file("/tmp/leased"), lambda: sb.write_file("/tmp/leased", "x")):
        start = time.monotonic()
        err = quick(call, 5)
        assert err is None or isinstance(err, envyard.EnvyardError), repr(err)
        assert time.monotonic() - start < 1
    holder.join(20)


def test_upload_replaces_links_planted_in_its_way_instead_of_writing_through_them(sb, tmp_path):
    src = tmp_path / "src"
    (src / "conf").mkdir(parents=True)
    (src / "conf" / "app.ini").write_text("mine")
    (src / "passwd").write_text("mine too")
    passwd = sb.exec("sha256sum /etc/passwd").stdout
    sb.exec("mkdir -p /work/dst && ln -s /etc /work/dst/conf && ln -s /etc/passwd /work/dst/passwd")
    sb.upload(src, "/work/dst")
    assert sb.exec("sha256sum /etc/passwd").stdout == passwd and sb.exec("test -e /etc/app.ini").exit_code == 1
    assert sb.exec("test -L /work/dst/conf || test -L /work/dst/passwd").exit_code == 1
    assert sb.read_file("/work/dst/conf/app.ini") == b"mine" and sb.read_file("/work/dst/passwd") == b"mine too"


def test_download_of_a_hostile_tree_stops_with_typed_errors(sb, tmp_path):
    sb.exec("mkdir -p /work/deep/" + "/".join(["d"] * 300) + " && mkdir -p /work/many && cd /work/many"
            " && i=0; while [ $i -lt 300 ]; do : > f$i; i=$((i+1)); done")
    with pytest.raises(envyard.BadInput, match="nested more than"):
        sb.download("/work/deep", tmp_path / "deep")
    with pytest.raises(envyard.BadInput, match="more than 100 files"):
        sb.download("/work/many", tmp_path / "many", max_entries=100)
    sb.exec("head -c 3000 /dev/zero > /work/many/f1 && head -c 3000 /dev/zero > /work/many/f2")
    with pytest.raises(envyard.FileTooLarge):
        sb.download("/work/many", tmp_path / "many2", max_bytes=5000)
    assert sb.download("/work/many", tmp_path / "many3", max_bytes=6000) == []
    assert len(list((tmp_path / "many3").iterdir())) == 300
