"""Services the tests expect (envyard.setup.services): planning, URL parsing and env rewriting (fast), and an end
to end setup whose tests need PostgreSQL and Redis from Debian's archive."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from envyard.setup import services, verdict
from envyard.setup.evidence import gather
from envyard.setup.interpreters import host_interpreter
from envyard.setup.plan import Candidate, plan

from bareenv import BARE, cli_cwd

REPOS = Path(__file__).resolve().parent / "fixtures" / "repos"
SRC = str(Path(__file__).resolve().parents[1] / "src")


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def recipe(root: Path):
    return plan(gather(root), Candidate(host_interpreter()))


# ---------------------------------------------------------------------------------------------------- fast

def test_parse_url():
    assert services.parse_url("postgresql+psycopg2://u%40x:p%2Fw@db:5433/app?sslmode=disable") == {
        "scheme": "postgresql+psycopg2", "user": "u@x", "password": "p/w", "host": "db", "port": 5433,
        "database": "app"}
    assert services.parse_url("redis://localhost/2")["database"] == "2"
    assert services.parse_url("postgres://x:notaport/db") == {}


@pytest.mark.parametrize("name,value,expect", [
    ("DATABASE_URL", "postgresql://u:p@localhost:5432/db", "postgresql://u:p@127.0.0.1:5432/db"),
    ("DATABASE_URL", "postgres://postgres@postgres/test", "postgres://postgres@127.0.0.1/test"),  # a CI container
    ("REDIS_URL", "redis://redis:6379/0", "redis://127.0.0.1:6379/0"),
    ("REDIS_URL", "redis://:pw@cache.example.com:6379", "redis://:pw@cache.example.com:6379"),  # a real host: kept
    ("PGHOST", "postgres", "127.0.0.1"),
    ("PGHOST", "localhost", "127.0.0.1"),
    ("PGHOST", "db.internal.example", "db.internal.example"),
    ("PGPORT", "5432", "5432"),
    ("MEMCACHED_SERVERS", "memcached:11211", "127.0.0.1:11211"),  # host:port in a variable that holds an address
    ("CACHE_LOCATION", "localhost:11311", "127.0.0.1:11311"),
    ("MEMCACHED_SERVERS", "cache.example.com:11211", "cache.example.com:11211"),  # a real host: kept
    ("DJANGO_SETTINGS_MODULE", "settings:1", "settings:1"),  # not an address variable: kept
])
def test_rewrite_hosts(name, value, expect):
    assert services.rewrite(name, value) == expect


def test_expand_ci_values():
    assert services.expand("postgres://u:p@localhost:${{ job.services.postgres.ports[5432] }}/db") == \
        "postgres://u:p@localhost:5432/db"
    assert services.expand("${{ job.services.pg.ports['5432'] }}") == "5432"
    assert services.expand("${{ secrets.DB }}") is None
    assert services.expand("postgres://$USER@localhost/db") is None
    assert services.expand("{env:DATABASE_URL:postgres://localhost/x}") is None


def test_github_services_settings_and_env_make_the_plan(tmp_path):
    root = write(tmp_path, {"pyproject.toml": '[project]\nname = "x"\nversion = "1"\n', "x/__init__.py": "",
                            ".github/workflows/ci.yml": (
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    services:\n      db:\n        image: postgres:16\n"
        "        env:\n          POSTGRES_USER: app\n          POSTGRES_PASSWORD: pw\n          POSTGRES_DB: appdb\n"
        "      cache:\n        image: redis:7-alpine\n"
        "    env:\n      PGHOST: db\n      PGUSER: app\n      PGPASSWORD: pw\n      PGDATABASE: other\n"
        "      REDIS_URL: redis://cache:6380/0\n      SECRET: ${{ secrets.X }}\n"
        "    steps:\n      - run: pytest\n")})
    ev = gather(root)
    assert {"service": "postgres", "host": "db", "name": "POSTGRES_PASSWORD", "value": "pw"} in \
        [f.value for f in ev.of("service_setting")]
    r = recipe(root)
    assert [s.kind for s in r.steps[:2]] == ["apt", "services"]
    assert "postgresql" in r.steps[0].command and "redis-server" in r.steps[0].command
    assert r.env == {"PGHOST": "127.0.0.1", "PGUSER": "app", "PGPASSWORD": "pw", "PGDATABASE": "other",
                     "REDIS_URL": "redis://127.0.0.1:6380/0"}
    pg, rd = r.services
    assert (pg["kind"], pg["port"], pg["users"], pg["databases"], pg["trust"]) == \
        ("postgres", 5432, [("app", "pw")], [("appdb", "app"), ("other", "app")], False)
    assert (rd["kind"], rd["port"]) == ("redis", 6380)  # the port the tests are told
    assert r.services_missing == {}
    assert f"> {services.START}" in r.steps[1].command and "\n" not in r.steps[1].command  # one line (Dockerfile RUN)


def test_a_service_image_from_the_job_matrix_and_published_on_another_port(tmp_path):
    """fakeredis: `image: ${{ matrix.redis-image }}` under a service named keydb, published as `6390:6379`; its
    tests connect to localhost:6390 and stop the whole run ("Redis is not running") without it. The matrix's
    first value names the server, and it listens on the host's side of the mapping."""
    root = write(tmp_path, {"pyproject.toml": '[project]\nname = "x"\nversion = "1"\n', "x/__init__.py": "",
                            ".github/workflows/test.yml": (
        "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    strategy:\n      matrix:\n"
        "        redis-image: [\"redis:6.2.17\", \"valkey/valkey:8.1\"]\n        include:\n"
        "          - db-image: postgres:16\n"
        "    services:\n      keydb:\n        image: ${{ matrix.redis-image }}\n        ports:\n"
        "          - 6390:6379\n      sql:\n        image: ${{ matrix.db-image }}\n        ports:\n"
        "          - 5432:5432\n"
        "      other:\n        image: ${{ matrix.unknown }}\n"
        "    steps:\n      - run: pytest\n")})
    found = [f.value for f in gather(root).of("service")]
    assert {"name": "redis", "image": "redis:6.2.17", "ports": [6379], "published": {"6379": 6390}} in found
    assert {"name": "postgres", "image": "postgres:16", "ports": [5432]} in found  # from `include`; same port
    r = recipe(root)
    assert {(s["kind"], s["port"]) for s in r.services} == {("redis", 6390), ("postgres", 5432)}
    assert "${{ matrix.unknown }}" in r.services_missing  # left unresolved: named as what CI runs


