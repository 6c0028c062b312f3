"""A task's compose services: the databases, web servers and other sidecars that its agent and its tests talk
to, each run in a sandbox of its own next to the agent's.

A task's docker-compose.yaml names one service the agent works in (Harbor's `main`, Terminal-Bench's
`client`); every other service becomes a *service sandbox*. All of them share one pod network
(runtime/podnet.py): the service names resolve to each other, nothing else reaches them. Services start in
`depends_on` order; a dependency's condition (`service_started`, `service_healthy`,
`service_completed_successfully`) is waited for before what depends on it starts, the agent's sandbox
included. A service runs its compose `entrypoint`/`command`, or its image's ENTRYPOINT/CMD, as its `user` or
the image's USER; its health is its compose `healthcheck`, or the image's HEALTHCHECK. Checks run as soon as a
service starts and then every half second (Docker waits a full `interval` first), within the same overall
bound Docker gives them.

The services live for the whole episode: the verifier's sandbox joins the same pod, so tests see the state
the agent left in a database, as they do under Docker Compose.
"""

from __future__ import annotations

import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import validate
from ..errors import EnvyardError, ServiceError
from ..runtime.holder import AS_USER, ROOT_USERS
from ..runtime.podnet import PodNetwork
from ..store import Image
from ..yard import Sandbox, Yard
from .foreign import compose_build, compose_environment, compose_services, main_service_name

CONDITIONS = ("service_started", "service_healthy", "service_completed_successfully")
KNOWN_KEYS = {"build", "image", "command", "entrypoint", "environment", "working_dir", "user", "depends_on",
              "healthcheck", "container_name", "ports", "expose", "networks", "restart", "hostname", "init",
              "stop_signal", "stop_grace_period", "tty", "stdin_open", "labels", "platform", "logging", "volumes"}
# Kept but not acted on: publishing ports to the host, named networks (the pod is the one network), restart
# policies, volumes (each service has its own filesystem).
NOT_ACTED_ON = ("ports", "networks", "restart", "volumes", "container_name", "hostname", "logging", "labels", "init",
                "stop_grace_period", "tty", "stdin_open", "expose", "platform", "stop_signal")
LOG = "/var/log/envyard-service.log"
PID_FILE = "/run/envyard-service.pid"
STATUS_FILE = "/run/envyard-service.status"
POLL = 0.5
DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)")
UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}


@dataclass
class Healthcheck:
    test: list[str] | str  # argv, or a shell command
    interval: float = 30.0
    timeout: float = 30.0
    retries: int = 3
    start_period: float = 0.0

    @property
    def bound(self) -> float:
        """How long a service may take to become healthy, as Docker counts it."""
        return self.start_period + self.retries * (self.interval + self.timeout)


@dataclass
class Service:
    name: str
    dockerfile: Path | None = None
    context: Path | None = None
    image: str | None = None
    entrypoint: list[str] | None = None  # None: the image's
    command: list[str] | None = None  # None: the image's CMD (unless entrypoint is set, as compose does)
    environment: dict[str, str] = field(default_factory=dict)
    working_dir: str | None = None
    user: str | None = None
    depends_on: dict[str, str] = field(default_factory=dict)  # service → condition
    healthcheck: Healthcheck | None = None
    healthcheck_disabled: bool = False


# ---- reading a compose file ---------------------------------------------------------------------------------


@dataclass
class ComposeProject:
    main: dict  # the compose service the agent works in
    main_name: str
    main_depends_on: dict[str, str]
    services: list[Service]  # the others


def load_compose(path: Path, main: str | None) -> tuple[ComposeProject | None, list[str], list[str]]:
    """(project, problems, notes) of a task's docker-compose.yaml; `main` names the agent's service (None: the
    only one, or `client` when there are several, as Terminal-Bench names it)."""
    table, problems = compose_services(path)
    if table is None:
        return None, problems, []
    name, problems = main_service_name(path, table, main if main is not None or len(table) == 1 else "client")
    if name is None:
        return None, problems, []
    services, main_deps, problems, notes = read_services(path, table, name)
    if problems:
        return None, problems, notes
    main_service = table[name] if isinstance(table[name], dict) else {}
    return ComposeProject(main_service, name, main_deps, services), [], notes


