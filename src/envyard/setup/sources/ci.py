"""CI configuration and compose files, read as YAML and never run: GitHub Actions workflows, GitLab CI, Travis,
CircleCI, Azure Pipelines, and docker-compose files. Yields Python version hints (matrices, setup-python,
`image: python:3.X`), test and install commands from `run:`/`script:` lines, `apt-get install` packages,
services (`services:` entries and environment variables)."""

from __future__ import annotations

import re

from . import yamltext
from .base import Sink
from .knowledge import service_for_alias, service_for_image, service_for_package, tls_variant
from .shell import apt_packages, record_apt, record_command, record_env
from .specs import image_python_version, version_hint
from .yamltext import Scalar

_COMMAND_KEYS = {"run", "script", "before_script", "after_script", "install", "before_install", "command",
                 "bash", "pwsh", "commands", "steps_script"}
_VERSION_KEYS = {"python-version", "python_version", "python-versions", "python_versions"}
_MATRIX_VERSION_KEYS = {"python", "py", "pythons", "python-version", "python_version", "python-versions"}
# `mysql|mariadb [options] < FILE.sql`, `psql [options] -f FILE.sql` (or `< FILE.sql`), maybe after sudo/-u
_FEED_SQL = re.compile(r"^(?:sudo\s+(?:-u\s+\S+\s+)?)?(?P<client>mysql|mariadb|psql)\b[^<>|;&`$]*?"
                       r"(?:(?:-f\s*|--file[= ])(?P<file>[\w./-]+\.sql)[^<>|;&`$]*"
                       r"|<\s*(?P<redirect>[\w./-]+\.sql))\s*$")
_ENV_KEYS = {"env", "environment", "variables", "global"}
# Variables whose name says "the database" without saying which (django-model-utils' CI gives its tests
# DB_NAME/DB_USER/DB_PASSWORD/DB_HOST/DB_PORT): they point at the one database service the same file runs.
_GENERIC_DB_ENV = re.compile(r"^(?:DB|DATABASE|TEST_DB|TEST_DATABASE)_(?:NAME|USER|USERNAME|PASSWORD|PASS|HOST|PORT)$")
_DATABASES = ("postgres", "mysql")


def ci_files(sink: Sink) -> list[tuple[str, str]]:
    """(path, system) for each CI configuration file."""
    out = []
    for rel in sink.files.under(".github/workflows"):
        if rel.endswith((".yml", ".yaml")) and rel.count("/") == 2:
            out.append((rel, "github-actions"))
    for name, system in ((".gitlab-ci.yml", "gitlab-ci"), (".travis.yml", "travis"),
                         (".circleci/config.yml", "circleci"), ("azure-pipelines.yml", "azure-pipelines"),
                         ("appveyor.yml", "appveyor"), (".appveyor.yml", "appveyor")):
        if sink.files.exists(name):
            out.append((name, system))
    return out


def compose_files(sink: Sink) -> list[str]:
    def wanted(path: str, name: str) -> bool:
        return name.endswith((".yml", ".yaml")) and (name.startswith(("docker-compose", "compose")))
    return [p for p in sink.files.matching(wanted, max_depth=1)
            if "/" not in p or p.split("/", 1)[0] in ("docker", ".devcontainer", "ci", ".ci", "tests", "test")]


def _documents(sink: Sink, rel: str) -> list:
    text = sink.read(rel)
    if text is None:
        return []
    try:
        return yamltext.load_all(text)
    except yamltext.YamlError as e:
        sink.problem(rel, e.line, f"invalid YAML: {e}")
        return []


def read_ci(sink: Sink) -> None:
    for rel, system in ci_files(sink):
        walker = _Walker(sink, rel, system)
        for doc in _documents(sink, rel):
            walker.walk(doc, ())
        walker.generic_database_env()


