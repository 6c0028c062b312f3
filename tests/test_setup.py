"""`envyard setup`: real installs from PyPI and Debian into sandboxes over the shared setup bases."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path

import pytest

from bareenv import BARE, cli_cwd, sigint_default

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "setup"
SRC = str(Path(__file__).resolve().parents[1] / "src")  # this checkout's envyard, not whichever one is installed
FIXTURE = FIXTURES / "tinycalc"
# Debian-suite setup bases take a debootstrap and an apt run to build: keep them in the persistent test store.
CACHE_HOME = Path(os.environ.get("ENVYARD_TEST_CACHE", "/var/tmp/envyard-test-cache"))


def envyard(home, *args, timeout=900):
    return subprocess.run([sys.executable, "-m", "envyard.cli.main", *map(str, args)], capture_output=True, text=True,
                          env={"ENVYARD_HOME": str(home), **BARE, "PYTHONPATH": str(SRC)},
                          timeout=timeout, cwd=cli_cwd())


def setup_cli(home, *args, timeout=900):
    return envyard(home, "setup", *args, timeout=timeout)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    h = tmp_path_factory.mktemp("setup-home")
    yield h
    subprocess.run([sys.executable, "-m", "envyard.cli.main", "gc"], env={"ENVYARD_HOME": str(h), "PYTHONPATH": SRC},
                   capture_output=True)


def copy_fixture(tmp_path, **edits) -> Path:
    dest = tmp_path / "tinycalc"
    shutil.copytree(FIXTURE, dest)
    text = (dest / "pyproject.toml").read_text()
    for old, new in edits.items():
        text = text.replace(old, new)
    (dest / "pyproject.toml").write_text(text)
    return dest


def test_setup_reaches_l4_with_a_baseline_and_a_usable_image(home, tmp_path):
    out = tmp_path / "contract"
    r = setup_cli(home, FIXTURE, "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 0.9 and data["image"] == "setup/tinycalc:latest"
    assert [lv["level"] for lv in data["levels"]] == [0, 1, 2, 3, 4]
    assert [lv["ok"] for lv in data["levels"]] == [True, True, True, True, True]
    assert "imports resolve" in data["levels"][2]["detail"]
    assert data["integrity"]["ok"] is True
    assert data["verified"] is True and data["replay"]["ok"] is True  # a clean replay from the base reproduced it
    assert data["status"] == "verified"  # L4 with a pass ratio of 0.9 (9 of 10): the bar for the plain name
    assert data["replay"]["collected"] == 10 and data["replay"]["statuses_same"] == 10  # L4 again, same statuses
    # at L4 the replay's run of the tests counts them: no separate collection before it
    replay_log = (out / "log.txt").read_text().split("===== clean replay =====")[1]
    assert "--collect-only" not in replay_log and replay_log.count("--junitxml=") == 1
    # that run began in a copy of the replay's head start while the search finished, and was taken as it was
    assert data["replay"]["head_start"]["tests_early"]["used"] is True, data["replay"]["head_start"]
    assert data["recipe"]["interpreter"]["provider"] == "host" and data["recipe"]["cutoff"] is None
    dockerfile = (out / "Dockerfile").read_text()
    assert dockerfile.startswith("# written by") and "FROM debian:bookworm" in dockerfile and "uv venv --seed" in dockerfile
    contract = tomllib.loads((out / "envyard.toml").read_text())
    assert contract["result"]["level"] == 4 and contract["result"]["verified"] is True
    assert contract["baseline"]["tests.test_calc::test_known_failure"] == "failed"
    assert contract["baseline"]["tests.test_calc::test_add"] == "passed"
    assert any(e["kind"] == "python_constraint" and e["file"] == "pyproject.toml" for e in contract["evidence"])
    assert "uv venv --seed --python /usr/bin/python3 /opt/venv" in (out / "setup.sh").read_text()
    assert "pytest" in (out / "test.sh").read_text()
    # the image runs the project's tests from its workdir with its interpreter on PATH
    run = subprocess.run([sys.executable, "-m", "envyard.cli.main", "run", "setup/tinycalc", "--",
                          "python", "-m", "pytest", "-q"], capture_output=True, text=True,
                         env={"ENVYARD_HOME": str(home), "PYTHONPATH": SRC}, timeout=120)
    assert "1 failed, 9 passed" in run.stdout


def test_unsatisfiable_python_constraint(home, tmp_path):
    src = copy_fixture(tmp_path, **{'requires-python = ">=3.8"': 'requires-python = ">=3.99"'})
    r = setup_cli(home, src)
    assert r.returncode == 1
    assert ">=3.99" in r.stderr and "provides" in r.stderr and "3.9 (debian:bullseye)" in r.stderr


@pytest.mark.timeout(1800)  # the first run on a machine builds a bullseye base and its setup base
def test_python_constraint_picks_a_debian_interpreter(tmp_path):
    """A project that excludes the host's 3.11 gets Debian bullseye's 3.9, from a shared setup base."""
    src = copy_fixture(tmp_path, **{'requires-python = ">=3.8"': 'requires-python = ">=3.8,<3.10"'})
    out = tmp_path / "contract"
    r = setup_cli(CACHE_HOME, src, "--name", "test/tinycalc39", "--out", out, "--json", timeout=1500)
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["verified"] is True
    assert data["recipe"]["interpreter"]["provider"] == "debian:bullseye"
    assert data["recipe"]["interpreter"]["version"].startswith("3.9")
    assert "FROM debian:bullseye" in (out / "Dockerfile").read_text()
    run = envyard(CACHE_HOME, "run", "test/tinycalc39", "--", "python", "--version", timeout=120)
    assert run.stdout.startswith("Python 3.9"), run.stderr
    # the setup base's apt run (toolchain, headers, git) kept none of the .debs it downloaded (~110 MB)
    run = envyard(CACHE_HOME, "run", "test/tinycalc39", "--", "find", "/var/cache/apt/archives", "-name", "*.deb",
                  timeout=120)
    assert run.returncode == 0 and run.stdout == "", (run.stdout[:500], run.stderr[-500:])
    envyard(CACHE_HOME, "rmi", "test/tinycalc39")


def test_a_setup_base_that_cannot_be_built_is_the_machines_fault(tmp_path, monkeypatch):
    """Only bullseye's 3.9 fits and debootstrap is missing: no candidate can start, so setup raises the base
    build error (exit 6) instead of blaming the project (exit 1)."""
    import envyard
    from envyard.errors import BaseBuildError
    from envyard.setup.engine import setup_directory

    src = copy_fixture(tmp_path, **{'requires-python = ">=3.8"': 'requires-python = ">=3.8,<3.10"'})
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr("envyard.bases.debian.SYSTEM_SBIN", str(tmp_path / "empty-bin"))
    yard = envyard.Yard(tmp_path / "home")
    from envyard.setup.interpreters import debian_interpreters, host_interpreter

    only_these = [host_interpreter(), *debian_interpreters()]  # not the pyenv/uv 3.8 and 3.9 this machine may have
    try:
        with pytest.raises(BaseBuildError, match="debootstrap is not installed"):
            setup_directory(yard, src, "setup/nobase", available=only_these)
        assert yard.sandboxes() == [] and not yard.store.has_image("setup/nobase")
    finally:
        yard.close()
        yard.gc()


def test_a_step_past_the_disk_limit_is_the_machines_problem_not_the_projects(home, tmp_path, monkeypatch):
    """The project's build writes more than a setup sandbox may: the kernel answers EDQUOT, and setup stops with
    DiskFull (exit 25) naming the limit, instead of reporting an L0 install failure and trying repairs."""
    import envyard
    from envyard.errors import DiskFull
    from envyard.setup.engine import setup_directory
    from envyard.setup.interpreters import host_interpreter

    yard = envyard.Yard(home)
    if not yard.can_limit_disk:
        pytest.skip("no disk limits on this machine (btrfs volume unavailable)")
    src = copy_fixture(tmp_path)
    (src / "setup.py").write_text(  # setuptools runs it during the editable build, in the sandbox
        "from setuptools import setup\n"
        "with open('/opt/envyard-fill', 'wb') as f:\n"
        "    for _ in range(160):\n"
        "        f.write(b'x' * (1 << 20))\n"
        "setup()\n")
    monkeypatch.setattr("envyard.setup.search.SETUP_DISK", "64M")
    try:
        with pytest.raises(DiskFull, match=r"disk limit \(64M\).*Disk quota exceeded") as caught:
            setup_directory(yard, src, "setup/diskfull", available=[host_interpreter()])
        assert caught.value.exit_code == 25
        yard.wait_closed()
        assert yard.sandboxes() == [] and not any(i.name.startswith("setup/diskfull") for i in yard.images())
    finally:
        yard.close()


def test_setup_does_not_start_on_a_nearly_full_disk(home, tmp_path, monkeypatch):
    import envyard
    from envyard.errors import DiskFull
    from envyard.setup.engine import setup_directory

    monkeypatch.setattr("envyard.diskspace.MIN_FREE", 1 << 62)  # more than any disk here has free
    yard = envyard.Yard(home)
    try:
        with pytest.raises(DiskFull, match=f"the disk holding the store {home} has .* free; setup needs"):
            setup_directory(yard, copy_fixture(tmp_path), "setup/nospace")
        assert yard.sandboxes() == []
    finally:
        yard.close()


def _pyenv(minor: str):
    from envyard.setup.interpreters import pyenv_interpreters

    return next((i for i in pyenv_interpreters() if i.version.startswith(minor + ".")), None)


@pytest.mark.timeout(900)
def test_a_project_below_3_9_reaches_l4_on_pyenvs_3_8(home, tmp_path):
    """No Debian suite has 3.8: pyenv's does, copied into its setup base (the host image hides /root), and the
    image keeps working on that copy."""
    py38 = _pyenv("3.8")
    if py38 is None:
        pytest.skip("no pyenv Python 3.8 on this machine")
    src = copy_fixture(tmp_path, **{'requires-python = ">=3.8"': 'requires-python = ">=3.8,<3.9"'})
    out = tmp_path / "contract"
    r = setup_cli(home, src, "--name", "test/tinycalc38", "--out", out, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["verified"] is True and data["pass_ratio"] == 0.9
    interp = data["recipe"]["interpreter"]
    assert interp["provider"] == py38.provider and interp["version"] == py38.version and interp["prefix"] == py38.prefix
    dockerfile = (out / "Dockerfile").read_text()
    assert f"FROM python:{py38.version}-slim" in dockerfile and "from pyenv on the host" in dockerfile
    assert f"ln -sf /usr/local/bin/python3.8 {py38.path}" in dockerfile
    contract = tomllib.loads((out / "envyard.toml").read_text())
    assert contract["recipe"]["interpreter_origin"].startswith("from pyenv on the host")
    setup_sh = (out / "setup.sh").read_text()
    assert f"needs Python {py38.version} at {py38.path}" in setup_sh
    run = envyard(home, "run", "test/tinycalc38", "--", "python", "-c",
                  "import sys, os; print(sys.version.split()[0], os.path.realpath(sys.executable))", timeout=120)
    assert run.stdout.split()[0] == py38.version and run.stdout.split()[1].startswith(py38.prefix), run.stderr
    envyard(home, "rmi", "test/tinycalc38")


def test_python_option_with_a_release_the_machine_lacks_lists_what_it_has(home, tmp_path):
    cache = home / "cache"
    cache.mkdir(exist_ok=True)  # uv's download of 3.99 failed a moment ago: not tried again
    (cache / "uv-python-install.json").write_text(json.dumps({"3.99": {"at": time.time(), "error": "dns error"}}))
    r = setup_cli(home, FIXTURE, "--python", "3.99", timeout=300)
    assert r.returncode == 2
    assert "no Python 3.99" in r.stderr and "(host)" in r.stderr and "uv python install 3.99` failed: dns error" in r.stderr
    assert setup_cli(home, FIXTURE, "--python", "three").returncode == 2


def test_missing_header_is_repaired_with_a_debian_package(home, tmp_path):
    """The C extension includes <mpfr.h>: the compiler's error names the header, a repair table names
    libmpfr-dev, apt installs it in the sandbox (the host stays without it), and setup.sh replays the repair."""
    assert subprocess.run(["dpkg", "-s", "libmpfr-dev"], capture_output=True).returncode != 0, \
        "this test needs a host without libmpfr-dev"
    out = tmp_path / "contract"
    r = setup_cli(home, FIXTURES / "mpfrext", "--out", out, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True
    assert any("libmpfr-dev" in rep for rep in data["repairs"])
    steps = data["recipe"]["steps"]
    apt = [s for s in steps if s["kind"] == "apt"]
    assert apt and "libmpfr-dev" in apt[0]["command"]
    assert steps.index(apt[0]) < next(i for i, s in enumerate(steps) if s["kind"] == "project")
    assert "libmpfr-dev" in (out / "setup.sh").read_text()
    assert subprocess.run(["dpkg", "-s", "libmpfr-dev"], capture_output=True).returncode != 0


@pytest.mark.timeout(1800)  # may build the bullseye setup base on a fresh machine
def test_too_new_dependency_is_fixed_with_a_time_cutoff(home, tmp_path):
    """An old project imports an API its unpinned dependency has since removed; dependencies as of the
    source's date (uv --exclude-newer) make it work. With --jobs 1 the branches run one after the other."""
    src = tmp_path / "oldsigner"
    shutil.copytree(FIXTURES / "oldsigner", src)
    stamp = time.mktime((2021, 6, 1, 12, 0, 0, 0, 0, -1))
    for p in [src, *src.rglob("*")]:
        os.utime(p, (stamp, stamp))
    r = setup_cli(CACHE_HOME, src, "--name", "test/oldsigner", "--json", "--jobs", "1", timeout=1500)
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True
    assert data["recipe"]["cutoff"].startswith("2021-06-01")
    assert any("--exclude-newer 2021-06-01" in s["command"] for s in data["recipe"]["steps"])
    first = data["branches"][0]
    assert "cut-off" not in first["candidate"] and first["level"] < 3 and "itsdangerous" in first["reason"]
    # a 2021 project ranks Pythons that existed in 2021 first
    assert data["recipe"]["interpreter"]["provider"] == "debian:bullseye"
    envyard(CACHE_HOME, "rmi", "test/oldsigner")


