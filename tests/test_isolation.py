"""Isolation and limits: the host and images never change; limits hold; networks are as asked."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import envyard
from conftest import tree_digest
from envyard.runtime.cgroups import Cgroups


def _interfaces(proc_net_dev: str) -> list[str]:
    return sorted(line.split(":")[0].strip() for line in proc_net_dev.splitlines()[2:])


def test_network_none_by_default_and_host_on_request(yard, host):
    with yard.sandbox(host) as sb:
        assert _interfaces(sb.exec("cat /proc/net/dev").stdout) == ["lo"]
    with yard.sandbox(host, network="host") as sb:
        assert _interfaces(sb.exec("cat /proc/net/dev").stdout) == _interfaces(Path("/proc/net/dev").read_text())


def test_namespaces_and_capabilities(sb):
    r = sb.exec("echo $$; hostname; cat /proc/self/status")
    pid, hostname, status = r.stdout.split("\n", 2)
    assert int(pid) < 100  # own pid namespace
    assert hostname == f"envyard-{sb.id}"
    cap_eff = int(next(l for l in status.splitlines() if l.startswith("CapEff")).split()[1], 16)
    assert not cap_eff & (1 << 21)  # no CAP_SYS_ADMIN
    assert not cap_eff & (1 << 27)  # no CAP_MKNOD
    assert sb.exec("mount -t tmpfs x /mnt").exit_code != 0
    assert sb.exec("stat -c %a /tmp").stdout.strip() == "1777"
    canary = Path("/tmp/envyard-host-canary")
    canary.write_text("host")
    try:
        assert sb.exec(f"test -e {canary}").exit_code == 1  # the host's /tmp is masked
    finally:
        canary.unlink()


def test_writes_everywhere_leave_host_untouched(yard, host):
    canary_dirs = [Path("/etc/apt"), Path("/usr/share/doc/coreutils")]
    before = [tree_digest(d) for d in canary_dirs]
    store_before = sorted(p.name for p in yard.store.layers_dir.iterdir())
    with yard.sandbox(host) as sb:
        r = sb.exec(
            "echo evil > /etc/apt/evil; rm -rf /usr/share/doc/coreutils; echo x >> /etc/passwd;"
            " touch /usr/bin/evil; ls /proc/1/root/ >/dev/null; echo done"
        )
        assert r.stdout.endswith("done\n")
        assert sb.exec("test -e /etc/apt/evil").exit_code == 0
        # the store is invisible from inside
        assert sb.exec(f"ls -A {yard.store.home}").stdout == ""
    assert [tree_digest(d) for d in canary_dirs] == before
    assert not Path("/etc/apt/evil").exists() and not Path("/usr/bin/evil").exists()
    assert sorted(p.name for p in yard.store.layers_dir.iterdir()) == store_before


def test_rm_rf_root_and_apt_leave_image_and_host_identical(debian_yard, debian):
    layer = debian_yard.store.layer_paths(debian.layers)[0]
    image_before = tree_digest(layer)
    host_before = tree_digest(Path("/etc"))
    with debian_yard.sandbox(debian) as sb:
        sb.exec("apt-get install -y --no-download hello >/dev/null 2>&1; dpkg --purge --force-all apt", timeout=120)
        r = sb.exec("rm -rf --no-preserve-root / 2>/dev/null; echo $?", timeout=120)
        assert r.exit_code in (0, 1) or r.stdout
    with debian_yard.sandbox(debian) as fresh:
        assert fresh.exec("test -x /usr/bin/apt-get && echo intact").stdout == "intact\n"
    assert tree_digest(layer) == image_before
    assert tree_digest(Path("/etc")) == host_before


needs_cgroups = pytest.mark.skipif(Cgroups().mode == "rlimit", reason="cgroups are not writable here")


@needs_cgroups
def test_fork_bomb_is_stopped_by_pids_limit(yard, host):
    with yard.sandbox(host, limits={"pids": 64}) as sb:
        sb.exec("bomb() { bomb | bomb & }; bomb", timeout=3)
        pids_dir = next(d for d in sb._h.cg.dirs if "/pids/" in d or Path(d, "pids.max").exists())
        assert Path(pids_dir, "pids.max").read_text().strip() == "64"
        events = Path(pids_dir, "pids.events").read_text()
        assert int(events.split()[-1]) > 0  # forks were refused at the limit
        assert len(sb._h.host_pids()) <= 64
        # the next command either runs or fails fast with a typed error: it never hangs on a missing runner
        start = time.monotonic()
        try:
            r = sb.exec("echo after", timeout=20)
            assert r.exit_code in (0, 254) and not r.timed_out
        except envyard.SandboxDied:
            pass
        assert time.monotonic() - start < 5
    # the host can still start processes and the sandbox is gone
    assert os.system("true") == 0


@needs_cgroups
def test_memory_hog_is_oom_killed_and_reported(yard, host):
    with yard.sandbox(host, limits={"memory": "64M"}) as sb:
        r = sb.exec("head -c 400000000 /dev/zero | tail > /dev/null", timeout=60)
        assert r.oom_killed and r.exit_code == 137
        ok = sb.exec("echo fine")
        assert ok.stdout == "fine\n" and not ok.oom_killed
        plain = sb.exec("exit 137")
        assert not plain.oom_killed  # an ordinary failure is not an OOM


@needs_cgroups
def test_cpu_limit_applies(yard, host):
    with yard.sandbox(host, limits={"cpus": 0.2}) as sb:
        quota = Path(sb._h.cg.dirs[-1], "cpu.cfs_quota_us")
        if quota.exists():
            assert quota.read_text().strip() == "20000"


@needs_cgroups
def test_cpu_shares_weigh_sandboxes_that_contend_for_a_core(yard, host):
    """Two sandboxes spin on the same core for 2 s: the one with 8x the weight gets most of it (the kernel
    divides a contended core by cpu.shares / cpu.weight); neither is capped."""
    import threading

    spin = ("taskset -c 0 python3 -c 'import time\nn, end = 0, time.monotonic() + 2\n"
            "while time.monotonic() < end: n += 1\nprint(n)'")
    counts = {}
    with yard.sandbox(host, limits={"cpu_shares": 128}) as light, \
            yard.sandbox(host, limits=envyard.Limits(cpu_shares=1024)) as heavy:
        assert light._h.cg.dirs and Path(light._h.cg.dirs[-1]).name.startswith("envyard-")
        runs = [threading.Thread(target=lambda name=name, sb=sb: counts.__setitem__(name, sb.exec(spin, timeout=60)))
                for name, sb in (("light", light), ("heavy", heavy))]
        for t in runs:
            t.start()
        for t in runs:
            t.join()
    assert all(r.exit_code == 0 for r in counts.values()), counts
    light_n, heavy_n = (int(counts[k].stdout) for k in ("light", "heavy"))
    assert heavy_n > 3 * light_n, (heavy_n, light_n)


def test_cpu_shares_out_of_range_are_refused():
    for bad in (1, 262145, 0.5, True, "512"):
        with pytest.raises(envyard.BadInput, match="cpu_shares"):
            envyard.Limits(cpu_shares=bad)
    assert envyard.Limits.coerce({"cpu_shares": 2}).cpu_shares == 2
    from envyard.runtime.limits import cpu_weight
    assert (cpu_weight(2), cpu_weight(1024), cpu_weight(262144)) == (1, 39, 10000)


def test_rlimit_fallback_when_cgroups_unavailable(yard, host, monkeypatch, caplog):
    monkeypatch.setenv("ENVYARD_NO_CGROUPS", "1")
    cg = Cgroups()
    assert cg.mode == "rlimit"
    backend = yard.backend
    real = backend.cgroups
    backend.cgroups = cg
    try:
        with caplog.at_level("WARNING", logger="envyard"):
            with yard.sandbox(host, limits={"memory": "64M"}) as sb:
                r = sb.exec("ulimit -v")
                assert r.stdout.strip() == str(64 * 1024)
            with yard.sandbox(host, limits={"memory": "64M"}):
                pass
        warnings = [r for r in caplog.records if "cgroups unavailable" in r.message]
        assert len(warnings) == 1  # warned once
    finally:
        backend.cgroups = real


def test_fifty_sandboxes_from_threads(yard, host):
    from concurrent.futures import ThreadPoolExecutor

    def work(i):
        with yard.sandbox(host) as sb:
            return sb.exec(f"echo {i}").stdout

    start = time.monotonic()
    with ThreadPoolExecutor(50) as pool:
        outs = list(pool.map(work, range(50)))
    assert outs == [f"{i}\n" for i in range(50)]
    assert time.monotonic() - start < 60
    yard.wait_closed()
    assert [r for r in yard.store.sandboxes() if r.owner_pid == os.getpid()] == []


def test_binds_are_shared_and_read_only_binds_are_not_writable(yard, host, tmp_path):
    shared, ro = tmp_path / "shared", tmp_path / "ro.txt"
    shared.mkdir()
    ro.write_text("trust me\n")
    with yard.sandbox(host, binds={str(shared): "/mnt/cache"}, ro_binds={str(ro): "/etc/envyard-test-ro.txt"}) as sb:
        assert sb.exec("echo hi > /mnt/cache/out && cat /etc/envyard-test-ro.txt").stdout == "trust me\n"
        assert sb.exec("echo no > /etc/envyard-test-ro.txt").exit_code != 0
        snap = sb.snapshot()
    assert (shared / "out").read_text() == "hi\n" and ro.read_text() == "trust me\n"
    with yard.sandbox(snap) as sb:  # a bind's contents never enter a snapshot
        assert sb.exec("cat /mnt/cache/out").exit_code != 0
    yard.remove_image(snap.name)


def test_missing_parents_of_a_mount_point_are_made_0755(yard, host, tmp_path):
    """As Docker makes them: a non-root user can reach a bind under directories the image lacks; directories the
    image has keep their modes."""
    (tmp_path / "seen.txt").write_text("ok\n")
    tmp_path.chmod(0o755)  # pytest makes it 0700
    with yard.sandbox(host, binds={str(tmp_path): "/envyard-new/deep/cache"},
                      ro_binds={str(tmp_path / "seen.txt"): "/root/envyard-ro.txt"}) as sb:
        assert sb.exec("stat -c %a /envyard-new /envyard-new/deep /root").stdout.split() == ["755", "755", "700"]
        assert sb.exec("cat /envyard-new/deep/cache/seen.txt", user="nobody").stdout == "ok\n"


def test_bad_binds_are_refused(yard, host, tmp_path):
    with pytest.raises(envyard.BadInput):
        yard.sandbox(host, binds={str(tmp_path / "missing"): "/mnt/x"})
    with pytest.raises(envyard.BadInput):
        yard.sandbox(host, binds={str(tmp_path): "relative/path"})
    with pytest.raises(envyard.BadInput):
        yard.sandbox(host, ro_binds={str(tmp_path / "missing.txt"): "/etc/x"})
