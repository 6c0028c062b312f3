"""Fixtures for the OCI image tests: a real registry on loopback, fresh stores, and debian:bookworm pushed to
the registry once per session (from the test cache store, see tests/conftest.py)."""

from __future__ import annotations

import os

import pytest

import envyard
from envyard.images import push_image

from .registry import Registry, require_registry

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="unpacking layers needs root (owners, device nodes)")


@pytest.fixture(autouse=True)
def _registry_config(tmp_path, monkeypatch):
    """No registry configuration but what a test writes: the machine's /etc/envyard is not read."""
    config = tmp_path / "registries.json"
    config.write_text("{}")
    monkeypatch.setenv("ENVYARD_REGISTRIES_CONFIG", str(config))
    for name in ("ENVYARD_REGISTRY_MIRRORS", "ENVYARD_INSECURE_REGISTRIES"):
        monkeypatch.delenv(name, raising=False)
    return config


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    require_registry()
    reg = Registry(tmp_path_factory.mktemp("registry"))
    yield reg
    reg.stop()


@pytest.fixture
def make_yard(tmp_path_factory):
    """Fresh, empty stores; closed and collected at the end."""
    made = []

    def make() -> envyard.Yard:
        y = envyard.Yard(tmp_path_factory.mktemp("store"))
        made.append(y)
        return y

    yield make
    for y in made:
        y.close()
        y.gc()


@pytest.fixture(scope="session")
def pushed_debian(registry, debian_yard):
    """debian:bookworm in the registry, pushed by envyard itself; its reference."""
    ref = f"{registry.host}/base/debian:bookworm"
    push_image(debian_yard, "debian:bookworm", ref)
    return ref
