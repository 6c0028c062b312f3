"""Candidate ranking and recipes: pure functions over evidence read from small projects written here."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timezone

import pytest

from envyard.setup.evidence import gather
from envyard.setup.interpreters import Interpreter, NoPython
from envyard.setup.plan import CUTOFF_EXEMPT, Candidate, candidates, plan

HOST = Interpreter("host", "host", "/usr/bin/python3", "3.11.2")
BULLSEYE = Interpreter("debian:bullseye", "debian:bullseye", "/usr/bin/python3", "3.9")
BOOKWORM = Interpreter("debian:bookworm", "debian:bookworm", "/usr/bin/python3", "3.11")
TRIXIE = Interpreter("debian:trixie", "debian:trixie", "/usr/bin/python3", "3.13")
ALL = [HOST, BULLSEYE, BOOKWORM, TRIXIE]
NOW = datetime(2026, 11, 29, tzinfo=timezone.utc)


def project(tmp_path, requires="", classifiers=(), dated=None):
    lines = ['[project]', 'name = "demo"', 'version = "1.0"']
    if requires:
        lines.append(f'requires-python = "{requires}"')
    if classifiers:
        lines.append("classifiers = [" + ", ".join(f'"Programming Language :: Python :: {c}"' for c in classifiers) + "]")
    lines += ['[project.optional-dependencies]', 'test = ["pytest"]']
    (tmp_path / "pyproject.toml").write_text("\n".join(lines) + "\n")
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "__init__.py").write_text("")
    if dated:
        stamp = time.mktime((*dated, 12, 0, 0, 0, 0, -1))
        for p in [tmp_path, *tmp_path.rglob("*")]:
            os.utime(p, (stamp, stamp))
    return gather(tmp_path)


def test_a_recent_project_gets_the_host_first_and_the_rest_as_fallbacks(tmp_path):
    cands = candidates(project(tmp_path, ">=3.8", dated=(2026, 10, 1)), ALL, now=NOW)
    assert cands[0] == Candidate(HOST, None, cands[0].why)
    assert [c.interpreter.version for c in cands] == ["3.11.2", "3.13", "3.9"]  # one per minor version
    assert all(c.fallback for c in cands[1:]) and all(c.cutoff is None for c in cands)


def test_a_constraint_that_excludes_the_host_picks_a_debian_suite(tmp_path):
    cands = candidates(project(tmp_path, ">=3.8,<3.10", dated=(2026, 10, 1)), ALL, now=NOW)
    assert [c.interpreter.provider for c in cands] == ["debian:bullseye"]


def test_an_old_source_prefers_a_python_of_its_time_and_adds_a_cutoff_candidate(tmp_path):
    cands = candidates(project(tmp_path, ">=3.6", dated=(2021, 6, 1)), ALL, now=NOW)
    first, second = cands[:2]
    assert first.interpreter is BULLSEYE and first.cutoff is None and not first.fallback
    assert second.interpreter is BULLSEYE and second.cutoff == "2021-06-01T23:59:59Z" and not second.fallback
    assert all(c.fallback and c.cutoff for c in cands[2:])


def test_classifiers_name_the_preferred_python(tmp_path):
    cands = candidates(project(tmp_path, ">=3.8", classifiers=["3.13"], dated=(2026, 10, 1)), ALL, now=NOW)
    assert cands[0].interpreter is TRIXIE


def test_no_interpreter_satisfies_the_constraint(tmp_path):
    with pytest.raises(NoPython) as e:
        candidates(project(tmp_path, ">=3.14"), ALL, now=NOW)
    assert ">=3.14" in str(e.value) and "3.9 (debian:bullseye)" in str(e.value)


def test_a_cutoff_recipe_pins_dependencies_but_not_build_backends(tmp_path):
    ev = project(tmp_path, ">=3.6")
    r = plan(ev, Candidate(BULLSEYE, "2021-06-01T23:59:59Z"))
    assert r.steps[0].command.startswith("uv venv --seed --python /usr/bin/python3 --exclude-newer 2021-06-01")
    proj = next(s for s in r.steps if s.kind == "project")
    assert proj.command.startswith("uv pip install --exclude-newer 2021-06-01T23:59:59Z")
    assert all(f"--exclude-newer-package {p}=" in proj.command for p in CUTOFF_EXEMPT)
    assert proj.command.endswith("-e '.[test]'")
    plain = plan(ev, Candidate(HOST))
    assert not any("exclude-newer" in s.command for s in plain.steps)


def test_carried_repairs_keep_their_place(tmp_path):
    from envyard.setup.plan import Step

    apt = Step("apt", "apt-get install -y libfoo-dev", "repair")
    pip = Step("repair", "uv pip install hypothesis", "repair")
    r = plan(project(tmp_path, ">=3.8"), Candidate(HOST, None, "", (pip, apt)))
    assert r.steps[0] == apt and r.steps[-1] == pip


def test_apt_steps_round_trip_their_packages():
    from envyard.setup.plan import apt_packages, apt_step

    repair = apt_step(["libmpfr-dev", "liblzo2-dev"], "repair")
    assert "--no-install-recommends" in repair.command
    assert apt_packages(repair) == ["libmpfr-dev", "liblzo2-dev"]
    project_own = apt_step(["graphviz"], "the project's CI", recommends=True)
    assert "--no-install-recommends" not in project_own.command and apt_packages(project_own) == ["graphviz"]


def test_requirement_files_uv_refuses_are_installed_as_arguments(tmp_path):
    """pip reads `-e.[tests]`, `-rfile`, `--requirement=file`, `-cfile` and options uv does not know; uv's parser
    refuses the first ones ("Expected '=' or whitespace"), so such a file becomes the install's arguments."""
    project(tmp_path, ">=3.8")
    (tmp_path / "reqs").mkdir()
    (tmp_path / "reqs" / "base.txt").write_text("attrs\n-e./plugins/a\n")
    (tmp_path / "reqs" / "more.txt").write_text("click\n")
    (tmp_path / "constraints.txt").write_text("click<9\n")
    (tmp_path / "requirements.txt").write_text(
        "-e.[tests]\n-rreqs/base.txt\n--requirement=reqs/more.txt\n-cconstraints.txt\n"
        "--index-url=https://pypi.org/simple\n--trusted-host pypi.org\n# a comment\n"
        "requests>=2 \\\n    ; python_version >= \"3.8\"  # why\nsix==1.16 --hash=sha256:abc\n")
    r = plan(gather(tmp_path), Candidate(HOST))
    step = next(s for s in r.steps if s.kind == "requirements")
    assert step.command == ("uv pip install -e '.[tests]' attrs -e ./plugins/a click -c constraints.txt "
                            "--index-url https://pypi.org/simple 'requests>=2 ; python_version >= \"3.8\"' six==1.16")
    assert any("-e.[tests] read as -e .[tests]" in n for n in r.notes)
    assert any("--trusted-host pypi.org is ignored" in n for n in r.notes)


