"""`envyard setup`'s completeness pass (complete.py) and pinned contracts (pins.py): real installs from PyPI into
sandboxes over the host's setup base, with fixture repositories from tests/fixtures/repos/."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from envyard.setup import complete, locks, pins, pkgcache
from envyard.setup.evidence import gather
from envyard.setup.interpreters import host_interpreter
from envyard.setup.plan import Candidate, plan

from bareenv import BARE, cli_cwd

REPOS = Path(__file__).resolve().parent / "fixtures" / "repos"
SRC = str(Path(__file__).resolve().parents[1] / "src")


def setup_cli(home, *args, timeout=900):
    return subprocess.run([sys.executable, "-m", "envyard.cli.main", "setup", *map(str, args), "--json"],
                          capture_output=True, text=True, timeout=timeout, cwd=cli_cwd(),
                          env={"ENVYARD_HOME": str(home), **BARE, "PYTHONPATH": SRC})


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    h = tmp_path_factory.mktemp("complete-home")
    yield h
    subprocess.run([sys.executable, "-m", "envyard.cli.main", "gc"], env={"ENVYARD_HOME": str(h), "PYTHONPATH": SRC},
                   capture_output=True)


# ---- what the pass installs, and when it keeps it ------------------------------------------------------------

def test_the_pass_installs_what_the_recipe_left_out():
    ev = gather(REPOS / "imports_app")
    recipe = plan(ev, Candidate(host_interpreter()))
    units = {u.label: u for u in complete.declared_units(ev, recipe)}
    assert set(units) == {"extras test, toml", "requirements docs/requirements.txt", "group lint"}
    assert units["extras test, toml"].args == "-e '.[test,toml]'"
    assert units["extras test, toml"].parts == ("-e '.[test]'", "-e '.[toml]'")  # tried one by one on failure
    assert units["group lint"].args == "'toolz>=0.12'"
    command = complete.install_command(recipe, units["group lint"].args)
    assert command == f"uv pip install -c {complete.BEFORE} 'toolz>=0.12'"  # never changes what is installed
    # with the installed project's name, its extras come by name: uv takes them from the installed project
    # rather than building it again (`-e .` under the pass's constraints rebuilds it)
    named = {u.label: u for u in complete.declared_units(ev, recipe, "importsapp")}
    assert named["extras test, toml"].args == "'importsapp[test,toml]'"
    assert named["extras test, toml"].parts == ("'importsapp[test]'", "'importsapp[toml]'")


def test_extras_that_name_a_distribution_by_url_come_with_the_project_itself(tmp_path):
    """uv refuses `NAME[docs]` when docs has `pkg @ URL` ("URL dependencies must be expressed as direct
    requirements"): such extras are asked for as `-e .[docs]`, where the project is the direct requirement."""
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "urlextra"\nversion = "1"\n[project.optional-dependencies]\n'
        'docs = ["slowbuild @ file:///work/urlextra/slowbuild"]\ntest = ["pytest"]\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n')
    (tmp_path / "urlextra.py").write_text("")
    ev = gather(tmp_path)
    recipe = plan(ev, Candidate(host_interpreter()))
    units = {u.label: u for u in complete.declared_units(ev, recipe, "urlextra")}
    assert units["extras docs, test"].args == "-e '.[docs,test]'"


def test_the_editable_projects_name_is_read_from_uvs_listing():
    listing = ('[{"name":"other","version":"1","editable_project_location":"/work/repo/lib"},'
               '{"name":"PyNaCl","version":"1.5.0","editable_project_location":"/work/repo"}]')
    assert complete.editable_name(listing, "/work/repo") == "PyNaCl"
    assert complete.editable_name(listing, "/work/elsewhere") is None
    assert complete.editable_name("not json", "/work/repo") is None


def test_a_requirements_file_installed_or_included_is_not_installed_again():
    ev = gather(REPOS / "requirements")
    recipe = plan(ev, Candidate(host_interpreter()))
    labels = [u.label for u in complete.declared_units(ev, recipe)]
    installed = [s.command for s in recipe.steps if s.kind == "requirements"]
    assert installed and not any(f"-r {label.split(' ', 1)[1]}" in " ".join(installed)
                                 for label in labels if label.startswith("requirements "))


