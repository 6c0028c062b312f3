"""What a setup result may be called (verdict.status), why it fell short, and where it is saved."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from envyard.setup import verdict
from envyard.setup.engine import SetupResult, partial_name, saved_name, unverified_name
from envyard.setup.interpreters import host_interpreter
from envyard.setup.plan import Recipe
from envyard.setup.search import LevelResult


def result(level, tests, *, replay=True, integrity=True, missing=None, image="img"):
    r = Recipe(host_interpreter(), services_missing=missing or {})
    levels = [LevelResult(n, "x", True) for n in range(level + 1)]
    from envyard.setup.search import pass_ratio
    return SetupResult("setup/x:latest", image, level, levels, r, tests=tests, pass_ratio=pass_ratio(tests),
                       replay={"ok": replay}, integrity=LevelResult(-1, "sources unchanged", integrity))


def suite(passed, failed, skipped=0):
    return {**{f"t::p{i}": "passed" for i in range(passed)}, **{f"t::f{i}": "failed" for i in range(failed)},
            **{f"t::s{i}": "skipped" for i in range(skipped)}}


def test_psycopg2_like_l4_with_a_low_pass_ratio_is_partial_not_verified():
    r = result(4, suite(12, 54))  # what psycopg2 2.9.10 gave without its database: 0.18
    assert r.pass_ratio == pytest.approx(0.18, abs=0.01)
    assert r.status == "partial" and r.verified is False
    assert r.to_dict()["status"] == "partial" and r.to_dict()["verified"] is False


@pytest.mark.parametrize("tests,status", [
    (suite(9, 1), "verified"),          # exactly the bar
    (suite(10, 0, 5), "verified"),      # skipped tests do not count
    (suite(89, 11), "partial"),
    (suite(0, 0, 7), "partial"),        # everything skipped: no pass ratio
])
def test_the_bar_is_a_pass_ratio_of_0_9_at_l4(tests, status):
    assert result(4, tests).status == status


def test_l3_reproduced_is_partial_and_failures_stay_what_they_were():
    assert result(3, {}).status == "partial"                                    # collected, not run
    assert result(4, suite(10, 0), replay=False).status == "unverified"          # the replay did not reproduce it
    assert result(4, suite(10, 0), integrity=False).status == "unverified"       # the sources changed
    assert result(1, {}, replay=False).status == "unverified"
    assert result(-1, {}, replay=False, image=None).status == "failed"
    assert result(4, suite(10, 0), missing={"mongo": ".travis.yml:5"}).status == "partial"


def test_saved_names_follow_the_unverified_scheme():
    assert saved_name("setup/x:latest", "verified") == "setup/x:latest"
    assert saved_name("setup/x:latest", "partial") == partial_name("setup/x:latest") == "setup/x:partial"
    assert saved_name("setup/x:v2", "partial") == "setup/x:v2-partial"
    assert saved_name("setup/x:latest", "unverified") == unverified_name("setup/x:latest") == "setup/x:unverified"
    assert saved_name("127.0.0.1:5000/x", "partial") == "127.0.0.1:5000/x:partial"


JUNIT = b"""<?xml version="1.0"?><testsuites><testsuite>
<testcase classname="tests.test_connection.ConnectionTests" name="test_closed">
  <error message="psycopg2.OperationalError: connection to server at &quot;127.0.0.1&quot;, port 5432 failed: Connection refused">
E   psycopg2.OperationalError: connection to server at "127.0.0.1", port 5432 failed: Connection refused
E   	Is the server running on that host and accepting TCP/IP connections?</error></testcase>
<testcase classname="tests.test_cursor.CursorTests" name="test_x">
  <failure message="">psycopg2.OperationalError: connection to server on socket "/var/run/postgresql/.s.PGSQL.5432" failed: No such file or directory</failure></testcase>
