"""Evidence extraction (envyard.setup.evidence): facts read from sample repositories under tests/fixtures/repos,
each checked with its provenance (file, line, rule). Nothing from a repository is executed; no network."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from envyard.errors import BadInput
from envyard.setup import Evidence, Fact, NotARepository, gather
from envyard.setup.sources import shell, yamltext
from envyard.setup.sources.knowledge import service_for_image, system_packages
from envyard.setup.sources.specs import poetry_to_pep440, python_spec, version_hint
from envyard.setup.sources.tox import expand_envlist

REPOS = Path(__file__).parent / "fixtures" / "repos"


@functools.cache
def ev(name: str) -> Evidence:
    return gather(REPOS / name)


def find(e: Evidence, kind: str, value=None, *, file=None, line=None, via=None) -> list[Fact]:
    """Facts of `kind` whose value equals `value` (a str) or contains it (a dict), with the given provenance."""
    out = []
    for f in e.of(kind):
        if isinstance(value, dict):
            if not isinstance(f.value, dict) or any(f.value.get(k) != v for k, v in value.items()):
                continue
        elif value is not None and f.value != value:
            continue
        if (file is None or f.file == file) and (line is None or f.line == line) and (via is None or f.via == via):
            out.append(f)
    return out


def one(e: Evidence, kind: str, value=None, **where) -> Fact:
    found = find(e, kind, value, **where)
    assert len(found) == 1, f"expected one {kind} {value} {where}, got {found}\nall: {e.of(kind)}"
    return found[0]


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# ---------------------------------------------------------------------------------------------------- PEP 621

def test_pep621_constraint_dependencies_and_extras():
    e = ev("pep621")
    assert e.problems == []
    one(e, "python_constraint", ">=3.9", file="pyproject.toml", line=8, via="pep621.requires-python")
    assert e.python_constraint() == SpecifierSet(">=3.9")
    one(e, "dependency", {"name": "requests", "spec": ">=2.28", "marker": None}, file="pyproject.toml", line=15,
        via="pep621.dependencies")
    tomli = one(e, "dependency", {"name": "tomli"}, line=16)
    assert tomli.value["marker"] == 'python_version < "3.11"'
    assert tomli.value["requirement"] == 'tomli>=1.1; python_version < "3.11"'
    one(e, "extra", {"name": "pytest", "spec": ">=7", "extra": "test"}, line=21, via="pep621.optional-dependencies")
    one(e, "extra", {"name": "pytest-cov", "extra": "test"}, line=21)
    one(e, "extra", {"name": "sphinx", "extra": "docs"}, line=23)
    assert not find(e, "dependency", {"name": "pytest"})


def test_pep735_dependency_groups_expand_include_group():
    e = ev("pep621")
    one(e, "dependency_group", {"name": "ruff", "group": "lint"}, line=27, via="pep735.dependency-groups")
    one(e, "dependency_group", {"name": "pytest", "spec": ">=8", "group": "test"}, line=29)
    included = one(e, "dependency_group", {"name": "ruff", "group": "test"})
    assert included.value["included_from"] == "lint" and included.line == 27


def test_pep621_hints_build_tests_layout():
    e = ev("pep621")
    hints = [(f.value, f.line) for f in find(e, "python_hint", via="pep621.classifiers")]
    assert hints == [("3.9", 11), ("3.12", 12)]
    one(e, "python_hint", "3.11", file=".python-version", line=1)
    assert e.python_constraint() == SpecifierSet(">=3.9")          # hints never narrow the constraint
    one(e, "build_backend", "hatchling.build", file="pyproject.toml", line=3, via="pep517.build-backend")
    one(e, "build_requirement", {"name": "hatchling"}, line=2)
    one(e, "test_runner", "pytest", file="pyproject.toml", line=33, via="pytest.ini_options")
    one(e, "test_runner", "pytest", file="tests/conftest.py", via="conftest.py")
    plugins = {f.value["name"] for f in e.of("test_plugin")}
    assert plugins == {"pytest-cov", "pytest-xdist", "pytest-asyncio"}
    one(e, "test_path", "tests", line=35)
    one(e, "test_command", "pytest {args:tests}", file="pyproject.toml", line=42, via="hatch.envs.scripts")
    one(e, "dependency_group", {"name": "coverage", "extras": ["toml"], "group": "hatch:default"}, line=39)
    one(e, "lock_file", "uv", file="uv.lock")
    one(e, "package_dir", "src", via="layout.src")
    one(e, "top_level_package", {"name": "pep621demo", "path": "src/pep621demo"}, file="src/pep621demo/__init__.py")
    one(e, "system_package", {"name": "libpq-dev", "for": "psycopg2", "when": "always"}, file="pyproject.toml",
        line=17, via="table:system_packages")
    assert not e.of("test_command") or all(f.via != "unittest.discover" for f in e.of("test_command"))


def test_to_dict_is_json_with_provenance():
    d = json.loads(json.dumps(ev("pep621").to_dict()))
    assert d["summary"]["python_constraint"] == ">=3.9"
    assert d["summary"]["test_runners"] == ["pytest"]
    assert d["summary"]["lock_files"] == ["uv"]
    assert d["summary"]["python_hints"][0] == "3.12"
    fact = next(f for f in d["facts"] if f["kind"] == "python_constraint")
    assert fact == {"kind": "python_constraint", "value": ">=3.9", "file": "pyproject.toml", "line": 8,
                    "via": "pep621.requires-python"}
    assert d["problems"] == []


# ---------------------------------------------------------------------------------------------------- Poetry

def test_poetry_caret_tilde_groups_and_extras():
    e = ev("poetry")
    assert e.problems == []
    one(e, "python_constraint", ">=3.8,<4.0", file="pyproject.toml", line=9, via="poetry.python")
    assert e.python_constraint() == SpecifierSet(">=3.8,<4.0")
    one(e, "dependency", {"name": "requests", "spec": ">=2.28.1,<3.0.0"}, line=10, via="poetry.dependencies")
    one(e, "dependency", {"name": "click", "spec": ">=8.1,<8.2"}, line=11)
    one(e, "dependency", {"name": "attrs", "spec": ""}, line=12)
    tomli = one(e, "dependency", {"name": "tomli", "spec": ">=2.0,<3.0"}, line=13)
    assert tomli.value["marker"] == 'python_version < "3.11"'
    one(e, "extra", {"name": "lxml", "spec": ">=4.9,<5.0", "extra": "xml"}, line=14)
    assert not find(e, "dependency", {"name": "lxml"})              # optional: only through its extra
    one(e, "local_package", {"name": "mylib", "path": "../mylib", "editable": True}, line=15)
    one(e, "dependency_group", {"name": "pytest", "spec": ">=7.4,<8.0", "group": "test"}, line=21, via="poetry.group")
    one(e, "dependency_group", {"name": "black", "spec": ">=0.0.3,<0.0.4", "group": "dev"}, line=24,
        via="poetry.dev-dependencies")
    one(e, "build_backend", "poetry.core.masonry.api", line=28)
    one(e, "lock_file", "poetry", file="poetry.lock")
    one(e, "package_dir", "src", file="pyproject.toml", via="poetry.packages.from")
    assert {f.value["name"] for f in e.of("system_package")} == {"libxml2-dev", "libxslt1-dev"}


@pytest.mark.parametrize("poetry, pep440", [
    ("^1.2.3", ">=1.2.3,<2.0.0"), ("^0.2.3", ">=0.2.3,<0.3.0"), ("^0.0.3", ">=0.0.3,<0.0.4"), ("^0.0", ">=0.0,<0.1"),
    ("^0", ">=0,<1"), ("^1.2", ">=1.2,<2.0"), ("~1.2.3", ">=1.2.3,<1.3.0"), ("~1.2", ">=1.2,<1.3"), ("~1", ">=1,<2"),
    ("*", ""), ("1.2.*", "==1.2.*"), ("1.2.3", "==1.2.3"), (">= 1.2, < 2.0", ">=1.2,<2.0"),
    (">=1.2 <2.0", ">=1.2,<2.0"),
    ("~=1.4", "~=1.4"), ("^2.7 || ^3.5", ">=2.7,<4.0"), ("!=1.5", "!=1.5"),
])
def test_poetry_constraints_to_pep440(poetry, pep440):
    assert poetry_to_pep440(poetry) == pep440


def test_poetry_constraint_garbage_raises():
    with pytest.raises(ValueError):
        poetry_to_pep440("^banana")


# ---------------------------------------------------------------------------------------------------- setup.py

def test_legacy_setup_py_by_ast():
    e = ev("legacy_setuppy")
    # python_requires via a variable: the line is where the text is
    one(e, "python_constraint", ">=3.7", file="setup.py", line=5, via="setup.py:python_requires")
    one(e, "dependency", {"name": "six", "spec": ">=1.10"}, line=7, via="setup.py:install_requires")
    one(e, "dependency", {"name": "lxml"}, line=8)
    one(e, "dependency", {"name": "python-dateutil"}, line=10)              # from `+=`
    one(e, "extra", {"name": "PyYAML", "extra": "yaml"}, line=31, via="setup.py:extras_require")
    one(e, "extra", {"name": "pytest", "spec": ">=6", "extra": "test"}, line=11)   # TEST_REQUIRES
    one(e, "extra", {"name": "mock", "extra": "test"}, line=11)
    conditional = one(e, "dependency", {"name": "importlib-metadata"}, via="setup.py:extras_require")
    assert conditional.value["marker"] == 'python_version < "3.8"'
    one(e, "dependency_group", {"name": "pytest", "group": "tests_require"}, line=11, via="setup.py:tests_require")
    one(e, "test_suite", "tests", line=37)
    assert [(f.value, f.line) for f in e.of("python_hint")] == [("3.7", 39), ("3.8", 40)]
    one(e, "build_backend", "setuptools (legacy)", file="setup.py", via="setup.py.legacy")
    assert e.problems == ["setup.py:36: setup_requires is computed at run time (get_setup_requires()); not read"]


def test_unittest_suite_without_pytest_config():
    e = ev("legacy_setuppy")
    one(e, "test_runner", "unittest", file="tests/test_legacy.py", line=1, via="unittest.imports")
    one(e, "test_command", "python -m unittest discover -s tests", via="unittest.discover")
    assert not find(e, "test_runner", "pytest")


def test_setup_py_forms(tmp_path):
    write(tmp_path, {"setup.py": (
        "import setuptools\n"
        "BASE = ['a>=1']\n"
        "BASE.append('b')\n"
        "BASE.extend(['c<2'])\n"
        "META = dict(install_requires=BASE + ['d'], python_requires='>=3.6.*')\n"
        "setuptools.setup(name='x', package_dir={'': 'lib'}, ext_modules=[object()], **META)\n"),
        "lib/x/__init__.py": ""})
    e = gather(tmp_path)
    assert [f.value["name"] for f in e.of("dependency")] == ["a", "b", "c", "d"]
    assert [f.line for f in e.of("dependency")] == [2, 3, 4, 5]
    one(e, "python_constraint", ">=3.6", line=5)                      # repaired, with a note
    assert any("'>=3.6.*' is not valid PEP 440" in p for p in e.problems)
    one(e, "package_dir", "lib", via="setup.py:package_dir")
    one(e, "native_build", "ext_modules", line=6)


def test_python2_setup_py_is_a_problem_not_a_crash(tmp_path):
    write(tmp_path, {"setup.py": "print 'hello'\nsetup(name='old', python_requires='>=2.7')\n"})
    e = gather(tmp_path)
    assert e.problems[0].startswith("setup.py:1: invalid Python")
    one(e, "python_constraint", ">=2.7", line=2, via="setup.py:python_requires (pattern)")


def test_setup_py_is_never_executed(tmp_path):
    marker = tmp_path / "EXECUTED"
    payload = f"open({str(marker)!r}, 'w').write('x')\n"
    write(tmp_path, {"setup.py": payload + "from setuptools import setup\nsetup(install_requires=['a'])\n",
                     "noxfile.py": "import nox\n" + payload +
                                   "@nox.session\ndef tests(session):\n    session.run('pytest')\n",
                     "conftest.py": payload, "manage.py": "# django\n" + payload})
    e = gather(tmp_path)
    assert not marker.exists()
    one(e, "dependency", {"name": "a"})
    one(e, "test_command", "nox -s tests")


# ---------------------------------------------------------------------------------------------------- setup.cfg

def test_setup_cfg_project():
    e = ev("setupcfg")
    assert e.problems == []
    one(e, "python_constraint", ">=3.8,<4", file="setup.cfg", line=12, via="setup.cfg:python_requires")
    one(e, "dependency", {"name": "attrs", "spec": ">=21"}, line=14, via="setup.cfg:install_requires")
    res = one(e, "dependency", {"name": "importlib-resources"}, line=16)   # the comment line is skipped
    assert res.value["marker"] == 'python_version < "3.9"'
    one(e, "extra", {"name": "pytest", "spec": ">=7", "extra": "test"}, line=25)
    one(e, "extra", {"name": "pytest-timeout", "extra": "test"}, line=26)
    one(e, "dependency_group", {"name": "pytest", "group": "tests_require"}, line=18)
    assert [(f.value, f.line) for f in e.of("python_hint")] == [("3.10", 5), ("3.11", 6)]
    one(e, "package_dir", "src", file="setup.cfg", line=10, via="setup.cfg:package_dir")
    one(e, "test_runner", "pytest", file="setup.cfg", line=28, via="setup.cfg [tool:pytest]")
    one(e, "test_plugin", {"name": "pytest-timeout"}, line=30)
    assert e.values("build_backend") == ["setuptools.build_meta"]       # pyproject's, not "legacy"


def test_constraints_intersect(tmp_path):
    write(tmp_path, {"pyproject.toml": '[project]\nname = "x"\nrequires-python = ">=3.8"\n',
                     "setup.cfg": "[options]\npython_requires = <3.12\n[metadata]\nclassifiers =\n"
                                  "    Programming Language :: Python :: 3.7\n",
                     "setup.py": "from setuptools import setup\nsetup(python_requires='!=3.9.*')\n"})
    e = gather(tmp_path)
    assert e.python_constraint() == SpecifierSet(">=3.8,<3.12,!=3.9.*")
    assert e.python_hints() == ["3.7"]


def test_no_constraint_is_none(tmp_path):
    write(tmp_path, {"main.py": "print(1)\n", ".python-version": "3.12.1\n"})
    e = gather(tmp_path)
    assert e.python_constraint() is None
    assert e.python_hints() == ["3.12.1"]
    one(e, "top_level_module", "main")


# ---------------------------------------------------------------------------------------------------- requirements

def test_requirements_nested_includes_and_cycle():
    e = ev("requirements")
    one(e, "dependency", {"name": "click"}, file="requirements/common.txt", line=1)
    one(e, "dependency", {"name": "numpy", "spec": ">=1.24"}, file="requirements/base.txt", line=3)
    flask = one(e, "dependency", {"name": "Flask", "spec": ">=2.0,<3"}, file="requirements.txt", line=7)
    assert flask.value["marker"] == 'python_version >= "3.8"'
    one(e, "dependency", {"name": "cryptography", "spec": "==41.0.7"}, line=8)      # --hash dropped
    widgets = one(e, "dependency", {"name": "widgets"}, line=10)
    assert widgets.value["url"].startswith("git+https://github.com/example/widgets.git@v1.2")
    one(e, "constraint", {"name": "urllib3", "spec": "<2"}, file="constraints.txt", line=1)
    one(e, "requirements_file", {"path": "constraints.txt", "role": "constraints"}, file="requirements.txt", line=3,
        via="requirements.-c")
    one(e, "requirements_file", {"path": "requirements/base.txt"}, file="requirements.txt", line=2,
        via="requirements.-r")
    one(e, "requirements_file", {"path": "requirements/common.txt"}, file="requirements/base.txt", line=1)
    one(e, "package_index", "https://pypi.example.org/simple", line=4)
    one(e, "local_package", {"path": "./libs/helper", "resolved": "libs/helper", "editable": True}, line=5)
    assert len(e.of("local_package")) == 1                              # `-e .` is the project itself
    one(e, "dependency", {"name": "pytest"}, file="dev-requirements.in", line=2)
    assert e.problems == [
        "requirements/base.txt:2: -r ../requirements.txt: include cycle "
        "(requirements.txt → requirements/base.txt → requirements.txt); not followed again",
        "requirements.txt:11: requirement file missing.txt not found",
    ]
    # each requirement is recorded once even though requirements.txt is reached three ways
    assert len(find(e, "dependency", {"name": "click"})) == 1


def test_pipfile():
    e = ev("requirements")
    one(e, "dependency", {"name": "requests", "spec": ""}, file="Pipfile", line=7, via="pipfile.packages")
    one(e, "dependency", {"name": "django", "spec": ">=4.2", "extras": ["argon2"]}, file="Pipfile", line=8)
    one(e, "dependency_group", {"name": "pytest", "group": "dev"}, file="Pipfile", line=11)
    one(e, "python_hint", "3.10", file="Pipfile", line=14)


# ---------------------------------------------------------------------------------------------------- tox, nox, make

def test_tox_envlist_commands_deps_services():
    e = ev("toxnox")
    assert e.problems == []
    hints = [(f.value, f.line) for f in find(e, "python_hint", file="tox.ini")]
    assert hints == [("3.9", 2), ("3.10", 2), ("3.11", 2)]
    one(e, "test_command", "pytest {posargs:tests}", file="tox.ini", line=12, via="tox.commands")
    one(e, "test_command", "tox", file="tox.ini", via="tox.env")
    assert not find(e, "test_command", "flake8 toxnox")
    one(e, "dependency_group", {"name": "pytest", "group": "tox"}, file="tox.ini", line=6)
    one(e, "dependency_group", {"name": "flake8", "group": "tox:lint"}, line=15)
    one(e, "dependency_group", {"name": "hypothesis", "group": "tox"}, file="requirements-test.txt", line=1)
    one(e, "service", {"name": "postgres", "env": "DATABASE_URL"}, file="tox.ini", line=9, via="tox.setenv")
    one(e, "service", {"name": "redis", "env": "REDIS_URL"}, file="tox.ini", line=10, via="tox.passenv")
    one(e, "test_runner", "pytest", file="tox.ini", line=18, via="tox.ini [pytest]")


def test_nox_sessions_by_ast():
    e = ev("toxnox")
    assert [(f.value, f.line) for f in find(e, "python_hint", file="noxfile.py")] == [("3.10", 3), ("3.11", 3)]
    one(e, "test_command", "pytest -x", file="noxfile.py", line=10, via="nox.session.run")
    one(e, "test_command", "nox -s tests", file="noxfile.py", line=7, via="nox.session")
    assert not find(e, "test_command", "nox -s docs")
    one(e, "dependency_group", {"name": "pytest-mock", "group": "nox:tests"}, file="noxfile.py", line=9)
    one(e, "dependency_group", {"name": "sphinx", "group": "nox:docs"}, line=15)


def test_makefile_test_target():
    e = ev("toxnox")
    one(e, "test_command", "make test", file="Makefile", line=3, via="Makefile.target")
    one(e, "test_command", "python -m pytest -q tests", file="Makefile", line=4, via="Makefile:test")
    assert not find(e, "test_command", file="Makefile", line=7)


def test_tox_in_pyproject_and_tox_toml(tmp_path):
    write(tmp_path, {
        "pyproject.toml": '[project]\nname = "x"\n\n[tool.tox]\nlegacy_tox_ini = """\n[tox]\nenvlist = py38\n\n'
                          '[testenv]\ncommands =\n    python -m pytest\n"""\n',
        "sub/tox.toml": "",                             # only the root tox.toml counts
    })
    e = gather(tmp_path)
    one(e, "python_hint", "3.8", file="pyproject.toml", line=7, via="tox.envlist")
    one(e, "test_command", "python -m pytest", file="pyproject.toml", line=11, via="tox.commands")
    other = write(tmp_path / "native", {
        "tox.toml": 'env_list = ["3.13", "py312"]\n\n[env_run_base]\ndeps = ["pytest"]\n'
                    'commands = [["pytest", "--color=yes", "{posargs}"]]\n\n'
                    '[env.lint]\ncommands = [["ruff", "check"]]\n',
        "x.py": ""})
    e = gather(other)
    one(e, "python_hint", "3.12", file="tox.toml", line=1)
    one(e, "test_command", "pytest --color=yes {posargs}", file="tox.toml", line=5)
    one(e, "dependency_group", {"name": "pytest", "group": "tox"}, line=4)
    assert not find(e, "test_command", "tox -e lint")