def test_of_a_version_matrix_of_tox_environments_only_the_last_is_installed(tmp_path):
    """hypothesis' tox.ini pins pandas~=1.0 ... ~=1.5 in one environment each: installing them all would build
    old pandas releases from source, each replacing the one before. Environments naming other distributions,
    or the same one with the same specifier, stay."""
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='m')\n")
    (tmp_path / "tox.ini").write_text(
        "[tox]\nenvlist = py311\n\n[testenv]\ncommands = pytest\n\n"
        "[testenv:pandas10]\ndeps =\n    pandas~=1.0.5\n    numpy~=1.23.5\n"
        "[testenv:pandas11]\ndeps = pandas~=1.1.5\n"
        "[testenv:pandas15]\ndeps = pandas~=1.5.0\n"
        "[testenv:nose]\ndeps = nose\n"
        "[testenv:nose2]\ndeps = nose\n")
    ev = gather(tmp_path)
    labels = [u.label for u in complete.declared_units(ev, plan(ev, Candidate(host_interpreter())))]
    assert labels == ["group tox:pandas15", "group tox:nose", "group tox:nose2"], labels


def test_modules_worth_looking_for():
    missing = [{"module": m} for m in ["humps", "humps.main", "urllib2", "win32api", "_private", "mypkg.sub",
                                        "netaddr", "netaddr", "netaddr"]]
    assert complete.modules_to_map(missing, {"mypkg"}) == ["netaddr", "humps"]  # most imported first


@pytest.mark.parametrize("before,after,kept", [
    ((4, 1.0, 5), (4, 1.0, 0), True),
    ((4, 0.95, 5), (4, 0.97, 2), True),
    ((3, None, 5), (4, 0.5, 1), True),          # the pass let the tests run: better
    ((4, 1.0, 5), (4, 0.9, 0), False),          # a test broke: the L4 environment stays
    ((4, 1.0, 5), (3, None, 0), False),
    ((4, 1.0, 5), (4, 1.0, 5), False),          # nothing gained
])
def test_the_pass_is_kept_only_when_nothing_gets_worse(before, after, kept):
    assert complete.keeps(before, after)[0] is kept


def test_pins_from_a_freeze():
    freeze = "Using Python 3.11\nb-pkg==2.0\n-e file:///work/x\nlocal @ file:///tmp/l.whl\nA_Pkg==1.0\n"
    assert pins.parse_freeze(freeze) == ["A_Pkg==1.0", "b-pkg==2.0"]
    assert pins.differences(["a-pkg==1.0", "b==2"], ["A_Pkg==1.0", "b==3", "c==1"]) == \
        ["b: pinned 2, installed 3", "c: pinned -, installed 1"]


# ---- end to end ------------------------------------------------------------------------------------------------

def test_setup_installs_what_the_code_imports_and_pins_it(home, tmp_path):
    out = tmp_path / "contract"
    r = setup_cli(home, REPOS / "imports_app", "--out", out, "--python", "3.11")
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(r.stdout)
    assert data["status"] == "verified" and data["pass_ratio"] == 1.0
    c = data["completion"]
    # tomli_w (extra), text_unidecode (docs/requirements.txt), toolz (group lint), humps (declared nowhere)
    assert c["kept"] is True and c["missing_before"] == 4 and c["missing_after"] == 0, c
    assert c["mapped"] == {"humps": "pyhumps"}  # the `humps` distribution is tried and rejected: no camelize
    assert data["missing_imports"] == 0 and data["levels"][2]["ok"] is True
    contract = tomllib.loads((out / "envyard.toml").read_text())
    assert contract["result"]["missing_imports"] == 0 and contract["completeness"]["kept"] is True
    assert "pyhumps" in (out / "setup.sh").read_text()
    # the three declared units were installed at once: one resolution, one line of setup.sh
    assert c["installed"] == ["extras test, toml", "requirements docs/requirements.txt", "group lint"], c
    [line] = [ln for ln in (out / "setup.sh").read_text().splitlines() if "-r docs/requirements.txt" in ln]
    assert "'importsapp[test,toml]'" in line and "'toolz>=0.12'" in line, line
    # the contract pins the versions that passed, and the clean replay installed exactly those
    locked = [line for line in (out / "requirements.lock").read_text().splitlines() if not line.startswith("#")]
    assert "pyhumps==3.8.0" in locked or any(p.startswith("pyhumps==") for p in locked)
    assert contract["pins"]["versions"] == locked and contract["pins"]["source"] == "uv pip freeze"
    assert data["replay"]["pins_match"] is True and data["replay"]["pins"] == len(locked)
    assert f"UV_CONSTRAINT={pins.PINS}" in (out / "Dockerfile").read_text().replace("'", "")
    # The pass ran before the tests, so the suite ran twice: once in the branch, with the pass's installs, whose
    # result (verified) kept the pass, and once in the clean replay (not a third time without the pass).
    log = (out / "log.txt").read_text()
    runs = [line for line in log.splitlines() if line.startswith("$ ") and "--junitxml=" in line]
    assert len(runs) == 2, runs
    branch_log = log.split("===== clean replay =====")[0]
    assert branch_log.index("pyhumps") < branch_log.index("--junitxml="), "the tests ran before the pass"
    # the project was built once, by its own step: the pass asked for its extras by name
    assert branch_log.count("Built importsapp @ file://") == 1, branch_log
    # The replay's installs started before the pass and followed the pass's installs as the branch made them:
    # the replay went on from all of the recipe's steps, and still installed exactly the pins (pins_match above).
    head = data["replay"]["head_start"]
    assert head["used"] is True and head["steps"] == len(data["recipe"]["steps"]), head
    # and its run of the tests began after the pass's last install, beside the branch's, in a copy of it
    assert head["tests_early"]["used"] is True, head
    replay_log = log.split("===== clean replay =====")[1]
    assert replay_log.count("pyhumps") >= 1 and "uv venv" in replay_log  # from a fresh base, the pass included
    assert c["tested"] == "L4, pass ratio 1.000", c
    assert "per-test statuses match" in data["replay"]["detail"], data["replay"]


