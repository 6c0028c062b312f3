"""setup.bugs: telling a failure in the project's own code from the environment's (fast, no sandboxes)."""

from __future__ import annotations

import pytest

from envyard.setup.bugs import project_bug
from envyard.setup.engine import unverified_name

ROOT = "/work/boom"

IMPORT_CHECK = '''Traceback (most recent call last):
  File "<string>", line 4, in <module>
  File "/usr/lib/python3.11/importlib/__init__.py", line 126, in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "<frozen importlib._bootstrap>", line 1204, in _gcd_import
  File "/work/boom/src/tinycalc/__init__.py", line 11, in <module>
    raise RuntimeError("boom")
RuntimeError: boom
'''

PYTEST_COLLECT = '''==================================== ERRORS ====================================
_____________________ ERROR collecting tests/test_calc.py ______________________
tests/test_calc.py:1: in <module>
    from tinycalc import add, div
src/tinycalc/__init__.py:11: in <module>
    raise RuntimeError("boom")
E   RuntimeError: boom
=========================== short test summary info ============================
ERROR tests/test_calc.py - RuntimeError: boom
'''


def test_a_raise_in_the_projects_init_is_a_project_bug():
    bug = project_bug(IMPORT_CHECK, ROOT, "import")
    assert bug is not None and bug.error == "RuntimeError: boom"
    assert (bug.file, bug.line, bug.stage) == ("src/tinycalc/__init__.py", 11, "import")
    assert "raise RuntimeError" in bug.traceback and "RuntimeError: boom" in bug.headline


def test_pytests_collection_traceback_gives_the_same_signature():
    bug = project_bug(PYTEST_COLLECT, ROOT, "collect")
    assert bug is not None and bug.stage == "collect"
    assert bug.signature == project_bug(IMPORT_CHECK, ROOT, "import").signature


@pytest.mark.parametrize("error", [
    "ModuleNotFoundError: No module named 'yaml'",
    "ImportError: libfoo.so.1: cannot open shared object file: No such file or directory",
    "ImportError: /opt/venv/lib/python3.11/site-packages/x/_x.so: undefined symbol: PyFoo",
    # a service the tests expect, not set up as they expect: the environment's problem, not the project's
    "pymysql.err.OperationalError: (1049, \"Unknown database 'test1'\")",
    "ConnectionRefusedError: [Errno 111] Connection refused",
    "psycopg2.OperationalError: connection to server at \"127.0.0.1\", port 5432 failed: Connection refused",
    "redis.exceptions.ConnectionError: Error 111 connecting to localhost:6379. Connection refused.",
    # redis-py-cluster's conftest.py, raised by its own code when no cluster node answers
    "rediscluster.exceptions.RedisClusterException: Redis Cluster cannot be connected. Please provide at least "
    "one reachable node.",
    # fakeredis's conftest stops the run when its Redis does not answer
    "_pytest.outcomes.Exit: Redis is not running",
])
def test_a_missing_module_or_a_binary_problem_is_not(error):
    assert project_bug(IMPORT_CHECK.replace("RuntimeError: boom", error), ROOT, "import") is None


def test_a_failure_inside_a_dependency_is_not():
    inside = IMPORT_CHECK.replace("/work/boom/src/tinycalc/__init__.py",
                                  "/opt/venv/lib/python3.11/site-packages/dep/__init__.py")
    assert project_bug(inside, ROOT, "import") is None


def test_the_stdlib_raising_for_the_project_counts_as_the_projects():
    out = IMPORT_CHECK.replace("RuntimeError: boom", '''  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads
    return _default_decoder.decode(s)
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)''')
    bug = project_bug(out, ROOT, "import")
    assert bug is not None and bug.file == "src/tinycalc/__init__.py" and bug.error.startswith("json.decoder.")


def test_the_last_of_chained_tracebacks_counts():
    dep = IMPORT_CHECK.replace("/work/boom/src/tinycalc/__init__.py", "/opt/venv/lib/python3.11/site-packages/d.py")
    out = IMPORT_CHECK + "\nDuring handling of the above exception, another exception occurred:\n\n" + dep
    assert project_bug(out, ROOT, "import") is None
    assert project_bug(dep + "\nThe above exception was the direct cause of the following exception:\n\n"
                       + IMPORT_CHECK, ROOT, "import") is not None


def test_no_traceback_is_no_bug():
    assert project_bug("error: Failed to build `tinycalc`\n  Caused by: exit 1", ROOT, "install") is None


@pytest.mark.parametrize("name,unverified", [
    ("setup/x:latest", "setup/x:unverified"),
    ("setup/x:v2", "setup/x:v2-unverified"),
    ("127.0.0.1:5000/x:latest", "127.0.0.1:5000/x:unverified"),
])
def test_unverified_results_get_a_name_that_says_so(name, unverified):
    assert unverified_name(name) == unverified


def test_a_name_an_import_guarded_by_except_importerror_should_bind_names_its_modules(tmp_path):
    """mccabe's test module imports hypothesmith and hypothesis inside `try: ... except ImportError: pass`, then
    uses `@settings`: without them collection fails with a NameError, which is a missing module, not a bug."""
    from envyard.setup.bugs import ProjectBug, guarded_imports
    (tmp_path / "test_x.py").write_text(
        "import unittest\ntry:\n    import hypothesmith\n    from hypothesis import given, settings as s2\n"
        "except (ImportError, SyntaxError):\n    pass\n\ntry:\n    from yaml import load\nexcept ValueError:\n"
        "    pass\n\n@s2()\ndef test(): pass\n")
    def bug(error):
        return ProjectBug(error, "test_x.py", 13, "collect", "")
    assert guarded_imports(bug("NameError: name 's2' is not defined"), tmp_path) == ["hypothesmith", "hypothesis"]
    assert guarded_imports(bug("NameError: name 'load' is not defined"), tmp_path) == []  # not ImportError
    assert guarded_imports(bug("NameError: name 'other' is not defined"), tmp_path) == []
    assert guarded_imports(bug("TypeError: boom"), tmp_path) == []
    assert guarded_imports(ProjectBug("NameError: name 's2' is not defined", "gone.py", 1, "collect", ""),
                           tmp_path) == []
