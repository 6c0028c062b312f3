"""Services the tests expect (databases, caches), provided inside the environment.

Evidence notices services (CI `services:`, a CI step that apt-installs a server, compose files, environment
variables that name them; see `data/services.toml`). For the kinds envyard knows how to provide — PostgreSQL,
MySQL (as MariaDB), Redis, memcached and RabbitMQ, from Debian's archive — the plan adds an apt step that
installs the server and a step that writes `/opt/envyard/services/start.sh` and `stop.sh`. start.sh starts each
server as its own user (no systemd: `pg_ctlcluster`, `mariadbd` in the background, `redis-server --daemonize`,
`memcached -d`, `rabbitmq-server -detached`) on 127.0.0.1 at the port the project uses (the default unless its
settings name another), waits until it answers (`pg_isready`, `mariadb-admin ping`, `redis-cli ping`; for
memcached, which ships no client, and RabbitMQ, whose client starts an Erlang VM, until its port listens) for at
most 30 s (RabbitMQ 60 s), and creates the roles, passwords and databases the project expects (from its CI
service's settings — POSTGRES_USER/POSTGRES_PASSWORD/POSTGRES_DB — and the URLs and PG* variables its tests get;
defaults postgres/postgres and a database `test`); RabbitMQ also listens with TLS when the tests want it, and
memcached when CI runs a TLS-serving image of it (on the next port, 11212), with the repository's test
certificate if it has one. A TLS image of another kind gets the plain server, and "KIND with TLS" is missing.
When a server cannot start it says so on stderr (`envyard-services: cannot start KIND: why`) and exits 97.

An X display (Xvfb, `DISPLAY=:99`) is provided the same way for tests that open windows: CI runs them under
`xvfb-run`, apt-installs xvfb or exports DISPLAY, the test code reads DISPLAY, or their run fails for want of
a display.

Services cannot outlive the transaction between two steps (each step runs in a fresh sandbox), so every command
that runs the tests is wrapped (`wrap`, `run_with`): start.sh, the tests, then stop.sh (also after a timeout). The
environment variables the project's CI gives its tests (DATABASE_URL, PGHOST, REDIS_URL...) are exported, with a
host that names a CI service container or localhost (`postgres`, `db`, `localhost`) rewritten to 127.0.0.1.

A kind envyard cannot provide (MongoDB, Elasticsearch: not in Debian's archive) is `missing`: the tests cannot
all run, so such a result never counts as verified.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from .evidence import Evidence

DIR = "/opt/envyard/services"
START = f"{DIR}/start.sh"
MAX_INIT_SQL = 10
STOP = f"{DIR}/stop.sh"
FAILED = "envyard-services: cannot start"  # start.sh's message when a service does not come up
FAILED_EXIT = 97

# What envyard can provide: the Debian packages and the default port of each kind.
KINDS = {"postgres": {"packages": ["postgresql"], "port": 5432},
         "mysql": {"packages": ["mariadb-server", "mariadb-client"], "port": 3306},
         "redis": {"packages": ["redis-server"], "port": 6379},
         "memcached": {"packages": ["memcached"], "port": 11211},
         "rabbitmq": {"packages": ["rabbitmq-server"], "port": 5672},
         "xvfb": {"packages": ["xvfb"], "port": 99}}  # an X server; its "port" is the display number
DEFAULT_USER, DEFAULT_PASSWORD, DEFAULT_DB = "postgres", "postgres", "test"
MYSQL_USER, MYSQL_PASSWORD = "root", "root"  # the mysql image's MYSQL_ROOT_PASSWORD as CI configs often set it
RABBITMQ_USER = "guest"  # the rabbitmq image's default user, password and vhost
RABBITMQ_VHOST = "/"
RABBITMQ_TLS_PORT = 5671
LOCAL_HOSTS = {"localhost", "127.0.0.1", "0.0.0.0", "::1", "[::1]", "host.docker.internal"}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,62}$")
_SECRET = re.compile(r"^[\x21-\x7e]{1,200}$")  # printable, no spaces
_REDIS_SECRET = re.compile(r"^[A-Za-z0-9._~!@#%^&*+=,:;?/-]{1,200}$")  # no quotes: redis.conf reads it bare
_CONF_SECRET = re.compile(r"^[A-Za-z0-9._~!@%^&*+=,:;?/-]{1,200}$")  # bare in rabbitmq.conf: no quotes, no #
_VHOST = re.compile(r"^[A-Za-z0-9_./-]{1,64}$")
_MYSQL_NAME = re.compile(r"^[A-Za-z0-9_$-]{1,64}$")  # a database name MariaDB takes inside backquotes
_HOST_PORT = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*):(\d{1,5})")  # `memcached:11211` in MEMCACHED_SERVERS
_ADDRESS_NAME = re.compile(r"(?:HOST|HOSTS|SERVER|SERVERS|ADDR|ADDRESS|LOCATION)$")
_GHA_PORT = re.compile(r"\$\{\{\s*job\.services\.[\w-]+\.ports\[\s*['\"]?(\d+)['\"]?\s*\]\s*\}\}")


@dataclass
class Service:
    kind: str
    port: int
    packages: list[str]
    users: list[tuple[str, str]] = field(default_factory=list)  # (role, password)
    databases: list[tuple[str, str]] = field(default_factory=list)  # (database, owner)
    password: str = ""  # redis: requirepass
    trust: bool = False  # postgres: no password anywhere: local connections are trusted
    init_sql: list[str] = field(default_factory=list)  # the repository's SQL files CI feeds the server, in order
    tls_port: int = 0  # rabbitmq, memcached: a TLS listener too (CI publishes 5671, runs a TLS image, amqps://)
    tls_files: list[str] = field(default_factory=list)  # its certificate, key and CA from the repository; [] = made
    evidence: list[str] = field(default_factory=list)  # "file:line (rule)"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Services:
    provided: list[Service] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)  # kind → where the evidence says the tests expect it
    env: dict[str, str] = field(default_factory=dict)  # exported for the tests
    notes: list[str] = field(default_factory=list)


def default(kind: str, why: str) -> Service:
    """A service of `kind` with envyard's defaults (its usual port, the common role and database): for tests that
    turned out, when run, to need a server no evidence named (settings with `redis://127.0.0.1:6379` in code)."""
    svc = _build(kind, {}, [])
    svc.evidence = [why]
    return svc


def from_dict(d: dict) -> Service:
    """A Service back from its `to_dict()` (a recipe keeps them as dicts)."""
    return Service(**{**d, "users": [tuple(u) for u in d.get("users", [])],
                      "databases": [tuple(x) for x in d.get("databases", [])]})


def _where(f) -> str:
    return f"{f.file}:{f.line} ({f.via})" if f.line else f"{f.file} ({f.via})"


def expand(value: str) -> str | None:
    """A CI value as the tests would see it: GitHub's `${{ job.services.X.ports[5432] }}` is the container's port
    (which envyard uses); any other expression or shell/tox variable cannot be known here (None)."""
    value = _GHA_PORT.sub(r"\1", value.strip().strip("\"'"))
    if "${{" in value or re.search(r"\$\{?\w|\{env:|\{posargs", value):
        return None
    return value


def local_host(host: str) -> bool:
    """A host name that means "the service next to the tests": localhost, or a CI service container's name
    (a single label such as `postgres` or `db`); never a dotted name or a real address."""
    h = host.lower()
    return h in LOCAL_HOSTS or bool(re.fullmatch(r"[a-z_][a-z0-9_-]*", h))


def rewrite(name: str, value: str) -> str:
    """The value with a local or CI-container host rewritten to 127.0.0.1 (URLs; *_HOST variables; `host:port`
    in a variable that holds an address, such as MEMCACHED_SERVERS)."""
    if "://" in value:
        try:
            parts = urlsplit(value)
            host, port = parts.hostname, parts.port
        except ValueError:
            return value
        if host and local_host(host):
            auth = parts.netloc.rpartition("@")[0]
            netloc = (auth + "@" if "@" in parts.netloc else "") + "127.0.0.1" + (f":{port}" if port else "")
            return urlunsplit(parts._replace(netloc=netloc))
        return value
    if name.upper().endswith("HOST") and local_host(value):
        return "127.0.0.1"
    m = _HOST_PORT.fullmatch(value)
    if m and _ADDRESS_NAME.search(name.upper()) and local_host(m.group(1)):
        return f"127.0.0.1:{m.group(2)}"
    return value


def parse_url(value: str) -> dict:
    """user, password, host, port, database of a service URL (`postgresql+psycopg2://u:p@h:5432/db`)."""
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return {}
    path = unquote(parts.path.lstrip("/"))
    return {"scheme": parts.scheme, "user": unquote(parts.username) if parts.username else None,
            "password": unquote(parts.password) if parts.password else None, "host": parts.hostname,
            "port": port, "database": path.split("?")[0] or None}


def needed(ev: Evidence) -> Services:
    """The services the evidence says the tests expect: what envyard provides (with the roles, databases and
    ports the project uses), what it cannot, and the environment variables to export for the tests."""
    out = Services()
    kinds: dict[str, list[str]] = {}
    ports: dict[str, set[int]] = {}  # the container ports CI publishes, per kind
    published: dict[str, dict[int, int]] = {}  # container port → the host port CI publishes it on, per kind
    tls: dict[str, str] = {}  # kinds CI runs as a TLS-serving image → where
    for f in ev.of("service"):
        name = f.value.get("name") if isinstance(f.value, dict) else None
        if isinstance(name, str):
            kinds.setdefault(name, []).append(_where(f))
            if f.value.get("tls"):
                tls.setdefault(name, _where(f))
            ports.setdefault(name, set()).update(p for p in f.value.get("ports", []) if isinstance(p, int))
            for container, host in (f.value.get("published") or {}).items():
                if str(container).isdigit() and isinstance(host, int):
                    published.setdefault(name, {}).setdefault(int(container), host)
    if "database" in kinds:  # a DATABASE_URL-like name with no value: often sqlite by default; nothing to provide
        out.notes.append("a database variable is passed without a value (" + kinds.pop("database")[0]
                         + "): its kind is unknown, no service is provided for it")
    settings: dict[str, dict[str, str]] = {}
    for f in ev.of("service_setting"):
        v = f.value
        if isinstance(v, dict) and isinstance(v.get("value"), str):
            value = expand(v["value"])
            if value is not None:
                settings.setdefault(v["service"], {}).setdefault(v["name"].upper(), value)
    env_of: dict[str, list[tuple[str, str]]] = {}
    for f in ev.of("service_env"):
        v = f.value
        if not isinstance(v, dict) or not isinstance(v.get("value"), str) or v["name"] in out.env:
            continue
        value = expand(v["value"])
        if value is None:
            out.notes.append(f"{v['name']} is set from a value only CI knows ({_where(f)}): not exported")
            continue
        if not v["value"].strip():
            continue
        out.env[v["name"]] = rewrite(v["name"], value)
        env_of.setdefault(v["service"], []).append((v["name"].upper(), value))
    code: dict[str, list[dict]] = {}  # variables the test code reads (sources/testenv.py)
    for f in ev.of("service_code_env"):
        v = f.value
        if isinstance(v, dict) and isinstance(v.get("name"), str) and v.get("service") in KINDS:
            code.setdefault(v["service"], []).append({**v, "where": _where(f)})
            default = v.get("default")
            if isinstance(default, str) and "://" in default and v["name"] not in out.env:
                env_of.setdefault(v["service"], []).append((v["name"].upper(), default))  # its users and databases
    init_sql: dict[str, list[str]] = {}
    for f in ev.of("service_init"):
        v = f.value
        if isinstance(v, dict) and v.get("path") not in init_sql.get(v.get("service"), []):
            init_sql.setdefault(v.get("service"), []).append(v["path"])
    for kind, where in kinds.items():
        if kind not in KINDS:
            out.missing[kind] = where[0]
            continue
        svc = _build(kind, settings.get(kind, {}), env_of.get(kind, []))
        if svc.port == KINDS[kind].get("port") and svc.port in published.get(kind, {}):
            svc.port = published[kind][svc.port]  # `6390:6379`: the tests on CI's runner connect to 6390
        svc.evidence = where[:5]
        svc.init_sql = init_sql.get(kind, [])[:MAX_INIT_SQL]
        if kind == "rabbitmq":
            _rabbitmq_tls(svc, settings.get(kind, {}), env_of.get(kind, []), ports.get(kind, set()), ev.root,
                          wanted=kind in tls)
        elif kind == "memcached" and kind in tls:
            _memcached_tls(svc, ev.root)
        elif kind in tls:
            out.missing[f"{kind} with TLS"] = tls[kind]  # provided without it: tests that need TLS fail
        for name, value in exports(svc).items():
            out.env.setdefault(name, value)
        out.provided.append(svc)
        _code_env(svc, code.get(kind, []), out)
    for kind, where in out.missing.items():
        out.notes.append(f"the tests expect {kind} ({where}), which envyard cannot provide yet")
    return out


def _code_env(svc: Service, reads: list[dict], out: Services) -> None:
    """Export the variables the test code reads for `svc`, pointing at it: host 127.0.0.1, its port, the role
    start.sh creates and its password, the database the code names by default (created too). A URL/DSN variable
    is exported when its default is a URL (its host rewritten), or when the code reads no host/port/user/db
    variable for this service (then it is the only way the tests learn where it is); otherwise one without a
    default is left unset, since code that reads a DSN with no default usually skips what needs it (psycopg2's
    replication tests)."""
    if not reads:
        return
    user, password = svc.users[0] if svc.users else (DEFAULT_USER, DEFAULT_PASSWORD)
    sql = svc.kind in ("postgres", "mysql")
    login = sql or svc.kind == "rabbitmq"
    located = any(r.get("role") in ("host", "port", "user", "db") for r in reads)
    db_default = next((d for d, _ in svc.databases), DEFAULT_DB)
    exported = []
    for r in reads:
        name, role, default = r["name"], r.get("role"), r.get("default")
        if name in out.env:
            continue
        value = None
        if role == "host":
            value = "127.0.0.1"
        elif role == "port":
            value = str(svc.port)
        elif role == "user" and login:
            value = user
        elif role == "password":
            value = password if login else (svc.password or None)
        elif role == "db" and sql:
            value = default if default and (_NAME if svc.kind == "postgres" else _MYSQL_NAME).match(default) \
                else db_default
            if value not in ("postgres", "mysql") and value not in [d for d, _ in svc.databases]:
                svc.databases.append((value, user))
        elif role == "db" and svc.kind == "redis":
            value = default if default and default.isdigit() else None
        elif isinstance(default, str) and "://" in default:
            value = rewrite(name, default)
        elif role == "url" and not located:
            value = (f"postgresql://{user}:{password}@127.0.0.1:{svc.port}/{db_default}" if svc.kind == "postgres"
                     else f"mysql://{user}:{password}@127.0.0.1:{svc.port}/{db_default}" if svc.kind == "mysql"
                     else f"redis://{(':' + svc.password + '@') if svc.password else ''}127.0.0.1:{svc.port}/0"
                     if svc.kind == "redis" else _amqp_url(svc) if svc.kind == "rabbitmq"
                     else f"127.0.0.1:{svc.port}")  # memcached's clients take host:port
        if value is None:
            continue
        out.env[name] = value
        exported.append(name)
    if svc.kind == "postgres" and "PGHOST" in exported and "PGUSER" not in out.env:
        # libpq and asyncpg connect as the OS user when PGUSER is unset: root, a role the server does not have
        out.env["PGUSER"] = user
        exported.append("PGUSER")
    if exported:
        out.notes.append(f"exported for {svc.kind}, read by the test code ({reads[0]['where']}): "
                         + ", ".join(exported))


def _amqp_url(svc: Service) -> str:
    (user, password), (vhost, _owner) = svc.users[0], svc.databases[0]
    return f"amqp://{user}:{password}@127.0.0.1:{svc.port}/{quote(vhost, safe='')}"


def _port(env: list[tuple[str, str]], names: tuple[str, ...], default: int) -> int:
    ports = set()
    for name, value in env:
        if "://" in value:
            p = parse_url(value).get("port")
            if p:
                ports.add(p)
        elif name in names and value.isdigit():
            ports.add(int(value))
    return ports.pop() if len(ports) == 1 and 0 < next(iter(ports)) < 65536 else default


def _build(kind: str, settings: dict[str, str], env: list[tuple[str, str]]) -> Service:
    """A service of `kind` (one of KINDS) as the project's CI settings and variables describe it."""
    if kind == "postgres":
        return _postgres(settings, env)
    if kind == "mysql":
        return _mysql(settings, env)
    if kind == "redis":
        return _redis(env)
    if kind == "rabbitmq":
        return _rabbitmq(settings, env)
    if kind == "xvfb":
        return _xvfb(env)
    return _memcached(env)