def read_compose(sink: Sink) -> None:
    for rel in compose_files(sink):
        for doc in _documents(sink, rel):
            services = doc.get("services") if isinstance(doc, dict) else None
            if isinstance(services, dict):
                _Walker(sink, rel, "compose").services(services)


class _Walker:
    def __init__(self, sink: Sink, rel: str, system: str):
        self.sink, self.rel, self.system = sink, rel, system
        self.databases: set[str] = set()  # the database services this file runs
        self.generic: list[tuple[str, str, int | None]] = []  # DB_HOST=... variables of this file

    def generic_database_env(self) -> None:
        """DB_* variables are the one database service's when the file runs exactly one kind of database."""
        if len(self.databases) != 1:
            return
        service = next(iter(self.databases))
        for name, value, line in self.generic:
            self.sink.add("service_env", {"service": service, "name": name, "value": value}, self.rel, line,
                          f"{self.system}.env (the file's only database service)")

    def walk(self, node, path: tuple[str, ...]) -> None:
        if isinstance(node, list):
            for item in node:
                self.walk(item, path)
            return
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            k = str(key).lower()
            if k in _VERSION_KEYS or (k in _MATRIX_VERSION_KEYS and ("matrix" in path or "include" in path)) \
                    or (self.system == "travis" and k == "python"):
                self.versions(value, key)
            if k in _COMMAND_KEYS and "with" not in path:
                self.commands(value)
            if k == "services":
                self.services(value, matrix_of(node))
                continue
            if k in _ENV_KEYS:
                self.env(value)
            if k == "image":
                self.image(value)
            if k == "docker" and self.system == "circleci" and isinstance(value, list):
                for item in value[1:]:                          # secondary containers are services
                    image = item.get("image") if isinstance(item, dict) else None
                    if isinstance(image, Scalar):
                        self.service(str(image), image, image)
            if k == "packages" and "apt" in path:               # Travis addons.apt.packages
                for item in value if isinstance(value, list) else [value]:
                    if isinstance(item, Scalar) and item.strip():
                        self.sink.add("system_package", {"name": item.strip()}, self.rel, item.line,
                                      f"{self.system}.addons.apt")
                continue
            self.walk(value, path + (k,))

    def versions(self, value, key) -> None:
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, Scalar):
                for part in item.split(",") if "," in item and "[" not in item else [item]:
                    hint = version_hint(part)
                    if hint:
                        self.sink.add("python_hint", hint, self.rel, item.line, f"{self.system}.python-version")

    def commands(self, value) -> None:
        if isinstance(value, dict):                             # CircleCI `run: {name, command}`
            value = value.get("command")
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, Scalar):
                continue
            lines = [(item.line + k if item.line else None, text) for k, text in enumerate(item.splitlines())]
            buf, start, state = "", None, {}
            for number, text in lines:
                if start is None:
                    start = number
                if text.rstrip().endswith("\\"):
                    buf += text.rstrip()[:-1] + " "
                    continue
                record_command(self.sink, (buf + text).strip(), self.rel, start, f"{self.system}.run", state=state)
                self.init_sql((buf + text).strip(), start)
                buf, start = "", None
            if buf.strip():
                record_command(self.sink, buf.strip(), self.rel, start, f"{self.system}.run", state=state)
                self.init_sql(buf.strip(), start)
            record_apt(self.sink, [(n or 0, t) for n, t in lines], self.rel, f"{self.system}.apt-get")
            self.apt_services([(n or 0, t) for n, t in lines])

    def apt_services(self, lines: list[tuple[int, str]]) -> None:
        """A server CI installs with apt (python-memcached: `sudo apt -y install memcached`) runs once installed
        on Ubuntu's runners: the tests expect it, as if it were a service container."""
        for package, line in apt_packages(lines):
            kind = service_for_package(package)
            if kind:
                if kind in _DATABASES:
                    self.databases.add(kind)
                self.sink.add("service", {"name": kind, "package": package}, self.rel, line or None,
                              f"{self.system}.apt-get")

    def init_sql(self, command: str, line: int | None) -> None:
        """A CI step that feeds one of the repository's SQL files to the database service before the tests
        (pymysql: `mysql -h127.0.0.1 -uroot < ci/docker-entrypoint-initdb.d/init.sql`)."""
        m = _FEED_SQL.match(command)
        if not m:
            return
        path = (m.group("redirect") or m.group("file") or "").removeprefix("./")
        if path and ".." not in path.split("/") and self.sink.files.exists(path):
            kind = "postgres" if m.group("client") == "psql" else "mysql"
            self.sink.add("service_init", {"service": kind, "path": path}, self.rel, line, f"{self.system}.run")

    def services(self, value, matrix: dict | None = None) -> None:
        if isinstance(value, dict):                             # GitHub Actions, compose: name → definition
            for name, definition in value.items():
                image = None
                if isinstance(definition, dict):
                    image = definition.get("image")
                    if isinstance(image, dict):
                        image = image.get("name")
                    if image is None and "build" in definition:
                        continue                                # the project's own container, not a dependency
                elif isinstance(definition, Scalar):
                    image = definition
                if isinstance(image, Scalar) and matrix:
                    image = with_matrix(image, matrix)
                ports = container_ports(definition.get("ports")) if isinstance(definition, dict) else []
                published = published_ports(definition.get("ports")) if isinstance(definition, dict) else {}
                kind = self.service(str(name), image if isinstance(image, Scalar) else None, name, ports, published)
                if kind and isinstance(definition, dict):
                    self.settings(kind, str(name), definition.get("env") or definition.get("environment"))
        elif isinstance(value, list):                           # GitLab (images), Travis (names)
            for item in value:
                if isinstance(item, dict):
                    image = item.get("name")
                    if isinstance(image, Scalar):
                        self.service(str(item.get("alias") or image), image, image)
                elif isinstance(item, Scalar):
                    if self.system == "travis":
                        self.service(str(item), None, item)
                    else:
                        self.service(str(item), item, item)

    def service(self, name: str, image: Scalar | None, where, ports: list[int] = (),
                published: dict[int, int] | None = None) -> str | None:
        service = (service_for_image(image) if image else None) or service_for_alias(name)
        tls = tls_variant(str(image)) if service is None and image else None
        service = service or tls
        if service is None and image is None:
            if self.system == "travis" and name not in ("docker", "xvfb"):
                service = name
            else:
                return None
        if service is None:
            service = image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]
        value = {"name": service}
        if tls:
            value["tls"] = True  # a TLS-serving image of that server (pymemcache's `scoriacorp/tls_memcached`)
        if image:
            value["image"] = str(image)
        if ports:
            value["ports"] = list(ports)
        if published:
            value["published"] = {str(c): h for c, h in published.items()}
        if service in _DATABASES:
            self.databases.add(service)
        self.sink.add("service", value, self.rel, getattr(where, "line", None), f"{self.system}.services")
        return service

    def settings(self, kind: str, host: str, value) -> None:
        """A service container's own settings (POSTGRES_PASSWORD...): not a need of the tests, but how the
        service is configured (its user, password, database), as `service_setting` facts."""
        pairs: list[tuple[str, str, int | None]] = []
        if isinstance(value, dict):
            pairs = [(str(k), str(v), getattr(k, "line", None)) for k, v in value.items() if isinstance(v, Scalar)]
        elif isinstance(value, list):                           # compose: ["POSTGRES_PASSWORD=x", ...]
            for item in value:
                if isinstance(item, Scalar) and "=" in item:
                    k, _, v = item.partition("=")
                    pairs.append((k.strip(), v.strip(), item.line))
        for k, v, line in pairs:
            self.sink.add("service_setting", {"service": kind, "host": host, "name": k, "value": v}, self.rel, line,
                          f"{self.system}.services.env")

    def env(self, value) -> None:
        pairs: list[tuple[str, str | None, int | None]] = []
        if isinstance(value, dict):
            for k, v in value.items():
                if isinstance(v, (dict, list)):
                    self.env(v)
                    continue
                pairs.append((str(k), str(v) if isinstance(v, Scalar) else None, getattr(k, "line", None)))
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Scalar):
                    for assignment in item.split():
                        name, sep, v = assignment.partition("=")
                        if sep:
                            pairs.append((name, v, item.line))
                elif isinstance(item, (dict, list)):
                    self.env(item)
        for name, v, line in pairs:
            if _GENERIC_DB_ENV.match(name) and v is not None:
                self.generic.append((name, v, line))
            else:
                record_env(self.sink, name, v, self.rel, line, f"{self.system}.env")

    def image(self, value) -> None:
        if isinstance(value, dict):
            value = value.get("name")
        if isinstance(value, Scalar):
            hint = image_python_version(value)
            if hint:
                self.sink.add("python_hint", hint, self.rel, value.line, f"{self.system}.image")
        elif isinstance(value, list):                           # CircleCI docker: [{image: ...}]
            for item in value:
                self.image(item)


