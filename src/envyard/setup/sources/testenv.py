"""Services named only in the project's test code: environment variables its tests read.

Some suites name their database nowhere but in Python: psycopg2's `tests/testconfig.py` reads
`os.environ.get('PSYCOPG2_TESTDB_HOST', os.environ.get('PGHOST'))`, with no CI service or compose file. This
reader parses (with `ast`, never running anything) the Python files of test directories and every `conftest.py`,
and collects the names read through `os.environ.get/[]/in`, `os.getenv`, `environ.get` and `getenv`, with their
literal default. A name means a service when `data/services.toml` lists it (`PGHOST`, `REDIS_URL`), when its
literal default is a URL of a service's scheme, or when one of its words is a service's token (`PSYCOPG`,
`MYSQL`, `REDIS`) and its last word says what it holds (its *role*: host, port, user, password, db, url):

    service           {"name": KIND, "env": NAME}                                   via "testcode.environ"
    service_code_env  {"service": KIND, "name": NAME, "role": ROLE, "default": str | None}

services.py provides the kind and exports each such variable pointing at it (host 127.0.0.1, the port, the
role it creates, the database named by the default).
"""

from __future__ import annotations

import ast
import re

from .base import Sink
from .knowledge import service_for_env, services

MAX_FILES = 400
MAX_BYTES = 300_000
TEST_DIRS = {"tests", "test", "testing", "t", "unittests", "unit_tests", "functional_tests", "integration_tests"}

# The last word of a variable's name → what it holds.
ROLES = {"HOST": "host", "HOSTNAME": "host", "SERVER": "host", "PORT": "port", "USER": "user", "USERNAME": "user",
         "PASSWORD": "password", "PASS": "password", "PASSWD": "password", "PWD": "password",
         "DB": "db", "TESTDB": "db", "DATABASE": "db", "DBNAME": "db", "NAME": "db",
         "DSN": "url", "URL": "url", "URI": "url", "TESTDSN": "url"}
# libpq's own variables (read by psycopg2, asyncpg...): PG + the role's word.
_PG = {"PGHOST": "host", "PGPORT": "port", "PGUSER": "user", "PGPASSWORD": "password", "PGDATABASE": "db"}


def test_files(sink: Sink) -> list[str]:
    """Python files under a test directory (at any depth), and every conftest.py."""
    out = []
    for p in sink.files.paths:
        if not p.endswith(".py"):
            continue
        parts = p.split("/")
        if parts[-1] == "conftest.py" or any(d.lower() in TEST_DIRS for d in parts[:-1]):
            out.append(p)
    return out[:MAX_FILES]


def _is_environ(node: ast.AST) -> bool:
    return ((isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
             and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "environ"))


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def env_reads(source: str) -> list[tuple[str, str | None, int]]:
    """(name, literal default or None, line) of each environment variable the code reads."""
    tree = ast.parse(source)
    out = []
    for node in ast.walk(tree):
        name = default = None
        if isinstance(node, ast.Call) and node.args:
            f = node.func
            getter = ((isinstance(f, ast.Attribute) and f.attr in ("get", "setdefault") and _is_environ(f.value))
                      or (isinstance(f, ast.Attribute) and f.attr == "getenv" and isinstance(f.value, ast.Name)
                          and f.value.id == "os")
                      or (isinstance(f, ast.Name) and f.id == "getenv"))
            if getter:
                name = _literal(node.args[0])
                default = _literal(node.args[1]) if len(node.args) > 1 else None
                for kw in node.keywords:
                    if kw.arg == "default":
                        default = _literal(kw.value)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            name = _literal(node.slice)
        elif (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))
              and _is_environ(node.comparators[0])):
            name = _literal(node.left)
        if name and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,100}", name):
            out.append((name, default, getattr(node, "lineno", None)))
    return out


def role_of(name: str) -> str | None:
    upper = name.upper()
    if upper in _PG:
        return _PG[upper]
    words = [w for w in upper.split("_") if w]
    if len(words) > 1 and re.sub(r"\d+", "", words[-1]) in _service_tokens():
        words = words[:-1]  # the service named last: DJANGO_DATABASE_HOST_POSTGRES (django-reversion's settings)
    if not words:
        return None
    role = ROLES.get(words[-1])
    if words[-1] == "NAME" and (len(words) < 2 or words[-2] not in ("DB", "DATABASE")):
        return None  # SERVICE_NAME, TEST_NAME: not a database's name
    return role


def _service_tokens() -> set[str]:
    return {t for entry in services().values() for t in entry.get("tokens", [])}


def kind_of(name: str, default: str | None) -> str | None:
    """The service a variable the tests read points at, or None."""
    known = service_for_env(name, default)
    if known:
        return known
    words = {re.sub(r"\d+", "", w) for w in name.upper().split("_")}
    for kind, entry in services().items():
        if words & set(entry.get("tokens", [])):
            return kind
    return None


def read_test_env(sink: Sink) -> None:
    for rel in test_files(sink):
        text = sink.read(rel, limit=MAX_BYTES, quiet=True)
        if not text or "environ" not in text and "getenv" not in text:
            continue
        try:
            reads = env_reads(text)
        except (SyntaxError, ValueError, RecursionError):
            continue  # Python 2 code, or not Python at all: nothing to read here
        for name, default, line in reads:
            role = role_of(name)
            listed = service_for_env(name, None) is not None
            if role is None and not listed and not (default and "://" in default):
                continue
            kind = kind_of(name, default)
            if kind is None:
                continue
            sink.add("service", {"name": kind, "env": name}, rel, line, "testcode.environ")
            sink.add("service_code_env", {"service": kind, "name": name, "role": role, "default": default}, rel,
                     line, "testcode.environ")
