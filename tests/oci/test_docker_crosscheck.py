"""Cross-check with Docker itself (Debian's docker.io): Docker runs what envyard pushed and loads what it
saved, and envyard pulls what Docker built and pushed. A private dockerd is started for the module (its own
data root and socket, no bridge, no iptables); skipped when dockerd is missing or cannot start here."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from envyard.images import save_image


class Docker:
    def __init__(self, root: Path):
        self.root = root
        self.sock = root / "docker.sock"
        self.env = {**os.environ, "DOCKER_HOST": f"unix://{self.sock}", "DOCKER_BUILDKIT": "0",
                    "DOCKER_CONFIG": str(root / "client")}
        self.log = open(root / "dockerd.log", "wb")
        self.proc = subprocess.Popen(
            ["dockerd", "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
             "--pidfile", str(root / "dockerd.pid"), "--host", f"unix://{self.sock}", "--bridge=none",
             "--iptables=false", "--ip6tables=false", "--ip-forward=false"],  # leave the host's sysctl alone
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while self("info").returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (root / "dockerd.log").read_text(errors="replace").strip().splitlines()[-3:]
                pytest.skip(f"dockerd cannot start on this machine: {' | '.join(tail)}")
            time.sleep(0.2)

    def __call__(self, *args: str, check: bool = False) -> subprocess.CompletedProcess:
        r = subprocess.run(["docker", *args], env=self.env, capture_output=True, text=True, timeout=180)
        if check:
            assert r.returncode == 0, f"docker {' '.join(args)}: {r.stderr}"
        return r

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # dockerd and the containerd it started
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        for point in sorted((m for m in mounts if m.startswith(str(self.root))), reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True)


@pytest.fixture(scope="module")
def docker(tmp_path_factory):
    if not (shutil.which("dockerd") and shutil.which("docker")):
        pytest.skip("Docker is not installed (apt-get install docker.io): no cross-check with Docker")
    d = Docker(tmp_path_factory.mktemp("docker"))
    yield d
    d.stop()


def test_docker_runs_what_envyard_pushed(docker, pushed_debian):
    docker("pull", pushed_debian, check=True)
    r = docker("run", "--rm", "--network", "none", pushed_debian, "sh", "-c", "cat /etc/debian_version; echo $LANG",
               check=True)
    assert r.stdout.startswith("12.") and r.stdout.endswith("C.UTF-8\n")


DOCKERFILE = """FROM {base}
RUN rm /etc/debian_version && rm -rf /usr/share/doc && mkdir /usr/share/doc && echo fresh > /usr/share/doc/only
ENV FROM_DOCKER=yes
WORKDIR /srv
EXPOSE 8080/tcp
STOPSIGNAL SIGINT
HEALTHCHECK --interval=5s CMD true
ENTRYPOINT ["/bin/sh", "-c"]
CMD ["echo hi"]
"""


def test_envyard_pulls_what_docker_built_and_pushed(docker, pushed_debian, registry, make_yard, tmp_path):
    (tmp_path / "Dockerfile").write_text(DOCKERFILE.format(base=pushed_debian))
    ref = f"{registry.host}/docker/made:v1"
    docker("build", "--network", "none", "-t", ref, str(tmp_path), check=True)
    docker("push", ref, check=True)
    yard = make_yard()
    base = yard.pull_image(pushed_debian)
    img = yard.pull_image(ref)
    assert img.layers[0] == base.layers[0] and len(img.layers) == 2
    c = img.config
    assert c.env["FROM_DOCKER"] == "yes" and c.workdir == "/srv" and c.exposed_ports == ["8080/tcp"]
    assert (c.entrypoint, c.cmd, c.stop_signal) == (["/bin/sh", "-c"], ["echo hi"], "SIGINT")
    assert c.healthcheck["Test"] == ["CMD-SHELL", "true"]
    with yard.sandbox(img) as sb:
        r = sb.exec("test -e /etc/debian_version || echo deleted; ls -A /usr/share/doc; pwd")
        assert r.stdout == "deleted\nonly\n/srv\n"


def test_docker_loads_what_envyard_saved(docker, pushed_debian, make_yard, tmp_path):
    yard = make_yard()
    img = yard.pull_image(pushed_debian)
    with yard.sandbox(img) as sb:
        sb.write_file("/root/from-envyard", "saved by envyard\n")
        sb.snapshot("crosscheck/saved:v1")
    save_image(yard, "crosscheck/saved:v1", tmp_path / "saved.tar")
    r = docker("load", "-i", str(tmp_path / "saved.tar"), check=True)
    assert "crosscheck/saved:v1" in r.stdout
    r = docker("run", "--rm", "--network", "none", "crosscheck/saved:v1", "cat", "/root/from-envyard", check=True)
    assert r.stdout == "saved by envyard\n"