def test_published_ports():
    from envyard.setup.sources.ci import published_ports
    assert published_ports(["6390:6379", "5432:5432", "127.0.0.1:7000:6379/tcp", "11211",
                            {"published": 8080, "target": 80}, {"target": 5672}]) == {6379: 6390, 80: 8080}


def test_generic_db_variables_belong_to_the_files_only_database_service(tmp_path):
    """django-model-utils' CI gives its test step DB_NAME/DB_USER/DB_PASSWORD/DB_HOST/DB_PORT beside a postgres
    service: they are that service's (exported, host rewritten). With two kinds of database in the file, or
    none, such names say nothing and are not exported."""
    workflow = ("on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    services:\n{services}"
                "    steps:\n      - run: tox\n        env:\n          DB_USER: postgres\n"
                "          DB_PASSWORD: pw\n          DB_HOST: localhost\n          DB_PORT: 5432\n")
    pg = "      postgres:\n        image: postgres:10\n        env:\n          POSTGRES_PASSWORD: pw\n"
    my = "      mysql:\n        image: mysql:8\n"
    base = {"pyproject.toml": '[project]\nname = "x"\nversion = "1"\n', "x/__init__.py": ""}
    r = recipe(write(tmp_path / "one", {**base, ".github/workflows/ci.yml": workflow.format(services=pg)}))
    assert r.env == {"DB_USER": "postgres", "DB_PASSWORD": "pw", "DB_HOST": "127.0.0.1", "DB_PORT": "5432"}
    assert r.services[0]["users"] == [("postgres", "pw")]
    for name, services_text in (("two", pg + my), ("none", "      cache:\n        image: redis:7\n")):
        r = recipe(write(tmp_path / name, {**base, ".github/workflows/ci.yml": workflow.format(services=services_text)}))
        assert not any(k.startswith("DB_") for k in r.env), (name, r.env)


def test_defaults_and_trust_when_no_password(tmp_path):
    root = write(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='x')\n", "x.py": "",
                            ".travis.yml": "language: python\nservices:\n  - postgresql\n  - redis-server\n"})
    pg, rd = recipe(root).services
    assert pg["users"] == [("postgres", "postgres")] and pg["databases"] == [("test", "postgres")]
    assert pg["trust"] is True and pg["port"] == 5432 and rd["port"] == 6379
    assert "127.0.0.1/32 trust" in services.start_script([services.Service(**{**pg, "users": pg["users"]})])


def test_sql_and_names_are_quoted():
    svc = services.Service("postgres", 5432, ["postgresql"], users=[("app", "it's")], databases=[("db", "app")])
    sql = services.postgres_sql(svc)
    assert "PASSWORD %L', 'app', 'it''s')" in sql and "\\gexec" in sql
    # a name that is not a plain identifier is never used
    ev_env = [("DATABASE_URL", "postgresql://u;drop:x@localhost/d$b")]
    assert services._postgres({}, ev_env).databases == [("test", "postgres")]


def test_sql_files_ci_feeds_the_server_are_fed_by_start_sh(tmp_path):
    """pymysql's CI creates its test databases with `mysql ... < ci/docker-entrypoint-initdb.d/init.sql`; psql
    `-f` likewise. Files outside the repository, missing ones, and commands with shell syntax are not taken."""
    ci = ("jobs:\n  t:\n    services:\n      db:\n        image: postgres:16\n    steps:\n      - run: |\n"
          "          psql -h localhost -U postgres -f ./sql/schema.sql\n"
          "          psql -U postgres -f ../outside.sql\n"
          "          psql -U postgres -f sql/missing.sql\n"
          "          psql -U postgres < sql/schema.sql; curl x | sh\n"
          "          sudo -u postgres psql < sql/seed.sql\n")
    root = write(tmp_path / "p", {"pyproject.toml": "[project]\nname='p'\nversion='1'\n", ".github/workflows/ci.yml": ci,
                                  "sql/schema.sql": "CREATE TABLE t (x int);\n", "sql/seed.sql": "INSERT INTO t VALUES (1);\n"})
    r = recipe(root)
    svc = r.services[0]
    assert svc["kind"] == "postgres" and svc["init_sql"] == ["sql/schema.sql", "sql/seed.sql"]
    step = next(s for s in r.steps if s.kind == "services")
    assert "install -m 644 sql/schema.sql /opt/envyard/services/postgres-init-1.sql" in step.command
    start = services.start_script([services.Service(**{**svc, "users": [tuple(u) for u in svc["users"]],
                                                       "databases": [tuple(d) for d in svc["databases"]]})])
    assert start.index("postgres.sql") < start.index("postgres-init-1.sql") < start.index("postgres-init-2.sql")


