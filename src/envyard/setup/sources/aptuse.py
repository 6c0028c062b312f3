"""Whether a Debian package that a project's CI or docs install is a tool its tests never run, or the project.

CI configurations install what the CI itself needs beside what the tests need: a Go toolchain to fetch a
conformance runner, pandoc for the docs, curl and git for their own scripts, Python 2 for an old matrix entry.
Installed in every branch, such a package costs 10-20 s (golang alone: 18 s on bullseye). The packages listed in
data/ci_tools.toml are installed only when a test file, a conftest.py or the build configuration names one of
their programs as a word (`subprocess.run(["go", ...])`, `shutil.which("pandoc")`); libraries, headers,
compilers, servers and anything not listed are installed as before. Docs that offer the project itself from
Debian (`apt-get install python-nibabel`) name a package setup must not install: the project comes from its
source (and Python 2's `python-` packages are gone from current Debian, so the install would fail)."""

from __future__ import annotations

import re

from packaging.utils import canonicalize_name

from .base import Fact, Sink
from .knowledge import ci_tools
from .testenv import test_files

BUILD_FILES = ("setup.py", "setup.cfg", "pyproject.toml", "conftest.py")
MAX_FILES = 400
SHORT = 3  # a program name this short (go, gs) must stand in quotes: as a bare word it is English


def programs_of(package: str) -> tuple[str, ...] | None:
    """The programs of a CI tool package (also versioned: golang-1.15, dotnet-sdk-6.0); None when it is not one."""
    table = ci_tools()
    name = package.strip().lower()
    return table.get(name, table.get(re.sub(r"-\d+(?:\.\d+)*$", "", name)))


def mark_unused_tools(sink: Sink) -> None:
    """Give `when = "unused"` to CI and docs `system_package` facts for tools no test or build file runs, and
    `when = "project"` to those that are the project's own Debian package."""
    texts: list[str] | None = None
    names = {canonicalize_name(str(f.value)) for f in sink.of("project_name")}
    own = {f"{prefix}-{name}" for name in names for prefix in ("python", "python3")}
    for i, fact in enumerate(sink.facts):
        if fact.kind != "system_package" or fact.via.startswith("table:") or not isinstance(fact.value, dict):
            continue
        if fact.value.get("name", "").lower() in own:
            sink.facts[i] = Fact(fact.kind, {**fact.value, "when": "project"}, fact.file, fact.line, fact.via)
            continue
        programs = programs_of(fact.value.get("name", ""))
        if programs is None or fact.value.get("when", "always") != "always":
            continue
        if texts is None:
            texts = [t for rel in _files(sink) if (t := sink.read(rel, quiet=True))]
        if not any(named(program, text) for program in programs for text in texts):
            sink.facts[i] = Fact(fact.kind, {**fact.value, "when": "unused"}, fact.file, fact.line, fact.via)


def named(program: str, text: str) -> bool:
    """Whether `text` names `program` as a word of its own (not `pypandoc` for pandoc, nor `go` in prose)."""
    word = re.escape(program)
    if len(program) <= SHORT:
        return re.search(rf"""["']{word}(?:["'\s])""", text) is not None
    return re.search(rf"(?<![\w.+-]){word}(?![\w+-])", text) is not None


def _files(sink: Sink) -> list[str]:
    tests = test_files(sink)
    top = [p for p in sink.files.paths if "/" not in p and (p in BUILD_FILES or re.match(r"test_.*\.py$", p))]
    return (top + tests)[:MAX_FILES]