<testcase classname="tests.test_quote.QuoteTests" name="test_y"><failure message="AssertionError: 1 != 2"/></testcase>
<testcase classname="tests.test_quote.QuoteTests" name="test_z"/>
</testsuite></testsuites>"""


def test_connection_failures_from_junit_name_the_service():
    conn = verdict.connection_failures(junit=JUNIT)
    assert conn["tests"] == 2 and conn["failing"] == 3 and conn["services"] == ["postgres"]
    assert "Connection refused" in conn["sample"]
    why = verdict.describe_connection(conn, provided=[])
    assert why.startswith("2 of the 3 failing tests could not connect to postgres (port 5432)")
    assert why.endswith("a service the tests need was not provided")
    assert "the tests did not reach it" in verdict.describe_connection(conn, provided=["postgres"])


@pytest.mark.parametrize("line,kind", [
    ("redis.exceptions.ConnectionError: Error 111 connecting to localhost:6379. Connection refused.", "redis"),
    ("MySQLdb.OperationalError: (2002, \"Can't connect to local MySQL server through socket "
     "'/run/mysqld/mysqld.sock' (2)\")", "mysql"),
    ("psycopg2.OperationalError: could not connect to server: Connection refused", "postgres"),
    # pylibmc's own check before each test: nothing else in its failures says "connection"
    ("pylibmc.test.NotAliveError: test memcached 127.0.0.1:11211 not alive", "memcached"),
    # no X display: python-xlib, tkinter, Qt
    ('Xlib.error.DisplayNameError: Bad display name ""', "xvfb"),
    ("_tkinter.TclError: no display name and no $DISPLAY environment variable", "xvfb"),
    ('qt.qpa.xcb: could not connect to display', "xvfb"),
])
def test_connection_failures_from_output(line, kind):
    conn = verdict.connection_failures(output=f"ERROR: test_a ...\n{line}\nok\n")
    assert conn["tests"] == 1 and conn["services"] == [kind] and conn["failing"] is None


def test_no_connection_errors_no_note():
    # an address that is not the local host, or one that answered, is not a missing local server
    assert verdict.connection_failures(output="AssertionError: 10.0.0.1:11211 not alive\n") == {}
    assert verdict.connection_failures(output="ok: localhost:11211 alive\n") == {}
    assert verdict.connection_failures(junit=b"<testsuite><testcase name='a'><failure message='x'/></testcase>"
                                             b"</testsuite>") == {}
    assert verdict.connection_failures(output="AssertionError\n") == {}


def test_shortfall_names_the_ratio_and_the_service():
    conn = verdict.connection_failures(junit=JUNIT)
    why = verdict.shortfall(level=4, pass_ratio=0.18, tests=suite(12, 54), l4_detail="", services_missing={},
                            conn=conn, provided=[])
    assert why.startswith("pass ratio 0.18 < 0.9 (12 of 66 tests passed); 2 of the 3 failing tests could not "
                          "connect to postgres (port 5432)")
    assert verdict.shortfall(level=3, pass_ratio=None, tests={}, l4_detail="the test run passed the 60s limit",
                             services_missing={}, conn={}, provided=[]) == \
        "L4 tests run failed: the test run passed the 60s limit"
    assert verdict.shortfall(level=4, pass_ratio=1.0, tests=suite(3, 0), l4_detail="", services_missing={},
                             conn={}, provided=[]) == ""


def test_the_import_check_takes_top_level_scripts_as_imported(tmp_path):
    """A repository's top-level scripts (flit's bootstrap_dev.py) parse sys.argv, or exit, when imported: the
    check must neither hand them the module names as arguments nor die with them. A package that exits on
    import still fails."""
    from envyard.setup.search import IMPORT_CHECK

    (tmp_path / "tool.py").write_text("import argparse\nargparse.ArgumentParser().parse_args()\n")
    (tmp_path / "runner.py").write_text("import sys\nsys.exit('usage: runner.py FILE')\n")
    # flit's bootstrap_dev.py installs when imported, and raises as root: a script, skipped
    (tmp_path / "bootstrap.py").write_text("raise RuntimeError('Installing packages as root is not recommended')\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", IMPORT_CHECK, "tool", "runner", "bootstrap", "pkg", "absent"], cwd="/",
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["tool runner pkg", "absent", "bootstrap(RuntimeError)"]
    # ... but not when nothing else imports, and never an ImportError
    r = subprocess.run([sys.executable, "-c", IMPORT_CHECK, "bootstrap"], cwd="/", env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0 and "not recommended" in r.stderr
    (tmp_path / "broken.py").write_text("import no_such_module_here\n")
    r = subprocess.run([sys.executable, "-c", IMPORT_CHECK, "broken", "pkg"], cwd="/", env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0 and "no_such_module_here" in r.stderr
    (tmp_path / "pkg" / "__init__.py").write_text("import sys\nsys.exit('this Python is not supported')\n")
    r = subprocess.run([sys.executable, "-c", IMPORT_CHECK, "pkg"], cwd="/", env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0 and "not supported" in r.stderr


def test_a_missing_display_is_described_as_one():
    conn = verdict.connection_failures(output='E   Xlib.error.DisplayNameError: Bad display name ""\n')
    assert verdict.describe_connection(conn, provided=[]).startswith(
        "1 lines of the output could not connect to an X display (xvfb)")
