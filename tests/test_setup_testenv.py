"""Services named only in test code (sources/testenv.py): environment variables read with os.environ/os.getenv,
found with ast and turned into a provided service with the variables exported (services.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envyard.setup import services
from envyard.setup.evidence import gather
from envyard.setup.interpreters import host_interpreter
from envyard.setup.plan import Candidate, plan
from envyard.setup.sources.testenv import env_reads, kind_of, role_of

# psycopg2 2.9.10's tests/testconfig.py, as its sdist ships it (abridged)
PSYCOPG2_TESTCONFIG = """import os

dbname = os.environ.get('PSYCOPG2_TESTDB', 'psycopg2_test')
dbhost = os.environ.get('PSYCOPG2_TESTDB_HOST', os.environ.get('PGHOST'))
dbport = os.environ.get('PSYCOPG2_TESTDB_PORT', os.environ.get('PGPORT'))
dbuser = os.environ.get('PSYCOPG2_TESTDB_USER', os.environ.get('PGUSER'))
dbpass = os.environ.get('PSYCOPG2_TESTDB_PASSWORD', os.environ.get('PGPASSWORD'))
green = os.environ.get('PSYCOPG2_TEST_GREEN', None)
repl_dsn = os.environ.get('PSYCOPG2_TEST_REPL_DSN', None)
repl_slot = os.environ.get('PSYCOPG2_TEST_REPL_SLOT', 'psycopg2_test_slot')
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_env_reads_every_spelling_and_no_writes():
    code = ("import os\nfrom os import environ, getenv\n"
            "a = os.environ.get('A_HOST', 'localhost')\nb = os.getenv('B_PORT')\nc = os.environ['C_URL']\n"
            "d = 'D_DSN' in os.environ\ne = environ.get('E_DB', default='x')\nf = getenv('F_USER', 'u')\n"
            "os.environ['WRITTEN_HOST'] = 'x'\ndel os.environ['DELETED_HOST']\nname = 'DYN'\ng = os.getenv(name)\n")
    assert env_reads(code) == [("A_HOST", "localhost", 3), ("B_PORT", None, 4), ("C_URL", None, 5),
                               ("D_DSN", None, 6), ("E_DB", "x", 7), ("F_USER", "u", 8)]


@pytest.mark.parametrize("name,default,kind,role", [
    ("PSYCOPG2_TESTDB", "psycopg2_test", "postgres", "db"),
    ("PSYCOPG2_TESTDB_HOST", None, "postgres", "host"),
    ("PGHOST", None, "postgres", "host"),
    ("MYSQL_TEST_DB", None, "mysql", "db"),
    ("REDIS_TEST_URL", None, "redis", "url"),
    ("TEST_DSN", "postgresql://u:p@localhost/x", "postgres", "url"),   # the default's scheme
    ("TEST_DSN", None, None, "url"),                                   # no kind: nothing
    ("PSYCOPG2_TEST_GREEN", None, "postgres", None),                   # a kind but no role: not a location
    ("SERVICE_NAME", None, None, None),
    ("DJANGO_DATABASE_HOST_POSTGRES", "", "postgres", "host"),          # django-reversion: the service named last
    ("DJANGO_DATABASE_NAME_MYSQL", "test_project", "mysql", "db"),
    ("DJANGO_DATABASE_ENGINE_MYSQL", None, "mysql", None),
])
def test_kind_and_role(name, default, kind, role):
    assert kind_of(name, default) == kind and role_of(name) == role


def test_psycopg2_gets_postgres_with_its_variables_exported(tmp_path):
    root = write(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='p')\n",
                            "tests/testconfig.py": PSYCOPG2_TESTCONFIG, "tests/test_a.py": "def test_a(): pass\n"})
    ev = gather(root)
    facts = [f for f in ev.of("service") if f.via == "testcode.environ"]
    assert {f.value["name"] for f in facts} == {"postgres"} and facts[0].file == "tests/testconfig.py"
    need = services.needed(ev)
    assert [s.kind for s in need.provided] == ["postgres"] and not need.missing
    pg = need.provided[0]
    assert ("psycopg2_test", "postgres") in pg.databases and pg.users == [("postgres", "postgres")]
    assert need.env["PSYCOPG2_TESTDB"] == "psycopg2_test" and need.env["PSYCOPG2_TESTDB_HOST"] == "127.0.0.1"
    assert need.env["PSYCOPG2_TESTDB_PORT"] == "5432" and need.env["PSYCOPG2_TESTDB_USER"] == "postgres"
    assert need.env["PSYCOPG2_TESTDB_PASSWORD"] == "postgres" and need.env["PGHOST"] == "127.0.0.1"
    assert "PSYCOPG2_TEST_REPL_DSN" not in need.env  # no default, and the location is known: left unset (skipped)
    assert "PSYCOPG2_TEST_GREEN" not in need.env and "PSYCOPG2_TEST_REPL_SLOT" not in need.env
    r = plan(ev, Candidate(host_interpreter()))
    assert r.services and r.services[0]["kind"] == "postgres"
    assert r.env["PSYCOPG2_TESTDB_HOST"] == "127.0.0.1"
    assert "psycopg2_test" in services.postgres_sql(pg)


def test_a_url_read_by_a_conftest_is_exported_and_its_user_created(tmp_path):
    root = write(tmp_path, {
        "pyproject.toml": "[project]\nname='p'\nversion='1'\n",
        "conftest.py": "import os\nURL = os.environ.get('TEST_DSN', 'postgresql://app:secret@localhost:5433/appdb')\n"
                       "R = os.getenv('REDIS_TEST_URL')\n"})
    need = services.needed(gather(root))
    kinds = {s.kind: s for s in need.provided}
    assert set(kinds) == {"postgres", "redis"}
    assert need.env["TEST_DSN"] == "postgresql://app:secret@127.0.0.1:5433/appdb"
    assert kinds["postgres"].port == 5433 and ("app", "secret") in kinds["postgres"].users
    assert ("appdb", "app") in kinds["postgres"].databases
    assert need.env["REDIS_TEST_URL"] == "redis://127.0.0.1:6379/0"  # the only way its tests learn where it is


def test_library_code_and_ci_values_are_not_overridden(tmp_path):
    root = write(tmp_path, {
        "pyproject.toml": "[project]\nname='p'\nversion='1'\n",
        "src/p/settings.py": "import os\nH = os.environ.get('REDIS_HOST')\n",  # not test code: no service
        "tox.ini": "[testenv]\nsetenv =\n    PGHOST = db.example.org\n",
        "tests/conftest.py": "import os\nH = os.environ.get('PGHOST')\n"})
    ev = gather(root)
    need = services.needed(ev)
    assert [s.kind for s in need.provided] == ["postgres"]
    assert need.env["PGHOST"] == "db.example.org"  # the project's own setting wins


def test_unparsable_test_files_are_skipped(tmp_path):
    root = write(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='p')\n",
                            "tests/test_py2.py": "print 'hello'\nimport os\nos.environ.get('PGHOST')\n"})
    ev = gather(root)
    assert not ev.of("service") and not ev.problems