_MATRIX_REF = re.compile(r"\$\{\{\s*matrix\.([\w-]+)\s*\}\}")


def matrix_of(job) -> dict:
    """A GitHub Actions job's `strategy.matrix` ({} when it has none)."""
    strategy = job.get("strategy") if isinstance(job, dict) else None
    matrix = strategy.get("matrix") if isinstance(strategy, dict) else None
    return matrix if isinstance(matrix, dict) else {}


def with_matrix(text: Scalar, matrix: dict) -> Scalar:
    """`${{ matrix.X }}` in a service's image replaced by X's first value in the job's matrix (or in its
    `include` entries): fakeredis runs `image: ${{ matrix.redis-image }}` over redis:6.2 ... valkey:8.1, and any
    of them tells which server the tests want. Unresolved references are left as they are."""
    def first(m: re.Match) -> str:
        values = matrix.get(m.group(1))
        values = list(values) if isinstance(values, list) else [values]  # (a copy: the YAML's list stays as it is)
        values += [i.get(m.group(1)) for i in matrix.get("include") or [] if isinstance(i, dict)]
        found = next((v for v in values if isinstance(v, Scalar) and v.strip()), None)
        return str(found) if found is not None else m.group(0)
    return Scalar(_MATRIX_REF.sub(first, text), text.line)


