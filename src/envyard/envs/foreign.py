"""Pieces shared by the loaders of foreign task layouts (Harbor, Terminal-Bench 1): reading a Docker Compose
file for the one container a task runs in, host environment templates, safe task names, and how unknown
fields are reported (kept, never fatal)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

SLUG_RE = re.compile(r"[^a-z0-9-]+")
TEMPLATE_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


def slug(name: str) -> str:
    """An envyard task name (lowercase letters, digits, '-') from a foreign one ('org/My_Task.v2')."""
    return SLUG_RE.sub("-", name.lower()).strip("-")[:64] or "task"


def expand_host_env(value: str) -> str:
    """`${VAR}` and `${VAR:-default}` resolved from the host's environment, as Harbor does for task env."""
    return TEMPLATE_RE.sub(lambda m: os.environ.get(m.group(1), m.group(2) or ""), value)


def unknown_fields(where: str, table: dict, known: set[str]) -> list[str]:
    return [f"{where}: {key}: not used by envyard (kept)" for key in table if key not in known]


def read_yaml(path: Path) -> tuple[object, str | None]:
    """(data, problem): YAML parsed safely, or the reason it could not be."""
    try:
        return yaml.safe_load(path.read_text()), None
    except yaml.YAMLError as e:
        return None, f"{path}: not valid YAML: {str(e).splitlines()[0]}"
    except (OSError, UnicodeDecodeError) as e:
        return None, f"{path}: unreadable: {e}"


def compose_services(path: Path) -> tuple[dict | None, list[str]]:
    """(services, problems): the `services:` table of a docker-compose.yaml."""
    data, problem = read_yaml(path)
    if problem:
        return None, [problem]
    services = data.get("services") if isinstance(data, dict) else None
    if not isinstance(services, dict) or not services:
        return None, [f"{path}: services: a mapping of at least one service is required"]
    return services, []


def main_service_name(path: Path, services: dict, main: str | None) -> tuple[str | None, list[str]]:
    """The service a task's agent works in: `main` when the format names it (Harbor: `main`; Terminal-Bench:
    `client` when there are several), else the only one."""
    if main is not None and main in services:
        return main, []
    if main is None and len(services) == 1:
        return next(iter(services)), []
    return None, [f"{path}: services: no service named {main or 'client'!r} (the container the agent works in)"]


def compose_service(path: Path, main: str | None) -> tuple[dict | None, list[str]]:
    """The one service a task runs in, from its docker-compose.yaml, for callers that cannot run other
    services (see services.py for those that can). (service, problems)."""
    services, problems = compose_services(path)
    if services is None:
        return None, problems
    name, problems = main_service_name(path, services, main)
    if name is None:
        return None, problems
    others = [s for s in services if s != name]
    if others:
        return None, [f"{path}: services: {', '.join(others)}: services besides {name!r} run only under envyard's own "
                      "task runner (`envyard rollout`, TerminalEnv)"]
    service = services[name]
    return (service if isinstance(service, dict) else {}), []


def compose_environment(service: dict) -> dict[str, str]:
    """A compose service's `environment:` (a mapping, or a list of KEY=VALUE), host templates resolved."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, os.environ.get(item, "")) for item in map(str, env))
    return {str(k): expand_host_env(str(v)) for k, v in env.items()} if isinstance(env, dict) else {}


def compose_build(service: dict, base: Path) -> tuple[Path | None, Path | None, str | None]:
    """(Dockerfile, build context, image) of a compose service: `build: DIR` or `build: {context, dockerfile}`,
    or `image:`. Paths are relative to the compose file's directory."""
    build = service.get("build")
    image = service.get("image")
    if isinstance(build, str):
        context = (base / build).resolve()
        return context / "Dockerfile", context, None
    if isinstance(build, dict):
        context = (base / str(build.get("context", "."))).resolve()
        return context / str(build.get("dockerfile", "Dockerfile")), context, None
    return None, None, str(image) if image else None