# ---------------------------------------------------------------------------------------------------- Django

def test_django_manage_py():
    e = ev("django_site")
    assert e.problems == []
    one(e, "test_runner", "django", file="manage.py", line=7, via="django.manage.py")
    one(e, "test_command", "python manage.py test", file="manage.py", line=7)
    one(e, "dependency", {"name": "Django", "spec": ">=4.2,<5"}, file="requirements.txt", line=1)
    assert e.values("test_runner") == ["django"]
    assert {f.value["name"] for f in e.of("top_level_package")} == {"mysite", "polls"}


# ---------------------------------------------------------------------------------------------------- CI, docs, Docker

def test_github_actions_workflow():
    e = ev("ci_project")
    wf = ".github/workflows/tests.yml"
    hints = [(f.value, f.line) for f in find(e, "python_hint", file=wf)]
    assert hints == [("3.9", 10), ("3.10", 10), ("3.11", 10)]
    one(e, "service", {"name": "postgres", "image": "postgres:15"}, file=wf, line=12, via="github-actions.services")
    one(e, "service", {"name": "redis", "image": "redis:7-alpine"}, file=wf, line=16)
    one(e, "service", {"name": "postgres", "env": "DATABASE_URL"}, file=wf, line=4, via="github-actions.env")
    assert [(f.value["name"], f.line) for f in find(e, "system_package", file=wf)] == [("libpq-dev", 24),
                                                                                       ("libxml2-dev", 24)]
    one(e, "test_command", "cd tests && python -m pytest -q --maxfail=5", file=wf, line=32, via="github-actions.run")
    one(e, "test_runner", "pytest", file=wf, line=32)
    one(e, "install_command", "pip install -r requirements.txt", file=wf, line=28)
    assert not find(e, "service", {"name": "postgres"}, file=wf, line=14)   # the service's own env is not a need