def published_ports(value) -> dict[int, int]:
    """{container port: host port} for the ports a CI service publishes on another host port (`6390:6379`):
    the tests on the runner connect to the host's side."""
    out: dict[int, int] = {}
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict):  # compose's long form
            item = f"{item.get('published')}:{item.get('target')}" if item.get("published") else ""
        parts = str(item).strip().split("/", 1)[0].split(":") if isinstance(item, (str, int)) else []
        if len(parts) >= 2 and parts[-1].isdigit() and parts[-2].isdigit():
            container, host = int(parts[-1]), int(parts[-2])
            if container != host and 0 < host < 65536:
                out.setdefault(container, host)  # the first mapping of a port, as needed() takes the first
    return out


def container_ports(value) -> list[int]:
    """The container ports a CI service or compose entry publishes (`- 5671:5671`, `- 5432/tcp`,
    `- "127.0.0.1:6379:6379"`, `- 11211`): which of a server's listeners the tests use (RabbitMQ's TLS 5671)."""
    ports: list[int] = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict):  # compose's long form: {target: 5671, published: 5671}
            item = item.get("target")
        text = str(item).strip() if isinstance(item, (str, int)) else ""
        last = text.rsplit(":", 1)[-1].split("/", 1)[0]
        if last.isdigit() and 0 < int(last) < 65536 and int(last) not in ports:
            ports.append(int(last))
    return ports