def test_dependencies_newer_than_the_project_go_back_to_its_date_when_tests_fail(home, tmp_path):
    """An old project installs, imports and collects with today's itsdangerous, but 2 of its 8 tests use an API
    removed since (L4 at 0.75): its runtime dependencies go back to their releases as of the source date
    (uv's per-package --exclude-newer), the rest of the environment as it is, and every test passes; the
    contract keeps the step, so the clean replay verifies it."""
    src = tmp_path / "oldapi"
    shutil.copytree(FIXTURES / "oldapi", src)
    stamp = time.mktime((2021, 6, 1, 12, 0, 0, 0, 0, -1))
    for p in [src, *src.rglob("*")]:
        os.utime(p, (stamp, stamp))
    r = setup_cli(home, src, "--name", "test/oldapi", "--python", "3.11", "--jobs", "1", "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True, data["reason"]
    assert data["recipe"]["cutoff"] is None  # not a whole-environment cut-off branch
    step = next(s for s in data["recipe"]["steps"] if "dependencies-as-of-source" in s["why"])
    assert "--exclude-newer-package itsdangerous=2021-06-01T23:59:59Z" in step["command"]
    assert any("itsdangerous 2." in x and "→ 2.0." in x and "pass ratio 0.75" in x for x in data["repairs"]), \
        data["repairs"]
    assert any(p.lower().startswith("itsdangerous==2.0.") for p in data["recipe"]["pins"]), data["recipe"]["pins"]


def test_a_pth_file_that_setup_py_installs_is_in_site_packages(home, tmp_path):
    """pytest-cov's setup.py copies `pytest-cov.pth` into the install with its own build command, so subprocess
    coverage starts in every interpreter; an editable install skips it. The plan copies it into site-packages
    after the project's install, and the contract keeps the step."""
    src = tmp_path / "pthhook"
    shutil.copytree(FIXTURES / "pthhook", src)
    out = tmp_path / "contract"
    r = setup_cli(home, src, "--name", "test/pthhook", "--python", "3.11", "--out", out, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True, data["reason"]
    step = next(s for s in data["recipe"]["steps"] if "pthhook.pth" in s["why"])
    assert step["command"].startswith("cp src/pthhook.pth ")
    assert "cp src/pthhook.pth" in (out / "setup.sh").read_text()


def test_a_missing_module_whose_distribution_builds_against_debian_libraries(home, tmp_path):
    """The tests import MySQLdb, declared nowhere; its distribution, mysqlclient, has no Linux wheels and builds
    only with default-libmysqlclient-dev and pkg-config: they are installed before it, and both go into the
    contract in that order."""
    src = tmp_path / "mysqlimport"
    shutil.copytree(FIXTURES / "mysqlimport", src)
    r = setup_cli(home, src, "--name", "test/mysqlimport", "--python", "3.11", "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True, data["reason"]
    commands = [s["command"] for s in data["recipe"]["steps"]]
    apt = next(i for i, c in enumerate(commands) if "default-libmysqlclient-dev" in c and "pkg-config" in c)
    assert apt < next(i for i, c in enumerate(commands) if c.endswith(" mysqlclient"))


def test_a_requirement_whose_releases_are_all_yanked_is_left_out(home, tmp_path):
    """hypothesis' requirements/tools.in names types-pkg-resources, every release of which is yanked: uv finds
    the requirements unsatisfiable. The requirement is left out (a uv override) and the rest installs."""
    src = copy_fixture(tmp_path)
    (src / "requirements.txt").write_text("types-pkg-resources\n")
    r = setup_cli(home, src, "--name", "yanked", "--python", "3.11", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["verified"], data["reason"]
    assert any("every release of types-pkg-resources was withdrawn" in x for x in data["repairs"]), data["repairs"]


def test_a_url_requirement_that_cannot_be_fetched_is_installed_from_the_index(home, tmp_path):
    """uvicorn's requirements.txt names h11 from a git branch on GitHub; where that cannot be fetched, the index's
    h11 stands in (a uv override) and the contract replays it."""
    src = copy_fixture(tmp_path)
    (src / "requirements.txt").write_text("iniconfig @ git+http://127.0.0.1:9/iniconfig.git@main\n")
    r = setup_cli(home, src, "--name", "urlreq", "--python", "3.11", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["verified"], data["reason"]
    assert any("iniconfig from a URL that cannot be fetched" in x for x in data["repairs"]), data["repairs"]
    assert any("requirement-overrides.txt" in s["command"] and "iniconfig" in s["command"]
               for s in data["recipe"]["steps"]), data["recipe"]["steps"]


def test_install_failure_stops_at_l0_with_the_reason(home, tmp_path):
    src = copy_fixture(tmp_path, **{"dependencies = []": 'dependencies = ["envyard-no-such-package-xyz==1.0"]'})
    # One interpreter: the failure is the project's on any, and fallbacks would only build more setup bases
    r = setup_cli(home, src, "--name", "broken", "--python", "3.11", "--json")
    assert r.returncode == 1
    data = json.loads(r.stdout)
    assert data["level"] == -1 and data["image"] is None and data["reason"].startswith("L0 install")


def test_a_build_that_needs_a_missing_submodule_names_it(home, tmp_path):
    """A checkout made without --recursive: the build needs sources from a git submodule that is empty. The
    reason says which submodule and how to get it (python-rapidjson's RapidJSON headers, pyerfa's liberfa)."""
    src = copy_fixture(tmp_path)
    (src / ".gitmodules").write_text('[submodule "lib"]\n\tpath = vendor/lib\n\turl = https://example.org/lib.git\n')
    (src / "vendor" / "lib").mkdir(parents=True)
    (src / "setup.py").write_text("import os\nfrom setuptools import setup\n\n"
                                  "if not os.path.exists(os.path.join('vendor', 'lib', 'lib.h')):\n"
                                  "    raise RuntimeError('lib sources not found: initialize the submodule')\n"
                                  "setup()\n")
    r = setup_cli(home, src, "--name", "nosub", "--python", "3.11", "--json")
    assert r.returncode == 1
    data = json.loads(r.stdout)
    assert data["level"] == -1 and data["image"] is None
    assert "the repository's git submodules are not checked out (vendor/lib)" in data["reason"], data["reason"]
    assert "git submodule update --init --recursive" in data["reason"]


@pytest.mark.timeout(1800)  # with no tests, fallbacks start: on a fresh store they build Debian setup bases
def test_no_tests_is_not_success(home, tmp_path):
    src = copy_fixture(tmp_path)
    shutil.rmtree(src / "tests")
    r = setup_cli(home, src, "--name", "notests", "--json", timeout=1700)  # two base builds: slow on a loaded machine
    assert r.returncode == 1
    data = json.loads(r.stdout)
    assert data["level"] == 1 and "no tests collected" in data["reason"]
    # not verified: saved under a name that says so, never under the plain name
    assert data["verified"] is False and data["status"] == "unverified" and data["level_name"] == "L1 imports"
    assert data["image"] == "notests:unverified"
    names = [i["name"] for i in json.loads(envyard(home, "images", "--json").stdout)]
    assert "notests:unverified" in names and "notests:latest" not in names
    envyard(home, "rmi", "notests:unverified")


def _setup_bases(home) -> set[str]:
    return {i["name"] for i in json.loads(envyard(home, "images", "--json").stdout)
            if i["name"].startswith("setup-base/")}


def test_a_bug_in_the_projects_own_code_stops_the_search_at_once(home, tmp_path):
    """The project's __init__ raises: no repair, no other Python or base can fix that, so setup stops after the
    first branch and reports the traceback, instead of building Debian bases for fallback interpreters."""
    src = copy_fixture(tmp_path, **{'requires-python = ">=3.8"': 'requires-python = ">=3.9"'})
    with open(src / "src" / "tinycalc" / "__init__.py", "a") as f:
        f.write('\nraise RuntimeError("boom")\n')
    bases_before = _setup_bases(home)
    r = setup_cli(home, src, "--name", "boom", "--json")
    assert r.returncode == 1, r.stderr[-2000:]
    data = json.loads(r.stdout)
    assert data["status"] == "project-bug" and data["reason"].startswith("project bug: RuntimeError: boom")
    bug = data["project_bug"]
    assert bug["error"] == "RuntimeError: boom" and bug["file"] == "src/tinycalc/__init__.py"
    assert 'raise RuntimeError("boom")' in bug["traceback"]
    assert len(data["branches"]) == 1 and data["branches"][0]["candidate"].endswith("host")  # no fallbacks
    assert data["level"] == 0 and data["image"] == "boom:unverified"
    assert _setup_bases(home) == bases_before  # no base was built for a fallback
    envyard(home, "rmi", "boom:unverified")


def test_the_first_good_branch_wins_and_a_running_suite_is_killed(tmp_path):
    """Two branches on the host: branch 0's suite passes once branch 1 is inside its slow one (a 900 s sleep).
    Branch 0 wins at L4 and the search returns at once, with branch 1's tests killed, not waited for."""
    import envyard
    from envyard.setup.evidence import gather
    from envyard.setup.interpreters import host_interpreter
    from envyard.setup.plan import Candidate, Step
    from envyard.setup.search import Search

    src = copy_fixture(tmp_path)
    mark = "/root/.cache/uv/envyard-race-slow-started"  # the uv cache is shared by the search's sandboxes
    (src / "tests" / "test_calc.py").write_text(
        "import os, time\nfrom tinycalc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
        "def test_suite():\n    if os.path.exists('/opt/envyard-race-slow'):\n"
        f"        open({mark!r}, 'w').close()\n        os.system('sleep 901')\n"
        f"    else:\n        for _ in range(600):\n            if os.path.exists({mark!r}):\n                break\n"
        "            time.sleep(0.5)\n")
    yard = envyard.Yard(tmp_path / "home")
    try:
        host = host_interpreter()
        search = Search(yard, gather(src), src, "/work/tinycalc", [host], jobs=2, step_timeout=600,
                        test_timeout=1200)
        slow = Candidate(host, None, "slow", (Step("repair", "touch /opt/envyard-race-slow", "the slow suite"),))
        best = search.run([Candidate(host, None, "fast"), slow])
        returned = time.monotonic()
        assert best.id == 0 and best.good and best.pass_ratio == 1.0
        assert returned - best.ended < 10, returned - best.ended
        other = search.branches[1]
        assert other.state == "cancelled" and other.level == 3 and "branch 0 won" in other.reason
        assert subprocess.run(["pgrep", "-fx", "sleep 901"], capture_output=True).returncode == 1  # killed
        yard.store.remove_image(best.image.name)
    finally:
        yard.close()
        yard.gc()
    assert not [s for s in yard.sandboxes()]


def test_a_branch_the_winner_cancelled_does_not_win_when_it_returns_after(tmp_path):
    """Branch 0 wins before its completeness pass and cancels branch 1, which had reached a good L4 too and
    returns a moment later (the cancel came too late to stop it): branch 0 stays the winner. Before, branch 1
    became the winner on its return and cancelled branch 0 in turn; the result was the cancelled branch's."""
    import envyard
    from envyard.setup.evidence import gather
    from envyard.setup.interpreters import host_interpreter
    from envyard.setup.plan import Candidate
    from envyard.setup.search import LevelResult, Search

    class Scripted(Search):
        def _branch(self, b):  # no sandboxes: each branch's outcome and timing, scripted
            b.levels = [LevelResult(level, "scripted", True) for level in (0, 1, 3, 4)]
            b.tests = {"tests/test_a.py::test_a": "passed"}
            if b.id == 0:
                b.won = True
                time.sleep(2.0)  # its completeness pass
            else:
                time.sleep(0.8)  # still finishing when branch 0 wins

    yard = envyard.Yard(tmp_path / "home")
    try:
        host = host_interpreter()
        search = Scripted(yard, gather(FIXTURE), FIXTURE, "/work/tinycalc", [host])
        best = search.run([Candidate(host, None, "first"), Candidate(host, "2024-01-01T00:00:00Z", "second")])
        first, second = search.branches
        assert best is first and first.state == "done" and first.reason == "", (first.state, first.reason)
        assert second.state == "cancelled" and "branch 0 won" in second.reason
    finally:
        yard.close()


def with_a_hanging_pass(tmp_path) -> Path:
    """tinycalc with an import its tests do not need (msgpack: the completeness pass runs) and a docs extra
    whose build hangs (`sleep 902`): the pass never ends on its own."""
    src = copy_fixture(tmp_path, **{'test = ["pytest>=7"]': 'test = ["pytest>=7"]\n'
                                    'docs = ["slowbuild @ file:///work/tinycalc/slowbuild"]'})
    (src / "slowbuild").mkdir()
    (src / "slowbuild" / "setup.py").write_text("import os\nos.system('sleep 902')\n")
    (src / "src" / "tinycalc" / "extra.py").write_text("import msgpack\n")  # missing: the pass runs
    return src


def test_a_branch_wins_before_its_completeness_pass_which_the_time_limit_stops(tmp_path):
    """Branch 0 reaches L4 with a good pass ratio while branch 1 is inside a slow suite: branch 1 is cancelled
    at once, not when branch 0 has also finished its completeness pass (which waits for the tests while another
    branch runs). That pass then hangs (an extra whose build sleeps): the search's time limit stops the pass,
    not the branch, which rolls back to what it had and is the result."""
    import envyard
    from envyard.setup.evidence import gather
    from envyard.setup.interpreters import host_interpreter
    from envyard.setup.plan import Candidate, Step
    from envyard.setup.search import Search

    src = with_a_hanging_pass(tmp_path)
    mark = "/root/.cache/uv/envyard-pass-slow-started"
    (src / "tests" / "test_calc.py").write_text(
        "import os, time\nfrom tinycalc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
        "def test_suite():\n    if os.path.exists('/opt/envyard-race-slow'):\n"
        f"        open({mark!r}, 'w').close()\n        os.system('sleep 903')\n"
        f"    else:\n        for _ in range(600):\n            if os.path.exists({mark!r}):\n                break\n"
        "            time.sleep(0.5)\n")
    yard = envyard.Yard(tmp_path / "home")
    limit = 75
    try:
        host = host_interpreter()
        search = Search(yard, gather(src), src, "/work/tinycalc", [host], jobs=2, step_timeout=600,
                        test_timeout=1200, time_limit=limit)
        slow = Candidate(host, None, "slow", (Step("repair", "touch /opt/envyard-race-slow", "the slow suite"),))
        t = time.monotonic()
        best = search.run([Candidate(host, None, "fast"), slow])
        assert time.monotonic() - t < limit + 45
        assert best.id == 0 and best.good and best.pass_ratio == 1.0, (best.reason, best.levels)
        assert best.completion["detail"] == "stopped: the search's time limit passed", best.completion
        assert not any("slowbuild" in step.command for step in best.recipe.steps)  # rolled back
        other = search.branches[1]
        assert other.state == "cancelled" and "branch 0 won" in other.reason, other.reason
        assert other.ended - t < limit - 5, (other.ended - t)  # not when branch 0 finished
        for cmd in ("sleep 902", "sleep 903"):
            assert subprocess.run(["pgrep", "-fx", cmd], capture_output=True).returncode == 1, cmd
        yard.store.remove_image(best.image.name)
    finally:
        yard.close()
        yard.gc()
    assert not [s for s in yard.sandboxes()]


def test_the_time_limit_stops_a_branch_in_its_completeness_pass(tmp_path):
    """A branch alone runs the completeness pass before its tests, as part of the search: when the search's time
    limit passes while that pass hangs (an extra whose build sleeps), the branch is cancelled at once, every
    process of it is killed, and the result says the limit passed before any branch finished."""
    import envyard
    from envyard.setup.evidence import gather
    from envyard.setup.interpreters import host_interpreter
    from envyard.setup.plan import Candidate
    from envyard.setup.search import Search

    src = with_a_hanging_pass(tmp_path)
    yard = envyard.Yard(tmp_path / "home")
    limit = 60
    try:
        host = host_interpreter()
        search = Search(yard, gather(src), src, "/work/tinycalc", [host], jobs=2, step_timeout=600,
                        test_timeout=1200, time_limit=limit)
        t = time.monotonic()
        best = search.run([Candidate(host, None, "alone")])
        assert time.monotonic() - t < limit + 30
        for b in search.branches:
            assert b.state == "cancelled" and "time limit" in b.reason, (b.state, b.reason)
            assert b.doing.startswith("completeness pass"), b.doing  # where it was stopped
        assert best.levels == [] and "time limit (60s) passed before any branch finished" in best.reason
        assert best.image is None
        assert subprocess.run(["pgrep", "-f", "sleep 902"], capture_output=True).returncode == 1
    finally:
        yard.close()
        yard.gc()
    assert not [s for s in yard.sandboxes()]


@pytest.mark.parametrize("kind", ["file", "foreign-dir", "under-a-file", "unwritable"])
def test_a_bad_out_is_refused_before_any_work(home, tmp_path, kind):
    (tmp_path / "notes.txt").write_text("mine")
    out = {"file": tmp_path / "notes.txt", "foreign-dir": tmp_path, "under-a-file": tmp_path / "notes.txt" / "c",
           "unwritable": Path("/proc/envyard-contract")}[kind]
    t = time.monotonic()
    r = setup_cli(home, FIXTURE, "--out", out)
    assert r.returncode == 2 and time.monotonic() - t < 30
    assert r.stderr.startswith(f"error: --out {out}") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_an_earlier_contract_or_a_new_path_is_a_fine_out(home, tmp_path):
    """Checked before the source: a bad source then fails as a bad source, not as a bad --out."""
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "envyard.toml").write_text("# written by `envyard setup`\n[result]\n")
    for out in (tmp_path / "old", tmp_path / "new" / "deeper"):
        r = setup_cli(home, "/no/such/dir", "--out", out)
        assert r.returncode == 2 and "--out" not in r.stderr and "no such file or directory" in r.stderr
    assert not (tmp_path / "new").exists()


def test_setup_from_a_pypi_sdist(home, tmp_path):
    r = setup_cli(home, "pypi:iniconfig==2.3.0", "--out", tmp_path / "c", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["image"] == "setup/iniconfig-2.3.0:latest" and data["pass_ratio"] == 1.0


@pytest.mark.parametrize("source,expect", [
    ("/no/such/dir", "no such file or directory"),
    ("pypi:envyard-no-such-project-xyz", "no project named"),
    ("pypi:iniconfig==0.0.0", "has no source distribution"),
    ("pypi:bad name", "is not a PyPI source"),
    ("ftp://example.org/x", "error:"),
])
def test_bad_sources(home, source, expect):
    r = setup_cli(home, source)
    assert r.returncode == 2 and expect in r.stderr


def test_directory_without_python(home, tmp_path):
    (tmp_path / "empty" / "docs").mkdir(parents=True)
    (tmp_path / "empty" / "README.md").write_text("nothing here")
    r = setup_cli(home, tmp_path / "empty")
    assert r.returncode == 2 and "error:" in r.stderr


def hanging_fixture(tmp_path) -> Path:
    """tinycalc whose test collection never finishes."""
    src = copy_fixture(tmp_path)
    (src / "tests" / "conftest.py").write_text("import time\n\ntime.sleep(3600)\n")
    return src


def test_hanging_tests_hit_the_step_timeout(home, tmp_path):
    r = setup_cli(home, hanging_fixture(tmp_path), "--name", "hangs", "--timeout", "40", "--python", "3.11", "--json")
    assert r.returncode == 1, r.stderr[-2000:]
    data = json.loads(r.stdout)
    assert data["level"] == 1 and "passed the 40s limit" in data["reason"]
    assert json.loads(envyard(home, "ps", "--json").stdout) == []


def test_the_search_stops_at_its_time_limit_and_says_how_far_it_got(home, tmp_path):
    """--time-limit bounds the search, not each step: the hanging collection (its step limit is 1800 s) is
    stopped at 30 s, the result names the limit and the furthest level, and nothing is left running."""
    t = time.monotonic()
    r = setup_cli(home, hanging_fixture(tmp_path), "--name", "slow", "--time-limit", "30", "--python", "3.11",
                  "--json")
    assert r.returncode == 1, r.stderr[-2000:]
    assert time.monotonic() - t < 150
    data = json.loads(r.stdout)
    assert data["status"] == "failed" and data["image"] is None
    assert "time limit (30s) passed before any branch finished; the furthest" in data["reason"]
    assert "had reached L1" in data["reason"] or "had reached L2" in data["reason"], data["reason"]
    assert all("time limit" in b["reason"] for b in data["branches"]), data["branches"]
    assert json.loads(envyard(home, "ps", "--json").stdout) == []
    bad = setup_cli(home, hanging_fixture(tmp_path / "b"), "--time-limit", "0")
    assert bad.returncode == 2 and "--time-limit must be positive" in bad.stderr


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_interrupt_mid_search_cleans_up_every_branch(home, tmp_path, sig, code):
    """Ctrl-C, or SIGTERM from `timeout`/a CI runner: no sandbox, process or step image is left behind."""
    src = hanging_fixture(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "envyard.cli.main", "setup", str(src), "--name", "interrupted"],
                            env={"ENVYARD_HOME": str(home), **BARE, "PYTHONPATH": SRC},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_default)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if _collecting_under(proc.pid):  # ours: other setups may run on this machine meanwhile
                break
            time.sleep(0.5)
        assert proc.poll() is None, "setup ended before its tests were being collected"
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, stderr[-2000:]
    assert "interrupted" in stderr
    assert json.loads(envyard(home, "ps", "--json").stdout) == []
    # No process of this store is left: a leaked sandbox's bwrap names the store's directory
    assert subprocess.run(["pgrep", "-f", "--", str(home)], capture_output=True).returncode == 1
    names = [i["name"] for i in json.loads(envyard(home, "images", "--json").stdout)]
    assert not [n for n in names if n.startswith(("snapshot/", "setup/interrupted"))], names


def _collecting_under(ancestor: int) -> bool:
    """Whether a pytest collection runs in a process descending from `ancestor` (sandboxes included: host
    pids name the whole chain)."""
    found = subprocess.run(["pgrep", "-f", "--", "--collect-only -q -p no:cacheprovider"], capture_output=True,
                           text=True).stdout.split()
    for pid in map(int, found):
        while pid > 1:
            if pid == ancestor:
                return True
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                break
            pid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
    return False


def test_install_cannot_write_outside_its_sandbox(home, tmp_path):
    """A setup.py that writes into the host's /tmp, /root and /etc at build time changes nothing outside."""
    token = f"envyard-escape-{os.getpid()}-{time.time_ns()}"
    targets = [Path("/tmp") / token, Path("/root") / token, Path("/etc") / token]
    src = copy_fixture(tmp_path)
    (src / "setup.py").write_text(
        "import pathlib\nfrom setuptools import setup\n"
        f"for p in {[str(t) for t in targets]!r}:\n"
        "    try:\n        pathlib.Path(p).write_text('escaped')\n    except OSError:\n        pass\n"
        "setup()\n")
    r = setup_cli(home, src, "--name", "escape", "--json")
    data = json.loads(r.stdout)
    assert data["level"] >= 0, r.stderr[-2000:]  # the install ran (and wrote inside its sandbox)
    assert not [t for t in targets if t.exists()]


def test_setup_from_a_git_revision_and_from_a_tarball(home, tmp_path):
    repo = copy_fixture(tmp_path)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "v0.1"], cwd=repo, check=True)
    subprocess.run([*git, "tag", "v0.1"], cwd=repo, check=True)
    (repo / "tests" / "test_calc.py").write_text("def test_broken(:\n")  # a later commit breaks the tests
    subprocess.run([*git, "commit", "-qam", "broken"], cwd=repo, check=True)
    r = setup_cli(home, f"file://{repo}", "--rev", "v0.1", "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] == 0.9 and data["image"] == "setup/tinycalc-v0.1:latest"
    # without --out the contract goes to ./envyard-contract/<name> of the working directory
    assert (Path(cli_cwd()) / "envyard-contract" / "setup-tinycalc-v0.1" / "setup.sh").is_file()

    archive = tmp_path / "tinycalc-0.1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        t.add(FIXTURE, arcname="tinycalc-0.1.0")
    r = setup_cli(home, archive, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["image"] == "setup/tinycalc-0.1.0:latest"


def test_bad_git_sources(home, tmp_path):
    r = setup_cli(home, "https://github.com/pallets/flask.git", "--rev", "2.0.0")
    assert r.returncode == 5 and "cannot reach" in r.stderr
    r = setup_cli(home, FIXTURE, "--rev", "main")
    assert r.returncode == 2 and "error:" in r.stderr