def test_travis_compose_dockerfile_readme():
    e = ev("ci_project")
    one(e, "python_hint", "3.8", file=".travis.yml", line=3)
    one(e, "service", {"name": "mongo"}, file=".travis.yml", line=5)
    one(e, "test_command", "tox -e py38", file=".travis.yml", line=6)
    one(e, "service", {"name": "postgres", "image": "postgres:16-alpine"}, file="docker-compose.yml", line=6)
    one(e, "service", {"name": "elasticsearch"}, file="docker-compose.yml", line=8)
    assert not find(e, "service", {"name": "app"})                         # built from the repo: not a service
    one(e, "python_hint", "3.11", file="Dockerfile", line=2, via="dockerfile.from")     # ARG default expanded
    assert [(f.value["name"], f.line) for f in find(e, "system_package", file="Dockerfile")] == [
        ("build-essential", 6), ("libpq-dev", 7)]
    one(e, "service", {"name": "redis", "env": "REDIS_URL"}, file="Dockerfile", line=10)
    assert [(f.value["name"], f.line) for f in find(e, "system_package", file="README.md")] == [
        ("libxslt1-dev", 7), ("graphviz", 8), ("pkg-config", 13)]          # prose on line 11 is not a command
    one(e, "system_package", {"name": "libpq-dev", "for": "psycopg2", "when": "always"}, file="requirements.txt",
        line=1)
    one(e, "system_package", {"name": "libxslt1-dev", "for": "lxml", "when": "source-build"}, line=2)
    assert e.problems == []