def test_unknown_and_valueless_services(tmp_path):
    root = write(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='x')\n", "x.py": "",
                            "tox.ini": "[testenv]\npassenv = DATABASE_URL\ncommands = pytest\n",
                            "docker-compose.yml": "services:\n  es:\n    image: elasticsearch:8.1\n"})
    r = recipe(root)
    assert r.services == [] and list(r.services_missing) == ["elasticsearch"]
    assert "docker-compose.yml" in r.services_missing["elasticsearch"]
    assert any("database variable is passed without a value" in n for n in r.notes)
    assert not any(s.kind == "services" for s in r.steps)


def test_missing_service_fails_l4_and_verification():
    from envyard.setup.engine import SetupResult
    from envyard.setup.plan import Recipe
    from envyard.setup.search import LevelResult, Search

    r = Recipe(host_interpreter(), services_missing={"mongo": ".travis.yml:5 (travis.services)"})
    level = Search._missing_services(r, LevelResult(4, "tests run", True, "10 passed"))
    assert level.ok is False and "mongo (.travis.yml:5" in level.detail
    levels = [LevelResult(n, "x", True) for n in range(4)] + [level]
    result = SetupResult("n", "img", 3, levels, r, replay={"ok": True})
    assert result.verified is False and result.status == "partial"  # reproduced, but a service is missing


def test_wrap_keeps_the_exit_code_and_stops_services(tmp_path):
    """wrap() as /bin/sh runs it, with stand-ins for start.sh and stop.sh."""
    log = tmp_path / "log"
    start, stop = tmp_path / "start.sh", tmp_path / "stop.sh"
    start.write_text(f"#!/bin/sh\necho start >> {log}\n")
    stop.write_text(f"#!/bin/sh\necho stop >> {log}\n")
    for f in (start, stop):
        f.chmod(0o755)
    cmd = services.wrap("cd / && exit 5").replace(services.START, str(start)).replace(services.STOP, str(stop))
    assert subprocess.run(["sh", "-c", cmd]).returncode == 5
    assert log.read_text() == "start\nstop\n"
    start.write_text(f"#!/bin/sh\necho '{services.FAILED} postgres: no cluster' >&2\nexit {services.FAILED_EXIT}\n")
    p = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True)
    assert p.returncode == services.FAILED_EXIT and services.start_failure(p.stderr) == "postgres: no cluster"


# ---------------------------------------------------------------------------------------------------- end to end

@contextlib.contextmanager
def set_up(source: Path, tmp_path: Path):
    """`envyard setup SOURCE --python 3.11 --json` in a store of its own, as a user runs it: (its JSON result, the
    contract directory); the store's sandboxes and mounts are collected afterwards."""
    out = tmp_path / "contract"
    env = {"ENVYARD_HOME": str(tmp_path / "home"), **BARE, "PYTHONPATH": SRC}
    r = subprocess.run([sys.executable, "-m", "envyard.cli.main", "setup", str(source), "--python", "3.11", "--out",
                        str(out), "--json"], capture_output=True, text=True, env=env, timeout=1400, cwd=cli_cwd())
    try:
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        yield json.loads(r.stdout), out
    finally:
        subprocess.run([sys.executable, "-m", "envyard.cli.main", "gc"], env=env, capture_output=True)


@pytest.mark.timeout(1500)  # apt installs postgresql and redis-server (twice: the search and the clean replay)
def test_postgres_and_redis_are_provided_and_the_suite_passes(tmp_path):
    import shutil

    src = tmp_path / "services_app"
    shutil.copytree(REPOS / "services_app", src)
    with set_up(src, tmp_path) as (data, out):
        assert data["status"] == "verified" and data["level"] == 4 and data["pass_ratio"] == 1.0, data["reason"]
        assert data["tests_total"] == 5 and data["replay"]["statuses_same"] == 5
        assert [s["kind"] for s in data["recipe"]["services"]] == ["postgres", "redis"]
        assert data["recipe"]["env"]["DATABASE_URL"] == "postgresql://svc:s3cret@127.0.0.1:5432/svcdemo"
        contract = tomllib.loads((out / "envyard.toml").read_text())
        assert [(s["kind"], s["port"]) for s in contract["service"]] == [("postgres", 5432), ("redis", 6379)]
        assert services.START in (out / "test.sh").read_text()
        assert "apt-get install" in (out / "setup.sh").read_text()
        assert services.START in (out / "Dockerfile").read_text()


