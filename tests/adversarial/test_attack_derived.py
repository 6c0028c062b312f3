"""Attacks on the verifier of a derived bug task (`envyard derive`, docs/derive.md): an agent that does not fix
the bug tries to make the project's own test run report success. The task carries the project tree (the
workdir), and its verifier runs pytest there, so everything pytest reads from that tree is a way in: conftest
files, pytest's configuration, plugins named there, the hidden test files' places, and the code under test.

Each attack scores 0; the honest fix (the task's own solution) scores 1. The in-process attacks (code that the
tests import patches pytest) are not preventable by filtering files — they are documented as strict xfails, so
the day they are stopped the marks must go."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import envyard
from conftest import Scripted
from envyard.envs import load_task, run_episode

from bareenv import BARE, cli_cwd

SRC = str(Path(__file__).resolve().parents[2] / "src")
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "derive" / "minilib"

# A pytest plugin that reports every test as passed, and one that drops the tests it would run.
PASS_ALL = ("import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
            "    outcome = yield\n    r = outcome.get_result()\n    r.outcome = 'passed'\n    r.longrepr = None\n")
DROP_ALL = "def pytest_collection_modifyitems(config, items):\n    items[:] = []\n"
# Code under test that, once imported by a test module, makes every later report a pass.
IN_PROCESS = ("\ntry:\n    from _pytest.reports import TestReport as _R\n    _f = _R.from_item_and_call.__func__\n"
              "    def _pass(cls, item, call):\n        r = _f(cls, item, call)\n        r.outcome = 'passed'\n"
              "        r.longrepr = None\n        return r\n    _R.from_item_and_call = classmethod(_pass)\n"
              "except Exception:\n    pass\n")
# A module named like one pytest (or a plugin of the image) imports, new in the workdir (on sys.path first for
# `python -m pytest`): it patches pytest, then hands over to the real one. With minilib's pytest 9.2 these two
# score 0 even unfiltered (it imports pygments and packaging lazily, after the reports); a plugin importing one
# at start (hypothesis imports `attr`) made the same attack pass every test on the host.
SHADOW = IN_PROCESS + ("import importlib as _i, os as _o, sys as _s\n_s.modules.pop(__name__)\n"
                       "_d = _o.path.dirname(_o.path.dirname(_o.path.abspath(__file__)))\n_p = _s.path[:]\n"
                       "_s.path[:] = [x for x in _p if _o.path.abspath(x or '.') != _d]\n"
                       "_s.modules[__name__] = _i.import_module(__name__)\n_s.path[:] = _p\n")
# Code under test that writes a JUnit report of its own as the run ends (pytest's exit status stays 1).
FAKE_JUNIT = ("\nimport atexit as _a, sys as _s\ndef _forge():\n    ids = {ids}\n"
              "    cases = ''.join('<testcase classname=\"%s\" name=\"%s\"/>' % tuple(i.split('::', 1)) for i in ids)\n"
              "    open('/tmp/envyard-derive-junit.xml', 'w')"
              ".write('<testsuites><testsuite>%s</testsuite></testsuites>' % cases)\n"
              "if 'pytest' in _s.modules:\n    _a.register(_forge)\n")


def cli(home, *args, timeout=900):
    return subprocess.run([sys.executable, "-m", "envyard.cli.main", *map(str, args)], capture_output=True,
                          text=True, env={"ENVYARD_HOME": str(home), **BARE, "PYTHONPATH": SRC},
                          timeout=timeout, cwd=cli_cwd())


@pytest.fixture(scope="module")
def derived(tmp_path_factory):
    """One bug task derived from the minilib fixture (which has a tests/conftest.py of its own), and a Yard."""
    home = tmp_path_factory.mktemp("derived-attack-home")
    r = cli(home, "setup", FIXTURE, "--name", "setup/minilib", "--out", home / "contract", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    out = tmp_path_factory.mktemp("derived-attack") / "tasks"
    r = cli(home, "derive", "setup/minilib", "--kind", "bug", "--n", "1", "--seed", "1", "--out", out, "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    task_dir = out / json.loads(r.stdout)["tasks"][0]["name"]
    with envyard.Yard(home) as yard:
        yield yard, task_dir
    cli(home, "gc")


def play(derived, *commands):
    yard, task_dir = derived
    return run_episode(yard, load_task(task_dir), Scripted(*commands))


def meta(task_dir):
    return tomllib.loads((task_dir / "task.toml").read_text())


def wd(task_dir):
    return meta(task_dir)["environment"]["workdir"]


def write(path: str, text: str, append: bool = False) -> str:
    return f"mkdir -p {shlex.quote(str(Path(path).parent))} && printf '%s' {shlex.quote(text)} " \
           f"{'>>' if append else '>'} {shlex.quote(path)}"


def test_the_honest_fix_scores_one_and_doing_nothing_zero(derived):
    _, task_dir = derived
    ep = play(derived, (task_dir / "solution" / "solve.sh").read_text())
    assert (ep.reward, ep.infra_error) == (1.0, None), ep
    assert play(derived).reward == 0.0


def test_the_honest_fix_with_harmless_extras_scores_one(derived):
    """A fix that also adds a test module and a helper file keeps its reward."""
    _, task_dir = derived
    w = wd(task_dir)
    ep = play(derived, (task_dir / "solution" / "solve.sh").read_text(),
              write(f"{w}/tests/test_extra.py", "def test_extra():\n    assert True\n"),
              write(f"{w}/NOTES.md", "fixed\n"))
    assert (ep.reward, ep.infra_error) == (1.0, None), ep


def _attacks(w: str, hidden: str) -> dict[str, list[str]]:
    plug = write(f"{w}/winplug.py", PASS_ALL)
    return {
        # 1. a new conftest.py (top level, in the tests dir, nested in a package) that turns failures into passes
        "new-conftest-top": [write(f"{w}/conftest.py", PASS_ALL)],
        "new-conftest-tests": [write(f"{w}/tests/sub/conftest.py", PASS_ALL),
                               write(f"{w}/tests/sub/test_x.py", "def test_x():\n    pass\n")],
        "new-conftest-drops-tests": [f"rm -f {w}/tests/conftest.py", write(f"{w}/tests/conftest.py", DROP_ALL)],
        # 2. the project's own conftest.py, changed or replaced
        "changed-conftest": [write(f"{w}/tests/conftest.py", "\n" + PASS_ALL, append=True)],
        "replaced-conftest": [f"rm {w}/tests/conftest.py && ln -s ../winplug.py {w}/tests/conftest.py", plug],
        # 3. pytest's configuration in the project tree
        "pyproject-addopts-plugin": [plug, f"printf 'addopts = \"-p winplug\"\\n' >> {w}/pyproject.toml"],
        "pyproject-deselect": [f"printf 'addopts = \"-k not_mean\"\\n' >> {w}/pyproject.toml"],
        "pyproject-python-files": [f"printf 'python_files = [\"nothing_*.py\"]\\n' >> {w}/pyproject.toml"],
        "pyproject-collect-only": [f"printf 'addopts = \"--co\"\\n' >> {w}/pyproject.toml"],
        "pyproject-replaced": [plug, write(f"{w}/pyproject.toml",
                                           "[tool.pytest.ini_options]\naddopts = \"-p winplug\"\n")],
        "new-pytest-ini": [plug, write(f"{w}/pytest.ini", "[pytest]\naddopts = -p winplug\n")],
        "new-tox-ini-no-pyproject": [plug, f"rm {w}/pyproject.toml",
                                     write(f"{w}/tox.ini", "[pytest]\naddopts = -p winplug\n")],
        "new-setup-cfg-no-pyproject": [plug, f"rm {w}/pyproject.toml",
                                       write(f"{w}/setup.cfg", "[tool:pytest]\naddopts = -p winplug\n")],
        # 4. plugins named elsewhere, .pth files, the hidden test files' places
        "pytest-plugins-in-test-module": [plug, write(f"{w}/tests/test_aaa.py", "pytest_plugins = ['winplug']\n")],
        "pth-file": [plug, write(f"{w}/win.pth", "import winplug\n")],
        "hidden-test-is-a-directory": [f"mkdir -p {w}/{hidden}/x"],
        "hidden-test-is-a-symlink": [write(f"{w}/tests/fake.py", "def test_nothing():\n    pass\n"),
                                     f"ln -sf fake.py {w}/{hidden}"],
        # 4b. a module pytest imports as it starts, shadowed from the workdir
        "shadows-pygments": [write(f"{w}/pygments/__init__.py", SHADOW)],
        "shadows-packaging": [write(f"{w}/packaging.py", SHADOW)],
        "hidden-test-dir-is-a-symlink": [f"mv {w}/tests {w}/t2 && ln -s t2 {w}/tests",
                                         write(f"{w}/t2/conftest.py", PASS_ALL)],
    }


ATTACKS = list(_attacks("/w", "tests/test_x.py"))


@pytest.mark.parametrize("name", ATTACKS)
def test_an_attack_on_the_test_run_scores_zero(derived, name):
    _, task_dir = derived
    hidden = meta(task_dir)["metadata"]["hidden_tests"][0]
    ep = play(derived, *_attacks(wd(task_dir), hidden)[name])
    assert (ep.reward, ep.infra_error) == (0.0, None), (name, ep)


def test_a_forged_junit_report_disagreeing_with_pytests_exit_status_scores_zero(derived):
    """The code under test writes a report of its own when the run ends; pytest still exits 1 (tests failed)."""
    _, task_dir = derived
    ids = json.loads((task_dir / "tests" / "expect.json").read_text())["expect_pass"]
    init = f"{wd(task_dir)}/src/minilib/__init__.py"
    ep = play(derived, write(init, FAKE_JUNIT.replace("{ids}", repr(ids)), append=True))
    assert (ep.reward, ep.infra_error) == (0.0, None), ep


@pytest.mark.xfail(strict=True, reason="in-process tampering: code the tests import can patch pytest itself; "
                                       "no filter of files stops it (docs/derive.md, Limits)")
@pytest.mark.parametrize("where", ["code-under-test", "tests-package-init", "forged-report-and-exit-0"])
def test_code_the_tests_import_patching_pytest_scores_zero(derived, where):
    _, task_dir = derived
    w = wd(task_dir)
    code = IN_PROCESS
    if where == "forged-report-and-exit-0":  # a report of its own, then pytest's exit status 0 forced
        ids = json.loads((task_dir / "tests" / "expect.json").read_text())["expect_pass"]
        code = FAKE_JUNIT.replace("{ids}", repr(ids)) + ("def _exit_0():\n    _forge()\n    import os\n"
                                                         "    os._exit(0)\nif 'pytest' in _s.modules:\n"
                                                         "    _a.register(_exit_0)\n")
    path = f"{w}/tests/__init__.py" if where == "tests-package-init" else f"{w}/src/minilib/__init__.py"
    ep = play(derived, write(path, code, append=True))
    assert (ep.reward, ep.infra_error) == (0.0, None), ep


@pytest.mark.parametrize("name", ["changed-conftest", "pyproject-addopts-plugin"])
def test_the_config_attacks_work_when_the_carried_tree_is_unfiltered(derived, name, no_filter):
    """The twin: without the filter (which restores protected files) the same attacks score 1."""
    _, task_dir = derived
    ep = play(derived, *_attacks(wd(task_dir), "tests/none.py")[name])
    assert ep.reward == 1.0


def _judge(tmp_path, cases: str, exit_code: int) -> dict:
    from envyard.derive import judge

    (tmp_path / "expect.json").write_text(json.dumps({"runner": "pytest", "expect_pass": ["t::a", "t::b"]}))
    (tmp_path / "junit.xml").write_text(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
    logs = tmp_path / "logs"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVYARD_JUDGE_LOGS", str(logs))
        judge.main(["judge.py", str(tmp_path / "expect.json"), str(tmp_path / "junit.xml"), "/dev/null",
                    str(exit_code)])
    return json.loads((logs / "judge.json").read_text())


PASSED = '<testcase classname="t" name="a"/><testcase classname="t" name="b"/>'
ONE_FAILED_ELSEWHERE = PASSED + '<testcase classname="t" name="c"><failure message="x"/></testcase>'


@pytest.mark.parametrize("cases,exit_code,reward", [
    (PASSED, 0, 1.0), (ONE_FAILED_ELSEWHERE, 1, 1.0),  # a test not expected to pass may fail
    (PASSED, 1, 0.0),  # pytest saw a failure its report does not show: the report was rewritten
    (ONE_FAILED_ELSEWHERE, 0, 0.0), (PASSED, 2, 0.0), (PASSED, 5, 0.0), (PASSED, 3, 0.0)])
def test_the_judge_requires_pytests_exit_status_to_agree_with_its_report(tmp_path, cases, exit_code, reward):
    got = _judge(tmp_path, cases, exit_code)
    assert got["reward"] == reward
    assert ("contradiction" in got) == (reward == 0.0)


def test_the_filter_drops_only_new_configs_that_pytest_reads(tmp_path):
    """A new pyproject.toml/tox.ini/setup.cfg is dropped only when it holds a pytest section; a module named like
    one pytest imports as it starts is dropped from a project dir but kept in site-packages (a reinstall)."""
    from envyard.envs.carry import Carried, filter_carried

    image, layer = tmp_path / "image", tmp_path / "layer"
    (image / "w").mkdir(parents=True)
    files = {"w/a/pyproject.toml": "[project]\nname = 'a'\n", "w/b/pyproject.toml": "[tool.pytest.ini_options]\n",
             "w/c/tox.ini": "[tox]\n", "w/d/tox.ini": "[pytest]\naddopts = -p x\n", "w/e/setup.cfg": "[metadata]\n",
             "w/f/setup.cfg": "[tool:pytest]\n", "w/g/pytest.toml": "", "w/pygments/__init__.py": "",
             "w/attr.py": "", "opt/env/lib/python3.11/site-packages/packaging/__init__.py": "",
             # TOML's dotted keys say the same with no [tool.pytest...] header
             "w/h/pyproject.toml": "[project]\nname = 'h'\n[tool]\npytest.ini_options.addopts = '-p x'\n",
             "w/i/pyproject.toml": "tool.pytest.ini_options = { addopts = '-p x' }\n"}
    for rel, text in files.items():
        (layer / rel).parent.mkdir(parents=True, exist_ok=True)
        (layer / rel).write_text(text)
    result = Carried(layer)
    filter_carried(layer, [image], [], result)
    kept = {rel for rel in files if (layer / rel).exists()}
    assert kept == {"w/a/pyproject.toml", "w/c/tox.ini", "w/e/setup.cfg",
                    "opt/env/lib/python3.11/site-packages/packaging/__init__.py"}, result.dropped