def _postgres(settings: dict[str, str], env: list[tuple[str, str]]) -> Service:
    svc = Service("postgres", _port(env, ("PGPORT", "POSTGRES_PORT"), 5432), list(KINDS["postgres"]["packages"]))
    users: dict[str, str | None] = {}
    dbs: dict[str, str] = {}

    def user(name, password=None):
        if name and _NAME.match(name):
            if password and _SECRET.match(password):
                users[name] = password
            else:
                users.setdefault(name, None)
            return name
        return None

    def db(name, owner):
        if name and _NAME.match(name):
            dbs.setdefault(name, owner)

    main = user(settings.get("POSTGRES_USER") or DEFAULT_USER, settings.get("POSTGRES_PASSWORD")) or DEFAULT_USER
    if settings.get("POSTGRES_DB"):
        db(settings["POSTGRES_DB"], main)
    trust = settings.get("POSTGRES_HOST_AUTH_METHOD", "").lower() == "trust"
    values = dict(env)
    owner = user(values.get("PGUSER") or values.get("POSTGRES_USER"),
                 values.get("PGPASSWORD") or values.get("POSTGRES_PASSWORD")) or main
    db(values.get("PGDATABASE") or values.get("POSTGRES_DB"), owner)
    for _name, value in env:
        if "://" in value:
            u = parse_url(value)
            who = user(u.get("user"), u.get("password")) or main
            db(u.get("database"), who)
    if not dbs:
        db(DEFAULT_DB, main)
    svc.trust = trust or not any(users.values())
    svc.users = [(u, p or DEFAULT_PASSWORD) for u, p in users.items()]
    svc.databases = [(d, o) for d, o in dbs.items() if d != "postgres"]
    return svc