def test_requirement_files_named_for_another_python_are_left_out(tmp_path):
    """ecdsa ships build-requirements-2.6.txt and -2.7.txt (a git+https requirement for Python 2) beside the
    build-requirements.txt every other Python uses; its CI picks the file by the running Python's version."""
    project(tmp_path, ">=2.6")
    for name in ("build-requirements.txt", "build-requirements-2.7.txt", "requirements-py3.txt",
                 "requirements-py310.txt"):
        (tmp_path / name).write_text("six\n")
    ev = gather(tmp_path)
    installed = lambda interp: [s.command.split(" -r ")[1] for s in plan(ev, Candidate(interp)).steps
                                if s.kind == "requirements"]
    assert installed(HOST) == ["build-requirements.txt", "requirements-py3.txt"]
    assert installed(Interpreter("pyenv:3.10", "pyenv", "/p/python3", "3.10.13")) == [
        "build-requirements.txt", "requirements-py3.txt", "requirements-py310.txt"]
    assert sorted(installed(Interpreter("pyenv:2.7", "pyenv", "/p/python2", "2.7.18"))) == [
        "build-requirements-2.7.txt", "build-requirements.txt"]


def test_a_minimum_versions_requirement_file_is_not_installed(tmp_path):
    """nibabel's min-requirements.txt (numpy ==1.20, for a CI job checking the oldest versions) beside its
    requirements.txt: installing both would build numpy 1.20 from source on a current Python."""
    project(tmp_path, ">=3.8")
    (tmp_path / "requirements.txt").write_text("numpy >=1.20\n")
    for name in ("min-requirements.txt", "requirements-minimum.txt", "requirements_oldest.txt"):
        (tmp_path / name).write_text("numpy ==1.20\n")
    steps = [s.command for s in plan(gather(tmp_path), Candidate(HOST)).steps if s.kind == "requirements"]
    assert steps == ["uv pip install -r requirements.txt"], steps