def test_mysql_from_ci_settings_and_test_code(tmp_path):
    r = recipe(REPOS / "mysql_app")
    assert [s["kind"] for s in r.services] == ["mysql"] and not r.services_missing
    svc = r.services[0]
    assert svc["init_sql"] == ["ci/init.sql"]
    assert svc["port"] == 3306 and svc["packages"] == ["mariadb-server", "mariadb-client"]
    assert svc["users"] == [("app", "app-pw"), ("root", "rootpw")] and svc["databases"] == [("mydemo", "app")]
    assert r.env["MYSQL_HOST"] == "127.0.0.1" and r.env["MYSQL_PORT"] == "3306"  # `mysql` is the CI container
    # no settings: root/root and a database `test`; a URL's user and database; names with quotes are not used
    root = write(tmp_path / "a", {"pyproject.toml": "[project]\nname='a'\nversion='1'\n",
                                  "tox.ini": "[testenv]\nsetenv =\n    DATABASE_URL = mysql+pymysql://u:p@localhost:3307/shop\n"
                                             "    MYSQL_USER = o'hara\n"})
    svc = recipe(root).services[0]
    assert svc["port"] == 3307 and ("u", "p") in svc["users"] and ("root", "root") in svc["users"]
    assert svc["databases"] == [("shop", "u")] and not any("'" in u for u, _ in svc["users"])
    sql = services.mysql_sql(services.Service("mysql", 3306, [], users=[("u", "p")], databases=[("shop", "u")]))
    assert "CREATE USER IF NOT EXISTS 'u'@'%' IDENTIFIED BY 'p';" in sql and "CREATE DATABASE IF NOT EXISTS `shop`;" in sql


@pytest.mark.timeout(1500)  # apt installs mariadb-server (twice: the search and the clean replay)
def test_mysql_is_provided_as_mariadb_and_the_suite_passes(tmp_path):
    with set_up(REPOS / "mysql_app", tmp_path) as (data, out):
        assert data["status"] == "verified" and data["pass_ratio"] == 1.0 and data["tests_total"] == 5, data["reason"]
        assert data["replay"]["statuses_same"] == 5  # the clean replay started it again and the tests talked to it
        contract = tomllib.loads((out / "envyard.toml").read_text())
        assert [(s["kind"], s["port"], s["users"]) for s in contract["service"]] == [("mysql", 3306, ["app", "root"])]
        assert contract["service"][0]["init_sql"] == ["ci/init.sql"]  # CI's `mysql ... < ci/init.sql`
        assert "mariadb-server" in (out / "setup.sh").read_text() and services.START in (out / "test.sh").read_text()


def test_services_are_rebuilt_from_the_recipe_and_defaults_are_usable():
    svc = services.default("redis", "the test run")
    assert (svc.kind, svc.port, svc.evidence) == ("redis", 6379, ["the test run"])
    pg = services.default("postgres", "the test run")
    assert pg.port == 5432 and pg.users and pg.databases
    assert services.from_dict(pg.to_dict()) == pg


def test_memcached_from_ci_services_and_its_host_port_variable(tmp_path):
    r = recipe(REPOS / "memcached_app")
    assert [(s["kind"], s["port"], s["packages"]) for s in r.services] == [("memcached", 11211, ["memcached"])]
    assert r.env == {"MEMCACHED_SERVERS": "127.0.0.1:11211"} and not r.services_missing
    start = services.start_script([services.from_dict(r.services[0])])
    # ready means listening on 127.0.0.1:11211, as /proc/net/tcp writes it (hex port, state 0A)
    assert 'mc_on=127.0.0.1:11211\n' in start and 'mc_on="$mc_on,[::1]:11211"' in start  # ::1 where there is one
    assert 'memcached -d -u memcache -l "$mc_on" -U 0' in start and " 0100007F:2BCB 00000000:0000 0A " in start
    # another port, from the only address the project's variables give
    root = write(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='x')\n",
                            "tox.ini": "[testenv]\nsetenv =\n    MEMCACHED_SERVERS = localhost:11311\n"})
    svc = services.from_dict(recipe(root).services[0])
    assert (svc.kind, svc.port) == ("memcached", 11311) and ":2C2F " in services.start_script([svc])
    assert "envyard-memcached.pid" in services.stop_script([svc])


PYMEMCACHE_CI = """jobs:
  build:
    runs-on: ubuntu-latest
    steps:
    - run: tox -- pymemcache/test/ --port ${{ job.services.memcached.ports[11211] }}
    services:
      memcached:
        image: memcached:latest
        ports:
        - 11211/tcp
      tls_memcached:
        image: scoriacorp/tls_memcached:latest
        ports:
        - 11211/tcp
"""


