"""A private dockerd for tests (its own data root and socket, no bridge, no iptables): `docker(...)` runs the
CLI against it; the `dockerd` fixture (tests/conftest.py) starts it for a module and stops it after, and skips
with the reason when docker.io is not installed or dockerd cannot start here."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path

DOCKER_ROOT = Path(os.environ.get("ENVYARD_TEST_DOCKER", "/var/tmp/envyard-test-docker"))
SOCKET = DOCKER_ROOT / "docker.sock"
DOCKER_HOST = f"unix://{SOCKET}"


class Skip(Exception):
    pass


def docker(*args, check=True, **kw):
    env = {**os.environ, "DOCKER_HOST": DOCKER_HOST, "DOCKER_BUILDKIT": "0"}
    r = subprocess.run(["docker", *map(str, args)], capture_output=True, env=env, timeout=600, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"docker {' '.join(map(str, args))}: {r.stderr.decode(errors='replace')[-800:]}")
    return r


@contextlib.contextmanager
def running_dockerd():
    """Start the private dockerd; raise Skip(reason) when it cannot run. Stopped on exit."""
    if not shutil.which("dockerd") or not shutil.which("docker"):
        raise Skip("docker is not installed (apt-get install docker.io)")
    DOCKER_ROOT.mkdir(parents=True, exist_ok=True)
    lock = open(DOCKER_ROOT / "lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # one dockerd per data root
    except BlockingIOError:
        lock.close()
        raise Skip(f"another test session is using the test dockerd's data root {DOCKER_ROOT}") from None
    log = open(DOCKER_ROOT / "dockerd.log", "wb")
    proc = subprocess.Popen(["dockerd", "--data-root", DOCKER_ROOT / "data", "--exec-root", DOCKER_ROOT / "exec",
                             "-H", DOCKER_HOST, "--pidfile", DOCKER_ROOT / "dockerd.pid",
                             # no bridge, no NAT, so no IP forwarding: dockerd would turn the host's on
                             # (net.ipv4.ip_forward), which the attack tests' host check rightly reports
                             "--iptables=false", "--bridge=none", "--ip-forward=false"],
                            stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while docker("info", check=False).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (DOCKER_ROOT / "dockerd.log").read_text(errors="replace")[-300:]
                raise Skip(f"dockerd does not start on this machine: {tail}")
            time.sleep(0.5)
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)  # dockerd and the containerd it started
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        log.close()
        lock.close()
