"""Evidence extraction: what a Python repository says about the environment it needs — read from its files,
never by running anything from it.

`gather(root)` walks the repository once and runs every reader in `envyard.setup.sources`; each fact keeps the
file and line it came from and the rule that produced it. Files that cannot be read or parsed, and values that
only running code would tell (a computed `install_requires`), become `problems`, never exceptions.

Fact kinds:
    python_constraint  a hard Python constraint (PEP 440 specifier): requires-python, python_requires, Poetry python
    python_hint        a Python version mentioned elsewhere: classifiers, .python-version, CI matrices, tox envs,
                       Dockerfile FROM, Pipfile, conda, hatch/nox
    dependency         a runtime requirement             {"name", "spec", "marker", "requirement", [extras, url]}
    extra              a requirement of an extra          ... + {"extra"}
    dependency_group   a development/test requirement     ... + {"group"} (PEP 735, Poetry, PDM, Pipfile dev,
                       tests_require, and "hatch:ENV" / "tox:ENV" / "nox:SESSION" environments)
    constraint         a line of a pip constraints file
    local_package      a path dependency                  {"path", "editable", ...}
    build_backend      PEP 517 backend, or "setuptools (legacy)" for setup.py-only projects
    build_requirement  [build-system].requires, setup_requires
    native_build       the project compiles native code (ext_modules, a native build backend, Cython...)
    requirements_file  a pip requirement file in use      {"path", "role": "requirements" | "constraints"}
    requirements_rewrite  a requirement file that uv's parser refuses (`-e.`, `-rfile`, pip-only options), as
                       `uv pip install` arguments         {"path", "args", "notes"}
    lock_file          "poetry" | "uv" | "pdm" | "pipenv" | "pylock" | "conda-lock" | "pip-tools" | ...
    package_index      an index URL (requirements -i, Pipfile [[source]])
    conda_environment  an environment.yml
    test_runner        "pytest" | "unittest" | "django" | "nose"
    test_command       a literal command line that runs the tests
    test_plugin        a pytest plugin the configuration needs {"name", "reason"}
    pytest_cache_option  an option of pytest's cache plugin in the project's addopts (`--cache-clear`): the runs
                       keep the plugin, its cache outside the tree
    test_prepare       a step the Makefile's test target runs first, a Python script of the project that makes what
                       the tests read {"command", "target"} (babel's `import-cldr`)
    test_env           an environment variable the test runner needs {"name", "value"} (pytest-pythonpath's
                       `python_paths` as PYTEST_ADDOPTS)
    test_path, test_dir, test_suite
    install_command    an install command line from CI, tox, Makefile, Dockerfile
    test_extra         an extra of the project that its CI or Makefile installs (`pip install .[x]`), or tox's base
                       `[testenv]` lists in `extras =` (via "tox.extras")
    system_package     a Debian package                   {"name", [for, when]}
    service            a service the tests expect         {"name", [image, env]}
    service_env        an environment variable the tests get that points at a service {"service", "name", "value"}
    service_setting    a CI service container's own setting (POSTGRES_PASSWORD...) {"service", "host", "name", "value"}
    service_code_env   an environment variable the test code reads (ast) that names a service
                       {"service", "name", "role": host|port|user|password|db|url|None, "default"} (testenv.py)
    source_date        ISO 8601 UTC date of the source (via "git" | "pkg-info" | "mtime")
    git_untagged       the source is a git checkout with no tag reachable from its commit
    vcs_version        the version comes from git tags   {"tool", "tag_prefix"} (setuptools-scm, versioneer, ...)
    checkout_version   the release a source that cannot name its version is given {"version", "tag" | "env",
                       "uploaded", "why"}: added by envyard.setup.checkout_version from the package index
    project_name       the distribution's name ([project], [tool.poetry], setup.cfg [metadata], a literal setup(name=))
    package_dir, top_level_package, top_level_module
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from ..errors import BadInput
from .sources import (aptuse, ci, docker, docs, layout, nox, pyproject, requirements, setupcfg, setuppy, testenv,
                      testing, tox, versioning)
from .sources.base import Fact, RepoFiles, Sink
from .sources.knowledge import system_packages

__all__ = ["Evidence", "Fact", "NotARepository", "gather"]

# Files whose presence alone makes a directory a Python project, even without .py files.
PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "Pipfile", "tox.ini", "noxfile.py", "environment.yml")


class NotARepository(BadInput):
    """The path is not a directory, or holds no Python at all."""


@dataclass
class Evidence:
    root: Path
    facts: list[Fact]
    problems: list[str] = field(default_factory=list)

    def of(self, kind: str) -> list[Fact]:
        return [f for f in self.facts if f.kind == kind]

    def values(self, kind: str) -> list[object]:
        """The distinct values of one kind of fact, in the order first found."""
        out: list[object] = []
        for f in self.of(kind):
            if f.value not in out:
                out.append(f.value)
        return out

    def python_constraint(self) -> SpecifierSet | None:
        """The intersection of the hard Python constraints (requires-python, python_requires, Poetry python),
        or None when the project states none. Hints (classifiers, CI matrices, ...) are not included."""
        combined: SpecifierSet | None = None
        for fact in self.of("python_constraint"):
            try:
                spec = SpecifierSet(str(fact.value))
            except InvalidSpecifier:
                continue
            combined = spec if combined is None else combined & spec
        return combined

    def python_hints(self) -> list[str]:
        """Distinct hinted Python versions, newest first."""
        def key(v: str) -> tuple[int, ...]:
            return tuple(int(p) for p in v.split(".") if p.isdigit())
        return sorted({str(v) for v in self.values("python_hint")}, key=key, reverse=True)

    def to_dict(self) -> dict:
        constraint = self.python_constraint()
        return {
            "root": str(self.root),
            "summary": {
                "python_constraint": str(constraint) if constraint is not None else None,
                "python_hints": self.python_hints(),
                "test_runners": self.values("test_runner"),
                "build_backend": self.values("build_backend"),
                "lock_files": self.values("lock_file"),
            },
            "facts": [f.to_dict() for f in self.facts],
            "problems": list(self.problems),
        }


_READERS = (
    ("pyproject.toml", lambda s: s.files.exists("pyproject.toml") and pyproject.read_pyproject(s)),
    ("setup.cfg", lambda s: s.files.exists("setup.cfg") and setupcfg.read_setup_cfg(s)),
    ("setup.py", lambda s: s.files.exists("setup.py") and setuppy.read_setup_py(s)),
    ("vcs versioning", versioning.read_vcs_version),  # after the three that name build requirements
    ("requirements", requirements.read_all),
    ("Pipfile", lambda s: s.files.exists("Pipfile") and requirements.read_pipfile(s)),
    ("lock files", layout.read_lock_files),
    ("python version files", layout.read_version_files),
    ("pytest.ini", testing.read_pytest_ini),
    ("conftest.py", testing.read_conftests),
    ("tox.ini", tox.read_tox_ini),
    ("tox.toml", tox.read_tox_toml),
    ("noxfile.py", nox.read_noxfiles),
    ("Makefile", testing.read_makefiles),
    ("manage.py", testing.read_django),
    ("runtests.py", testing.read_runtests),
    ("self-running test scripts", testing.read_test_scripts),
    ("test directory READMEs", testing.read_test_readmes),
    ("CI", ci.read_ci),
    ("compose", ci.read_compose),
    ("Dockerfile", docker.read_dockerfiles),
    ("docs", docs.read_docs),
    ("layout", layout.read_layout),
    ("test files", testing.read_test_files),        # after every pytest configuration reader
    ("test code environment", testenv.read_test_env),
    ("source date", layout.read_source_date),
)


def gather(root: Path | str, repository: Path | None = None) -> Evidence:
    """Every fact the repository at `root` states about its environment. Reads files only. `repository`: the
    repository `root` is a subdirectory of (a monorepo's), for what only the whole repository says (its date)."""
    root = Path(root).expanduser()
    if not root.exists():
        raise NotARepository(f"{root} does not exist", fix="pass the path of a checked-out repository")
    if not root.is_dir():
        raise NotARepository(f"{root} is not a directory",
                             fix="pass the repository's root directory (unpack archives first)")
    root = root.resolve()
    files = RepoFiles.scan(root)
    if not _holds_python(files):
        raise NotARepository(
            f"{root} holds no Python: no .py files and none of {', '.join(PROJECT_FILES)} or requirements*.txt",
            fix="point envyard at the root of a Python project")
    sink = Sink(root, files, repository.resolve() if repository else None)
    if files.truncated:
        sink.problem(".", None, f"more than {len(files.paths)} files; the rest were not looked at")
    for name, reader in _READERS:
        try:
            reader(sink)
        except Exception as e:  # noqa: BLE001 - one unreadable source must not hide the others
            sink.problem(name, None, f"could not be read: {type(e).__name__}: {e}")
    _derive(sink)
    return Evidence(root, sink.facts, sink.problems)


def _holds_python(files: RepoFiles) -> bool:
    if any(p.endswith((".py", ".pyx")) for p in files.paths):
        return True
    if any(files.exists(name) for name in PROJECT_FILES):
        return True
    return any("requirements" in p.rsplit("/", 1)[-1].lower() and p.endswith((".txt", ".in")) for p in files.paths)


def _derive(sink: Sink) -> None:
    """Facts that follow from other facts: the legacy build backend, the CI's tools the tests never run
    (sources/aptuse.py), names for bare repository URLs the project requires by name elsewhere
    (requirements.name_bare_urls), and the Debian packages that known C-extension distributions need (from
    data/system_packages.toml)."""
    if not sink.of("build_backend") and sink.files.exists("setup.py"):
        sink.add("build_backend", "setuptools (legacy)", "setup.py", None, "setup.py.legacy")
    aptuse.mark_unused_tools(sink)
    requirements.name_bare_urls(sink)
    table = system_packages()
    for fact in list(sink.facts):
        if fact.kind not in ("dependency", "extra", "dependency_group", "build_requirement"):
            continue
        name = fact.value.get("name") if isinstance(fact.value, dict) else None
        entry = table.get(canonicalize_name(name)) if name else None
        if entry:
            for package in entry["debian"]:
                sink.add("system_package", {"name": package, "for": canonicalize_name(name), "when": entry["when"]},
                         fact.file, fact.line, "table:system_packages")
