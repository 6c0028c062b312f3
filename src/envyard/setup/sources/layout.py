"""The shape of the repository: where its packages are (src layout, top-level packages, single modules), which
lock files and environment files it keeps, Python version files (`.python-version`, `runtime.txt`, conda
`environment.yml`), and how old the source is (git commit date, sdist PKG-INFO, or newest file)."""

from __future__ import annotations

import os
import re
import subprocess
from datetime import datetime, timezone

from . import yamltext
from .base import Sink
from .specs import version_hint

LOCK_FILES = {"poetry.lock": "poetry", "uv.lock": "uv", "pdm.lock": "pdm", "Pipfile.lock": "pipenv",
              "pylock.toml": "pylock", "conda-lock.yml": "conda-lock"}
# Top-level names that are not part of the distribution even when they hold Python.
_NOT_PACKAGES = {"tests", "test", "testing", "docs", "doc", "examples", "example", "scripts", "script", "benchmarks",
                 "benchmark", "bench", "tools", "tool", "build", "dist", "ci", "requirements", "site", "static",
                 "notebooks", "tasks", "contrib", "samples", "sample", "demo", "demos", "data"}
_NOT_MODULES = {"setup.py", "conftest.py", "noxfile.py", "manage.py", "fabfile.py", "tasks.py", "runtests.py",
                "run_tests.py", "dodo.py", "pavement.py", "versioneer.py", "ez_setup.py", "distribute_setup.py",
                "__init__.py", "__main__.py"}


def read_layout(sink: Sink) -> None:
    files = sink.files
    src_packages = _packages_under(sink, "src")
    if src_packages:
        sink.add("package_dir", "src", "src", None, "layout.src")
        for name, rel, namespace in src_packages:
            value = {"name": name, "path": f"src/{name}"}
            if namespace:
                value["namespace"] = True
            sink.add("top_level_package", value, rel, None, "layout.src")
    for name, rel, _ in _packages_under(sink, ""):
        if name not in _NOT_PACKAGES and name != "src":
            sink.add("top_level_package", {"name": name, "path": name}, rel, None, "layout.flat")
    for rel in files.paths:
        if "/" not in rel and rel.endswith(".py") and rel not in _NOT_MODULES and not rel.startswith(("test_", ".")) \
                and not rel.endswith("_test.py") and rel.isascii() and rel[:-3].isidentifier():
            sink.add("top_level_module", rel[:-3], rel, None, "layout.flat")


def _packages_under(sink: Sink, base: str) -> list[tuple[str, str, bool]]:
    """(name, evidence file, namespace?) for each directory directly under `base` that is a Python package."""
    prefix = f"{base}/" if base else ""
    found: dict[str, tuple[str, bool]] = {}
    for rel in sink.files.paths:
        if not rel.startswith(prefix) or not rel.endswith(".py"):
            continue
        parts = rel[len(prefix):].split("/")
        if len(parts) < 2 or not parts[0].isidentifier():
            continue
        if len(parts) == 2 and parts[1] == "__init__.py":
            found[parts[0]] = (rel, False)
        elif base and parts[0] not in found:
            found.setdefault(parts[0], (rel, True))             # under src/, .py files without __init__: namespace
    return sorted((name, rel, ns) for name, (rel, ns) in found.items())


def read_lock_files(sink: Sink) -> None:
    for name, tool in LOCK_FILES.items():
        if sink.files.exists(name):
            sink.add("lock_file", tool, name, None, "lockfile.presence")


def read_version_files(sink: Sink) -> None:
    if sink.files.exists(".python-version"):
        text = sink.read(".python-version") or ""
        for number, line in enumerate(text.splitlines(), 1):
            hint = version_hint(line.split("#", 1)[0].strip())
            if hint:
                sink.add("python_hint", hint, ".python-version", number, "python-version-file")
    if sink.files.exists("runtime.txt"):
        text = sink.read("runtime.txt") or ""
        m = re.search(r"python-(\d+\.\d+(?:\.\d+)?)", text)
        if m:
            sink.add("python_hint", m.group(1), "runtime.txt", text[:m.start()].count("\n") + 1, "runtime.txt")
    for rel in sink.files.named("environment.yml", "environment.yaml", max_depth=1):
        _conda_environment(sink, rel)


def _conda_environment(sink: Sink, rel: str) -> None:
    sink.add("conda_environment", rel, rel, None, "conda.environment")
    text = sink.read(rel)
    if text is None:
        return
    try:
        docs = yamltext.load_all(text)
    except yamltext.YamlError as e:
        sink.problem(rel, e.line, f"invalid YAML: {e}")
        return
    deps = docs[0].get("dependencies") if docs and isinstance(docs[0], dict) else None
    for item in deps if isinstance(deps, list) else []:
        if isinstance(item, yamltext.Scalar):
            m = re.match(r"^python\s*(?:=|==|>=|~=)?\s*([0-9][0-9.*]*)", item.strip())
            if m:
                hint = version_hint(m.group(1).rstrip(".*"))
                if hint:
                    sink.add("python_hint", hint, rel, item.line, "conda.dependencies")


# ---------------------------------------------------------------------------------------------------- date

def read_source_date(sink: Sink) -> None:
    """The date of the source: the last commit's date when `.git` exists (read with `git log`, which runs no
    repository code; hooks and fsmonitor are disabled), else an sdist's PKG-INFO modification time, else the
    newest modification time of the repository's files. A project in a subdirectory has its repository's date.
    A git checkout with no tag reachable from its commit (a shallow clone between releases, a tree committed
    without its history) also gets a `git_untagged` fact: tools that version from tags cannot name it."""
    root = sink.root
    if (sink.repository / ".git").exists():
        date = _git_date(sink.repository)
        if date:
            sink.add("source_date", date, ".git", None, "git")
            if _git(sink.repository, "describe", "--tags", "--abbrev=0") is None:
                sink.add("git_untagged", "no tag is reachable from the checked-out commit", ".git", None,
                         "git describe")
            return
    if sink.files.exists("PKG-INFO"):
        try:
            mtime = (root / "PKG-INFO").stat().st_mtime
            sink.add("source_date", _iso(mtime), "PKG-INFO", None, "pkg-info")
            return
        except OSError:
            pass
    newest, newest_rel = None, None
    for rel in sink.files.paths:
        try:
            mtime = os.lstat(root / rel).st_mtime
        except OSError:
            continue
        if newest is None or mtime > newest:
            newest, newest_rel = mtime, rel
    if newest is not None:
        sink.add("source_date", _iso(newest), newest_rel, None, "mtime")


def _git_date(root) -> str | None:
    text = _git(root, "log", "-1", "--no-show-signature", "--format=%cI")
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    except ValueError:
        return None


def _git(root, *args: str) -> str | None:
    """The stripped output of a read-only git command in `root`, or None when it fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"})
    try:
        out = subprocess.run(["git", "-C", str(root), "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
                              "--no-pager", *args], capture_output=True, text=True, timeout=10, env=env,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(int(timestamp), tz=timezone.utc).isoformat().replace("+00:00", "Z")
