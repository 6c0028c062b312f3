"""`envyard setup` (first version): real installs from PyPI into a sandbox over the host's Python."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "setup" / "tinycalc"


def setup_cli(home, *args):
    return subprocess.run([sys.executable, "-m", "envyard.cli.main", "setup", *map(str, args)],
                          capture_output=True, text=True, env={"ENVYARD_HOME": str(home), "PATH": "/usr/bin:/bin"},
                          timeout=900)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    h = tmp_path_factory.mktemp("setup-home")
    yield h
    subprocess.run([sys.executable, "-m", "envyard.cli.main", "gc"], env={"ENVYARD_HOME": str(h)}, capture_output=True)


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
    assert data["level"] == 4 and data["pass_ratio"] == 0.75 and data["image"] == "setup/tinycalc:latest"
    assert [lv["ok"] for lv in data["levels"]] == [True, True, None, True, True]
    assert data["verified"] is True and data["replay"]["ok"] is True  # a clean replay from the base reproduced it
    dockerfile = (out / "Dockerfile").read_text()
    assert dockerfile.startswith("# written by") and "FROM debian:bookworm" in dockerfile and "-m venv /opt/venv" in dockerfile
    contract = tomllib.loads((out / "envyard.toml").read_text())
    assert contract["result"]["level"] == 4 and contract["result"]["verified"] is True
    assert contract["baseline"]["tests.test_calc::test_known_failure"] == "failed"
    assert contract["baseline"]["tests.test_calc::test_add"] == "passed"
    assert any(e["kind"] == "python_constraint" and e["file"] == "pyproject.toml" for e in contract["evidence"])
    assert "-m venv /opt/venv" in (out / "setup.sh").read_text()
    assert "pytest" in (out / "test.sh").read_text()
    # the image runs the project's tests from its workdir with its interpreter on PATH
    run = subprocess.run([sys.executable, "-m", "envyard.cli.main", "run", "setup/tinycalc", "--",
                          "python", "-m", "pytest", "-q"], capture_output=True, text=True,
                         env={"ENVYARD_HOME": str(home)}, timeout=120)
    assert "1 failed, 3 passed" in run.stdout


def test_unsatisfiable_python_constraint(home, tmp_path):
    src = copy_fixture(tmp_path, **{'requires-python = ">=3.8"': 'requires-python = ">=3.99"'})
    r = setup_cli(home, src)
    assert r.returncode == 1
    assert ">=3.99" in r.stderr and "provides" in r.stderr


def test_install_failure_stops_at_l0_with_the_reason(home, tmp_path):
    src = copy_fixture(tmp_path, **{"dependencies = []": 'dependencies = ["envyard-no-such-package-xyz==1.0"]'})
    r = setup_cli(home, src, "--name", "broken", "--json")
    assert r.returncode == 1
    data = json.loads(r.stdout)
    assert data["level"] == -1 and data["image"] is None and data["reason"].startswith("L0 install")


def test_no_tests_is_not_success(home, tmp_path):
    src = copy_fixture(tmp_path)
    shutil.rmtree(src / "tests")
    r = setup_cli(home, src, "--name", "notests", "--json")
    assert r.returncode == 1
    data = json.loads(r.stdout)
    assert data["level"] == 1 and "no tests collected" in data["reason"]


def test_setup_from_a_pypi_sdist(home, tmp_path):
    r = setup_cli(home, "pypi:iniconfig==2.3.0", "--out", tmp_path / "c", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["image"] == "setup/iniconfig-2.3.0:latest" and data["pass_ratio"] == 1.0


@pytest.mark.parametrize("source,expect", [
    ("/no/such/dir", "not a directory"),
    ("pypi:envyard-no-such-project-xyz", "no project named"),
    ("pypi:iniconfig==0.0.0", "has no source distribution"),
    ("pypi:bad name", "is not a PyPI source"),
    ("https://example.org/x.git", "not supported yet"),
])
def test_bad_sources(home, source, expect):
    r = setup_cli(home, source)
    assert r.returncode == 2 and expect in r.stderr


def test_directory_without_python(home, tmp_path):
    (tmp_path / "empty" / "docs").mkdir(parents=True)
    (tmp_path / "empty" / "README.md").write_text("nothing here")
    r = setup_cli(home, tmp_path / "empty")
    assert r.returncode == 2 and "error:" in r.stderr