def test_requirement_files_uv_reads_stay_as_they_are(tmp_path):
    project(tmp_path, ">=3.8")
    (tmp_path / "requirements.txt").write_text("-e .[tests]\n--editable=./lib\n-r reqs/dev.txt\n-c c.txt\n"
                                               "--extra-index-url https://example.org/simple\nsix --hash=sha256:ab\n")
    (tmp_path / "reqs").mkdir()
    (tmp_path / "reqs" / "dev.txt").write_text("pytest\n")
    (tmp_path / "c.txt").write_text("pytest<9\n")
    r = plan(gather(tmp_path), Candidate(HOST))
    assert [s.command for s in r.steps if s.kind == "requirements"] == ["uv pip install -r requirements.txt"]


def test_requirement_files_of_benchmarks_profilers_and_fuzzers_are_not_installed(tmp_path):
    """tomli's tox envs `benchmark`, `profile` and `fuzz` name their own requirement files; the benchmark's
    builds C++ TOML parsers that fail here, which used to fail the whole install."""
    project(tmp_path, ">=3.8")
    (tmp_path / "tox.ini").write_text("[testenv]\ncommands = pytest\n[testenv:benchmark]\ndeps = -r benchmark/requirements.txt\n"
                                      "[testenv:profile]\ndeps = -r profiler/requirements.txt\n"
                                      "[testenv:fuzz]\ndeps = -r fuzzer/requirements.txt\n"
                                      "[testenv:unit]\ndeps = -r tests/requirements.txt\n")
    for d in ("benchmark", "profiler", "fuzzer", "tests"):
        (tmp_path / d).mkdir(exist_ok=True)
        (tmp_path / d / "requirements.txt").write_text("six\n")
    r = plan(gather(tmp_path), Candidate(HOST))
    assert [s.command for s in r.steps if s.kind == "requirements"] == ["uv pip install -r tests/requirements.txt"]


def test_pytest_pythonpath_settings_become_pytests_own_pythonpath(tmp_path):
    """django-redis sets `python_paths = tests` (the pytest-pythonpath plugin, which current pytest no longer
    loads): its tests import `settings` from tests/. The recipe's PYTEST_ADDOPTS gives pytest that path itself
    and turns the plugin off; a real pytest run with and without it shows the difference."""
    project(tmp_path, ">=3.8")
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\npython_paths = tests\ntestpaths = tests\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "helper_settings.py").write_text("VALUE = 42\n")
    # imported before any test module puts tests/ on sys.path, as pytest-django imports the settings
    (tmp_path / "conftest.py").write_text("import helper_settings\n")
    (tmp_path / "tests" / "test_it.py").write_text("import helper_settings\n\n"
                                                   "def test_value():\n    assert helper_settings.VALUE == 42\n")
    r = plan(gather(tmp_path), Candidate(HOST))
    assert r.env["PYTEST_ADDOPTS"] == "-p no:pythonpath -o pythonpath=tests"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestConfigWarning"]
    without = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert without.returncode != 0 and "No module named 'helper_settings'" in without.stdout + without.stderr
    with_env = subprocess.run(run, cwd=tmp_path, env={**env, **r.env}, capture_output=True, text=True)
    assert with_env.returncode == 0, with_env.stdout
    assert "1 passed" in with_env.stdout


def test_an_explicit_pythonpath_setting_is_left_alone(tmp_path):
    project(tmp_path, ">=3.8")
    (tmp_path / "pytest.ini").write_text("[pytest]\npython_paths = old\npythonpath = src\n")
    assert "PYTEST_ADDOPTS" not in plan(gather(tmp_path), Candidate(HOST)).env


PYENV37 = Interpreter("pyenv:3.7.16", "host", "/root/.pyenv/versions/3.7.16/bin/python3", "3.7.16",
                      prefix="/root/.pyenv/versions/3.7.16")
PYENV38 = Interpreter("pyenv:3.8.18", "host", "/root/.pyenv/versions/3.8.18/bin/python3", "3.8.18",
                      prefix="/root/.pyenv/versions/3.8.18")
PYENV39 = Interpreter("pyenv:3.9.18", "host", "/root/.pyenv/versions/3.9.18/bin/python3", "3.9.18",
                      prefix="/root/.pyenv/versions/3.9.18")
