"""Registry configuration, read the way Docker's daemon reads daemon.json: mirrors and insecure registries,
plus credentials.

Files (JSON with Docker's key names, or TOML with the same keys when the name ends in .toml):
  /etc/envyard/registries.json      the machine's
  $ENVYARD_HOME/registries.json     the store's (added to the machine's; its credentials win)
  $ENVYARD_REGISTRIES_CONFIG        when set, read instead of both

  {
    "registry-mirrors": ["https://mirror.example.com"],         tried in order before docker.io
    "insecure-registries": ["10.0.0.5:5000", "192.168.0.0/16"], plain HTTP or unverified TLS
    "auths": {"127.0.0.1:5000": {"username": "u", "password": "p"}}   or {"auth": base64("u:p")}
  }

Environment (added to the files): ENVYARD_REGISTRY_MIRRORS and ENVYARD_INSECURE_REGISTRIES, comma-separated.
Loopback registries (localhost, 127.0.0.0/8, ::1) are insecure without being listed, as in Docker.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BadInput
from ..store.names import DOCKER_HUB
from ..tls import ca_bundle

SYSTEM_CONFIG = Path("/etc/envyard/registries.json")
DOCKER_HUB_URL = "https://registry-1.docker.io"


@dataclass(frozen=True)
class Endpoint:
    """One place to send a registry's requests to."""

    url: str  # scheme://host[:port][/path], no trailing slash
    verify: bool | str  # False: TLS without verification (an insecure registry); else the CA bundle
    http_fallback: bool  # an insecure registry: plain HTTP when TLS fails
    mirror: bool = False

    @property
    def host(self) -> str:
        return self.url.split("://", 1)[1].split("/", 1)[0]


@dataclass
class RegistryConfig:
    mirrors: list[str] = field(default_factory=list)
    insecure: list[str] = field(default_factory=list)
    auths: dict[str, tuple[str, str]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # the files that were read

    def is_insecure(self, host: str) -> bool:
        name = _hostname(host)
        if name == "localhost" or _in_networks(name, ["127.0.0.0/8", "::1/128"]):
            return True
        return host in self.insecure or name in self.insecure or _in_networks(name, self.insecure)

    def endpoints(self, registry: str) -> list[Endpoint]:
        """Where to send requests for `registry`, in order: Docker Hub's mirrors first, then the registry."""
        found = []
        if registry == DOCKER_HUB:
            for url in self.mirrors:
                found.append(self._endpoint(url, mirror=True))
            found.append(self._endpoint(DOCKER_HUB_URL))
        else:
            found.append(self._endpoint(f"https://{registry}"))
        return found

    def _endpoint(self, url: str, *, mirror: bool = False) -> Endpoint:
        url = url.rstrip("/")
        host = url.split("://", 1)[1].split("/", 1)[0]
        insecure = self.is_insecure(host)
        return Endpoint(url, False if insecure else (ca_bundle() or True),
                        http_fallback=insecure and url.startswith("https://"), mirror=mirror)

    def credentials(self, host: str) -> tuple[str, str] | None:
        if host == "registry-1.docker.io":
            return self.auths.get(DOCKER_HUB) or self.auths.get(host)
        return self.auths.get(host)


def load_config(home: Path) -> RegistryConfig:
    """The registry configuration in force for the store at `home`."""
    override = os.environ.get("ENVYARD_REGISTRIES_CONFIG")
    paths = [Path(override)] if override else [SYSTEM_CONFIG, Path(home) / "registries.json"]
    config = RegistryConfig()
    for path in paths:
        if not path.is_file():
            if override:
                raise BadInput(f"ENVYARD_REGISTRIES_CONFIG names {path}, which is not a file",
                               fix="point it at a registries.json, or unset it")
            continue
        _merge(config, _read(path), path)
        config.files.append(str(path))
    config.mirrors += _env_list("ENVYARD_REGISTRY_MIRRORS")
    config.insecure += _env_list("ENVYARD_INSECURE_REGISTRIES")
    for url in config.mirrors:
        if not url.startswith(("https://", "http://")):
            raise BadInput(f"registry mirror {url!r} is not an http(s) URL", fix="write it as https://HOST[:PORT]")
    return config


def _read(path: Path) -> dict:
    try:
        text = path.read_text()
        doc = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise BadInput(f"cannot read the registry configuration {path}: {e}",
                       fix="fix the file (JSON with Docker's key names; see docs/images.md)") from e
    if not isinstance(doc, dict):
        raise BadInput(f"the registry configuration {path} is not an object", fix="see docs/images.md")
    return doc


def _merge(config: RegistryConfig, doc: dict, path: Path) -> None:
    for key, target in (("registry-mirrors", config.mirrors), ("insecure-registries", config.insecure)):
        values = doc.get(key, [])
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise BadInput(f"{path}: {key} must be a list of strings", fix="see docs/images.md")
        target += values
    auths = doc.get("auths", {})
    if not isinstance(auths, dict):
        raise BadInput(f"{path}: auths must be an object of host → credentials", fix="see docs/images.md")
    for host, entry in auths.items():
        config.auths[host] = _credentials(entry, host, path)


def _credentials(entry, host: str, path: Path) -> tuple[str, str]:
    if isinstance(entry, dict) and isinstance(entry.get("username"), str) and isinstance(entry.get("password"), str):
        return entry["username"], entry["password"]
    if isinstance(entry, dict) and isinstance(entry.get("auth"), str):
        try:
            user, sep, password = base64.b64decode(entry["auth"], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            sep = ""
        if sep:
            return user, password
    raise BadInput(f"{path}: the credentials for {host} are not username+password or auth (base64 user:password)",
                   fix="see docs/images.md")


def _env_list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def _hostname(host: str) -> str:
    """`host[:port]` → host (an IPv6 literal loses its brackets)."""
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _in_networks(name: str, networks: list[str]) -> bool:
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    for net in networks:
        try:
            if address in ipaddress.ip_network(net, strict=False):
                return True
        except ValueError:
            continue  # a host name, not a network
    return False
