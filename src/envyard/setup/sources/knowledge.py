"""The data tables under `envyard/data/` that evidence reading uses: distribution → Debian packages, service
names, the CI's own tools, pytest plugins. Loaded once and validated on load."""

from __future__ import annotations

import functools
import re
import tomllib
from importlib import resources

from packaging.utils import canonicalize_name


def _load(name: str) -> dict:
    return tomllib.loads((resources.files("envyard") / "data" / name).read_text("utf-8"))


@functools.cache
def system_packages() -> dict[str, dict]:
    """{canonical distribution name: {"debian": [...], "when": "always" | "source-build"}}."""
    table = {}
    for dist, entry in _load("system_packages.toml").items():
        if entry.get("when") not in ("always", "source-build") or not entry.get("debian"):
            raise ValueError(f"system_packages.toml: bad entry {dist!r}")
        table[canonicalize_name(dist)] = {"debian": list(entry["debian"]), "when": entry["when"]}
    return table


@functools.cache
def ci_tools() -> dict[str, tuple[str, ...]]:
    """{Debian package a CI installs for itself: the programs it provides} (data/ci_tools.toml)."""
    table = _load("ci_tools.toml")
    for name, programs in table.items():
        if not isinstance(programs, list) or not all(isinstance(p, str) and p for p in programs):
            raise ValueError(f"ci_tools.toml: bad entry {name!r}")
    return {name: tuple(programs) for name, programs in table.items()}


@functools.cache
def services() -> dict[str, dict]:
    return {name: {key: list(entry.get(key, []))
                   for key in ("images", "aliases", "schemes", "env", "tokens", "packages")}
            for name, entry in _load("services.toml").items()}


def service_for_package(package: str) -> str | None:
    """`memcached`, `postgresql-14`, `redis-server` → the service whose server that Debian/Ubuntu package is."""
    name = re.sub(r"-\d+(?:\.\d+)?$", "", package.strip().lower())  # postgresql-14, mysql-server-8.0
    for service, entry in services().items():
        if package in entry["packages"] or name in entry["packages"]:
            return service
    return None


@functools.cache
def pytest_plugins() -> dict[str, dict[str, str]]:
    data = _load("pytest_plugins.toml")
    return {"options": dict(data.get("options", {})), "ini": {k.lower(): v for k, v in data.get("ini", {}).items()},
            "fixtures": dict(data.get("fixtures", {}))}


def service_for_image(image: str) -> str | None:
    """`postgres:15-alpine`, `docker.io/library/redis:7` → "postgres", "redis"; unknown images → None."""
    ref = image.strip().strip("\"'").split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        ref = ref[: len(ref) - len(last)] + last.split(":", 1)[0]
    parts = ref.lower().split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]                                   # registry host
    if parts and parts[0] == "library":
        parts = parts[1:]
    name = "/".join(parts)
    for service, entry in services().items():
        if name in entry["images"]:
            return service
    return None


def tls_variant(image: str) -> str | None:
    """`scoriacorp/tls_memcached`, `redis-ssl:7` → the known service whose image or alias an unknown image (or
    CI service) name holds as a word beside "tls" or "ssl": that server, set up to speak TLS; else None."""
    last = image.strip().strip("\"'").split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0].lower()
    words = set(re.split(r"[-_.]+", last))
    if not words & {"tls", "ssl"}:
        return None
    for service, entry in services().items():
        if words & ({i.rsplit("/", 1)[-1] for i in entry["images"]} | set(entry["aliases"])):
            return service
    return None


def service_for_alias(alias: str) -> str | None:
    alias = alias.strip().lower()
    for service, entry in services().items():
        if alias in entry["aliases"]:
            return service
    return service_for_image(alias)


def service_for_env(name: str, value: str | None) -> str | None:
    """The service an environment variable points at: by its value's URL scheme first, then by its name."""
    if value:
        m = value.strip().strip("\"'")
        scheme = m.split("://", 1)[0].lower() if "://" in m else None
        if scheme:
            base = scheme.split("+", 1)[0]
            if base in ("sqlite", "file", "http", "https") and name.upper() in services()["database"]["env"]:
                return None                                 # an in-process or file database: no service
            for service, entry in services().items():
                if base in entry["schemes"]:
                    return service
    upper = name.strip().upper()
    for service, entry in services().items():
        if upper in entry["env"]:
            return service
    return None