UV312 = Interpreter("uv:cpython-3.12.4-linux-x86_64-gnu", "host", "/u/cpython-3.12.4/bin/python3", "3.12.4",
                    prefix="/u/cpython-3.12.4")
MORE = [*ALL, PYENV37, PYENV38, PYENV39, UV312]


def test_a_project_older_than_every_interpreter_tries_the_oldest_first(tmp_path):
    """docopt (2014) names Python 2.5-3.3, none of which is here: the closest to its time come first (3.7, then
    3.8, ...), not the host's 3.11 or the newest, on which its old test tools (pytest < 6) do not run."""
    cands = candidates(project(tmp_path, classifiers=["2.7", "3.2", "3.3"], dated=(2014, 6, 16)), MORE, now=NOW)
    assert [c.interpreter.version for c in cands if c.cutoff] == ["3.7.16", "3.8.18", "3.9", "3.11.2", "3.12.4",
                                                                    "3.13"]
    assert cands[0].interpreter is PYENV37 and cands[0].cutoff is None and not cands[0].fallback


def test_a_project_below_3_9_gets_pyenvs_3_8_instead_of_failing(tmp_path):
    cands = candidates(project(tmp_path, ">=3.7,<3.9", dated=(2026, 10, 1)), MORE, now=NOW)
    assert [c.interpreter for c in cands] == [PYENV38, PYENV37]
    assert cands[0].interpreter.path == "/root/.pyenv/versions/3.8.18/bin/python3"
    assert plan(project(sub(tmp_path, "b"), ">=3.7,<3.9"), cands[0]).steps[0].command.startswith(
        "uv venv --seed --python /root/.pyenv/versions/3.8.18/bin/python3 ")


def test_classifiers_naming_3_8_pick_it_over_newer_ones(tmp_path):
    cands = candidates(project(tmp_path, ">=3.7", classifiers=["3.7", "3.8"], dated=(2026, 10, 1)), MORE, now=NOW)
    assert cands[0].interpreter is PYENV38 and cands[0].why == "named by the project"
    assert cands[1].interpreter is PYENV37 and cands[1].fallback


def test_of_one_minor_version_the_host_then_debian_then_pyenv_is_kept(tmp_path):
    cands = candidates(project(tmp_path, ">=3.7", dated=(2026, 10, 1)), [*reversed(MORE)], now=NOW)
    assert [c.interpreter.provider for c in cands] == [
        "host", "debian:trixie", "uv:cpython-3.12.4-linux-x86_64-gnu", "debian:bullseye", "pyenv:3.8.18",
        "pyenv:3.7.16"]


def test_an_old_source_gets_a_python_of_its_time_from_pyenv(tmp_path):
    cands = candidates(project(tmp_path, ">=3.6", dated=(2020, 3, 1)), MORE, now=NOW)
    assert cands[0].interpreter is PYENV38 and cands[1].interpreter is PYENV38 and cands[1].cutoff


def test_a_forced_python_is_used_even_outside_the_constraint(tmp_path):
    from envyard.setup.interpreters import select

    cands = candidates(project(tmp_path, ">=3.10"), select(MORE, "3.8"), now=NOW)
    assert len(cands) == 1 and cands[0].interpreter.provider == "pyenv:3.8.18"
    assert cands[0].why == "chosen with --python (the project requires Python >=3.10)"
    assert candidates(project(sub(tmp_path, "b"), ">=3.7"), select(MORE, "3.8"), now=NOW)[0].why == "chosen with --python"


def test_uv_python_install_is_the_last_resort(tmp_path):
    from envyard.setup.plan import ranked_or_installed

    asked = []
    uv314 = Interpreter("uv:cpython-3.14.1-linux-x86_64-gnu", "host", "/u/3.14/bin/python3", "3.14.1", prefix="/u/3.14")
    ev = project(tmp_path, ">=3.14")
    cands, avail = ranked_or_installed(ev, ALL, tmp_path / "cache", install=lambda v, _c: asked.append(v) or uv314,
                                       now=NOW)
    assert asked == ["3.14"] and cands[0].interpreter is uv314 and avail[-1] is uv314
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "uv-python-install.json").write_text('{"3.14": {"at": 0, "error": "dns error"}}')
    with pytest.raises(NoPython) as e:
        ranked_or_installed(ev, ALL, tmp_path / "cache", install=lambda v, _c: None, now=NOW)
    assert "`uv python install 3.14` failed: dns error" in e.value.message
    asked.clear()
    with pytest.raises(NoPython):  # no release uv could install satisfies it: uv is not asked
        ranked_or_installed(project(sub(tmp_path, "b"), ">=3.99"), ALL, tmp_path / "cache",
                            install=lambda v, _c: asked.append(v), now=NOW)
    assert asked == []
    assert ranked_or_installed(project(sub(tmp_path, "c"), ">=3.8"), ALL, tmp_path, install=None, now=NOW)[1] is ALL


