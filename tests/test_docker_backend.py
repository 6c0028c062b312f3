"""The Docker backend (runtime/docker_backend.py) against a private dockerd started for this module
(tests/dockerd.py; skipped, with the reason, where docker.io is missing or dockerd cannot start). Images come
from envyard's store (the cached debian:bookworm of conftest.py), exported to the engine by the backend."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import envyard
from envyard import BackendUnsupported
from envyard.envs import NoopPolicy, OraclePolicy, load_task, run_episode

from dockerd import DOCKER_HOST, docker

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dyard(dockerd, debian_yard):
    """A Yard on the debian store whose sandboxes run on the test dockerd."""
    old = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = DOCKER_HOST
    y = envyard.Yard(debian_yard.store.home, backend="docker")
    try:
        yield y
    finally:
        y.close()
        if old is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = old


@pytest.fixture
def dsb(dyard, debian):
    with dyard.sandbox(debian) as sb:
        yield sb


def containers(label_value: str | None = None) -> list[str]:
    filt = f"label=envyard.sandbox={label_value}" if label_value else "label=envyard.sandbox"
    return docker("ps", "-aq", "--filter", filt).stdout.decode().split()


def test_exec_exit_codes_output_env_cwd_user_stdin(dsb):
    assert dsb.backend == "docker"
    r = dsb.exec("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert dsb.exec(["no-such-program"]).exit_code == 127
    assert dsb.exec(["printf", "%s|", "a b", "c"]).stdout == "a b|c|"
    assert dsb.exec("pwd; echo $FOO", cwd="/tmp", env={"FOO": "bar"}).stdout == "/tmp\nbar\n"
    assert dsb.exec("id -u; echo $HOME", user="nobody").stdout == "65534\n/nonexistent\n"
    assert dsb.exec("id -u").stdout == "0\n"
    assert dsb.exec("cat", stdin=b"in\x00data").stdout_bytes == b"in\x00data"
    big = dsb.exec("head -c 300000 /dev/zero", max_output=1000)
    assert big.truncated and len(big.stdout_bytes) < 2000


def test_timeout_kills_the_command_tree(dsb):
    start = time.monotonic()
    r = dsb.exec("sleep 300 & sleep 300; echo never", timeout=1)
    assert r.timed_out and "never" not in r.stdout
    assert time.monotonic() - start < 15
    assert dsb.exec("pgrep -x sleep | wc -l; ps -eo comm | grep -c '^sleep$' || true").exit_code == 0
    left = dsb.exec("for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr '\\0' ' '; echo; done").stdout
    assert "sleep 300" not in left
    assert dsb.exec("echo still alive").stdout == "still alive\n"


def test_files(dsb, tmp_path):
    dsb.write_file("/work/sub/a.txt", "hello", mode=0o600)
    assert dsb.read_file("/work/sub/a.txt") == b"hello"
    assert dsb.exec("stat -c %a /work/sub/a.txt; stat -c %a /tmp").stdout == "600\n1777\n"  # parents untouched
    dsb.write_file("rel.txt", b"x")  # relative to the workdir (/)
    assert dsb.exec("cat /rel.txt").stdout == "x"
    with pytest.raises(FileNotFoundError):
        dsb.read_file("/nope")
    with pytest.raises(envyard.NotRegularFile):
        dsb.read_file("/etc")
    with pytest.raises(envyard.FileTooLarge):
        dsb.read_file("/work/sub/a.txt", max_bytes=2)
    with pytest.raises(envyard.PathOutsideSandbox):
        dsb.read_file("../../..")
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f.txt").write_text("in dir")
    (src / "top.txt").write_text("top")
    os.symlink("top.txt", src / "link")
    dsb.upload(src, "/up")
    assert dsb.exec("cat /up/d/f.txt /up/top.txt; readlink /up/link; stat -c %u /up/top.txt").stdout == \
        "in dirtop" + "top.txt\n0\n"
    dsb.upload(src / "top.txt", "/single/copy.txt")
    assert dsb.read_file("/single/copy.txt") == b"top"
    out = tmp_path / "out"
    skipped = dsb.download("/up", out)
    assert (out / "d" / "f.txt").read_text() == "in dir" and os.readlink(out / "link") == "top.txt"
    assert skipped == []
    dsb.download("/work/sub/a.txt", tmp_path / "one.txt")
    assert (tmp_path / "one.txt").read_text() == "hello"


def test_snapshot_then_new_sandboxes_see_the_state_and_reset_forgets_it(dyard, dsb):
    dsb.exec("mkdir -p /state && echo v1 > /state/f && rm /etc/debian_version && "
             "rm -rf /usr/share/doc && mkdir /usr/share/doc && touch /usr/share/doc/new")  # a whiteout, an opaque dir
    snap = dsb.snapshot()
    try:
        assert len(snap.layers) == len(dsb.image.layers) + 1
        for child in dyard.fork(snap, 2):
            with child:
                assert child.exec("cat /state/f; test -e /etc/debian_version; echo $?; ls /usr/share/doc").stdout \
                    == "v1\n1\nnew\n"
        dsb.reset()
        assert dsb.exec("test -e /state/f; echo $?; cat /etc/debian_version >/dev/null; echo $?").stdout == "1\n0\n"
        # the snapshot is an ordinary image of the store: the local backend runs it too
        with envyard.Yard(dyard.store.home) as local, local.sandbox(snap) as sb:
            assert sb.exec("cat /state/f; ls /usr/share/doc; test -e /etc/debian_version; echo $?").stdout == \
                "v1\nnew\n1\n"
    finally:
        dyard.remove_image(snap.name)


def test_limits_go_to_the_containers_host_config(dyard, debian):
    with dyard.sandbox(debian, limits={"memory": "256M", "pids": 64, "cpus": 0.5, "cpu_shares": 256}) as sb:
        host = json.loads(docker("inspect", f"envyard-{sb.id}").stdout)[0]["HostConfig"]
        assert host["Memory"] == 256 << 20 and host["PidsLimit"] == 64 and host["NanoCpus"] == 500_000_000
        assert host["CpuShares"] == 256
        assert host["NetworkMode"] == "none"
        r = sb.exec("python3 -c 'x = bytearray(1 << 30)' 2>/dev/null || "
                    "head -c 600m /dev/zero | tail > /dev/null", timeout=60)
        assert r.exit_code != 0
    with dyard.sandbox(debian, network="host") as sb:
        assert json.loads(docker("inspect", f"envyard-{sb.id}").stdout)[0]["HostConfig"]["NetworkMode"] == "host"


def test_close_leaves_no_container(dyard, debian):
    sb = dyard.sandbox(debian)
    assert containers(sb.id)
    sb.close()
    sb.close()
    assert containers(sb.id) == []
    with pytest.raises(envyard.SandboxClosed):
        sb.exec("true")


def test_capabilities_are_typed_errors_naming_the_backend(dyard, debian, dsb):
    with pytest.raises(BackendUnsupported) as e:
        dyard.sandbox(debian, limits={"disk": "1G"})
    assert e.value.backend == "docker" and "disk" in e.value.feature and e.value.exit_code == 22
    with pytest.raises(BackendUnsupported, match="docker backend does not support network 'pod'"):
        dyard.sandbox(debian, network=envyard.PodNetwork())
    with pytest.raises(BackendUnsupported, match="host image"):
        dyard.sandbox("host")
    assert not dyard.can_limit_disk


def test_owner_killed_with_sigkill_then_gc_removes_its_container(dyard, debian):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "DOCKER_HOST": DOCKER_HOST,
           "ENVYARD_HOME": str(dyard.store.home)}
    owner = subprocess.Popen(
        [sys.executable, "-c", "import envyard, sys, time\n"
         "sb = envyard.Yard(backend='docker').sandbox('debian:bookworm')\n"
         "print(sb.id, flush=True)\ntime.sleep(600)\n"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        sid = owner.stdout.readline().strip()
        assert sid and containers(sid)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert containers(sid)  # nothing removes it at once
    r = subprocess.run([sys.executable, "-m", "envyard.cli.main", "gc", "--backend", "docker", "--json"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert sid in json.loads(r.stdout)["docker_containers"]
    assert containers(sid) == []


def test_cli_run_backend_docker(dyard):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "DOCKER_HOST": DOCKER_HOST,
           "ENVYARD_HOME": str(dyard.store.home)}
    cli = [sys.executable, "-m", "envyard.cli.main", "run", "--backend", "docker"]
    r = subprocess.run([*cli, "debian:bookworm", "--", "sh", "-c", "echo hi; cat /etc/debian_version; exit 3"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 3 and r.stdout.startswith("hi\n12"), r.stderr
    r = subprocess.run([*cli, "--json", "debian:bookworm", "--", "echo", "json"], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and json.loads(r.stdout)["stdout"] == "json\n"
    r = subprocess.run([*cli, "--disk", "1G", "debian:bookworm", "--", "true"], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 125 and "docker backend does not support a disk limit" in r.stderr


def test_shell_session_keeps_cwd_and_exported_variables(dsb):
    sh = dsb.shell()
    assert sh.run("cd /tmp && export X=1").exit_code == 0
    assert sh.run("pwd; echo $X").stdout == "/tmp\n1\n"
    assert sh.run("exit 4").exit_code == 4
    assert sh.run("sleep 100", timeout=1).timed_out
    sh.close()


@pytest.fixture
def debian_task(tmp_path):
    dest = tmp_path / "hello-file"
    shutil.copytree(REPO / "examples" / "tasks" / "hello-file", dest)
    toml = dest / "task.toml"
    toml.write_text(toml.read_text().replace('image = "host"', 'image = "debian:bookworm"'))
    return load_task(dest)


def test_same_rewards_on_local_and_docker(dyard, debian_task):
    rewards = {}
    for name, yard in (("docker", dyard), ("local", envyard.Yard(dyard.store.home))):
        for policy in (OraclePolicy, NoopPolicy):
            ep = run_episode(yard, debian_task, policy())
            assert ep.infra_error is None, (name, ep.infra_error)
            rewards[name, policy.__name__] = ep.reward
        if name == "local":
            yard.close()
    assert rewards == {("docker", "OraclePolicy"): 1.0, ("docker", "NoopPolicy"): 0.0,
                       ("local", "OraclePolicy"): 1.0, ("local", "NoopPolicy"): 0.0}