def test_a_tls_serving_image_of_a_known_server_is_that_server_with_tls(tmp_path):
    from envyard.setup.sources.knowledge import tls_variant

    assert tls_variant("scoriacorp/tls_memcached:latest") == "memcached"
    assert tls_variant("ghcr.io/acme/ssl-redis:7") == "redis" and tls_variant("memcached:1.6") is None
    assert tls_variant("acme/tls-proxy") is None and tls_variant("acme/memcached-exporter") is None
    # pymemcache's CI: a plain memcached and a TLS-serving one from a third-party image → one memcached, both
    r = recipe(write(tmp_path / "a", {"setup.py": SETUP_PY, ".github/workflows/ci.yml": PYMEMCACHE_CI}))
    assert not r.services_missing
    [svc] = [services.from_dict(s) for s in r.services]
    assert (svc.kind, svc.port, svc.tls_port, svc.tls_files) == ("memcached", 11211, 11212, [])
    assert svc.packages == ["memcached", "openssl"]  # no certificate in the repository: one is made
    start = services.start_script([svc])
    assert ("memcached -d -u memcache -Z -o ssl_chain_cert=/opt/envyard/services/memcached-cert.pem,"
            'ssl_key=/opt/envyard/services/memcached-key.pem -l "$mc_on"') in start
    assert "mc_on=notls:127.0.0.1:11211,127.0.0.1:11212\n" in start
    assert 'mc_on="$mc_on,notls:[::1]:11211,[::1]:11212"' in start
    assert " 0100007F:2BCB 00000000:0000 0A " in start and " 0100007F:2BCC 00000000:0000 0A " in start
    made = services.steps([svc])[1].command
    assert "openssl req -x509" in made and "chown memcache /opt/envyard/services/memcached-key.pem" in made
    # the repository's own server certificate, key and CA, when it keeps them
    root = write(tmp_path / "b", {"setup.py": SETUP_PY, ".github/workflows/ci.yml": PYMEMCACHE_CI})
    with_test_certificates(root)
    [svc] = [services.from_dict(s) for s in recipe(root).services]
    assert svc.tls_files == ["tests/certs/server.pem", "tests/certs/server.key", "tests/certs/ca.pem"]
    assert svc.packages == ["memcached"]
    assert "install -m 600 -o memcache tests/certs/server.key" in services.steps([svc])[1].command
    # a TLS image of a server envyard provides only plain: the plain one, and TLS said to be missing
    root = write(tmp_path / "c", {"setup.py": SETUP_PY, ".github/workflows/ci.yml": PYMEMCACHE_CI.replace(
        "scoriacorp/tls_memcached", "acme/redis-tls").replace("memcached:latest", "redis:7")})
    r = recipe(root)
    assert [(s["kind"], s["tls_port"]) for s in r.services] == [("redis", 0)]
    assert list(r.services_missing) == ["redis with TLS"] and ".github/workflows/ci.yml" in r.services_missing[
        "redis with TLS"]


def test_a_server_ci_installs_with_apt_is_provided_once(tmp_path):
    # python-memcached's CI: `sudo apt -y install memcached`, which runs once installed on Ubuntu's runners
    wf = ("jobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
          "      - run: sudo apt-get -y install memcached libxml2-dev\n      - run: pytest\n")
    root = write(tmp_path / "a", {"setup.py": "from setuptools import setup\nsetup(name='x')\n",
                                  ".github/workflows/test.yml": wf})
    r = recipe(root)
    assert [s["kind"] for s in r.services] == ["memcached"] and not r.services_missing
    apt_lines = [s.command for s in r.steps if "apt-get" in s.command]
    # the server once, in the services' step; the other package in the system-package step
    assert sum("memcached" in c for c in apt_lines) == 1 and any("libxml2-dev" in c for c in apt_lines)
    # a client library or a versioned server package: only the server counts
    wf2 = wf.replace("memcached libxml2-dev", "postgresql-client redis-tools postgresql-14")
    root = write(tmp_path / "b", {"setup.py": "from setuptools import setup\nsetup(name='x')\n",
                                  ".github/workflows/test.yml": wf2})
    assert [s["kind"] for s in recipe(root).services] == ["postgres"]


FAKE_SERVER = """#!/bin/sh
# a server that daemonizes, as memcached -d and rabbitmq-server -detached do
setsid sh -c 'echo $$ > /tmp/fake-server.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &
while [ ! -s /tmp/fake-server.pid ]; do sleep 0.05; done
"""


def test_servers_of_a_test_run_that_times_out_are_stopped(sb):
    sb.exec(f"mkdir -p {services.DIR} && cat > {services.START} && chmod 755 {services.START}", stdin=FAKE_SERVER)
    sb.exec(f"printf '#!/bin/sh\\nkill $(cat /tmp/fake-server.pid); rm -f /tmp/fake-server.pid\\n' > {services.STOP}"
            f" && chmod 755 {services.STOP}")
    alive = "kill -0 $(cat /tmp/fake-server.pid)"
    # the timeout kills the test command's process tree; the daemonized server is not in it
    r = sb.exec(services.wrap("sleep 60"), timeout=2)
    assert r.timed_out and sb.exec(alive).exit_code == 0
    sb.exec(services.STOP)
    r = services.run_with(lambda command, timeout: sb.exec(command, timeout=timeout), "sleep 60", 2)
    assert r.timed_out and sb.exec(alive).exit_code != 0
    # a run that ends on its own stops them through wrap's own stop.sh
    assert services.run_with(lambda c, t: sb.exec(c, timeout=t), "true", 30).exit_code == 0
    assert sb.exec(alive).exit_code != 0


def test_rabbitmq_from_the_ci_image_settings_and_its_amqp_url(tmp_path):
    r = recipe(REPOS / "rabbitmq_app")
    assert [(s["kind"], s["port"], s["users"], s["databases"]) for s in r.services] == \
        [("rabbitmq", 5672, [("app", "app-pw")], [("demo", "app")])]
    assert r.env == {"AMQP_URL": "amqp://app:app-pw@127.0.0.1:5672/demo"} and not r.services_missing
    svc = services.from_dict(r.services[0])
    conf = services._rabbitmq_conf(svc)
    assert "listeners.tcp.default = 127.0.0.1:5672" in conf and "default_user = app" in conf
    assert "default_pass = app-pw" in conf and "default_vhost = demo" in conf
    start = services.start_script([svc])
    assert "rabbitmq-server -detached" in start and "ERL_EPMD_ADDRESS=127.0.0.1" in start  # not on the host's LAN
    assert " 0100007F:1628 00000000:0000 0A " in start and "epmd -kill" in services.stop_script([svc])
    # no settings: the URL's user and vhost; a password rabbitmq.conf cannot hold bare: the image's guest
    root = write(tmp_path / "a", {"setup.py": "from setuptools import setup\nsetup(name='x')\n",
                                  "tox.ini": "[testenv]\nsetenv =\n    BROKER_URL = amqp://u:pw@rabbit:5673/v1\n"})
    svc = services.from_dict(recipe(root).services[0])
    assert (svc.port, svc.users, svc.databases) == (5673, [("u", "pw")], [("v1", "u")])
    root = write(tmp_path / "b", {"setup.py": "from setuptools import setup\nsetup(name='x')\n",
                                  "tox.ini": "[testenv]\nsetenv =\n    AMQP_URL = amqp://u:p%23w@localhost//\n"})
    svc = services.from_dict(recipe(root).services[0])
    assert (svc.users, svc.databases) == ([("guest", "guest")], [("/", "guest")])
    assert services._amqp_url(svc) == "amqp://guest:guest@127.0.0.1:5672/%2F"


