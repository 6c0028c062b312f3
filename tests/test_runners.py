"""The project's own test runner (envyard.setup.runners): which commands from the evidence become runners, how
they are rebuilt, and how their output turns into per-test statuses. Pure functions, no sandbox."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bareenv import sigint_default

from envyard.setup.evidence import gather
from envyard.setup.runners import (INTERRUPTED_EXIT, PY, Runner, default_runner, from_command, interrupting,
                                   listed_count, native_results, parse_verbose, runners)
from envyard.setup.search import parse_junit
from envyard.setup.sources import shell

REPOS = Path(__file__).resolve().parent / "fixtures" / "repos"


def kinds(rs):
    return [(r.kind, r.command) for r in rs]


def test_a_tox_test_script_is_run_through_pytest_then_as_a_script():
    rs = runners(gather(REPOS / "script_tests"))
    assert kinds(rs) == [("pytest", f"{PY} -m pytest"),
                         ("pytest", f"{PY} -m pytest src/tests/test.py"),
                         ("script", f"{PY} src/tests/test.py -v")]  # -v: unittest.main() prints each test
    assert rs[1].collect == f"{PY} -m pytest src/tests/test.py --collect-only -q -p no:cacheprovider"
    assert rs[2].collect is None  # a script cannot list its tests: L3 runs it
    assert rs[1].source == "python src/tests/test.py" and rs[1].evidence == "tox.ini:6, tox.commands"
    assert "run through pytest" in rs[1].label and "tox.ini:6" in rs[2].label


def test_a_unittest_discover_line_in_a_makefile():
    rs = runners(gather(REPOS / "unittest_checks"))
    assert rs[0] == default_runner()
    assert rs[1].kind == "pytest" and rs[1].command == f"{PY} -m pytest checks -o 'python_files=*_test.py'"
    native = rs[2]
    assert native.kind == "unittest"
    assert native.command == f"{PY} -m unittest discover -s checks -p '*_test.py' -v"
    assert native.collect.startswith(f"{PY} -c ") and native.collect.endswith("discover checks '*_test.py' ''")
    assert native.evidence == "Makefile:2, Makefile:test"
    assert not [r for r in rs if "make" in r.command]  # `make test` itself is never run


def test_nose2s_own_file_pattern_makes_a_wider_runner(tmp_path):
    """pika runs `nose2` with nose2.cfg's `test-file-pattern = *test*.py`: its channel_tests.py and most of its
    suite are names pytest's default pattern skips. The runner pytest builds from it says it finds more."""
    rs = runners(gather(REPOS / "nose2_pattern"))
    assert kinds(rs) == [("pytest", f"{PY} -m pytest"), ("pytest", f"{PY} -m pytest tests -o 'python_files=*test*.py'")]
    assert not rs[0].wider and rs[1].wider and rs[1].source == "nose2 {posargs}"
    assert rs[1].evidence == "tox.ini:6, tox.commands"
    # the same pattern over files pytest's default already finds is not wider; a path on the command line wins
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_a(): pass\n")
    (tmp_path / "nose2.cfg").write_text("[unittest]\nstart-dir = tests\ntest-file-pattern = *test*.py\n")
    assert [(r.command, r.wider) for r in from_command("nose2", tmp_path, "x:1, rule")] == \
        [(f"{PY} -m pytest tests -o 'python_files=*test*.py'", False)]
    assert from_command("nose2 tests", tmp_path, "x:1, rule")[0].command == f"{PY} -m pytest tests"
    # a start dir outside the repository or a pattern with shell syntax: pytest's defaults
    (tmp_path / "nose2.cfg").write_text("[unittest]\nstart-dir = ../..\ntest-file-pattern = *test*.py\n")
    assert from_command("nose2", tmp_path, "x:1, rule")[0].command == f"{PY} -m pytest"
    (tmp_path / "nose2.cfg").write_text("[unittest]\ntest-file-pattern = *$(id).py\n")
    assert from_command("nose2", tmp_path, "x:1, rule")[0].command == f"{PY} -m pytest"


def test_a_unittest_pattern_is_wider_only_when_it_finds_files_pytest_would_not(tmp_path):
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "sum_check.py").write_text("")
    wide = from_command("python -m unittest discover -s checks -p '*_check.py'", tmp_path, "x:1, rule")
    narrow = from_command("python -m unittest discover -s checks -p 'test_*.py'", tmp_path, "x:1, rule")
    assert (wide[0].kind, wide[0].wider) == ("pytest", True) and not narrow[0].wider
    assert not wide[1].wider  # the native unittest runner is tried only when pytest's form fails