def read_services(path: Path, services: dict, main: str) -> tuple[list[Service], dict[str, str], list[str], list[str]]:
    """(services besides `main`, main's depends_on, problems, notes) of a compose file's `services:` table."""
    problems: list[str] = []
    notes: list[str] = []
    result: list[Service] = []
    main_deps: dict[str, str] = {}
    for name, raw in services.items():
        where = f"{path}: services.{name}"
        raw = raw if isinstance(raw, dict) else {}
        deps, found = _depends_on(raw.get("depends_on"), where, services)
        problems += found
        if name == main:
            main_deps = deps
            continue
        notes += [f"{where}: {key}: not used by envyard (kept)" for key in raw if key not in KNOWN_KEYS]
        notes += [f"{where}: {key}: recorded, not acted on (services share one private network and keep "
                  "their own files)" for key in NOT_ACTED_ON if key in raw]
        dockerfile, context, image = compose_build(raw, path.parent)
        if dockerfile is None and image is None:
            problems.append(f"{where}: needs `build` or `image`")
        elif dockerfile is not None and not dockerfile.is_file():
            problems.append(f"{dockerfile}: missing (the build of service {name!r})")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", str(name)):
            problems.append(f"{where}: {name!r} is not a valid service name")
        service = Service(name=str(name), dockerfile=dockerfile, context=context,
                          image=None if dockerfile else image, environment=compose_environment(raw),
                          working_dir=_opt_str(raw.get("working_dir")), user=_opt_str(raw.get("user")),
                          depends_on=deps)
        try:
            service.entrypoint = _argv(raw.get("entrypoint"))
            service.command = _argv(raw.get("command"))
            check = raw.get("healthcheck")
            if isinstance(check, dict) and check.get("disable"):
                service.healthcheck_disabled = True
            elif check is not None:
                service.healthcheck = compose_healthcheck(check)
                service.healthcheck_disabled = service.healthcheck is None
        except ValueError as e:
            problems.append(f"{where}: {e}")
        result.append(service)
    cycle = _cycle({s.name: s.depends_on for s in result})
    if cycle:
        problems.append(f"{path}: services: depends_on has a cycle: {' -> '.join(cycle)}")
    return result, main_deps, problems, notes


def _opt_str(value) -> str | None:
    return None if value is None else str(value)


def _argv(value) -> list[str] | None:
    """A compose command/entrypoint: a list, or a string split as a shell would (compose does not run sh)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as e:
            raise ValueError(f"cannot split {value!r}: {e}") from e
    if isinstance(value, list):
        return [str(v) for v in value]
    raise ValueError(f"a command must be a string or a list, not {type(value).__name__}")


def _depends_on(value, where: str, services: dict) -> tuple[dict[str, str], list[str]]:
    if value is None:
        return {}, []
    deps = {str(v): "service_started" for v in value} if isinstance(value, list) else None
    if isinstance(value, dict):
        deps = {str(k): str((v or {}).get("condition", "service_started")) if isinstance(v, dict) or v is None
                else "?" for k, v in value.items()}
    if deps is None:
        return {}, [f"{where}: depends_on: must be a list or a mapping of service names"]
    problems = [f"{where}: depends_on: no service named {d!r}" for d in deps if d not in services]
    problems += [f"{where}: depends_on.{d}: condition {c!r} is not one of {', '.join(CONDITIONS)}"
                 for d, c in deps.items() if c not in CONDITIONS]
    return deps, problems


def _cycle(graph: dict[str, dict]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> list[str] | None:
        if state.get(node) == 1:
            return [*trail[trail.index(node):], node]
        if state.get(node) == 2 or node not in graph:
            return None
        state[node] = 1
        for dep in graph[node]:
            found = visit(dep, [*trail, node])
            if found:
                return found
        state[node] = 2
        return None

    for node in graph:
        if found := visit(node, []):
            return found
    return None


def duration(value, default: float) -> float:
    """A compose/Docker duration: '1m30s', '500ms', a number of seconds, or nanoseconds (an image config's)."""
    if value is None:
        return default
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    parts = DURATION_RE.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"healthcheck: {value!r} is not a duration (e.g. '5s', '1m30s')")
    return sum(float(n) * UNITS[u] for n, u in parts)


