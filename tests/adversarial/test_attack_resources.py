"""Attacks on the machine's capacity: a sandbox that writes until the disk is full."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import envyard

FILL = "head -c 300M /dev/zero > /tmp/fill; echo rc=$?; echo small > /tmp/small; echo small=$?"


def test_a_writer_meets_the_disk_limit_and_the_sandbox_goes_on(yard, host):
    with yard.sandbox(host, limits={"disk": "64M"}) as sb, yard.sandbox(host) as neighbour:
        r = sb.exec(FILL)
        assert "Disk quota exceeded" in r.stderr and "rc=1" in r.stdout, r
        assert int(sb.exec("stat -c %s /tmp/fill").stdout) <= 64 << 20
        assert sb.exec("rm /tmp/fill && echo ok > /tmp/after && cat /tmp/after").stdout == "ok\n"
        assert neighbour.exec("head -c 100M /dev/zero > /tmp/n && echo ok").stdout == "ok\n"


def test_without_the_limit_the_same_writer_takes_what_it_wants(yard, host):
    yard.backend.disk_limits = False
    try:
        with yard.sandbox(host) as sb:
            assert sb.exec(FILL).stdout == "rc=0\nsmall=0\n"
    finally:
        yard.backend.disk_limits = True


def test_every_sandbox_has_a_default_limit(yard, host):
    from envyard.runtime.limits import DEFAULT_DISK

    with yard.sandbox(host) as sb:
        subvolume = yard.store.home / "volume" / sb.id / "g0"
        sb.exec("echo x > /tmp/x")
        assert (subvolume / "upper" / "tmp" / "x").is_file()
        out = subprocess.run(["btrfs", "qgroup", "show", "-r", "--raw", str(subvolume)], capture_output=True,
                             text=True).stdout
        assert str(DEFAULT_DISK) in out, out


def test_reset_gives_the_space_back(yard, host):
    with yard.sandbox(host, limits={"disk": "64M"}) as sb:
        sb.exec("head -c 60M /dev/zero > /tmp/fill")
        sb.reset()
        assert sb.exec("head -c 60M /dev/zero > /tmp/fill && echo ok").stdout == "ok\n"
        yard.wait_closed()  # the janitor deletes the old subvolume
        assert [p.name for p in (yard.store.home / "volume" / sb.id).iterdir()] == ["g1"]


def test_snapshot_and_fork_of_a_limited_sandbox(yard, host):
    with yard.sandbox(host, limits={"disk": "64M"}) as sb:
        sb.exec("echo kept > /tmp/state")
        snap = sb.snapshot()
    kids = yard.fork(snap, 2, limits={"disk": "32M"})
    try:
        assert [k.exec("cat /tmp/state").stdout for k in kids] == ["kept\n", "kept\n"]
    finally:
        for k in kids:
            k.close()
        yard.remove_image(snap.name)


def test_an_explicit_limit_on_a_machine_without_disk_limits_is_refused(yard, host, monkeypatch):
    monkeypatch.setattr(yard.backend.volume, "available", lambda: "the kernel has no btrfs")
    with pytest.raises(envyard.HostUnsupported, match="cannot limit this sandbox's disk: the kernel has no btrfs"):
        yard.sandbox(host, limits={"disk": "1G"})
    with yard.sandbox(host) as sb:  # no limit asked for: runs without one
        assert sb.exec("true").exit_code == 0


@pytest.mark.parametrize("bad", ["1M", "lots", True, [1]])
def test_bad_disk_limits_are_bad_input(yard, host, bad):
    with pytest.raises(envyard.BadInput):
        yard.sandbox(host, limits={"disk": bad})


OWNER = textwrap.dedent("""
    import sys, time, envyard
    yard = envyard.Yard(sys.argv[1])
    sb = yard.sandbox("host", limits={"disk": "64M"})
    sb.exec("echo x > /tmp/x")
    print(sb.id, flush=True)
    time.sleep(600)
""")


def test_gc_removes_the_subvolume_of_a_dead_owner(tmp_path):
    home = tmp_path / "home"
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(home)], stdout=subprocess.PIPE, text=True)
    try:
        sid = owner.stdout.readline().strip()
        assert (home / "volume" / sid / "g0").is_dir()
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        owner.stdout.close()
    yard = envyard.Yard(home, reap=False)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            report = yard.gc()
            if not (home / "volume" / sid).exists():
                break
            time.sleep(0.2)
        assert sid in report["sandboxes"] + report["stray_subvolumes"] or not (home / "volume" / sid).exists()
        assert not os.path.ismount(home / "volume") and not (home / "volume" / sid).exists()
    finally:
        yard.close()
        yard.gc()