def test_a_pass_that_breaks_a_test_is_rolled_back(home, tmp_path):
    src = tmp_path / "imports_app"
    shutil.copytree(REPOS / "imports_app", src)
    (src / "tests" / "test_fallback.py").write_text(
        "import importsapp\n\n\ndef test_the_builtin_writer_quotes_strings():\n"
        "    assert importsapp.dumps({'a': 'x'}) == \"a = 'x'\\n\"  # tomli_w writes a = \"x\"\n")
    r = setup_cli(home, src, "--out", tmp_path / "contract", "--python", "3.11")
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(r.stdout)
    c = data["completion"]
    assert c["ran"] is True and c["kept"] is False and "pass ratio 1.000" in c["detail"], c
    assert data["status"] == "verified" and data["pass_ratio"] == 1.0 and data["tests_total"] == 4
    assert data["missing_imports"] == 4  # the environment before the pass
    assert not [s for s in data["recipe"]["steps"] if s["kind"] == "complete"]
    assert "tomli-w" not in (tmp_path / "contract" / "requirements.lock").read_text()
    # The branch ran the tests with the pass first (3 of 4 passed: not verified), then again without it (all
    # passed), and went back to the state before the pass: the image saved is that state, and its pins match it.
    assert c["tested"] == "L4, pass ratio 0.750; without it L4, pass ratio 1.000", c
    assert c["detail"] == "the tests got worse: pass ratio 1.000 → 0.750", c
    assert data["replay"]["ok"] is True and data["replay"]["pins_match"] is True, data["replay"]
    r = subprocess.run([sys.executable, "-m", "envyard.cli.main", "run", data["image"], "--", "sh", "-c",
                        "/opt/venv/bin/python -c 'import tomli_w'"], capture_output=True, text=True,
                       cwd=cli_cwd(), env={"ENVYARD_HOME": str(home), **BARE, "PYTHONPATH": SRC}, timeout=120)
    assert r.returncode != 0 and "ModuleNotFoundError" in r.stderr, (r.returncode, r.stderr[-500:])