def test_a_self_running_unittest_script_outside_pytests_pattern_is_a_test_command(tmp_path):
    """decorator's sdist: tests/test.py ends with `unittest.main()`; no tox, CI or pytest configuration names it,
    and pytest's default discovery (test_*.py, *_test.py) collects nothing."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'd'\nversion = '1'\n")
    (tmp_path / "tests" / "test.py").write_text(
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n\n"
        "if __name__ == '__main__':\n    unittest.main()\n")
    (tmp_path / "tests" / "helper_test_data.py").write_text("X = 1\n")  # no unittest.main(): not a runner
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "run_testlike.py").write_text("import unittest\nif __name__ == '__main__':\n    unittest.main()\n")
    rs = runners(gather(tmp_path))
    assert kinds(rs) == [("pytest", f"{PY} -m pytest"), ("pytest", f"{PY} -m pytest tests/test.py"),
                         ("script", f"{PY} tests/test.py -v")]
    assert rs[1].evidence == "tests/test.py:8, unittest.main"


def test_a_test_directorys_readme_names_scripts_run_from_there(tmp_path):
    """ply's test/README: `$ python testlex.py`; the scripts call unittest.main() unguarded and put `..` on
    sys.path, so they run from test/ (natively with -v, so each test has a status). A named script that does
    not exist, a non-test script, and a README outside a test directory give nothing."""
    (tmp_path / "test").mkdir()
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='p')\n")
    (tmp_path / "test" / "README").write_text(
        "To run:\n\n  $ python testlex.py\n  $ python3 testgone.py\n  $ python cleanup.py\n")
    (tmp_path / "test" / "testlex.py").write_text(
        "import sys, unittest\nsys.path.insert(0, '..')\nclass T(unittest.TestCase):\n"
        "    def test_a(self):\n        pass\nunittest.main()\n")
    (tmp_path / "test" / "cleanup.py").write_text("")
    (tmp_path / "README.md").write_text("    $ python test/testlex.py\n")
    rs = runners(gather(tmp_path))
    assert kinds(rs) == [("pytest", f"{PY} -m pytest"), ("pytest", f"cd test && {PY} -m pytest testlex.py"),
                         ("script", f"cd test && {PY} testlex.py -v")]
    assert rs[2].evidence == "test/README:3, readme.test-script"


def test_a_script_with_its_own_options_gets_no_verbose_flag(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "runtests.py").write_text(
        "import argparse, unittest\nif __name__ == '__main__':\n    argparse.ArgumentParser().parse_args()\n"
        "    unittest.main()\n")
    rs = from_command("python tests/runtests.py", tmp_path, "x")
    assert kinds(rs)[-1] == ("script", f"{PY} tests/runtests.py")


def test_a_runtests_script_that_hands_over_to_djangos_test_command_is_a_django_runner(tmp_path):
    """django-filter's runtests.py calls `execute_from_command_line(argv[:1] + ["test"] + argv[1:])`: Django's
    options (`--noinput -v 2`, for per-test statuses) go to it; an option's value is not taken for a label."""
    (tmp_path / "runtests.py").write_text(
        "import os, sys\nfrom django.core.management import execute_from_command_line\n\n"
        "def runtests():\n    os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'tests.settings')\n"
        "    execute_from_command_line(sys.argv[:1] + ['test'] + sys.argv[1:])\n")
    (tmp_path / "run_tests_plain.py").write_text("import sys\nsys.exit(0)\n")
    rs = from_command("python -Werror ./runtests.py --testrunner xmlrunner.extra.XMLTestRunner tests.test_views",
                      tmp_path, "tox.ini:46, tox.commands")
    assert kinds(rs) == [("django", f"{PY} ./runtests.py --noinput -v 2 tests.test_views")]
    assert rs[0].collect is None  # Django cannot list its tests: L3 runs them
    assert [r.kind for r in from_command("python run_tests_plain.py", tmp_path, "Makefile:2")] == ["pytest", "script"]