def _mysql(settings: dict[str, str], env: list[tuple[str, str]]) -> Service:
    """MariaDB standing in for MySQL: the mysql image's settings (MYSQL_ROOT_PASSWORD, MYSQL_ALLOW_EMPTY_PASSWORD,
    MYSQL_USER/MYSQL_PASSWORD, MYSQL_DATABASE), then the users and databases of the URLs and MYSQL_* variables
    the tests get; by default root with the password `root` and a database `test`. Every user may connect from
    anywhere ('%', which covers the socket's localhost too) with every privilege, as in the CI container."""
    svc = Service("mysql", _port(env, ("MYSQL_PORT", "MYSQL_TCP_PORT", "DB_PORT"), 3306),
                  list(KINDS["mysql"]["packages"]))
    users: dict[str, str] = {}
    dbs: dict[str, str] = {}

    def user(name, password):
        if name and _NAME.match(name) and (not password or _REDIS_SECRET.match(password)):
            users.setdefault(name, password or "")
            return name
        return None

    def db(name, owner):
        if name and _MYSQL_NAME.match(name) and name.lower() not in ("mysql", "information_schema", "sys"):
            dbs.setdefault(name, owner)

    empty = settings.get("MYSQL_ALLOW_EMPTY_PASSWORD", "").lower() in ("1", "yes", "true")
    root = settings.get("MYSQL_ROOT_PASSWORD") or ("" if empty else None)
    main = user(settings.get("MYSQL_USER"), settings.get("MYSQL_PASSWORD"))
    user("root", root if root is not None else MYSQL_PASSWORD)
    main = main or "root"
    db(settings.get("MYSQL_DATABASE"), main)
    values = dict(env)
    owner = user(values.get("MYSQL_USER"), values.get("MYSQL_PASSWORD")) or main
    db(values.get("MYSQL_DATABASE") or values.get("MYSQL_DB"), owner)
    for _name, value in env:
        if "://" in value:
            u = parse_url(value)
            who = user(u.get("user"), u.get("password")) or main
            db(u.get("database"), who)
    if not dbs:
        db(DEFAULT_DB, main)
    svc.users = sorted(users.items(), key=lambda u: u[0] != main)  # the project's own user first
    svc.databases = list(dbs.items())
    return svc


