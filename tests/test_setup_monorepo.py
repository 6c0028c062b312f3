"""Monorepos: the Python project in a subdirectory of the repository (subproject.py), found or given with
--project-dir, set up from there with the whole repository in the sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from envyard.errors import BadInput
from envyard.setup import subproject
from envyard.setup.evidence import gather

from test_setup_runners import REPOS, setup_cli
from test_setup_services import write

SETUP_PY = "from setuptools import setup\nsetup(name='x')\n"
PYPROJECT = "[project]\nname = 'x'\nversion = '1'\n"


def test_the_subdirectory_with_packaging_and_the_most_tests_is_the_project():
    choice = subproject.find(REPOS / "monorepo")
    assert choice is not None and choice.subdir == "python/ringbuf"
    assert choice.others == ("python/ringbuf_cli",)
    assert "1 test files" in choice.why


def test_a_root_with_packaging_is_the_project(tmp_path):
    write(tmp_path, {"setup.py": SETUP_PY, "sub/pyproject.toml": PYPROJECT, "sub/tests/test_a.py": ""})
    assert subproject.find(tmp_path) is None


def test_a_root_pyproject_of_tool_settings_only_is_not_a_project(tmp_path):
    write(tmp_path, {"pyproject.toml": "[tool.ruff]\nline-length = 100\n", "setup.cfg": "[flake8]\nmax-line = 1\n",
                     "pkg/pyproject.toml": PYPROJECT, "pkg/tests/test_a.py": ""})
    assert subproject.find(tmp_path).subdir == "pkg"


def test_an_application_with_tests_at_the_root_keeps_the_root(tmp_path):
    """A vendored package below must not take over an app whose own tests are at the root."""
    write(tmp_path, {"requirements.txt": "requests\n", "app.py": "", "tests/test_a.py": "", "tests/test_b.py": "",
                     "libs/vendored/setup.py": SETUP_PY, "libs/vendored/test_v.py": ""})
    assert subproject.find(tmp_path) is None


def test_examples_and_docs_are_never_the_project(tmp_path):
    write(tmp_path, {"examples/demo/setup.py": SETUP_PY, "examples/demo/test_demo.py": "",
                     "docs/setup.py": SETUP_PY, "README.md": ""})
    assert subproject.find(tmp_path) is None


def test_without_tests_the_directory_named_like_the_repository_wins(tmp_path):
    repo = tmp_path / "acme"
    write(repo, {"bindings/setup.py": SETUP_PY, "bindings/b.py": "", "bindings/c.py": "",
                 "acme-python/setup.py": SETUP_PY, "acme-python/acme.py": ""})
    assert subproject.find(repo).subdir == "acme-python"


def test_project_dir_given_is_checked():
    root = REPOS / "monorepo"
    assert subproject.given(root, ".") is None and subproject.given(root, "") is None
    assert subproject.given(root, "python/ringbuf_cli/").subdir == "python/ringbuf_cli"
    with pytest.raises(BadInput, match="outside the repository"):
        subproject.given(root, "../tests_py_module")
    with pytest.raises(BadInput, match="no such directory"):
        subproject.given(root, "python/nope")
    with pytest.raises(BadInput, match="no such directory"):
        subproject.given(root, "package.json")


def test_a_subdirectory_project_has_its_repositorys_commit_date(tmp_path):
    write(tmp_path, {"README.md": "", "py/pyproject.toml": PYPROJECT, "py/x/__init__.py": ""})
    env = {**os.environ, "GIT_AUTHOR_DATE": "2020-05-01T12:00:00Z", "GIT_COMMITTER_DATE": "2020-05-01T12:00:00Z",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, env=env)
    dates = [f for f in gather(tmp_path / "py", repository=tmp_path).of("source_date")]
    assert [(f.value[:10], f.via) for f in dates] == [("2020-05-01", "git")]
    alone = gather(tmp_path / "py").of("source_date")  # without the repository: only the files' times
    assert [f.via for f in alone] == ["mtime"]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("monorepo-home")


def test_a_monorepo_is_set_up_from_its_project_directory_with_the_whole_repository(home, tmp_path):
    """The tests read ../../shared/sizes.json: they pass only because the whole repository is in the sandbox
    while install and tests run in python/ringbuf/. The contract says where to run it."""
    out = tmp_path / "contract"
    r = setup_cli(home, REPOS / "monorepo", "--name", "t/mono", "--python", "3.11", "--out", out, "--json")
    assert r.returncode == 0, (r.stderr[-2000:], r.stdout[-3000:])
    data = json.loads(r.stdout)
    assert data["project_dir"] == "python/ringbuf" and "python/ringbuf/" in data["project_dir_why"]
    assert data["level"] == 4 and data["pass_ratio"] == 1.0 and data["verified"] is True, data["reason"]
    assert data["tests_total"] == 2 and data["replay"]["ok"]
    dockerfile = (out / "Dockerfile").read_text()
    assert "COPY . .\n# the Python project is a subdirectory of the repository\n" \
           "WORKDIR /work/project/python/ringbuf\n" in dockerfile
    assert "The project root is python/ringbuf/ in the repository" in (out / "setup.sh").read_text()
    contract = tomllib.loads((out / "envyard.toml").read_text())
    assert contract["result"]["project_dir"] == "python/ringbuf"
    run = subprocess.run(["python3", "-m", "envyard.cli.main", "images", "--json"], capture_output=True, text=True,
                         env={**os.environ, "ENVYARD_HOME": str(home)})
    image = [i for i in json.loads(run.stdout) if i["name"] == "t/mono:latest"]
    assert image and image[0]["config"]["workdir"] == "/work/monorepo/python/ringbuf", run.stdout[-2000:]
    assert image[0]["config"]["provenance"]["project_dir"] == "python/ringbuf"


def test_a_bad_project_dir_is_refused_with_exit_2(home, tmp_path):
    r = setup_cli(home, REPOS / "monorepo", "--project-dir", "python/nope", "--out", tmp_path / "c", "--json")
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "--project-dir 'python/nope': no such directory" in r.stderr
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").iterdir())