def test_testtools_and_subunit_runners_run_through_unittest(tmp_path):
    """`python -m testtools.run NAMES` (testtools, testscenarios) takes unittest's arguments; unittest itself
    runs them, for its per-test verbose lines. A Makefile's `$(PYTHON)` is the interpreter."""
    for command in ("python -m testtools.run pkg.tests.test_suite", "$(PYTHON) -m subunit.run pkg.tests.test_suite"):
        rs = from_command(command, tmp_path, "Makefile:4, Makefile:check")
        assert [r.kind for r in rs] == ["unittest"] and rs[0].command == f"{PY} -m unittest -v pkg.tests.test_suite"
    assert shell.classify("PYTHONPATH=. $(PYTHON) -m testtools.run x.test_suite").runner == "unittest"


def test_django_runs_first_when_nothing_names_pytest():
    rs = runners(gather(REPOS / "django_app"))
    assert kinds(rs) == [("django", f"{PY} manage.py test --noinput -v 2"), ("pytest", f"{PY} -m pytest"),
                         ("pytest", f"{PY} -m pytest polls/tests.py")]  # a tests.py module, named to pytest
    assert rs[0].collect is None and rs[0].evidence == "manage.py:7, django.manage.py"


def test_a_pytest_project_keeps_pytest_first_and_its_paths():
    rs = runners(gather(REPOS / "toxnox"))
    assert rs[0] == default_runner()
    assert ("pytest", f"{PY} -m pytest tests") in kinds(rs)  # `pytest {posargs:tests}` from tox.ini


@pytest.mark.parametrize("command, kind, rebuilt", [
    ("python -m pytest tests --cov=x -x", "pytest", f"{PY} -m pytest tests"),
    ("{envpython} -m pytest {toxinidir}/tests {posargs}", "pytest", f"{PY} -m pytest tests"),
    ("coverage run -m pytest --doctest-modules pkg", "pytest", f"{PY} -m pytest pkg --doctest-modules"),
    ("poetry run pytest", "pytest", f"{PY} -m pytest"),
    ("nosetests -v tests", "pytest", f"{PY} -m pytest tests"),
    ("python -m unittest discover -s tests -p 'check_*.py'", "pytest", f"{PY} -m pytest tests -o 'python_files=check_*.py'"),
    ("python -m unittest discover tests '*_test.py'", "pytest", f"{PY} -m pytest tests -o 'python_files=*_test.py'"),
    ("python -m unittest tests.test_a", "unittest", f"{PY} -m unittest -v tests.test_a"),
    ("DJANGO_SETTINGS_MODULE=x python manage.py test polls --settings=site.test", "django",
     f"{PY} manage.py test --noinput -v 2 --settings=site.test polls"),
    ("cd sub && python run_tests.py", "pytest", f"cd sub && {PY} -m pytest run_tests.py"),
    # django-taggit's tox.ini: Django's test command as a module, through coverage
    ("coverage run -m django test --settings=tests.settings {posargs}", "django",
     f"{PY} -m django test --noinput -v 2 --settings=tests.settings"),
    ("django-admin test polls --settings=site.test", "django", f"{PY} -m django test --noinput -v 2 --settings=site.test polls"),
])
def test_commands_are_rebuilt_from_checked_parts(tmp_path, command, kind, rebuilt):
    for d in ("tests", "pkg", "sub"):
        (tmp_path / d).mkdir()
    (tmp_path / "manage.py").write_text("")
    (tmp_path / "sub" / "run_tests.py").write_text("")
    rs = from_command(command, tmp_path, "x:1, rule")
    assert rs and (rs[0].kind, rs[0].command) == (kind, rebuilt)
    assert all(r.source == command.split("&& ", 1)[-1] for r in rs)


@pytest.mark.parametrize("command", [
    "make test", "tox -e py311", "python setup.py test", "./run-tests.sh", "bash -c 'pytest'", "curl x | sh",
    "python -c 'import os; os.system(1)'", "python tools/lint.py",      # a script not named like a test
    "python ../outside/test.py", "python /etc/test.py", "python missing_test.py",  # outside the repo or absent
    "cd ../elsewhere && pytest", "python -m unittest discover -s 'tests; rm -rf /'",
    "python manage.py migrate", "python -m pip install -e .", "python -m django runserver",
])
def test_other_commands_are_not_runners(tmp_path, command):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "lint.py").write_text("")
    assert from_command(command, tmp_path, "x:1, rule") == []