def _redis(env: list[tuple[str, str]]) -> Service:
    svc = Service("redis", _port(env, ("REDIS_PORT",), 6379), list(KINDS["redis"]["packages"]))
    for _name, value in env:
        if "://" in value:
            password = parse_url(value).get("password")
            if password and _REDIS_SECRET.match(password):
                svc.password = password
    for name, value in env:
        if name == "REDIS_PASSWORD" and _REDIS_SECRET.match(value):
            svc.password = value
    return svc


def _memcached(env: list[tuple[str, str]]) -> Service:
    ports = {int(m.group(2)) for _name, value in env for m in [_HOST_PORT.fullmatch(value)] if m}
    port = ports.pop() if len(ports) == 1 and 0 < next(iter(ports)) < 65536 else 11211
    return Service("memcached", _port(env, ("MEMCACHED_PORT", "MEMCACHE_PORT"), port),
                   list(KINDS["memcached"]["packages"]))


def _rabbitmq(settings: dict[str, str], env: list[tuple[str, str]]) -> Service:
    """The rabbitmq image's settings (RABBITMQ_DEFAULT_USER/PASS/VHOST), else the user and vhost of the first
    amqp:// URL the tests get; by default guest/guest and `/`. One user and one vhost: rabbitmq.conf's
    default_user/default_vhost, created on the server's first start (more would need rabbitmqctl, an Erlang VM
    start each)."""
    svc = Service("rabbitmq", _port(env, ("RABBITMQ_PORT", "AMQP_PORT", "BROKER_PORT"), 5672),
                  list(KINDS["rabbitmq"]["packages"]))
    user, password, vhost = (settings.get("RABBITMQ_DEFAULT_USER"), settings.get("RABBITMQ_DEFAULT_PASS"),
                             settings.get("RABBITMQ_DEFAULT_VHOST"))
    for _name, value in env:
        if value.startswith(("amqp://", "amqps://", "pyamqp://")):
            u = parse_url(value)
            user, password = user or u.get("user"), password or u.get("password")
            vhost = vhost or u.get("database")
            break
    ok_user = bool(user and _NAME.match(user) and (password is None or _CONF_SECRET.match(password)))
    svc.users = [(user, password or RABBITMQ_USER) if ok_user else (RABBITMQ_USER, RABBITMQ_USER)]
    svc.databases = [(vhost if vhost and _VHOST.match(vhost) else RABBITMQ_VHOST, svc.users[0][0])]
    return svc


def _xvfb(env: list[tuple[str, str]]) -> Service:
    """An X display for tests that open windows: the DISPLAY CI exports (`:99.0`), else :99."""
    display = next((m.group(1) for name, value in env if name == "DISPLAY"
                    for m in [re.fullmatch(r":(\d{1,4})(?:\.\d+)?", value.strip())] if m), None)
    return Service("xvfb", int(display) if display else KINDS["xvfb"]["port"], list(KINDS["xvfb"]["packages"]))


def exports(svc: Service) -> dict[str, str]:
    """What the tests must be told to find a service that no address variable names: the X display."""
    return {"DISPLAY": f":{svc.port}"} if svc.kind == "xvfb" else {}


def _rabbitmq_tls(svc: Service, settings: dict[str, str], env: list[tuple[str, str]], ports: set[int],
                  root: Path, wanted: bool = False) -> None:
    """A TLS listener beside AMQP when the tests want one: CI runs a TLS-serving image of it (`wanted`),
    publishes the TLS port (5671), configures the image for TLS (RABBITMQ_SSL_*), or an amqps:// URL points at
    it. Its certificate, key and CA are the repository's test ones when it has them (aiormq's tests/certs:
    clients may check the server against that CA, or present a client certificate it signed); else start.sh's
    step makes a self-signed one."""
    urls = [parse_url(v) for _n, v in env if v.startswith("amqps://")]
    if not (wanted or RABBITMQ_TLS_PORT in ports or any(k.startswith("RABBITMQ_SSL_") for k in settings) or urls):
        return
    _with_tls(svc, next((u["port"] for u in urls if u.get("port")), RABBITMQ_TLS_PORT), root)