CI_TLS = """jobs:
  test:
    services:
      rabbitmq:
        image: example/rabbitmq-with-certs
        ports:
          - 5672:5672
          - "5671:5671"
    steps:
      - run: pytest
"""
SETUP_PY = "from setuptools import setup\nsetup(name='x')\n"
PEM_CERT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
PEM_KEY = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"


def test_rabbitmqs_tls_port_in_ci_gets_a_tls_listener_with_the_repositorys_certificates(tmp_path):
    """aiormq's CI publishes 5671 from an image built with tests/certs: the listener uses those files (clients
    check the server against ca.pem and present client certificates it signed)."""
    root = write(tmp_path / "a", {"setup.py": SETUP_PY, ".github/workflows/ci.yml": CI_TLS,
                                  "tests/certs/ca.pem": PEM_CERT, "tests/certs/server.pem": PEM_CERT,
                                  "tests/certs/server.key": PEM_KEY, "tests/certs/client.pem": PEM_CERT})
    assert [f.value for f in gather(root).of("service")] == [
        {"name": "rabbitmq", "image": "example/rabbitmq-with-certs", "ports": [5672, 5671]}]
    svc = services.from_dict(recipe(root).services[0])
    assert (svc.port, svc.tls_port) == (5672, 5671)
    assert svc.tls_files == ["tests/certs/server.pem", "tests/certs/server.key", "tests/certs/ca.pem"]
    conf = services._rabbitmq_conf(svc)
    assert "listeners.ssl.default = 127.0.0.1:5671" in conf and "ssl_options.verify = verify_peer" in conf
    assert "ssl_options.fail_if_no_peer_cert = false" in conf
    step = services.steps([svc])[1].command
    assert f"install -m 600 -o rabbitmq tests/certs/server.key {services.DIR}/rabbitmq-key.pem" in step
    assert "openssl" not in step and svc.packages == ["rabbitmq-server"]
    assert " 0100007F:1627 00000000:0000 0A " in services.start_script([svc])  # ready when 5671 listens too


def test_an_amqps_url_without_certificates_gets_a_made_one(tmp_path):
    root = write(tmp_path / "b", {"setup.py": SETUP_PY, "tests/certs/server.pem": "not a certificate\n",
                                  "tox.ini": "[testenv]\nsetenv =\n    AMQP_URL = amqps://u:pw@rabbit:5676/v\n"})
    svc = services.from_dict(recipe(root).services[0])
    assert (svc.tls_port, svc.tls_files) == (5676, []) and "openssl" in svc.packages
    assert "ssl_options.verify = verify_none" in services._rabbitmq_conf(svc)
    assert "openssl req -x509" in services.steps([svc])[1].command
    plain = write(tmp_path / "c", {"setup.py": SETUP_PY,
                                   "tox.ini": "[testenv]\nsetenv =\n    AMQP_URL = amqp://u:pw@rabbit/v\n"})
    svc = services.from_dict(recipe(plain).services[0])
    assert svc.tls_port == 0 and "ssl" not in services._rabbitmq_conf(svc)


def test_container_ports_of_every_form():
    from envyard.setup.sources.ci import container_ports

    assert container_ports(["5671:5671", "127.0.0.1:6379:6379", "11211/tcp", 5432, {"target": 9200},
                            "${{ x }}", "5671"]) == [5671, 6379, 11211, 5432, 9200]
    assert container_ports(None) == [] and container_ports("5432:5432") == []


def test_tests_ci_runs_under_xvfb_run_get_an_x_display(tmp_path):
    root = write(tmp_path / "a", {"setup.py": SETUP_PY,
                                  ".github/workflows/ci.yml": "jobs:\n  t:\n    steps:\n      - run: xvfb-run -a pytest\n"})
    r = recipe(root)
    assert [(s["kind"], s["port"], s["packages"]) for s in r.services] == [("xvfb", 99, ["xvfb"])]
    assert r.env["DISPLAY"] == ":99" and not r.services_missing
    svc = services.from_dict(r.services[0])
    start, stop = services.start_script([svc]), services.stop_script([svc])
    assert "Xvfb :99 -screen 0 1280x1024x24 -nolisten tcp -noreset" in start and "[ -S /tmp/.X11-unix/X99 ]" in start
    assert "X display :99 ready" in start and "rm -f /tmp/envyard-xvfb.pid" in stop
    assert "rm -f /tmp/.X99-lock /tmp/.X11-unix/X99" in stop
    # CI starts its own Xvfb on the DISPLAY it exports: the same display here
    root = write(tmp_path / "b", {"setup.py": SETUP_PY, ".github/workflows/ci.yml": (
        "env:\n  DISPLAY: ':42.0'\njobs:\n  t:\n    steps:\n      - run: sudo apt-get install -y xvfb\n"
        "      - run: pytest\n")})
    r = recipe(root)
    assert [(s["kind"], s["port"]) for s in r.services] == [("xvfb", 42)] and r.env["DISPLAY"] == ":42.0"