def test_yaml_fallback_reader_gives_the_same_ci_facts(monkeypatch):
    def ci_facts(e):
        return sorted(json.dumps(f.to_dict(), sort_keys=True) for f in e.facts
                      if f.file.endswith((".yml", ".yaml")))
    with_pyyaml = ci_facts(gather(REPOS / "ci_project"))
    monkeypatch.setattr(yamltext, "yaml", None)
    without = ci_facts(gather(REPOS / "ci_project"))
    assert with_pyyaml == without and len(without) > 15


def test_ci_tools_the_tests_never_run_are_not_installed(tmp_path):
    """A CI installs a Go toolchain for a conformance runner, pandoc for its docs (setup.py's `pypandoc` import
    is not pandoc), Python 2, git and a library: the tools no test or build file runs are marked unused and
    left out of the apt step (with a note); git, which a test runs, and the library stay. The docs' offer of the
    project's own Debian package is not installed either."""
    from envyard.setup.interpreters import host_interpreter
    from envyard.setup.plan import Candidate, plan

    write(tmp_path, {
        ".travis.yml": "language: python\naddons:\n  apt:\n    packages:\n    - golang-1.15\n    - pandoc\n"
                       "    - python2.7\n    - git\n    - libyaml-dev\n    - sqlite3\n",
        "setup.py": "try:\n    from pypandoc import convert\nexcept ImportError:\n    convert = None\n",
        "tests/test_cli.py": "import subprocess\n\n\ndef test_repo(tmp_path):\n"
                             "    subprocess.run(['git', 'init', str(tmp_path)], check=True)\n"
                             "    # sqlite3 is the standard module here, not the program: still a word, so kept\n"
                             "    # and let's go: prose does not name the go program\n",
        "pkg/__init__.py": "",
        "pyproject.toml": '[project]\nname = "Pkg_Tool"\nversion = "1.0"\n',
        "docs/install.rst": "Or from Debian::\n\n    sudo apt-get install python-pkg-tool\n"})
    e = gather(tmp_path)
    when = {f.value["name"]: f.value.get("when", "always") for f in e.of("system_package")}
    assert when == {"golang-1.15": "unused", "pandoc": "unused", "python2.7": "unused", "git": "always",
                    "libyaml-dev": "always", "sqlite3": "always", "python-pkg-tool": "project"}, when
    recipe = plan(e, Candidate(host_interpreter()))
    [apt] = [s for s in recipe.steps if s.kind == "apt"]
    assert apt.command.split()[-3:] == ["git", "libyaml-dev", "sqlite3"], apt.command
    assert any(n.startswith("not installed: golang-1.15, pandoc, python2.7 (") for n in recipe.notes), recipe.notes
    assert any(n.startswith("not installed: python-pkg-tool (the docs install the project itself") for n in recipe.notes)


