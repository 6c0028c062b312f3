"""Shared fixtures: one real store per test session, the `host` image, and (optionally) a Debian image.

The Debian image is built with debootstrap once and cached in a persistent store (ENVYARD_TEST_CACHE, default
/var/tmp/envyard-test-cache) so repeated runs on a machine skip the ~30 s build.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import bareenv
import envyard
from envyard import procinfo


@pytest.fixture(scope="session")
def yard(tmp_path_factory):
    home = tmp_path_factory.mktemp("envyard-home")
    y = envyard.Yard(home)
    yield y
    y.close()
    y.gc()  # also unmounts the host view


@pytest.fixture(scope="session")
def host(yard):
    return yard.image("host")


@pytest.fixture(scope="session")
def debian_yard():
    """A persistent store holding debian:bookworm (built on first use). Skipped when debootstrap cannot run."""
    home = Path(os.environ.get("ENVYARD_TEST_CACHE", "/var/tmp/envyard-test-cache"))
    y = envyard.Yard(home)
    try:
        y.pull("debian:bookworm")
    except envyard.EnvyardError as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"no debian image: {e}")
    yield y
    y.close()
    y.gc()


@pytest.fixture(scope="session")
def debian(debian_yard):
    return debian_yard.image("debian:bookworm")


@pytest.fixture(scope="module")
def dockerd():
    """A private dockerd for the module (tests/dockerd.py); skipped, with the reason, where it cannot run."""
    from dockerd import Skip, running_dockerd

    try:
        with running_dockerd() as proc:
            yield proc
    except Skip as e:
        pytest.skip(str(e))


@pytest.fixture
def sb(yard, host):
    with yard.sandbox(host) as s:
        yield s


class Scripted:
    """A policy that types fixed commands, then submits."""

    name = "scripted"

    def __init__(self, *commands):
        self.commands = list(commands)

    def start(self, task, instruction):
        self.queue = list(self.commands)

    def act(self, observation):
        from envyard.envs import SUBMIT

        return self.queue.pop(0) if self.queue else SUBMIT


def sandbox_processes(sandbox) -> list[int]:
    """Host pids still running in a sandbox's pid namespace."""
    return procinfo.pids_in_namespace(sandbox._h.pid_ns)


def tree_digest(path: Path) -> str:
    """A digest of a directory tree's names, types, modes, sizes and file contents."""
    out = subprocess.run(
        f"cd {path} && find . -xdev -printf '%p %y %m %s %l\\n' | sort | sha256sum && "
        f"find . -xdev -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum",
        shell=True, capture_output=True, text=True, check=True,
    ).stdout
    return out


@pytest.fixture(scope="session", autouse=True)
def _cli_cwd(tmp_path_factory):
    bareenv._session_cwd[:] = [str(tmp_path_factory.mktemp("cli-cwd"))]


@pytest.fixture(scope="session", autouse=True)
def _no_mounts_left(tmp_path_factory):
    """Safety net for failing tests: unmount any host view left under this session's temp dir, so pytest's own
    clean-up never walks a read-only view of `/`. Only this session's: another pytest may be running."""
    yield
    base = str(tmp_path_factory.getbasetemp())
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for point in sorted((m for m in mounts if m.startswith(base)), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)