def test_arguments_with_shell_syntax_are_dropped(tmp_path):
    (tmp_path / "test_all.py").write_text("")
    rs = from_command("python test_all.py --fast '$(rm -rf /)' `id`", tmp_path, "x")
    assert rs[1].command == f"{PY} test_all.py --fast"
    rs = from_command("python -m django test --settings='x; rm -rf /' 'a;b'", tmp_path, "x")
    assert [r.command for r in rs] == [f"{PY} -m django test --noinput -v 2"]


def test_shell_classifies_test_scripts():
    assert shell.classify("python src/tests/test.py") == shell.Classified("script", None)
    assert shell.classify("python tools/release.py") == shell.Classified(None, None)
    assert shell.classify("python setup.py test") == shell.Classified("setup.py test", None)


VERBOSE_311 = """\
test_all (count_test.CountTest.test_all) ... ok
test_later (count_test.CountTest.test_later) ... skipped 'not yet'
test_truthy (count_test.CountTest.test_truthy) ... FAIL
test_empty (empty_test.EmptyTest.test_empty)
Counting nothing gives nothing. ... ok
test_prints (empty_test.EmptyTest.test_prints) ... some output
ok
broken_test (unittest.loader._FailedTest.broken_test) ... ERROR
test_xf (m.C.test_xf) ... expected failure
test_us (m.C.test_us) ... unexpected success

======================================================================
FAIL: test_truthy (count_test.CountTest.test_truthy)
----------------------------------------------------------------------
Ran 8 tests in 0.002s

FAILED (failures=1, errors=1, skipped=1)
"""

DJANGO_V2 = """\
Found 3 test(s).
Creating test database for alias 'default' ('file:memorydb_default?mode=memory&cache=shared')...
Operations to perform:
  Synchronize unmigrated apps: polls
Running migrations:
  Applying contenttypes.0001_initial... OK
System check identified no issues (0 silenced).
test_empty (polls.tests.QuestionTests) ... ok
test_saved (polls.tests.QuestionTests) ... ok
test_truth (polls.tests.TruthTests) ... ok

----------------------------------------------------------------------
Ran 3 tests in 0.004s

OK
Destroying test database for alias 'default' ('file:memorydb_default?mode=memory&cache=shared')...
"""


def test_unittest_verbose_output_gives_per_test_statuses():
    assert parse_verbose(VERBOSE_311) == {
        "count_test.CountTest::test_all": "passed", "count_test.CountTest::test_later": "skipped",
        "count_test.CountTest::test_truthy": "failed", "empty_test.EmptyTest::test_empty": "passed",
        "empty_test.EmptyTest::test_prints": "passed", "unittest.loader._FailedTest::broken_test": "error",
        "m.C::test_xf": "skipped", "m.C::test_us": "failed"}


def test_django_verbose_output_before_and_after_311_gives_the_same_ids():
    assert parse_verbose(DJANGO_V2) == {"polls.tests.QuestionTests::test_empty": "passed",
                                        "polls.tests.QuestionTests::test_saved": "passed",
                                        "polls.tests.TruthTests::test_truth": "passed"}
    newer = DJANGO_V2.replace("(polls.tests.QuestionTests)", "(polls.tests.QuestionTests.XX)")
    newer = "\n".join(l.replace("XX", l.split()[0]) if "XX" in l else l for l in newer.splitlines())
    assert parse_verbose(newer) == parse_verbose(DJANGO_V2)


def test_a_script_without_unittest_output_is_one_test_by_its_exit_code():
    script = Runner("script", f"cd sub && {PY} tests/test.py", None, "python tests/test.py", "tox.ini:3")
    assert native_results(script, "all good\n", 0) == {"tests/test.py::main": "passed"}
    assert native_results(script, "Traceback ...\n", 1) == {"tests/test.py::main": "failed"}
    assert native_results(script, "test_a (m.C.test_a) ... ok\n", 1) == {"m.C::test_a": "passed"}
    django = Runner("django", f"{PY} manage.py test", None)
    assert native_results(django, "ImproperlyConfigured\n", 1) == {}


def test_the_unittest_lister_output_is_counted():
    assert listed_count("count_test.CountTest.test_all\nempty_test.EmptyTest.test_empty\n") == 2
    assert listed_count("") == 0