def test_a_refused_memcached_connection_names_memcached():
    out = ("tests/test_cache.py::test_get FAILED\n"
           "E   ConnectionRefusedError: [Errno 111] Connection refused (memcached at 127.0.0.1:11211)\n")
    assert verdict.connection_failures(output=out)["services"] == ["memcached"]
    svc = services.default("memcached", "the test run")
    assert (svc.kind, svc.port, svc.packages) == ("memcached", 11211, ["memcached"])


MEMCACHED_TLS_TEST = """import os
import ssl

from pymemcache.client.base import Client


def test_round_trip_over_tls_checking_the_server_against_the_repositorys_ca():
    ctx = ssl.create_default_context(cafile=os.path.join(os.path.dirname(__file__), "certs", "ca.pem"))
    c = Client(("localhost", 11212), tls_context=ctx, connect_timeout=5, timeout=5)
    c.set("over-tls", "yes")
    assert c.get("over-tls") == b"yes"
"""


@pytest.mark.timeout(1500)  # apt installs memcached (twice: the search and the clean replay)
def test_memcached_is_provided_and_the_suite_talks_to_it(tmp_path):
    """memcached_app, with its CI running a TLS-serving memcached image too and a test that stores and reads a
    value over TLS, checking the server against the repository's CA: plain and TLS both answer."""
    import shutil

    src = tmp_path / "memcached_app"
    shutil.copytree(REPOS / "memcached_app", src)
    ci = src / ".github" / "workflows" / "ci.yml"
    ci.write_text(ci.read_text().replace('        ports: ["11211:11211"]\n', '        ports: ["11211:11211"]\n'
                                         '      tls_memcached:\n        image: scoriacorp/tls_memcached:latest\n'))
    (src / "tests" / "test_tls.py").write_text(MEMCACHED_TLS_TEST)
    with_test_certificates(src)
    with set_up(src, tmp_path) as (data, out):
        # the tests store, read and increment values: only a real server passes them
        assert data["status"] == "verified" and data["pass_ratio"] == 1.0 and data["tests_total"] == 5, data["reason"]
        # the clean replay installed and started it from the contract, in a network namespace where "localhost"
        # is ::1 first: the TLS test passes there only because memcached listens on ::1 too
        assert data["replay"]["statuses_same"] == 5, data["replay"]
        contract = tomllib.loads((out / "envyard.toml").read_text())
        assert [(s["kind"], s["port"], s["tls_port"]) for s in contract["service"]] == [("memcached", 11211, 11212)]
        assert "memcached" in (out / "setup.sh").read_text() and services.START in (out / "test.sh").read_text()


TLS_TEST = """import os
import ssl

import pika


def test_login_over_tls_checking_the_server_against_the_repositorys_ca():
    url = pika.URLParameters(os.environ["AMQP_URL"])
    ctx = ssl.create_default_context(cafile=os.path.join(os.path.dirname(__file__), "certs", "ca.pem"))
    tls = pika.ConnectionParameters(host="localhost", port=5671, virtual_host=url.virtual_host,
                                    credentials=url.credentials, ssl_options=pika.SSLOptions(ctx, "localhost"))
    conn = pika.BlockingConnection(tls)
    assert conn.is_open
    conn.close()
"""