def test_tex_for_the_docs_is_left_out_unless_a_test_runs_it(tmp_path):
    """mpmath's CI installs `latexmk texlive-xetex` to build its PDF manual: 141 s of apt on every branch, for
    tests that never run TeX. A project whose tests call xelatex keeps them."""
    ci = ("on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n    - run: |\n"
          "        sudo apt install libmpc-dev latexmk texlive-xetex texlive-fonts-recommended\n")
    write(tmp_path / "docs-only", {".github/workflows/test.yml": ci, "pkg/__init__.py": "",
                                   "tests/test_pkg.py": "def test_one():\n    assert True\n"})
    write(tmp_path / "runs-tex", {".github/workflows/test.yml": ci, "pkg/__init__.py": "",
                                  "tests/test_pdf.py": "import subprocess\n\n\ndef test_pdf():\n"
                                                       "    subprocess.run(['xelatex', 'doc.tex'], check=True)\n"})
    for name, tex in (("docs-only", "unused"), ("runs-tex", "always")):
        when = {f.value["name"]: f.value.get("when", "always") for f in gather(tmp_path / name).of("system_package")}
        assert when == {"libmpc-dev": "always", "latexmk": "unused", "texlive-xetex": tex,
                        "texlive-fonts-recommended": tex}, (name, when)


def test_yaml_keeps_versions_as_text():
    doc = yamltext.load_all("m:\n  python-version: [3.10, 3.8]\n", use_pyyaml=False)[0]
    assert doc["m"]["python-version"] == ["3.10", "3.8"]
    if yamltext.yaml is not None:
        assert yamltext.load_all("m:\n  python-version: [3.10, 3.8]\n", use_pyyaml=True) == [doc]


def test_gitlab_and_circleci(tmp_path):
    write(tmp_path, {
        ".gitlab-ci.yml": "image: python:3.10-bullseye\nvariables:\n  BROKER: amqp://guest@rabbit//\n"
                          "services:\n  - mysql:8.0\n  - name: redis:7\n    alias: cache\ntest:\n  script:\n"
                          "    - apt-get install -y libldap2-dev\n    - pytest --junitxml=report.xml\n",
        ".circleci/config.yml": "jobs:\n  build:\n    docker:\n      - image: cimg/python:3.12.1\n"
                                "      - image: cimg/postgres:14.0\n    steps:\n      - run:\n          name: t\n"
                                "          command: |\n            poetry install\n            poetry run pytest\n",
        "x.py": ""})
    e = gather(tmp_path)
    one(e, "python_hint", "3.10", file=".gitlab-ci.yml", line=1, via="gitlab-ci.image")
    one(e, "service", {"name": "rabbitmq", "env": "BROKER"}, line=3)
    one(e, "service", {"name": "mysql", "image": "mysql:8.0"}, line=5)
    one(e, "service", {"name": "redis", "image": "redis:7"}, line=6)
    one(e, "system_package", {"name": "libldap2-dev"}, file=".gitlab-ci.yml", line=10)
    one(e, "test_command", "pytest --junitxml=report.xml", file=".gitlab-ci.yml", line=11)
    one(e, "python_hint", "3.12.1", file=".circleci/config.yml", line=4)
    one(e, "service", {"name": "postgres", "image": "cimg/postgres:14.0"}, file=".circleci/config.yml", line=5)
    one(e, "test_command", "poetry run pytest", file=".circleci/config.yml", line=11)
    one(e, "install_command", "poetry install", line=10)
    assert len(set(e.facts)) == len(e.facts)                           # facts hash, dict values included