def test_a_servers_refusal_of_root_is_found_and_the_runner_wrapped():
    from envyard.setup import testuser

    out = "E   RuntimeError: initdb failed: b'initdb: error: cannot be run as root\\n'\nmore"
    assert testuser.refusal(out) == "E   RuntimeError: initdb failed: b'initdb: error: cannot be run as root\\n'"
    assert testuser.refusal('postgres: "root" execution of the PostgreSQL server is not permitted.')
    assert testuser.refusal("[ERROR] Fatal error: Please consult the Knowledge Base to find out how to run mysqld "
                            "as root!")
    assert testuser.refusal("FATAL: role \"root\" does not exist") is None  # a client's error, not a refusal
    w = testuser.WRAPPER
    assert testuser.wrap(f"cd test && {PY} t.py -v") == f"cd test && {w} {PY} t.py -v"
    assert testuser.wrap(f"{PY} -m pytest") == f"{w} {PY} -m pytest"
    assert testuser.wrap(testuser.wrap(f"{PY} -m pytest")) == f"{w} {PY} -m pytest"  # once
    assert testuser.wrap(None) is None
    assert "chown -R nobody:nogroup ../.." in testuser.step("../..").command


def test_a_run_past_its_limit_is_interrupted_and_still_reports_the_tests_that_ran(tmp_path):
    """pytest, sent SIGINT shortly before the limit, writes its JUnit XML for the tests that ran; the one it
    was in is left out; the shell around it carries on. Killed at the limit instead, it would leave no XML."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_ok():\n    pass\n\n\ndef test_bad():\n    assert 0\n")
    (tmp_path / "tests" / "test_hang.py").write_text("import time\n\n\ndef test_hang():\n    time.sleep(600)\n")
    junit = tmp_path / "junit.xml"
    # a 20 s limit: interrupted at 18 s, killed 1.6 s later (pytest's report must fit in that on a busy machine)
    command, at = interrupting(f"cd {tmp_path} && {PY} -m pytest -q -p no:cacheprovider --junitxml={junit}", 20)
    assert at < 20 and command.startswith(f"cd {tmp_path} && timeout -s INT ")
    # timeout signals its command and its group: a shell with a no-op trap takes the first copy, so pytest gets
    # one SIGINT, not a second one in the middle of writing its report
    assert f"sh -c 'trap : INT; {PY} -m pytest" in command
    # SIGINT at its default, as in a sandbox (a CI script's `nohup pytest &` would leave it ignored here)
    r = subprocess.run(["sh", "-c", command.replace(PY, sys.executable) + "; echo after $?"],
                       capture_output=True, text=True, timeout=60, preexec_fn=sigint_default)
    assert r.stdout.rstrip().endswith(f"after {INTERRUPTED_EXIT}"), r.stdout[-2000:]
    assert "tests/test_hang.py:5: KeyboardInterrupt" in r.stdout
    assert parse_junit(junit.read_bytes()) == {"tests.test_a::test_ok": "passed", "tests.test_a::test_bad": "failed"}


def test_a_command_without_the_venvs_python_is_left_as_it_is():
    assert interrupting("make check", 600) == ("make check", 600)


def test_pytest_keeps_its_cache_plugin_when_the_projects_addopts_use_it(tmp_path):
    """async-lru's addopts say `--cache-clear`: with `-p no:cacheprovider` pytest refuses the run (unrecognized
    arguments, exit 4). Such a project's pytest commands keep the plugin, its cache in /tmp, not the tree; a
    real pytest collects and runs that way, and leaves no .pytest_cache behind."""
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = demo\n\n[tool:pytest]\naddopts = -s --cache-clear\n")
    (tmp_path / "Makefile").write_text("test:\n\tpytest tests\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    rs = runners(gather(tmp_path))
    assert [r.command for r in rs if r.kind == "pytest"] == [f"{PY} -m pytest -o cache_dir=/tmp/envyard-pytest-cache",
                                                             f"{PY} -m pytest -o cache_dir=/tmp/envyard-pytest-cache tests"]
    assert all("no:cacheprovider" not in f"{r.collect} {r.run('/tmp/j.xml')}" for r in rs)
    for command in (rs[0].collect, rs[0].run(str(tmp_path / "j.xml"))):
        local = command.replace(PY, sys.executable).replace("/tmp/envyard-pytest-cache", str(tmp_path / "c"))
        r = subprocess.run(local, shell=True, cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    assert not (tmp_path / ".pytest_cache").exists()
    plain = runners(gather(REPOS / "script_tests"))[0]   # without such options the plugin stays off
    assert plain.collect.endswith("-p no:cacheprovider") and "-p no:cacheprovider" in plain.run("/tmp/j.xml")