def _memcached_tls(svc: Service, root: Path) -> None:
    """A TLS listener beside the plain one, when CI runs a TLS-serving memcached image (pymemcache's
    `tls_memcached`). memcached has no usual TLS port: one above the plain one (11212, where pymemcache's tests
    look by default)."""
    _with_tls(svc, svc.port + 1, root)


def _with_tls(svc: Service, port: int, root: Path) -> None:
    """Listen with TLS on `port` too, with the repository's test certificate, key and CA when it has them (its
    clients may check the server against that CA), else a self-signed one that start.sh's step makes."""
    svc.tls_port = port
    svc.tls_files = _server_certificate(root)
    if not svc.tls_files:
        svc.packages = sorted({*svc.packages, "openssl"})


_CERT_NAMES = ("server.pem", "server.crt", "server_certificate.pem", "server-cert.pem", "server_cert.pem")
_KEY_NAMES = ("server.key", "server_key.pem", "server-key.pem", "server.key.pem")
_CA_NAMES = ("ca.pem", "ca.crt", "ca_certificate.pem", "ca-cert.pem", "cacert.pem", "ca-root.crt")
_SKIP_DIRS = {".git", ".tox", ".nox", "node_modules", ".venv", "venv", "build", "dist", "__pycache__"}


def _server_certificate(root: Path, depth: int = 4) -> list[str]:
    """[certificate, key, CA] of a test server in the repository (paths from its root, one directory holding
    all three), or []."""
    def walk(d: Path, level: int):
        try:
            entries = sorted(d.iterdir())
        except OSError:
            return
        names = {e.name: e for e in entries if e.is_file()}
        found = [next((names[n] for n in group if n in names), None) for group in (_CERT_NAMES, _KEY_NAMES, _CA_NAMES)]
        if all(found) and _pem(found[0], b"-----BEGIN CERTIFICATE") and _pem(found[1], b"PRIVATE KEY-----") \
                and _pem(found[2], b"-----BEGIN CERTIFICATE"):
            yield [f.relative_to(root).as_posix() for f in found]
        if level < depth:
            for e in entries:
                if e.is_dir() and not e.is_symlink() and e.name not in _SKIP_DIRS:
                    yield from walk(e, level + 1)

    return next(walk(root, 0), [])


def _pem(path: Path, marker: bytes) -> bool:
    try:
        return marker in path.read_bytes()[:8192]
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------------- scripts