def compose_healthcheck(check: dict) -> Healthcheck | None:
    """A compose `healthcheck:`; None when its test is NONE (disabled)."""
    test = check.get("test")
    if isinstance(test, str):
        test = ["CMD-SHELL", test]
    if not isinstance(test, list) or not test:
        raise ValueError("healthcheck.test: must be a string or a list such as [\"CMD\", ...]")
    return _healthcheck([str(t) for t in test], check.get("interval"), check.get("timeout"), check.get("retries"),
                        check.get("start_period"))


def image_healthcheck(config: dict | None) -> Healthcheck | None:
    """An image's recorded HEALTHCHECK (Docker's config: Test, Interval, Timeout in nanoseconds, Retries)."""
    if not config or not config.get("Test"):
        return None

    def seconds(key):
        return config[key] / 1e9 if config.get(key) else None

    return _healthcheck(list(config["Test"]), seconds("Interval"), seconds("Timeout"), config.get("Retries"),
                        seconds("StartPeriod"))


def _healthcheck(test: list[str], interval, timeout, retries, start_period) -> Healthcheck | None:
    kind, rest = test[0], test[1:]
    if kind == "NONE":
        return None
    if kind == "CMD":
        command: list[str] | str = rest
    elif kind == "CMD-SHELL":
        command = " ".join(rest)
    else:
        raise ValueError(f"healthcheck.test: starts with {kind!r}; use CMD, CMD-SHELL or NONE")
    if not command:
        raise ValueError("healthcheck.test: no command")
    return Healthcheck(command, duration(interval, 30.0), duration(timeout, 30.0),
                       int(retries) if retries is not None else 3, duration(start_period, 0.0))


def service_argv(service: Service, config) -> list[str]:
    """What a service runs: its entrypoint and command, each from the compose file or else the image. As in
    compose, an entrypoint given in the file drops the image's CMD unless the file gives a command too."""
    entrypoint = service.entrypoint if service.entrypoint is not None else (config.entrypoint or [])
    command = service.command if service.command is not None else (
        [] if service.entrypoint is not None else (config.cmd or []))
    return [*entrypoint, *command]


# ---- running them -------------------------------------------------------------------------------------------