def test_a_suite_that_outlasts_the_limit_is_not_run_again_by_the_pass(home, tmp_path):
    """The tests' run with the pass's installs passed the step limit: the pass is judged on collection and
    missing imports, and the tests do not spend the limit a second time without it (dask's suite: 600 s for
    nothing)."""
    src = tmp_path / "imports_app"
    shutil.copytree(REPOS / "imports_app", src)
    (src / "tests" / "test_slow.py").write_text("import time\n\n\ndef test_slow():\n    time.sleep(3600)\n")
    # and a group that cannot install: the pass's install of all units at once fails, and it goes unit by unit
    pyproject = (src / "pyproject.toml").read_text()
    (src / "pyproject.toml").write_text(pyproject.replace(
        'lint = ["toolz>=0.12"]', 'lint = ["toolz>=0.12"]\nbroken = ["envyard-test-no-such-distribution-7f3a>=1"]')
        # and colour forced, as dask's addopts do: the output is read without its escape codes
        .replace('testpaths = ["tests"]', 'testpaths = ["tests"]\naddopts = "--color=yes"'))
    t = time.monotonic()
    r = setup_cli(home, src, "--out", tmp_path / "contract", "--python", "3.11", "--timeout", "40")
    data = json.loads(r.stdout)
    c = data["completion"]
    assert c["kept"] is True and c["missing_after"] == 0 and "not run again" in c["tests"], c
    assert c["seconds"] < 40, c  # no second 40 s test run
    log = (tmp_path / "contract" / "log.txt").read_text().split("===== clean replay =====")[0]
    assert log.count("--junitxml=") == 1, "the branch ran the suite once"
    assert c["not_installed"] == ["group broken"], c
    assert c["installed"] == ["extras test, toml", "requirements docs/requirements.txt", "group lint"], c
    passes = [s["command"] for s in data["recipe"]["steps"] if s["kind"] == "complete"]
    assert len(passes) == 5 and not any("no-such-distribution" in p for p in passes), passes  # freeze + 3 + humps
    assert data["level"] == 3 and "passed the 40s limit" in data["reason"], data["reason"]
    # Interrupted before the limit, the run still says what ran and where it hung.
    assert "3 tests ran before it (" in data["reason"], data["reason"]
    assert "interrupted at tests/test_slow.py:5" in data["reason"], data["reason"]
    assert "\x1b" not in data["reason"] and "\x1b" not in (tmp_path / "contract" / "log.txt").read_text()
    assert time.monotonic() - t < 300