def _sql_literal(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def postgres_sql(svc: Service) -> str:
    """Roles (superusers, as the postgres image's POSTGRES_USER is) and databases, idempotent."""
    lines = []
    for role, password in svc.users:
        lit = _sql_literal(role)
        lines += [f"SELECT format('CREATE ROLE %I', {lit}) WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = "
                  f"{lit})\\gexec",
                  f"SELECT format('ALTER ROLE %I WITH LOGIN SUPERUSER PASSWORD %L', {lit}, "
                  f"{_sql_literal(password)})\\gexec"]
    for name, owner in svc.databases:
        lines.append(f"SELECT format('CREATE DATABASE %I OWNER %I', {_sql_literal(name)}, {_sql_literal(owner)}) "
                     f"WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = {_sql_literal(name)})\\gexec")
    return "\n".join(lines) + "\n"


def mysql_sql(svc: Service) -> str:
    """Users (every privilege, from anywhere, as the mysql image's are) and databases, idempotent. Names and
    passwords were checked against _NAME/_MYSQL_NAME/_REDIS_SECRET: no quotes or backslashes."""
    lines = []
    for name, password in svc.users:
        lines += [f"CREATE USER IF NOT EXISTS '{name}'@'%' IDENTIFIED BY '{password}';",
                  f"ALTER USER '{name}'@'%' IDENTIFIED BY '{password}';",
                  f"GRANT ALL PRIVILEGES ON *.* TO '{name}'@'%' WITH GRANT OPTION;"]
    lines += [f"CREATE DATABASE IF NOT EXISTS `{name}`;" for name, _owner in svc.databases]
    return "\n".join(lines + ["FLUSH PRIVILEGES;"]) + "\n"


def _mysql_start(svc: Service) -> str:
    p = svc.port
    # the clients read MYSQL_HOST, MYSQL_TCP_PORT, MYSQL_PWD... which the project's variables may set: not here
    return f"""# mysql (MariaDB) on 127.0.0.1:{p}, as the mysql user; root also over the socket
my() {{ env -u MYSQL_HOST -u MYSQL_TCP_PORT -u MYSQL_PWD -u MYSQL_UNIX_PORT -u MYSQL_USER -u MYSQL_PASSWORD "$@"; }}
sock=--socket=/run/mysqld/mysqld.sock
if ! {{ [ -f /tmp/envyard-mysql.pid ] && kill -0 "$(cat /tmp/envyard-mysql.pid)" 2>/dev/null; }}; then
  my mariadb-admin --protocol=tcp -h 127.0.0.1 -P {p} --connect-timeout=2 ping >/dev/null 2>&1 && \\
    fail mysql "port {p} on 127.0.0.1 is taken by a server outside this environment"
  [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db \\
    >/tmp/envyard-mysql-init.log 2>&1 || fail mysql "mariadb-install-db failed: $(tail -n 3 /tmp/envyard-mysql-init.log)"
  printf '%s\\n' '[mysqld]' 'bind-address = 127.0.0.1' 'port = {p}' 'skip-name-resolve' \\
    'innodb_flush_log_at_trx_commit = 0' 'socket = /run/mysqld/mysqld.sock' > /etc/mysql/mariadb.conf.d/99-envyard.cnf
  install -d -o mysql -g mysql -m 755 /run/mysqld
  setsid mariadbd --user=mysql --pid-file=/tmp/envyard-mysql.pid --log-error=/tmp/envyard-mysql.log \\
    </dev/null >/dev/null 2>&1 &
fi
i=0
until my mariadb-admin --protocol=socket $sock ping >/dev/null 2>&1; do
  i=$((i + 1)); [ $i -lt 60 ] || fail mysql "not ready after 30 s: $(tail -n 3 /tmp/envyard-mysql.log 2>/dev/null)"; sleep 0.5
done
my mariadb --protocol=socket $sock < {DIR}/mysql.sql >/tmp/envyard-mysql-users.log 2>&1 || \\
  fail mysql "could not create its users and databases: $(tail -n 3 /tmp/envyard-mysql-users.log)"
""" + "".join(f"my mariadb --protocol=socket $sock --force < {_init_file(svc, i)} >>/tmp/envyard-mysql-init-sql.log 2>&1\n"
              for i in range(len(svc.init_sql)))


def _postgres_start(svc: Service) -> str:
    # `md5` accepts a password stored either way: PostgreSQL 13 (bullseye) stores md5 hashes by default, with
    # which a `scram-sha-256` line fails every login; from 14 on they are SCRAM, and `md5` lines then use SCRAM
    method = "trust" if svc.trust else "md5"
    p = svc.port
    # libpq reads PGHOST, PGUSER, PGPASSWORD... which the project's variables may set (psycopg2's tests read
    # them): with them, creating the roles would log in over TCP as a role that does not exist yet
    return f"""# postgres on 127.0.0.1:{p}, as the postgres user
pg() {{ env -u PGHOST -u PGHOSTADDR -u PGPORT -u PGUSER -u PGPASSWORD -u PGPASSFILE -u PGDATABASE -u PGSERVICE \
  -u PGSERVICEFILE -u PGOPTIONS -u PGSSLMODE -u PGCONNECT_TIMEOUT -u PGTARGETSESSIONATTRS "$@"; }}
set -- $(pg_lsclusters -h 2>/dev/null | head -n 1)
[ $# -ge 4 ] || fail postgres "no cluster (is postgresql installed?)"
v=$1 c=$2
if [ "$4" != online ]; then
  pg pg_isready -q -h 127.0.0.1 -p {p} && fail postgres "port {p} on 127.0.0.1 is taken by a server outside this environment"
  printf '%s\\n' "listen_addresses = '127.0.0.1'" "port = {p}" "fsync = off" "synchronous_commit = off" \\
    "full_page_writes = off" > /etc/postgresql/$v/$c/conf.d/envyard.conf
  printf '%s\\n' "local all all trust" "host all all 127.0.0.1/32 {method}" "host all all ::1/128 {method}" \\
    > /etc/postgresql/$v/$c/pg_hba.conf
  install -d -o postgres -g postgres -m 2775 /var/run/postgresql
  pg_ctlcluster $v $c start >/tmp/envyard-postgres-start.log 2>&1 || \\
    fail postgres "pg_ctlcluster $v $c start failed: $(tail -n 3 /tmp/envyard-postgres-start.log \\
      /var/log/postgresql/postgresql-$v-$c.log 2>/dev/null | tr '\\n' ' ')"
fi
i=0
until pg pg_isready -q -h 127.0.0.1 -p {p}; do
  i=$((i + 1)); [ $i -lt 60 ] || fail postgres "not ready after 30 s"; sleep 0.5
done
pg su postgres -s /bin/sh -c "psql -X -q -v ON_ERROR_STOP=1 -p {p} -f {DIR}/postgres.sql" >/tmp/envyard-postgres-init.log \\
  2>&1 || fail postgres "could not create its roles and databases: $(tail -n 3 /tmp/envyard-postgres-init.log)"
""" + "".join(f'pg su postgres -s /bin/sh -c "psql -X -q -p {p} -f {_init_file(svc, i)}" '
              f">>/tmp/envyard-postgres-init-sql.log 2>&1\n" for i in range(len(svc.init_sql)))


def _init_file(svc: Service, i: int) -> str:
    """Where the services step puts the i-th SQL file CI feeds `svc` (the project's tree may not be at hand
    when start.sh runs). start.sh feeds them after creating the roles, errors ignored: they create what
    already exists on every later start."""
    return f"{DIR}/{svc.kind}-init-{i + 1}.sql"


def _redis_conf(svc: Service) -> str:
    return (f"bind 127.0.0.1\nport {svc.port}\ndaemonize yes\nsave \"\"\nappendonly no\ndir /tmp\n"
            f"pidfile /tmp/envyard-redis.pid\nlogfile /tmp/envyard-redis.log\n"
            + (f"requirepass {svc.password}\n" if svc.password else ""))


def _redis_start(svc: Service) -> str:
    p = svc.port
    auth = f"REDISCLI_AUTH={shlex.quote(svc.password)} " if svc.password else ""
    return f"""# redis on 127.0.0.1:{p}, as the redis user
if ! {{ [ -f /tmp/envyard-redis.pid ] && kill -0 "$(cat /tmp/envyard-redis.pid)" 2>/dev/null; }}; then
  {auth}redis-cli -h 127.0.0.1 -p {p} ping >/dev/null 2>&1 && \\
    fail redis "port {p} on 127.0.0.1 is taken by a server outside this environment"
  su redis -s /bin/sh -c "redis-server {DIR}/redis.conf" || fail redis "redis-server failed: $(tail -n 3 /tmp/envyard-redis.log 2>/dev/null)"
fi
i=0
until {auth}redis-cli -h 127.0.0.1 -p {p} ping 2>/dev/null | grep -q PONG; do
  i=$((i + 1)); [ $i -lt 60 ] || fail redis "not ready after 30 s: $(tail -n 3 /tmp/envyard-redis.log 2>/dev/null)"; sleep 0.5
done
"""


def _memcached_start(svc: Service) -> str:
    p, t = svc.port, svc.tls_port

    def on(host: str) -> str:
        return f"notls:{host}:{p},{host}:{t}" if t else f"{host}:{p}"

    tls = f"-Z -o ssl_chain_cert={DIR}/memcached-cert.pem,ssl_key={DIR}/memcached-key.pem " if t else ""
    # Debian's memcached has no client to ask it, and `-d` returns before it binds: ready is "listening", as the
    # kernel's socket table says (127.0.0.1 and the port in hex; state 0A is LISTEN)
    also = f" && grep -q ' 0100007F:{t:04X} 00000000:0000 0A ' /proc/net/tcp" if t else ""
    # ::1 too where the sandbox has it: "localhost" may resolve to ::1 first (a pod network's or Docker's
    # /etc/hosts), and pymemcache connects to the first address only
    return f"""# memcached on 127.0.0.1:{p}{f' (TLS on {t})' if t else ''} (and ::1), as the memcache user
mc_listening() {{ grep -q ' 0100007F:{p:04X} 00000000:0000 0A ' /proc/net/tcp{also}; }}
if ! {{ [ -f /tmp/envyard-memcached.pid ] && kill -0 "$(cat /tmp/envyard-memcached.pid)" 2>/dev/null; }}; then
  grep -q ' 0100007F:{p:04X} 00000000:0000 0A ' /proc/net/tcp && \\
    fail memcached "port {p} on 127.0.0.1 is taken by a server outside this environment"
  mc_on={on("127.0.0.1")}
  grep -q '^00000000000000000000000000000001 ' /proc/net/if_inet6 2>/dev/null && mc_on="$mc_on,{on("[::1]")}"
  memcached -d -u memcache {tls}-l "$mc_on" -U 0 -P /tmp/envyard-memcached.pid >/tmp/envyard-memcached.log 2>&1 || \\
    fail memcached "memcached failed: $(tail -n 3 /tmp/envyard-memcached.log 2>/dev/null)"
fi
i=0
until mc_listening; do
  i=$((i + 1)); [ $i -lt 60 ] || fail memcached "not ready after 30 s: $(tail -n 3 /tmp/envyard-memcached.log 2>/dev/null)"; sleep 0.5
done
"""


def _rabbitmq_conf(svc: Service) -> str:
    (user, password), (vhost, _owner) = svc.users[0], svc.databases[0]
    # loopback_users: the image's guest may log in only from localhost; the tests are on 127.0.0.1 anyway
    conf = (f"listeners.tcp.default = 127.0.0.1:{svc.port}\ndefault_user = {user}\ndefault_pass = {password}\n"
            f"default_vhost = {vhost}\nloopback_users = none\n")
    if svc.tls_port:
        # Client certificates are checked when a client presents one (the CA signed it), never required, as
        # the CI images set it (RABBITMQ_SSL_FAIL_IF_NO_PEER_CERT=false); a made certificate has no CA to check with.
        verify = "verify_peer" if svc.tls_files else "verify_none"
        conf += (f"listeners.ssl.default = 127.0.0.1:{svc.tls_port}\n"
                 f"ssl_options.cacertfile = {DIR}/rabbitmq-ca.pem\nssl_options.certfile = {DIR}/rabbitmq-cert.pem\n"
                 f"ssl_options.keyfile = {DIR}/rabbitmq-key.pem\nssl_options.verify = {verify}\n"
                 "ssl_options.fail_if_no_peer_cert = false\n")
    return conf


def _rabbitmq_start(svc: Service) -> str:
    p = svc.port
    # epmd and Erlang distribution on loopback only: setup's sandboxes share the host's network
    env = (f"RABBITMQ_NODENAME=rabbit@localhost RABBITMQ_CONFIG_FILE={DIR}/rabbitmq.conf "
           "RABBITMQ_PID_FILE=/tmp/envyard-rabbitmq.pid RABBITMQ_LOGS=/tmp/envyard-rabbitmq.log "
           "ERL_EPMD_ADDRESS=127.0.0.1 RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS='-kernel inet_dist_use_interface {127,0,0,1}'")
    tls = (f" && grep -q ' 0100007F:{svc.tls_port:04X} 00000000:0000 0A ' /proc/net/tcp" if svc.tls_port else "")
    return f"""# rabbitmq on 127.0.0.1:{p}{f' (TLS on {svc.tls_port})' if svc.tls_port else ''}, as the rabbitmq user
rmq_listening() {{ grep -q ' 0100007F:{p:04X} 00000000:0000 0A ' /proc/net/tcp{tls}; }}
if ! {{ [ -f /tmp/envyard-rabbitmq.pid ] && kill -0 "$(cat /tmp/envyard-rabbitmq.pid)" 2>/dev/null; }}; then
  rmq_listening && fail rabbitmq "port {p} on 127.0.0.1 is taken by a server outside this environment"
  su rabbitmq -s /bin/sh -c "{env} rabbitmq-server -detached" >/tmp/envyard-rabbitmq-start.log 2>&1 || \\
    fail rabbitmq "rabbitmq-server failed: $(tail -n 3 /tmp/envyard-rabbitmq-start.log)"
fi
i=0
until rmq_listening; do
  i=$((i + 1)); [ $i -lt 120 ] || fail rabbitmq "not ready after 60 s: $(tail -n 3 /tmp/envyard-rabbitmq.log 2>/dev/null)"; sleep 0.5
done
"""


def _certificate(svc: Service, owner: str) -> str:
    """The shell that puts the TLS listener's certificate, key and CA at {DIR}/KIND-{cert,key,ca}.pem, the key
    readable by the server's user (`owner`) only: the repository's (run from the project's root, like every
    step), or a self-signed one for localhost and 127.0.0.1 made here (its own CA)."""
    cert, key, ca = (f"{DIR}/{svc.kind}-{n}.pem" for n in ("cert", "key", "ca"))
    if svc.tls_files:
        src_cert, src_key, src_ca = map(shlex.quote, svc.tls_files)
        return (f"install -m 644 {src_cert} {cert} && install -m 600 -o {owner} {src_key} {key} && "
                f"install -m 644 {src_ca} {ca}")
    return (f"openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=localhost "
            f"-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout {key} -out {cert} 2>/dev/null && "
            f"chown {owner} {key} && chmod 600 {key} && cp {cert} {ca}")


def _xvfb_start(svc: Service) -> str:
    d = svc.port
    # Ready when its socket exists. A lock left by an Xvfb that was killed would stop the next one: removed first.
    # -noreset: by default an X server resets when its last client leaves, and a client connecting meanwhile is
    # dropped ("Connection reset by peer": 7 of 300 open-close cycles; none with -noreset).
    return f"""# an X display :{d} (Xvfb), for tests that open windows
if ! {{ [ -f /tmp/envyard-xvfb.pid ] && kill -0 "$(cat /tmp/envyard-xvfb.pid)" 2>/dev/null; }}; then
  rm -f /tmp/.X{d}-lock /tmp/.X11-unix/X{d}
  Xvfb :{d} -screen 0 1280x1024x24 -nolisten tcp -noreset >/tmp/envyard-xvfb.log 2>&1 &
  echo $! > /tmp/envyard-xvfb.pid
fi
i=0
until [ -S /tmp/.X11-unix/X{d} ]; do
  kill -0 "$(cat /tmp/envyard-xvfb.pid)" 2>/dev/null || fail xvfb "Xvfb exited: $(tail -n 3 /tmp/envyard-xvfb.log)"
  i=$((i + 1)); [ $i -lt 60 ] || fail xvfb "display :{d} not ready after 30 s"; sleep 0.5
done
"""


def _where_it_is(svc: Service) -> str:
    return f"X display :{svc.port}" if svc.kind == "xvfb" else f"{svc.kind} on 127.0.0.1:{svc.port}"


def start_script(services: list[Service]) -> str:
    start = {"postgres": _postgres_start, "mysql": _mysql_start, "redis": _redis_start, "memcached": _memcached_start,
             "rabbitmq": _rabbitmq_start, "xvfb": _xvfb_start}
    body = "".join(start[s.kind](s) for s in services)
    return ("#!/bin/sh\n# written by `envyard setup`: starts the services the tests expect, inside this environment"
            " (no systemd);\n# idempotent. Run it before the tests (test.sh does).\nset -u\n"
            f'fail() {{ echo "{FAILED} $1: $2" >&2; exit {FAILED_EXIT}; }}\n' + body
            + 'echo "envyard-services: ' + ", ".join(map(_where_it_is, services)) + ' ready" >&2\n')


def _stop_pid(name: str, seconds: float, step: float) -> str:
    """Stop the server whose pid start.sh wrote to /tmp/envyard-NAME.pid: SIGTERM (each one's orderly
    shutdown), then wait up to `seconds` for it to exit, polling every `step`."""
    pidfile = f"/tmp/envyard-{name}.pid"
    return (f'[ -f {pidfile} ] && pid=$(cat {pidfile}) && kill "$pid" 2>/dev/null && i=0 && '
            f'while kill -0 "$pid" 2>/dev/null && [ $i -lt {round(seconds / step)} ]; do i=$((i + 1)); sleep {step}; done\n'
            f"rm -f {pidfile}\n")


def stop_script(services: list[Service]) -> str:
    body = ""
    for s in services:
        if s.kind == "postgres":
            body += ("pg_lsclusters -h 2>/dev/null | while read -r v c _port status _rest; do\n"
                     '  [ "$status" = online ] && pg_ctlcluster "$v" "$c" stop -m fast\ndone\n')
        elif s.kind == "mysql":
            body += _stop_pid("mysql", 30, 0.5)
        elif s.kind == "rabbitmq":
            body += _stop_pid("rabbitmq", 30, 0.5) + "ERL_EPMD_ADDRESS=127.0.0.1 epmd -kill >/dev/null 2>&1\n"
        elif s.kind == "xvfb":
            body += _stop_pid("xvfb", 5, 0.1) + f"rm -f /tmp/.X{s.port}-lock /tmp/.X11-unix/X{s.port}\n"
        elif s.kind == "memcached":
            body += _stop_pid("memcached", 6, 0.1)
        else:
            auth = f"REDISCLI_AUTH={shlex.quote(s.password)} " if s.password else ""
            body += (f"{auth}redis-cli -h 127.0.0.1 -p {s.port} shutdown nosave >/dev/null 2>&1\n"
                     "rm -f /tmp/envyard-redis.pid\n")
    return "#!/bin/sh\n# written by `envyard setup`: stops what start.sh started\n" + body + "exit 0\n"


def _write(path: str, text: str, mode: str = "644") -> str:
    """One line of shell that writes `text` to `path` (a line a printf argument, so setup.sh and a Dockerfile's
    RUN can both hold it)."""
    lines = text.rstrip("\n").split("\n")
    return f"printf '%s\\n' {' '.join(shlex.quote(l) for l in lines)} > {path} && chmod {mode} {path}"


def steps(services: list[Service]):
    """The recipe steps that provide `services`: the Debian packages, then the scripts."""
    from .plan import Step, apt_step

    kinds = ", ".join(f"{s.kind} (from {s.evidence[0]})" if s.evidence else s.kind for s in services)
    packages = sorted({p for s in services for p in s.packages})
    writes = [f"mkdir -p {DIR}", _write(START, start_script(services), "755"), _write(STOP, stop_script(services), "755")]
    for s in services:
        if s.kind == "postgres":
            writes.append(_write(f"{DIR}/postgres.sql", postgres_sql(s)))
        elif s.kind == "mysql":
            writes.append(_write(f"{DIR}/mysql.sql", mysql_sql(s), "600"))
        elif s.kind == "redis":
            writes.append(_write(f"{DIR}/redis.conf", _redis_conf(s), "640") + f" && chown redis {DIR}/redis.conf")
        elif s.kind == "rabbitmq":
            writes.append(_write(f"{DIR}/rabbitmq.conf", _rabbitmq_conf(s), "640")
                          + f" && chown rabbitmq {DIR}/rabbitmq.conf")
            if s.tls_port:
                writes.append(_certificate(s, "rabbitmq"))
        elif s.kind == "memcached" and s.tls_port:
            writes.append(_certificate(s, "memcache"))
        # run from the project's root, like every step
        writes += [f"install -m 644 {shlex.quote(path)} {_init_file(s, i)}" for i, path in enumerate(s.init_sql)]
    return [apt_step(packages, f"services the tests expect: {kinds}"),
            Step("services", " && ".join(writes), f"start/stop scripts for {', '.join(s.kind for s in services)}")]


def wrap(command: str) -> str:
    """`command` (a test run or collection) with the services started before it and stopped after it, in the
    same sandbox: nothing started in one step survives into the next. Its exit code is the command's."""
    return f"{START} && ( {command}\n); envyard_rc=$?; {STOP}; exit $envyard_rc"


def run_with(sh: Callable, command: str, timeout: float):
    """`sh(wrap(command), timeout)`; when that times out, `sh(STOP, ...)` too: the timeout kills the command's
    process tree, and servers start.sh daemonized are not in it. Left running, they outlive the step (the next
    sandbox over its snapshot finds the port taken: aiormq's L4 after a 600 s run)."""
    r = sh(wrap(command), timeout)
    if r.timed_out:
        sh(STOP, 120)
    return r


def start_failure(output: str) -> str | None:
    """start.sh's reason, when a service did not come up."""
    m = re.search(re.escape(FAILED) + r" (.+)", output)
    return m.group(1).strip()[:400] if m else None