class Services:
    """A task's services, running: `network` is the pod the agent's and verifier's sandboxes join."""

    def __init__(self, yard: Yard, project: ComposeProject, *, internet: bool, image_for,
                 completion_timeout: float = 1800.0):
        """`image_for(service)` gives a service's Image (built or pulled); the caller owns how.
        `completion_timeout` bounds the wait for a `service_completed_successfully` dependency."""
        self.yard = yard
        self.project = project
        self.completion_timeout = completion_timeout
        self.network = PodNetwork([project.main_name, *(s.name for s in project.services)], internet=internet)
        self.sandboxes: dict[str, Sandbox] = {}
        self._images: dict[str, Image] = {}
        self._users: dict[str, str | None] = {}
        self._image_for = image_for

    @property
    def main_hostname(self) -> str | None:
        """The host name of the agent's and the verifier's sandboxes: the agent's service name."""
        return _hostname(self.project.main_name)

    def start(self) -> None:
        """Start every service in dependency order, waiting for the conditions the agent's service needs."""
        done: set[str] = set()
        by_name = {s.name: s for s in self.project.services}

        def bring_up(service: Service):
            if service.name in done:
                return
            for dep, condition in service.depends_on.items():
                bring_up(by_name[dep])
                self._wait_for(by_name[dep], condition)
            self._start_one(service)
            done.add(service.name)

        try:
            for service in self.project.services:
                bring_up(service)
            for dep, condition in self.project.main_depends_on.items():
                self._wait_for(by_name[dep], condition)
        except BaseException:
            self.close()
            raise

    def _start_one(self, service: Service) -> None:
        image = self._images[service.name] = self._image_for(service)
        config = image.config
        argv = service_argv(service, config)
        if not argv:
            raise ServiceError(f"service {service.name!r}: no command to run (neither the compose file nor its "
                               "image names one)", fix="give the service a `command:` in docker-compose.yaml")
        sb = self.sandboxes[service.name] = self.yard.sandbox(
            image, network=self.network, hostname=_hostname(service.name), env=service.environment,
            workdir=service.working_dir)
        user = service.user or config.user
        if user not in ROOT_USERS:
            argv = ["/bin/sh", AS_USER, user, *argv]
        # In the background, its output appended to a log file in the service's sandbox; the wrapper's pid
        # says whether it runs, and the wrapper records its exit status.
        launch = (f'mkdir -p /var/log /run && ( "$@"; echo $? > {STATUS_FILE} ) </dev/null >>{LOG} 2>&1 & '
                  f'echo $! > {PID_FILE}')
        r = sb.exec(["/bin/sh", "-c", launch, "sh", *argv], timeout=30)
        if r.exit_code != 0:
            raise ServiceError(f"service {service.name!r} could not start: {(r.stdout + r.stderr).strip()[-300:]}",
                               fix="check its command and user in docker-compose.yaml")
        self._users[service.name] = user

    def _wait_for(self, service: Service, condition: str) -> None:
        if condition == "service_started":
            return
        sb = self.sandboxes[service.name]
        if condition == "service_completed_successfully":
            deadline = time.monotonic() + self.completion_timeout
            while self._running(sb):
                if time.monotonic() > deadline:
                    raise ServiceError(f"service {service.name!r} did not finish within {self.completion_timeout:.0f}s",
                                       fix="check its command (others wait for it to complete)")
                time.sleep(POLL)
            status = sb.exec(["cat", STATUS_FILE], max_output=256).stdout.strip()
            if status != "0":
                raise ServiceError(f"service {service.name!r} exited with status {status or '?'}, and others need it "
                                   f"to complete successfully; its log ends: {self.log(service.name)[-300:]}",
                                   fix="check the service's command")
            return
        check = service.healthcheck or (None if service.healthcheck_disabled else
                                        image_healthcheck(self._images[service.name].config.healthcheck))
        if check is None:
            raise ServiceError(f"service {service.name!r}: others wait for it to be healthy, but it has no "
                               "healthcheck", fix="give it a `healthcheck:` in docker-compose.yaml")
        deadline = time.monotonic() + check.bound
        last = ""
        while True:
            # As under Docker, an exited service is never healthy, whatever its check would say.
            if not self._running(sb):
                raise ServiceError(f"service {service.name!r} exited; its log ends: "
                                   f"{self.log(service.name)[-300:] or '(empty)'}",
                                   fix="check the service's command in docker-compose.yaml")
            r = sb.exec(check.test, timeout=check.timeout, max_output=4096, user=self._users[service.name])
            if r.exit_code == 0 and not r.timed_out:
                return
            last = (r.stdout + r.stderr).strip()[-200:]
            if time.monotonic() > deadline:
                raise ServiceError(f"service {service.name!r} was not healthy within {check.bound:.0f}s; its last "
                                   f"check said: {last or 'nothing'}; its log ends: "
                                   f"{self.log(service.name)[-300:] or '(empty)'}",
                                   fix="check the service's command and healthcheck in docker-compose.yaml")
            time.sleep(POLL)

    def _running(self, sb: Sandbox) -> bool:
        return sb.exec(f'kill -0 "$(cat {PID_FILE})" 2>/dev/null', max_output=256).exit_code == 0

    def log(self, name: str) -> str:
        sb = self.sandboxes.get(name)
        if sb is None:
            return ""
        try:
            return sb.exec(["tail", "-c", "4000", LOG], max_output=8192).stdout
        except EnvyardError:
            return ""

    def close(self) -> None:
        for sb in self.sandboxes.values():
            sb.close()
        self.sandboxes.clear()
        self.network.close()


def _hostname(name: str) -> str | None:
    """A service's host name: its name, when that is a valid host name (compose allows '_' and '.')."""
    return name if validate.HOSTNAME_RE.match(name) else None

