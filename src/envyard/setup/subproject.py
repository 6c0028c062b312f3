"""Where the Python project is when the repository's root is not one: monorepos that keep it in a
subdirectory (`hypothesis-python/`, `python/ipywidgets/`) beside code in other languages or sibling packages.

`find(root)` looks only when the root has no packaging of its own (no setup.py, no pyproject.toml or setup.cfg
that declares a project). Among the directories one or two levels down that do, it picks the one holding the
most test files (then the one named like the repository, then the one with the most Python files), unless the
root holds as many tests outside every such directory: an application whose tests live at the root stays a root
project even if it vendors a package below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from ..errors import BadInput
from .sources.base import RepoFiles

# A directory with one of these (declaring a project) is a Python project's root.
PACKAGING = ("setup.py", "pyproject.toml", "setup.cfg")
MAX_DEPTH = 2
# Directories whose packaging is an example or documentation, never the repository's project.
NOT_PROJECTS = {"docs", "doc", "examples", "example", "samples", "sample", "demo", "demos", "benchmarks",
                "benchmark", "third_party", "thirdparty", "vendor", "vendored", "fixtures", "testdata", "test_data"}

_DECLARES = {"pyproject.toml": re.compile(r"^\[(project|tool\.poetry|build-system)\]", re.M),
             "setup.cfg": re.compile(r"^\[(metadata|options)\]", re.M)}


@dataclass(frozen=True)
class Choice:
    subdir: str              # POSIX path relative to the repository root
    why: str                 # one line: how it was chosen
    others: tuple[str, ...]  # the other project directories found, not chosen


def find(root: Path, files: RepoFiles | None = None) -> Choice | None:
    """The subdirectory holding the repository's Python project, or None when the root is the project."""
    files = files or RepoFiles.scan(root)
    if declares_project(root, files, ""):
        return None
    candidates = [d for d in _project_dirs(root, files)]
    if not candidates:
        return None
    tests = {d: _count(files, d, _is_test_file) for d in candidates}
    outside = sum(1 for p in files.paths if _is_test_file(p) and not any(p.startswith(d + "/") for d in candidates))
    repo = canonicalize_name(root.name)

    def rank(d: str) -> tuple:
        name = canonicalize_name(d.rsplit("/", 1)[-1])
        return (tests[d], bool(name) and (name in repo or repo in name), _count(files, d, lambda p: p.endswith(".py")))

    best = max(sorted(candidates), key=rank)
    if outside >= max(tests[best], 1):  # the root's own tests: the root is the project
        return None
    return Choice(best, f"the root has no packaging; {best}/ has it and {tests[best]} test files "
                        f"(the most of {len(candidates)} project director{'y' if len(candidates) == 1 else 'ies'})",
                  tuple(d for d in sorted(candidates) if d != best))


def given(root: Path, subdir: str) -> Choice | None:
    """`--project-dir`: the user's choice, checked (a directory inside the repository). "." is the root."""
    rel = subdir.strip().strip("/")
    if rel in ("", "."):
        return None
    path = (root / rel).resolve()
    if not path.is_relative_to(root.resolve()) or path == root.resolve():
        raise BadInput(f"--project-dir {subdir!r} is outside the repository",
                       fix="give a directory relative to the repository's root, such as python/mypkg")
    if not path.is_dir():
        raise BadInput(f"--project-dir {subdir!r}: no such directory in {root}",
                       fix="give a directory relative to the repository's root, such as python/mypkg")
    return Choice(path.relative_to(root.resolve()).as_posix(), "given with --project-dir", ())


def declares_project(root: Path, files: RepoFiles, d: str) -> bool:
    """Whether directory `d` (relative, "" for the root) has packaging that declares a project."""
    prefix = f"{d}/" if d else ""
    if files.exists(prefix + "setup.py"):
        return True
    for name, pattern in _DECLARES.items():
        if files.exists(prefix + name):
            try:
                text = (root / (prefix + name)).read_text(encoding="utf-8", errors="replace")[:200_000]
            except OSError:
                continue
            if pattern.search(text):
                return True
    return False


def _project_dirs(root: Path, files: RepoFiles) -> list[str]:
    """Directories one or two levels down that declare a project, not inside another such directory."""
    found: list[str] = []
    for p in files.paths:
        parts = p.split("/")
        if len(parts) - 1 > MAX_DEPTH or parts[-1] not in PACKAGING:
            continue
        d = "/".join(parts[:-1])
        if any(part.lower() in NOT_PROJECTS for part in parts[:-1]) or d in found:
            continue
        if declares_project(root, files, d):
            found.append(d)
    return [d for d in found if not any(d.startswith(o + "/") for o in found)]


def _count(files: RepoFiles, d: str, predicate) -> int:
    return sum(1 for p in files.under(d) if predicate(p))


def _is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py") or name == "tests.py"
                                     or ("/tests/" in f"/{path}" or "/test/" in f"/{path}") and name != "__init__.py")