def sub(tmp_path, name):
    (tmp_path / name).mkdir()
    return tmp_path / name


def test_runtime_dependencies_are_the_metadata_s_unconditional_installed_ones(tmp_path):
    """What goes back to the source date when tests fail on a newer API: install_requires by name, not extras,
    conditional or URL requirements, requirement files, build back-ends, or what is not installed."""
    from envyard.setup.plan import as_of_step, runtime_dependencies

    (tmp_path / "setup.cfg").write_text(
        "[metadata]\nname = p\n\n[options]\ninstall_requires =\n    Testing.Common_Database>=1.1\n"
        "    colorama; sys_platform == 'win32'\n    setuptools>=40\n    notinstalled\n"
        "    pkg @ https://example.org/pkg.tar.gz\n\n[options.extras_require]\ntest =\n    pytest\n")
    (tmp_path / "requirements-dev.txt").write_text("black\n")
    ev = gather(tmp_path)
    installed = ["testing-common-database==2.0.3", "colorama==0.4.6", "setuptools==80.0.0", "pytest==8.4.0",
                 "black==25.1.0", "pkg==1.0"]
    wanted = runtime_dependencies(ev, installed)
    assert wanted == {"Testing.Common_Database": "Testing.Common_Database>=1.1"}
    cmd = as_of_step(wanted, "2016-02-04T23:59:59Z")
    assert cmd == ("uv pip install --reinstall-package Testing.Common_Database --exclude-newer-package "
                   "Testing.Common_Database=2016-02-04T23:59:59Z 'Testing.Common_Database>=1.1'")


def _extras_project(root, extras: str, files: dict[str, str]):
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "1.0"\n'
                                         '[project.optional-dependencies]\n' + extras)
    (root / "demo").mkdir()
    (root / "demo" / "__init__.py").write_text("")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    ev = gather(root)
    return ev, next(s for s in plan(ev, Candidate(HOST, None, "x")).steps if s.kind == "project").command


def test_extras_the_projects_ci_installs_are_installed_when_none_looks_like_a_test_extra(tmp_path):
    """tzlocal keeps pytest-mock in an extra named devenv, which its CI installs (`pip install .[devenv]`): with no
    test-like extra, what the project's CI installs is; its docs and lint extras are not, nor other packages'."""
    ci = ("on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
          "      - run: pip install .[devenv] 'other[yaml]'\n      - run: pip install -e \".[docs,lint]\"\n"
          "      - run: pytest\n")
    ev, command = _extras_project(tmp_path, 'devenv = ["pytest-mock"]\ndocs = ["sphinx"]\nyaml = ["pyyaml"]\n'
                                  'lint = ["ruff"]\n', {".github/workflows/ci.yml": ci})
    assert sorted(f.value for f in ev.of("test_extra")) == ["devenv", "docs", "lint"]
    assert command.endswith("-e '.[devenv]'"), command


def test_extras_of_tox_s_base_environment_join_the_test_like_ones(tmp_path):
    """tox's `[testenv]` extras are installed beside the test-like ones (testtools: test, twisted); a named
    environment's are a variant (bleach's py39-tinycss2), and a CI job's are not needed when a test extra exists
    (sparse's `.[finch]` job)."""
    tox = "[testenv]\nextras =\n    test\n    full\ncommands = pytest\n\n[testenv:all]\nextras = yaml\n"
    ci = ("on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
          "      - run: pip install .[finch]\n      - run: pytest\n")
    ev, command = _extras_project(tmp_path, 'test = ["pytest"]\nfull = ["rich"]\nyaml = ["pyyaml"]\n'
                                  'finch = ["finch-tensor"]\n', {"tox.ini": tox, ".github/workflows/ci.yml": ci})
    assert command.endswith("-e '.[full,test]'"), command