def test_invalid_yaml_is_a_problem(tmp_path):
    write(tmp_path, {".github/workflows/ci.yml": "jobs:\n  test:\n    steps: [\n", "x.py": ""})
    e = gather(tmp_path)
    assert any(p.startswith(".github/workflows/ci.yml:") and "invalid YAML" in p for p in e.problems)


# ---------------------------------------------------------------------------------------------------- broken input

def test_broken_pyproject_is_a_problem_with_file_and_line():
    e = ev("broken")
    assert e.problems[0].startswith("pyproject.toml:9: invalid TOML: ")
    assert e.problems[1].startswith("requirements.txt:2: cannot read requirement 'this is not a requirement!!'")
    one(e, "dependency", {"name": "requests", "spec": ">=2"}, file="requirements.txt", line=1)


def test_not_a_repository(tmp_path):
    with pytest.raises(NotARepository, match="holds no Python") as info:
        gather(REPOS / "no_python")
    assert isinstance(info.value, BadInput) and info.value.fix and info.value.exit_code == 2
    with pytest.raises(NotARepository, match="does not exist"):
        gather(tmp_path / "missing")
    (tmp_path / "file.py").write_text("x = 1\n")
    with pytest.raises(NotARepository, match="is not a directory"):
        gather(tmp_path / "file.py")


def test_requirements_only_directory_is_a_repository(tmp_path):
    write(tmp_path, {"requirements.txt": "requests\n"})
    assert gather(tmp_path).values("dependency")[0]["name"] == "requests"


def test_requirements_in_every_spelling_pip_accepts(tmp_path):
    write(tmp_path, {"pyproject.toml": '[project]\nname = "demo"\nversion = "1"\n',
                     "requirements.txt": "-e.[tests]\n-rreqs/a.txt\n--requirement=reqs/b.txt\n-cc.txt\n"
                                         "--index-url=https://pypi.org/simple\n-e./lib\n--pre\n"
                                         "requests \\\n  >=2 ; python_version >= '3.8'  # note\n",
                     "reqs/a.txt": "attrs\n", "reqs/b.txt": "click\n", "c.txt": "click<9\n",
                     "lib/setup.py": ""})
    e = gather(tmp_path)
    assert e.problems == []
    for name in ("attrs", "click"):
        one(e, "dependency", {"name": name})
    one(e, "constraint", {"name": "click", "spec": "<9"}, file="c.txt")
    one(e, "dependency", {"name": "requests", "spec": ">=2", "marker": 'python_version >= "3.8"'}, line=8)
    one(e, "local_package", {"path": "./lib", "editable": True})
    one(e, "package_index", "https://pypi.org/simple")
    rewrite = one(e, "requirements_rewrite", file="requirements.txt")
    assert rewrite.value["args"][:2] == ["-e", ".[tests]"]


def test_git_protocol_urls_are_read_over_https_for_uv(tmp_path):
    """requests-toolbelt's dev-requirements.txt names `git+git://github.com/sigmavirus24/betamax`: pip reads it,
    uv refuses the scheme (and GitHub stopped serving it). The rewrite asks for the same repository over https,
    named only when the URL names it (`#egg=`): a name guessed from the path could be another package."""
    write(tmp_path, {"pyproject.toml": '[project]\nname = "demo"\nversion = "1"\n',
                     "dev-requirements.txt": "pytest\ngit+git://github.com/sigmavirus24/betamax\n"
                                             "git+git://example.org/x/lib.git#egg=the_lib\n"
                                             "-e git+git://example.org/x/tool.git@v2#egg=the_tool\n"})
    rewrite = one(gather(tmp_path), "requirements_rewrite", file="dev-requirements.txt")
    assert rewrite.value["args"] == ["pytest", "git+https://github.com/sigmavirus24/betamax",
                                     "the_lib @ git+https://example.org/x/lib.git#egg=the_lib",
                                     "-e", "git+https://example.org/x/tool.git@v2#egg=the_tool"]
    assert "uv has no git:// protocol" in rewrite.value["notes"][0]


def test_a_bare_repository_url_is_named_only_after_a_distribution_the_project_requires_by_name(tmp_path):
    """requests-toolbelt again: its tox deps require `betamax>0.5.0`, so the repository .../betamax is betamax
    (and, unreachable, gives way to the index's betamax); `lib` is required by name nowhere: it stays bare."""
    write(tmp_path, {"pyproject.toml": '[project]\nname = "demo"\nversion = "1"\n',
                     "tox.ini": "[tox]\nenvlist = py3\n\n[testenv]\ndeps =\n    betamax>0.5.0\n    pytest\n"
                                "commands = pytest\n",
                     "dev-requirements.txt": "pytest\ngit+git://github.com/sigmavirus24/betamax\n"
                                             "git+git://example.org/x/lib.git\n"})
    rewrite = one(gather(tmp_path), "requirements_rewrite", file="dev-requirements.txt")
    assert rewrite.value["args"] == ["pytest", "betamax @ git+https://github.com/sigmavirus24/betamax",
                                     "git+https://example.org/x/lib.git"]
    assert any("named betamax" in n for n in rewrite.value["notes"])