def test_tests_that_first_collect_with_the_pass_win_there_and_start_the_replay(home, tmp_path):
    """A test module imports what only a declared-but-uninstalled requirement file provides (a vendored package
    no PyPI name guess finds), so the tests collect only with the completeness pass's installs, and run after it
    (testtools). The good L4 reached there wins, and the replay's run of the tests begins during the search."""
    src = tmp_path / "imports_app"
    shutil.copytree(REPOS / "imports_app", src)
    helper = src / "vendor" / "helper"
    (helper / "envyard_vendored_helper_4b1e").mkdir(parents=True)
    (helper / "envyard_vendored_helper_4b1e" / "__init__.py").write_text("VALUE = 42\n")
    (helper / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "envyard-vendored-helper"\nversion = "1.0"\n')
    with open(src / "docs" / "requirements.txt", "a") as f:
        f.write("./vendor/helper\n")
    (src / "tests" / "test_vendored.py").write_text(
        "import envyard_vendored_helper_4b1e\n\n\ndef test_value():\n    assert envyard_vendored_helper_4b1e.VALUE == 42\n")
    out = tmp_path / "contract"
    r = setup_cli(home, src, "--out", out, "--python", "3.11")
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(r.stdout)
    c = data["completion"]
    assert any("requirements docs/requirements.txt" in unit for unit in c["installed"]), c
    assert data["status"] == "verified" and data["pass_ratio"] == 1.0 and data["tests_total"] == 4, data["reason"]
    assert c["kept"] is True and c["tested"] == "L4, pass ratio 1.000", c  # not run without it: no L3 there
    head = data["replay"]["head_start"]
    assert head["used"] is True and head["steps"] == len(data["recipe"]["steps"]), head
    assert head["tests_early"]["used"] is True, head  # its run of the tests began during the search


def test_no_complete_leaves_the_imports_missing(home, tmp_path):
    r = setup_cli(home, REPOS / "imports_app", "--out", tmp_path / "contract", "--python", "3.11", "--no-complete")
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(r.stdout)
    assert data["completion"] == {} and data["missing_imports"] == 4
    assert sorted(data["missing_modules"]) == ["humps", "text_unidecode", "tomli_w", "toolz"]


def test_a_project_with_uv_lock_is_installed_and_replayed_from_it(home, tmp_path):
    out = tmp_path / "contract"
    r = setup_cli(home, REPOS / "uvlock_app", "--out", out, "--python", "3.11")
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(r.stdout)
    locked = data["recipe"]["pins"]
    # uv.lock says iniconfig 2.0.0 and pytest 7.3.1 (mid-2023), not the newest releases
    assert {"iniconfig==2.0.0", "pytest==7.3.1"} <= set(locked) and data["recipe"]["pins_source"] == "uv.lock"
    assert data["replay"]["pins_match"] is True
    # setup.sh, run by itself on a fresh setup base, installs exactly the pins
    from envyard import Yard
    from envyard.setup.interpreters import setup_base
    from envyard.setup.search import setup_env, setup_sandbox

    yard = Yard(home)
    cache = pkgcache.scope_dir(home, pkgcache.named_identity("tests"))
    with setup_sandbox(yard, setup_base(yard, host_interpreter()), cache) as sb:
        sb.upload(REPOS / "uvlock_app", "/work/uvlock_app")
        sb.write_file("/tmp/setup.sh", (out / "setup.sh").read_text())
        run = sb.exec("sh /tmp/setup.sh", cwd="/work/uvlock_app", env=setup_env(), timeout=600)  # the machine's CAs
        assert run.exit_code == 0, run.stderr[-2000:]
        freeze = sb.exec("uv pip freeze --exclude-editable", env=setup_env(), timeout=60)
    assert pins.parse_freeze(freeze.stdout) == locked


def test_a_project_with_poetry_lock_is_installed_and_replayed_from_it(home, tmp_path):
    out = tmp_path / "contract"
    r = setup_cli(home, REPOS / "poetrylock_app", "--out", out, "--python", "3.11")
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(r.stdout)
    recipe = data["recipe"]
    # poetry.lock says iniconfig 1.1.1 (2020) and pytest 7.3.1, not the newest releases; its markers keep
    # tomli and exceptiongroup (Python < 3.11) and colorama (Windows) out of Python 3.11's environment
    assert {"iniconfig==1.1.1", "pytest==7.3.1", "pluggy==1.0.0"} <= set(recipe["pins"])
    assert not [p for p in recipe["pins"] if p.split("==")[0] in ("tomli", "exceptiongroup", "colorama")]
    assert recipe["pins_source"] == "poetry.lock" and recipe["lock_source"] == "poetry.lock" and not recipe["warnings"]
    assert data["status"] == "verified" and data["replay"]["pins_match"] is True
    # the contract carries the lock's constraints itself: no lock parser is needed to replay it
    setup_sh, docker = (out / "setup.sh").read_text(), (out / "Dockerfile").read_text()
    assert "'tomli==2.0.1 ; python_version < \"3.11\"'" in setup_sh and "iniconfig==1.1.1" in setup_sh
    assert locks.LOCKED in setup_sh.split("UV_CONSTRAINT=", 1)[1].split(" PATH=")[0]  # exported for every step
    assert "RUN mkdir -p /opt/envyard && printf '%s\\n' 'colorama==0.4.6 ; sys_platform == \"win32\"'" in docker
    contract = tomllib.loads((out / "envyard.toml").read_text())
    assert contract["pins"]["source"] == "poetry.lock" and "iniconfig==1.1.1" in contract["pins"]["versions"]


STALE_PDM_LOCK = """\
# This file is @generated by PDM.
# It is not intended for manual editing.

[metadata]
groups = ["default", "test"]
strategy = ["inherit_metadata"]
lock_version = "4.5.0"
content_hash = "sha256:written-by-hand"

[[package]]
name = "iniconfig"
version = "1.1.1"
summary = "iniconfig: brain-dead simple config-ini parsing"
groups = ["default", "test"]
files = []
"""


def test_a_stale_pdm_lock_is_not_used_and_the_report_says_so(home, tmp_path):
    # the lock pins iniconfig 1.1.1, but the project has since moved to iniconfig>=2: resolving against the
    # lock fails, so the lock stops constraining the installs (a repair), and the freeze is pinned instead
    src = tmp_path / "stale"
    shutil.copytree(REPOS / "poetrylock_app", src)
    (src / "poetry.lock").unlink()
    (src / "pdm.lock").write_text(STALE_PDM_LOCK)
    pyproject = src / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('dependencies = ["iniconfig"]', 'dependencies = ["iniconfig>=2"]'))
    out = tmp_path / "contract"
    r = setup_cli(home, src, "--out", out, "--python", "3.11")
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(r.stdout)
    recipe = data["recipe"]
    assert recipe["lock_source"] == "pdm.lock" and recipe["pins_source"] == "uv pip freeze"
    assert recipe["warnings"] and recipe["warnings"][0].startswith("pdm.lock not used")
    assert data["repairs"] == ["pdm.lock pins iniconfig==1.1.1, which the requirements exclude: the lock is not used"]
    iniconfig = next(p for p in recipe["pins"] if p.startswith("iniconfig=="))
    assert int(iniconfig.split("==")[1].split(".")[0]) >= 2
    assert data["status"] == "verified" and data["replay"]["pins_match"] is True
    assert f": > {locks.LOCKED}" in (out / "setup.sh").read_text()  # the replay drops the lock the same way
