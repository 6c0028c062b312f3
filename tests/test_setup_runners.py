"""`envyard setup` on projects whose tests pytest's default discovery does not find: their own runner, named
by their tox.ini / Makefile / manage.py, reaches L4 (real installs from PyPI into sandboxes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import envyard

from bareenv import BARE, cli_cwd

REPOS = Path(__file__).resolve().parent / "fixtures" / "repos"


def setup_cli(home, *args, timeout=900):
    env = {"ENVYARD_HOME": str(home), **BARE,
           "PYTHONPATH": str(Path(envyard.__file__).resolve().parents[1])}  # this checkout's envyard
    return subprocess.run([sys.executable, "-m", "envyard.cli.main", "setup", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=cli_cwd())


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    h = tmp_path_factory.mktemp("setup-runners-home")
    yield h
    subprocess.run([sys.executable, "-m", "envyard.cli.main", "gc"], env={**os.environ, "ENVYARD_HOME": str(h)},
                   capture_output=True)


def test_a_test_script_named_by_tox_reaches_l4_through_pytest(home, tmp_path):
    """decorator's layout: src/tests/test.py, run by tox as `python src/tests/test.py`; pytest's default
    discovery collects nothing, pytest over that file collects its unittest cases."""
    out = tmp_path / "contract"
    r = setup_cli(home, REPOS / "script_tests", "--name", "t/script", "--out", out, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True
    assert data["replay"]["statuses_same"] == 4
    assert "tox.ini:6" in data["levels"][3]["detail"] and "no tests collected" in data["levels"][3]["detail"]
    recipe = tomllib.loads((out / "envyard.toml").read_text())["recipe"]
    assert recipe["test_runner"] == "pytest" and recipe["test_source"] == "python src/tests/test.py"
    assert recipe["test_evidence"] == "tox.ini:6, tox.commands"
    assert "/opt/venv/bin/python -m pytest src/tests/test.py \"$@\"" in (out / "test.sh").read_text()


def test_a_tests_py_module_outside_pytests_pattern_is_named_to_pytest(home, tmp_path):
    """webencodings' layout: the suite is labelcodec/tests.py and nothing names a runner; pytest's default
    discovery collects nothing, pytest given the file collects it."""
    out = tmp_path / "contract"
    r = setup_cli(home, REPOS / "tests_py_module", "--name", "t/testspy", "--python", "3.11", "--out", out, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True, data["reason"]
    assert data["tests_total"] == 3 and data["replay"]["statuses_same"] == 3
    assert data["recipe"]["test_source"] == "pytest labelcodec/tests.py"
    assert "/opt/venv/bin/python -m pytest labelcodec/tests.py \"$@\"" in (out / "test.sh").read_text()


def test_test_scripts_a_readme_names_run_from_their_directory_with_per_test_statuses(home, tmp_path):
    """ply's layout: test/README says `$ python testtiny.py`; the script calls unittest.main() at import (pytest
    cannot collect it), imports a sibling input module and writes a table to the cwd. Run natively from test/
    with -v, each of its 3 tests gets a status."""
    out = tmp_path / "contract"
    r = setup_cli(home, REPOS / "readme_scripts", "--name", "t/readme", "--python", "3.11", "--out", out, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True, data["reason"]
    assert data["tests_total"] == 3, data["tests"]
    assert data["recipe"]["test_runner"] == "script" and data["recipe"]["test_evidence"] == \
        "test/README:3, readme.test-script"
    assert "cd test && /opt/venv/bin/python testtiny.py -v \"$@\"" in (out / "test.sh").read_text()


def test_tests_whose_server_refuses_root_run_as_an_ordinary_user(home, tmp_path):
    """testing.postgresql's way: a test helper runs initdb, which refuses root. Seen in the test run, the tests
    run again as nobody (writing in /tmp, $HOME and their own tree), and setup.sh, test.sh and the replay do
    the same. Without the repair 2 of 3 tests fail and the result is not verified. A pyenv interpreter (under
    /root, which only root may enter) where the machine has one: the test user must still reach it."""
    out = tmp_path / "contract"
    from envyard.setup import interpreters
    pyenv = sorted((i.version for i in interpreters.available() if i.provider.startswith("pyenv")),
                   key=lambda v: tuple(map(int, v.split("."))))
    python = pyenv[-1] if pyenv else "3.11"
    r = setup_cli(home, REPOS / "rootless_server", "--name", "t/rootless", "--python", python, "--out", out, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True, data["reason"]
    assert data["tests_total"] == 3 and data["replay"]["ok"] and data["replay"]["statuses_same"] == 3
    assert any("refused to run as root" in rep and "initdb: error: cannot be run as root" in rep
               for rep in data["repairs"]), data["repairs"]
    assert "/opt/envyard/bin/as-test-user /opt/venv/bin/python -m pytest" in (out / "test.sh").read_text()
    setup_sh = (out / "setup.sh").read_text()
    assert "setpriv --reuid=65534" in setup_sh and "chown -R nobody:nogroup ." in setup_sh


def test_running_the_tests_as_an_ordinary_user_is_rolled_back_when_it_does_worse(home, tmp_path):
    """The same refusal, but most of this suite needs root (it writes under /etc): as nobody the pass ratio
    drops, so the repair is rolled back and the contract runs the tests as root."""
    import shutil
    src = tmp_path / "rootless_server"
    shutil.copytree(REPOS / "rootless_server", src)
    (src / "tests" / "test_needs_root.py").write_text("".join(
        f"def test_writes_etc_{i}():\n    open('/etc/minipg-{i}.conf', 'w').write('x')\n\n\n" for i in range(4)))
    out = tmp_path / "contract"
    r = setup_cli(home, src, "--name", "t/needsroot", "--python", "3.11", "--out", out, "--json")
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 5 / 7, (data["pass_ratio"], data["reason"])
    assert not any("refused to run as root" in rep for rep in data["repairs"]), data["repairs"]
    assert "as-test-user" not in (out / "test.sh").read_text() and "setpriv" not in (out / "setup.sh").read_text()


def test_the_projects_runner_replaces_pytests_discovery_when_that_fails_most_tests(home, tmp_path):
    """testscenarios' layout: the Makefile runs `python -m testtools.run tests.test_scenarios`, whose load_tests
    runs each case once per scenario; pytest ignores load_tests and collects the cases unset (2 of 3 fail).
    L4 tries the project's runner and keeps it: 7 tests, all passing, and the replay agrees."""
    out = tmp_path / "contract"
    r = setup_cli(home, REPOS / "scenario_suite", "--name", "t/scen", "--python", "3.11", "--out", out, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True, data["reason"]
    assert data["recipe"]["test_runner"] == "unittest" and data["recipe"]["test_evidence"] == "Makefile:4, Makefile:check"
    l4 = data["levels"][-1]["detail"]
    assert "pytest's discovery: pass ratio 0.33 over 3 tests" in l4, l4
    assert data["replay"]["ok"] and data["replay"]["collected"] == 7
    assert "-m unittest -v tests.test_scenarios" in (out / "test.sh").read_text()


def test_tests_that_read_stdin_under_pytests_capture_run_again_with_s(home, tmp_path):
    """invoke's layout: tests that read stdin fail under pytest's output capture ("reading from stdin while output
    is captured! Consider using `-s`"). L4 runs them again with -s, keeps it (1 of 3 → 3 of 3), and test.sh has
    the flag, so the replay agrees."""
    src = tmp_path / "stdinreader"
    (src / "stdinreader").mkdir(parents=True)
    (src / "tests").mkdir()
    (src / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=61"]\n'
                                        'build-backend = "setuptools.build_meta"\n\n'
                                        '[project]\nname = "stdinreader"\nversion = "1.0"\n')
    (src / "stdinreader" / "__init__.py").write_text("def double(x):\n    return 2 * x\n")
    (src / "tests" / "test_io.py").write_text(
        "import sys\nfrom stdinreader import double\n\n\ndef test_double():\n    assert double(2) == 4\n\n\n"
        "def test_reads_stdin():\n    assert sys.stdin.read() == ''\n\n\n"
        "def test_reads_a_line():\n    assert sys.stdin.readline() == ''\n")
    out = tmp_path / "contract"
    r = setup_cli(home, src, "--name", "t/stdin", "--python", "3.11", "--out", out, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True, data["reason"]
    assert "with -s (under pytest's output capture: pass ratio 0.33)" in data["levels"][-1]["detail"]
    assert any("run with -s" in x for x in data["repairs"]), data["repairs"]
    assert data["replay"]["statuses_same"] == 3
    assert " -s " in (out / "test.sh").read_text()


def test_a_plugin_fixture_the_project_names_nowhere_is_installed(home, tmp_path):
    """Tests that use pytest-mock's `mocker` while the project declares no pytest-mock anywhere envyard reads
    fail with "fixture 'mocker' not found" (1 of 3 pass). L4 installs the plugin that provides it, runs the
    tests again and keeps it (3 of 3); the contract installs it, so the replay agrees."""
    src = tmp_path / "mockuser"
    (src / "mockuser").mkdir(parents=True)
    (src / "tests").mkdir()
    (src / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=61"]\n'
                                        'build-backend = "setuptools.build_meta"\n\n'
                                        '[project]\nname = "mockuser"\nversion = "1.0"\n')
    (src / "mockuser" / "__init__.py").write_text("import os\n\n\ndef home():\n    return os.getcwd()\n")
    (src / "tests" / "test_mock.py").write_text(
        "import os\nimport mockuser\n\n\ndef test_plain():\n    assert mockuser.home()\n\n\n"
        "def test_patched(mocker):\n    mocker.patch.object(os, 'getcwd', return_value='/x')\n"
        "    assert mockuser.home() == '/x'\n\n\n"
        "def test_spy(mocker):\n    spy = mocker.spy(os, 'getcwd')\n    mockuser.home()\n    assert spy.call_count == 1\n")
    out = tmp_path / "contract"
    r = setup_cli(home, src, "--name", "t/mocker", "--python", "3.11", "--out", out, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True, data["reason"]
    assert any("fixtures mocker (pass ratio 0.33): installed pytest-mock" in x for x in data["repairs"]), data["repairs"]
    assert "pytest-mock" in (out / "setup.sh").read_text()


def _data_project(root, script: str):
    """babel's layout: the package reads data a script of the project generates, which the Makefile's test
    target runs first (`test: import-cldr`); a checkout has no data."""
    (root / "dataread").mkdir(parents=True)
    (root / "scripts").mkdir()
    (root / "tests").mkdir()
    (root / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=61"]\n'
                                         'build-backend = "setuptools.build_meta"\n\n'
                                         '[project]\nname = "dataread"\nversion = "1.0"\n')
    (root / "dataread" / "__init__.py").write_text(
        "import json, pathlib\n\nDATA = json.loads((pathlib.Path(__file__).parent / 'data.json').read_text())\n")
    (root / "scripts" / "make_data.py").write_text(script)
    (root / "Makefile").write_text("test: make-data\n\tpython -m pytest\n\nmake-data:\n\tpython scripts/make_data.py\n\n"
                                   "clean:\n\trm -f dataread/data.json\n")
    (root / "tests" / "test_data.py").write_text("from dataread import DATA\n\n\ndef test_data():\n"
                                                 "    assert DATA == {'en': 'English'}\n")
    return root


def test_data_the_test_target_prepares_is_made_when_the_project_fails_without_it(home, tmp_path):
    """The import fails inside the project (no data.json); the Makefile's test target first runs
    scripts/make_data.py: it runs as a step of the contract, and the tests pass (verified, so the replay ran it)."""
    src = _data_project(tmp_path / "dataread", "import json, pathlib\n"
                        "pathlib.Path('dataread/data.json').write_text(json.dumps({'en': 'English'}))\n")
    out = tmp_path / "contract"
    r = setup_cli(home, src, "--name", "t/prepare", "--python", "3.11", "--out", out, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True, data["reason"]
    assert any("its test target prepares first: ran `python scripts/make_data.py`" in x for x in data["repairs"])
    assert "python scripts/make_data.py" in (out / "setup.sh").read_text()


def test_a_preparation_that_fails_is_named_in_the_reason(home, tmp_path):
    """babel's import-cldr downloads from unicode.org, which this machine cannot reach: the project bug the
    tests meet is reported with the preparation that failed and why."""
    src = _data_project(tmp_path / "dataread", "raise SystemExit('cannot download the data: no network')\n")
    r = setup_cli(home, src, "--name", "t/prepare-fails", "--python", "3.11", "--json")
    assert r.returncode == 1, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["reason"].startswith("project bug"), data["reason"]
    assert ("the tests' preparation `python scripts/make_data.py` (`make make-data` (Makefile:4)) failed here: "
            "cannot download the data: no network") in data["reason"], data["reason"]


def test_a_name_from_a_guarded_import_is_a_missing_module_not_a_bug(home, tmp_path):
    """mccabe's layout: the test module imports an optional library inside `try: ... except ImportError: pass`
    and uses a name from it at module level, and nothing declares it: collection fails with a NameError in
    the project's code. The guarded module is installed, as a repair, instead of a project bug being reported."""
    src = tmp_path / "guarded"
    (src / "guarded").mkdir(parents=True)
    (src / "tests").mkdir()
    (src / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=61"]\n'
                                        'build-backend = "setuptools.build_meta"\n\n'
                                        '[project]\nname = "guarded"\nversion = "1.0"\n')
    (src / "guarded" / "__init__.py").write_text("def same(x):\n    return x\n")
    (src / "tests" / "test_guarded.py").write_text(
        "from guarded import same\ntry:\n    from toolz import identity\nexcept ImportError:\n    pass\n\n"
        "ID = identity\n\n\ndef test_same():\n    assert same(3) == ID(3)\n")
    r = setup_cli(home, src, "--name", "t/guarded", "--python", "3.11", "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True, data["reason"]
    assert any("toolz is provided by toolz" in x for x in data["repairs"]), data["repairs"]


def test_the_projects_wider_file_pattern_collects_the_whole_suite(home, tmp_path):
    """pika's layout: nose2.cfg's `test-file-pattern = *test*.py`. pytest's default discovery collects 1 test
    (test_import.py) and would be judged alone; the project's runner finds channel_tests.py too, and is kept."""
    out = tmp_path / "contract"
    r = setup_cli(home, REPOS / "nose2_pattern", "--name", "t/nose2", "--python", "3.11", "--out", out, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True, data["reason"]
    assert data["tests_total"] == 4 and data["replay"]["statuses_same"] == 4
    assert data["recipe"]["test_source"] == "nose2 {posargs}"
    assert "more than pytest (its default discovery) collects (1 tests)" in data["levels"][3]["detail"], data["levels"][3]
    assert "-m pytest tests -o 'python_files=*test*.py' \"$@\"" in (out / "test.sh").read_text()


def test_a_unittest_suite_pytest_cannot_import_runs_with_unittest(home, tmp_path):
    """checks/*_test.py import a sibling module as top-level, which only `unittest discover -s checks` (the
    Makefile's command) allows: pytest's collection errors out, unittest lists and runs the 4 tests."""
    out = tmp_path / "contract"
    r = setup_cli(home, REPOS / "unittest_checks", "--name", "t/checks", "--out", out, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True
    assert data["tests"] == {"count_test.CountTest::test_all": "passed", "count_test.CountTest::test_later": "skipped",
                             "count_test.CountTest::test_truthy": "passed", "empty_test.EmptyTest::test_empty": "passed"}
    assert data["recipe"]["test_runner"] == "unittest" and data["recipe"]["test_evidence"] == "Makefile:2, Makefile:test"
    assert data["replay"]["statuses_same"] == 4
    assert "-m unittest discover -s checks -p '*_test.py' -v" in (out / "test.sh").read_text()


def test_a_django_project_runs_manage_py_test(home, tmp_path):
    out = tmp_path / "contract"
    r = setup_cli(home, REPOS / "django_app", "--name", "t/django", "--out", out, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True
    assert data["recipe"]["test_runner"] == "django"
    assert sorted(data["tests"]) == ["polls.tests.QuestionTests::test_empty", "polls.tests.QuestionTests::test_saved",
                                     "polls.tests.TruthTests::test_truth"]
    assert data["replay"]["statuses_same"] == 3
    assert "manage.py test --noinput -v 2" in (out / "test.sh").read_text()


@pytest.mark.parametrize("addopts", ["", "addopts = -q\n"])
def test_a_collection_is_counted_also_when_the_projects_addopts_quiet_it_further(tmp_path, addopts):
    """requests-toolbelt's tox.ini has `[pytest] addopts = -q`: with envyard's own -q, pytest prints one count
    per file (`tests/test_a.py: 2`) and no summary, which was read as "no tests collected"."""
    from envyard.setup.runners import COLLECT_FLAGS
    from envyard.setup.search import collected_count

    (tmp_path / "tox.ini").write_text("[tox]\nenvlist = py3\n\n[pytest]\n" + addopts)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    (tmp_path / "tests" / "test_b.py").write_text("def test_three():\n    pass\n")
    r = subprocess.run([sys.executable, "-m", "pytest", *COLLECT_FLAGS.split()], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert collected_count(r.stdout) == 3, r.stdout


def test_colour_a_project_forces_is_taken_out_of_the_output_setup_reads(tmp_path):
    """dask's addopts say `--color=yes`: pytest then colours its output even into a pipe. Setup reads command
    output through `without_escapes`, so line-anchored parsers (where a run was interrupted, counts, errors) see
    plain text; the rest of the result is kept."""
    from envyard.runtime.result import ExecResult
    from envyard.setup.runners import COLLECT_FLAGS
    from envyard.setup.search import collected_count, without_escapes

    (tmp_path / "tox.ini").write_text("[pytest]\naddopts = --color=yes\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_one():\n    pass\n\n\ndef test_two():\n    assert 0\n")
    runs = [subprocess.run([sys.executable, "-m", "pytest", *flags], cwd=tmp_path, capture_output=True, timeout=120)
            for flags in (COLLECT_FLAGS.split(), ["-q", "-p", "no:cacheprovider"])]
    assert all(b"\x1b[" in r.stdout for r in runs)  # coloured, though not a terminal
    collect, run = (without_escapes(ExecResult(r.returncode, r.stdout, b"err", 1.5, timed_out=True)) for r in runs)
    assert "\x1b" not in collect.stdout + run.stdout and collected_count(collect.stdout) == 2, collect.stdout
    assert any(line.startswith("E       assert 0") for line in run.stdout.splitlines()), run.stdout
    assert (run.exit_code, run.stderr, run.duration, run.timed_out) == (1, "err", 1.5, True)
    plain = ExecResult(0, b"ok\n", b"", 0.1)
    assert without_escapes(plain) is plain