def test_links_outside_the_repository_are_not_read(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret-package\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("")
    os.symlink(outside, repo / "requirements.txt")
    e = gather(repo)
    assert not e.of("dependency")
    assert any(p.startswith("requirements.txt: cannot read") for p in e.problems)


def test_skips_virtualenvs_and_caches(tmp_path):
    write(tmp_path, {"app.py": "", ".venv/lib/x/requirements.txt": "nope\n", "env/pyvenv.cfg": "",
                     "env/requirements.txt": "nope\n", "node_modules/a/setup.py": "", ".tox/py/conftest.py": ""})
    e = gather(tmp_path)
    assert not e.of("dependency") and not e.of("test_runner")


# ---------------------------------------------------------------------------------------------------- other tools

def test_pdm_flit_setuptools_dynamic_and_groups(tmp_path):
    write(tmp_path, {
        "pyproject.toml": (
            '[project]\nname = "x"\ndynamic = ["dependencies", "optional-dependencies"]\n\n'
            '[tool.setuptools.dynamic]\ndependencies = {file = ["reqs/base.in"]}\n'
            'optional-dependencies.test = {file = ["reqs/test.in"]}\n\n'
            '[tool.pdm.dev-dependencies]\nlint = ["flake8>=6", "-e ./plugins/local"]\n\n'
            '[tool.pdm.scripts]\ntest = "pytest -q"\n\n'
            '[tool.flit.metadata]\nmodule = "x"\nrequires-python = ">=3.7"\nrequires = ["docutils"]\n\n'
            '[dependency-groups]\na = [{include-group = "b"}]\nb = [{include-group = "a"}]\n'
            'c = [{include-group = "zzz"}]\n'),
        "reqs/base.in": "httpx\n", "reqs/test.in": "respx\n", "x.py": ""})
    e = gather(tmp_path)
    one(e, "dependency", {"name": "httpx"}, file="reqs/base.in", line=1)
    one(e, "requirements_file", {"path": "reqs/base.in"}, file="pyproject.toml", line=6,
        via="setuptools.dynamic.dependencies")
    one(e, "extra", {"name": "respx", "extra": "test"}, file="reqs/test.in")
    one(e, "dependency_group", {"name": "flake8", "group": "lint"}, line=10, via="pdm.dev-dependencies")
    one(e, "local_package", {"path": "./plugins/local", "editable": True, "group": "lint"}, line=10)
    one(e, "test_command", "pytest -q", line=13, via="pdm.scripts")
    one(e, "python_constraint", ">=3.7", via="flit.requires-python", line=17)
    one(e, "dependency", {"name": "docutils"}, via="flit.metadata.requires", line=18)
    assert any("include cycle: a → b → a" in p for p in e.problems)
    assert any("includes unknown group 'zzz'" in p for p in e.problems)


def test_conda_environment_and_runtime_txt(tmp_path):
    write(tmp_path, {"environment.yml": "name: x\ndependencies:\n  - python=3.9\n  - numpy\n  - pip:\n"
                                        "    - requests\n",
                     "runtime.txt": "python-3.10.4\n", "x.py": ""})
    e = gather(tmp_path)
    one(e, "python_hint", "3.9", file="environment.yml", line=3, via="conda.dependencies")
    one(e, "python_hint", "3.10.4", file="runtime.txt", line=1)
    one(e, "conda_environment", "environment.yml")


# ---------------------------------------------------------------------------------------------------- source date

def test_source_date_from_mtime_and_pkg_info(tmp_path):
    write(tmp_path, {"a.py": "", "b.py": ""})
    os.utime(tmp_path / "a.py", (1_600_000_000, 1_600_000_000))
    os.utime(tmp_path / "b.py", (1_500_000_000, 1_500_000_000))
    one(gather(tmp_path), "source_date", "2020-09-13T12:26:40Z", file="a.py", via="mtime")
    write(tmp_path, {"PKG-INFO": "Metadata-Version: 2.1\nName: x\n"})
    os.utime(tmp_path / "PKG-INFO", (1_400_000_000, 1_400_000_000))
    one(gather(tmp_path), "source_date", "2014-05-13T16:53:20Z", file="PKG-INFO", via="pkg-info")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_source_date_from_git(tmp_path):
    write(tmp_path, {"a.py": ""})
    date = "2021-03-04T05:06:07+02:00"
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_CONFIG_NOSYSTEM": "1"}
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run(git + ["init", "-q"], check=True, env=env)
    subprocess.run(git + ["add", "a.py"], check=True, env=env)
    subprocess.run(git + ["commit", "-q", "-m", "x"], check=True, env=env)
    one(gather(tmp_path), "source_date", "2021-03-04T03:06:07Z", file=".git", via="git")


# ---------------------------------------------------------------------------------------------------- small parts

@pytest.mark.parametrize("command, tool, runner", [
    ("pytest -x tests", "pytest", "pytest"), ("poetry run python -m pytest", "pytest", "pytest"),
    ("uv run --extra test pytest", "pytest", "pytest"), ("coverage run -m pytest", "pytest", "pytest"),
    ("{envpython} -m unittest discover", "unittest", "unittest"), ("$(PYTHON) -m pytest", "pytest", "pytest"),
    ("python manage.py test polls", "django", "django"), ("nosetests -v", "nose", "nose"),
    ("tox -e py311", "tox", None), ("python setup.py test", "setup.py test", None),
    ("DJANGO_SETTINGS_MODULE=x xvfb-run -a pytest", "pytest", "pytest"),
    ("pip install -e .[test]", "install", None), ("echo pytest", None, None), ('python -c "import pytest"', None, None),
])
def test_command_classification(command, tool, runner):
    assert shell.classify(command) == shell.Classified(tool, runner)


def test_apt_packages_from_shell_text():
    lines = [(1, "RUN apt-get update && apt-get install -y --no-install-recommends \\"), (2, "  libffi-dev \\"),
             (3, "  libssl-dev=3.0 gcc && rm -rf /var/lib/apt/lists/*"), (4, "apt-get -o X=1 install -qq $PKG tk # x")]
    assert shell.apt_packages(lines) == [("libffi-dev", 2), ("libssl-dev", 3), ("gcc", 3), ("tk", 4)]


def test_small_parsers():
    assert expand_envlist("py{38,39}-django{32,40}, lint") == [
        "py38-django32", "py38-django40", "py39-django32", "py39-django40", "lint"]
    assert [version_hint(v) for v in ("3.10", "3.13-dev", "3.x", "pypy3.9", "${{ matrix.py }}")] == [
        "3.10", "3.13", None, None, None]
    assert python_spec(">= 3.7 , <4") == (">=3.7,<4", None)
    assert service_for_image("docker.io/library/postgres:15") == "postgres"
    assert system_packages()["psycopg2"] == {"debian": ["libpq-dev"], "when": "always"}


def test_missing_module_repair_table():
    from envyard.setup.repairs import distributions_for, missing_modules

    out = ("E   ModuleNotFoundError: No module named 'hypothesis'\n"
           "E   ModuleNotFoundError: No module named 'yaml.constructor'\n"
           "E   ModuleNotFoundError: No module named 'hypothesis'\n"
           "E   ImportError: No module named 'mypkg'\n")
    assert missing_modules(out) == ["hypothesis", "yaml", "mypkg"]
    assert distributions_for(missing_modules(out), local={"mypkg"}) == ["hypothesis", "pyyaml"]


def test_a_requirement_whose_marker_holds_a_newline_is_a_problem_not_a_crash(tmp_path):
    """packaging 26 raises SyntaxError, not InvalidRequirement, for a newline inside a marker's string: a
    pyproject.toml can hold one (a TOML "\\n" escape). The rest of the project's evidence is still read."""
    root = write(tmp_path / "p", {"pyproject.toml": (
        '[project]\nname = "p"\nversion = "1"\n'
        'dependencies = ["requests>=2", "foo ; os_name == \\"a\\\\n--index-url http://127.0.0.1:9/\\""]\n')})
    e = gather(root)
    one(e, "dependency", {"name": "requests", "spec": ">=2"})
    assert not find(e, "dependency", {"name": "foo"})
    assert e.problems, "the unreadable requirement is reported"


def test_a_tests_py_module_is_named_to_pytest(tmp_path):
    write(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='a')\n",
                     "a/__init__.py": "", "a/tests.py": "def test_x():\n    pass\n",
                     "b/test_ok.py": "def test_y():\n    pass\n"})
    e = gather(tmp_path)
    one(e, "test_command", "pytest a/tests.py", file="a/tests.py", via="layout.tests_py")