def with_test_certificates(src: Path) -> None:
    """A test CA and a server certificate it signed, for localhost, in src/tests/certs (as aiormq keeps them)."""
    certs = src / "tests" / "certs"
    certs.mkdir(parents=True)
    (certs / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for cmd in ("openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=test-ca -keyout ca.key -out ca.pem",
                "openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout server.key -out server.csr",
                "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 "
                "-extfile ext.cnf -out server.pem"):
        subprocess.run(cmd.split(), cwd=certs, check=True, capture_output=True)
    for name in ("ca.key", "server.csr", "ext.cnf", "ca.srl"):
        (certs / name).unlink(missing_ok=True)


@pytest.mark.timeout(1500)  # apt installs rabbitmq-server with Erlang (twice: the search and the clean replay)
def test_rabbitmq_is_provided_and_the_suite_talks_to_it(tmp_path):
    """rabbitmq_app, with its CI publishing the TLS port too and a test that logs in over TLS, checking the server
    against the repository's CA: AMQP and AMQPS both answer, with the repository's certificate."""
    import shutil

    src = tmp_path / "rabbitmq_app"
    shutil.copytree(REPOS / "rabbitmq_app", src)
    ci = src / ".github" / "workflows" / "tests.yml"
    ci.write_text(ci.read_text().replace("- 5672:5672\n", "- 5672:5672\n          - 5671:5671\n"))
    (src / "tests" / "test_tls.py").write_text(TLS_TEST)
    with_test_certificates(src)
    with set_up(src, tmp_path) as (data, out):
        # the tests log in as CI's user to its vhost and send a message through a queue: only a real broker passes
        assert data["status"] == "verified" and data["pass_ratio"] == 1.0 and data["tests_total"] == 4, data["reason"]
        assert data["replay"]["statuses_same"] == 4
        contract = tomllib.loads((out / "envyard.toml").read_text())
        assert [(s["kind"], s["port"], s["users"], s["tls_port"]) for s in contract["service"]] == \
            [("rabbitmq", 5672, ["app"], 5671)]
        assert "rabbitmq-server" in (out / "setup.sh").read_text()


@pytest.mark.timeout(1500)  # apt installs xvfb (twice: the search and the clean replay)
def test_tests_that_fail_for_want_of_a_display_get_one_and_run_again(tmp_path):
    """xvfb_app's tests open windows with python-xlib, and nothing in the repository says so: their first run
    fails with `DisplayNameError`; an X display is provided, DISPLAY exported, and they all pass."""
    with set_up(REPOS / "xvfb_app", tmp_path) as (data, out):
        assert data["status"] == "verified" and data["pass_ratio"] == 1.0 and data["tests_total"] == 3, data["reason"]
        assert [s["kind"] for s in data["recipe"]["services"]] == ["xvfb"]
        assert data["recipe"]["env"]["DISPLAY"] == ":99"
        assert any("could not connect to xvfb" in x for x in data["repairs"]), data["repairs"]
        assert data["replay"]["statuses_same"] == 3
        contract = tomllib.loads((out / "envyard.toml").read_text())
        assert [(s["kind"], s["display"]) for s in contract["service"]] == [("xvfb", ":99")]


def test_a_server_named_only_in_code_is_not_planned():
    """redis_found_app names its server only as an address in code: the plan provides nothing (the end-to-end
    test below shows the test run finding it)."""
    r = recipe(REPOS / "redis_found_app")
    assert r.services == [] and not r.services_missing


@pytest.mark.timeout(1500)  # apt installs redis-server (twice: the search and the clean replay)
def test_a_server_the_test_run_could_not_reach_is_provided_and_the_tests_run_again(tmp_path):
    with set_up(REPOS / "redis_found_app", tmp_path) as (data, out):
        assert data["status"] == "verified" and data["pass_ratio"] == 1.0 and data["tests_total"] == 3, data["reason"]
        assert [s["kind"] for s in data["recipe"]["services"]] == ["redis"]
        assert any("could not connect to redis" in x and "run again" in x for x in data["repairs"]), data["repairs"]
        assert data["replay"]["statuses_same"] == 3  # the clean replay installed and started it from the contract
        contract = tomllib.loads((out / "envyard.toml").read_text())
        assert [(s["kind"], s["port"]) for s in contract["service"]] == [("redis", 6379)]
        assert services.START in (out / "test.sh").read_text()


@pytest.mark.timeout(900)  # apt installs postgresql into a bullseye sandbox
def test_bullseyes_postgres_13_accepts_the_passwords_start_sh_sets(debian_yard, tmp_path):
    """PostgreSQL 13 (bullseye, the Python 3.9 candidate's base) stores md5 password hashes by default: a
    `scram-sha-256` line in pg_hba.conf then refused every password login (dataset's suite, as postgres/postgres
    over TCP, failed all 59 tests). start.sh's lines must accept what the server stores."""
    from envyard.errors import EnvyardError
    from envyard.setup.search import setup_env, setup_sandbox

    try:
        image = debian_yard.pull("debian:bullseye")
    except EnvyardError as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"no bullseye image: {e}")
    svc = services.Service("postgres", 5432, ["postgresql"], users=[("postgres", "postgres")],
                           databases=[("dataset", "postgres")])
    (tmp_path / "uv-cache").mkdir()
    with setup_sandbox(debian_yard, image, tmp_path / "uv-cache") as sb:
        for step in services.steps([svc]):
            r = sb.exec(step.command, env=setup_env(), timeout=600)
            assert r.exit_code == 0, r.stderr[-2000:]
        login = "PGPASSWORD=postgres psql -h 127.0.0.1 -U postgres -d dataset -tAc 'SHOW server_version'"
        r = sb.exec(services.wrap(login), env=setup_env(), timeout=300)
        debs = sb.exec("find /var/cache/apt/archives -name '*.deb'", timeout=60)
    assert r.exit_code == 0, r.stdout[-1000:] + r.stderr[-2000:]
    assert r.stdout.strip().startswith("13.")
    assert debs.exit_code == 0 and debs.stdout == "", debs.stdout[:500]  # the server's .debs were not kept


def test_code_that_reads_only_pghost_gets_the_provided_role_too(tmp_path):
    """asyncpg's test base reads PGHOST and, when it is set, connects to that server as the OS user (root):
    `role "root" does not exist` failed 258 of its 272 tests. With PGHOST exported, PGUSER names the role
    start.sh creates, unless the project sets it."""
    code = "import os\n\ndef test_db():\n    assert os.environ.get('PGHOST')\n"
    root = write(tmp_path / "a", {"pyproject.toml": "[project]\nname='a'\nversion='1'\n", "tests/test_db.py": code})
    r = recipe(root)
    assert [s["kind"] for s in r.services] == ["postgres"]
    assert r.env["PGHOST"] == "127.0.0.1" and r.env["PGUSER"] == r.services[0]["users"][0][0] == "postgres"
    own = write(tmp_path / "b", {"pyproject.toml": "[project]\nname='b'\nversion='1'\n",
                                 "tests/test_db.py": code + "\nUSER = os.environ.get('PGUSER', 'app')\n"})
    r = recipe(own)
    assert r.env["PGHOST"] == "127.0.0.1" and r.env["PGUSER"] == "postgres"  # the code's own read, same role