def test_a_pth_file_is_evidence_only_when_setup_py_names_it(tmp_path):
    """pytest-cov's setup.py copies src/pytest-cov.pth into the install: that file is a `site_pth` fact. A .pth
    file setup.py does not name, or a name with no such file, is not."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "hook.pth").write_text("import os\n")
    (tmp_path / "stray.pth").write_text("import os\n")
    (tmp_path / "setup.py").write_text("from setuptools import setup\nPTH = 'hook.pth'\nOTHER = 'missing.pth'\n"
                                       "setup(name='p')\n")
    facts = gather(tmp_path).of("site_pth")
    assert [(f.value, f.file, f.line) for f in facts] == [("src/hook.pth", "setup.py", 2)]


@pytest.mark.parametrize("files, via, line", [
    ({"pyproject.toml": "[build-system]\nrequires = ['setuptools']\n\n[project]\nname = 'My_Pkg'\n"}, "pep621.name", 5),
    ({"pyproject.toml": "[tool.poetry]\nversion = '1'\nname = 'my-pkg'\n"}, "poetry.name", 3),
    ({"setup.cfg": "[metadata]\nname = my.pkg\nversion = 1\n", "setup.py": "from setuptools import setup\nsetup()\n"},
     "setup.cfg:name", 2),
    ({"setup.py": "from setuptools import setup\nsetup(\n    name='my_pkg',\n)\n"}, "setup.py:name", 3),
])
def test_the_projects_own_name_is_read_where_its_metadata_gives_it(tmp_path, files, via, line):
    """The contract's pins leave the project itself out by this name (pins.parse_freeze)."""
    e = gather(write(tmp_path, files))
    fact = one(e, "project_name", via=via, line=line)
    assert fact.value.replace("_", "-").replace(".", "-").lower() == "my-pkg"


def test_a_computed_setup_py_name_is_skipped_without_a_problem(tmp_path):
    e = gather(write(tmp_path, {"setup.py": "from setuptools import setup\nN = 'x' + 'y'\nsetup(name=N)\n"}))
    assert e.of("project_name") == []
    assert not any("name is computed" in p for p in e.problems)


def test_the_makefile_test_targets_preparation_scripts(tmp_path):
    """babel's `test: import-cldr` runs `python scripts/download_import_cldr.py` before pytest: a test_prepare
    fact. Prerequisites that clean or lint, run tests, or name a script the repository lacks are not."""
    (tmp_path / "scripts").mkdir()
    for name in ("download_data.py", "test_all.py"):
        (tmp_path / "scripts" / name).write_text("")
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='x')\n")
    (tmp_path / "Makefile").write_text(
        "test: clean-data import-data lint run-tests gone data.stamp\n\t$(PYTHON) -m pytest\n\n"
        "import-data:\n\t$(PYTHON) scripts/download_data.py --all\n\n"
        "clean-data:\n\trm -f data/*.dat\n\nlint:\n\tpython scripts/download_data.py\n\n"
        "run-tests:\n\tpython scripts/test_all.py\n\ngone:\n\tpython scripts/missing.py\n\n"
        "data.stamp:\n\tpython scripts/download_data.py && touch data.stamp\n")
    e = gather(tmp_path)
    assert [(f.value, f.line) for f in e.of("test_prepare")] == [
        ({"command": "python scripts/download_data.py --all", "target": "import-data"}, 4)]


def test_a_packages_own_test_module_is_a_test_command(tmp_path):
    """parameterized keeps its suite in parameterized/test.py, outside pytest's default file pattern: named on
    pytest's command line it is collected. Not a root test.py (lxml's runner script), not a module that only
    has test in its name (werkzeug/test.py, the test client), not one that runs itself (a script, found apart)."""
    write(tmp_path, {"pyproject.toml": '[project]\nname = "demo"\nversion = "1"\n',
                     "demo/__init__.py": "", "demo/test.py": "import mock\n\ndef test_naked(x=1):\n    pass\n\n"
                                                            "class TestThing(object):\n    def test_it(self):\n"
                                                            "        pass\n",
                     "client/__init__.py": "", "client/test.py": "class TestResponse(object):\n    pass\n",
                     "runner/__init__.py": "", "runner/test.py": "import unittest\n\nclass T(unittest.TestCase):\n"
                                                                "    def test_a(self):\n        pass\n\n"
                                                                "if __name__ == '__main__':\n    unittest.main()\n",
                     "test.py": "def test_root():\n    pass\n"})
    e = gather(tmp_path)
    assert [f.value for f in e.of("test_command") if f.via == "layout.package_test_py"] == ["pytest demo/test.py"]
