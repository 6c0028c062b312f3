"""Plumbing shared by the evidence readers: the `Fact` record, the `Sink` that collects facts and problems, and
`RepoFiles`, the one walk of the repository tree that every reader looks files up in."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_BYTES = 2_000_000       # bigger files are not read: evidence lives in small text files
MAX_FILES = 60_000               # stop walking a huge tree after this many files (recorded as a problem)
MAX_DEPTH = 12

# Directories that never hold evidence (caches, virtual environments, VCS metadata, build output).
_SKIP_DIRS = {".git", ".hg", ".svn", ".bzr", ".tox", ".nox", ".venv", "venv", "node_modules", "__pycache__",
              ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs", "site-packages", ".idea", ".vscode",
              ".cache", "htmlcov", ".hypothesis", ".ipynb_checkpoints"}
_SKIP_AT_ROOT = {"build", "dist", "wheelhouse"}
# Hidden directories that do hold evidence (CI configuration).
_KEEP_HIDDEN = {".github", ".circleci", ".gitlab", ".ci", ".devcontainer", ".buildkite", ".azure-pipelines"}


@dataclass(frozen=True)
class Fact:
    """One piece of evidence and where it came from."""

    kind: str         # "python_constraint", "dependency", "extra", "test_command", ...
    value: object     # a str, or a small JSON-able dict
    file: str         # path relative to the repository root
    line: int | None  # 1-based line where it was found, when known
    via: str          # the rule that produced it, e.g. "pep621.requires-python"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "value": self.value, "file": self.file, "line": self.line, "via": self.via}

    def __hash__(self) -> int:                      # values may be dicts: hash their canonical JSON
        return hash(json.dumps(self.to_dict(), sort_keys=True, default=str))


class RepoFiles:
    """The repository's files (POSIX paths relative to the root), found by one walk that skips caches, virtual
    environments and VCS metadata and never follows symbolic links to directories."""

    def __init__(self, root: Path, paths: list[str], truncated: bool = False):
        self.root = root
        self.paths = sorted(paths)
        self.truncated = truncated
        self._set = set(self.paths)
        self.dirs = sorted({p.rsplit("/", 1)[0] for p in self.paths if "/" in p})

    @classmethod
    def scan(cls, root: Path, limit: int = MAX_FILES) -> RepoFiles:
        paths: list[str] = []
        truncated = False
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            rel_dir = os.path.relpath(dirpath, root)
            rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
            depth = 0 if not rel_dir else rel_dir.count("/") + 1
            if "pyvenv.cfg" in filenames and rel_dir:
                dirnames[:] = []          # a virtual environment inside the repository
                continue
            dirnames[:] = sorted(d for d in dirnames if _keep_dir(d, at_root=not rel_dir) and depth < MAX_DEPTH)
            for name in sorted(filenames):
                paths.append(f"{rel_dir}/{name}" if rel_dir else name)
            if len(paths) >= limit:
                truncated = True
                break
        return cls(root, paths[:limit], truncated)

    def exists(self, rel: str) -> bool:
        return rel in self._set

    def named(self, *names: str, max_depth: int | None = None) -> list[str]:
        """Files whose base name is one of `names` (case-sensitive), at most `max_depth` directories deep."""
        wanted = set(names)
        return [p for p in self.paths if p.rsplit("/", 1)[-1] in wanted and _depth_ok(p, max_depth)]

    def matching(self, predicate, max_depth: int | None = None) -> list[str]:
        """Files for which `predicate(path, basename)` is true."""
        return [p for p in self.paths if _depth_ok(p, max_depth) and predicate(p, p.rsplit("/", 1)[-1])]

    def under(self, directory: str) -> list[str]:
        prefix = directory.rstrip("/") + "/"
        return [p for p in self.paths if p.startswith(prefix)]

    def is_dir(self, rel: str) -> bool:
        prefix = rel.rstrip("/") + "/"
        return any(p.startswith(prefix) for p in self.paths)


def _keep_dir(name: str, at_root: bool) -> bool:
    if name in _SKIP_DIRS or name.endswith(".egg-info") or (at_root and name in _SKIP_AT_ROOT):
        return False
    return not name.startswith(".") or name in _KEEP_HIDDEN


def _depth_ok(path: str, max_depth: int | None) -> bool:
    return max_depth is None or path.count("/") <= max_depth


class Sink:
    """Collects facts (deduplicated, in the order found) and problems for one repository."""

    def __init__(self, root: Path, files: RepoFiles, repository: Path | None = None):
        self.root = root
        self.repository = repository or root  # differs when the project is a subdirectory of a monorepo
        self.files = files
        self.facts: list[Fact] = []
        self.problems: list[str] = []
        self._seen: set[str] = set()
        self._texts: dict[str, str | None] = {}

    def add(self, kind: str, value: object, file: str, line: int | None, via: str) -> None:
        fact = Fact(kind, value, file, line, via)
        key = json.dumps(fact.to_dict(), sort_keys=True, default=str)
        if key not in self._seen:
            self._seen.add(key)
            self.facts.append(fact)

    def problem(self, file: str, line: int | None, message: str) -> None:
        text = f"{file}:{line}: {message}" if line else f"{file}: {message}"
        if text not in self.problems:
            self.problems.append(text)

    def of(self, kind: str) -> list[Fact]:
        return [f for f in self.facts if f.kind == kind]

    def read(self, rel: str, limit: int = MAX_FILE_BYTES, quiet: bool = False) -> str | None:
        """The text of a repository file, or None (with a problem recorded unless `quiet`) when it cannot be read.
        Files that resolve outside the repository (symbolic links) and non-regular files are refused."""
        key = f"{rel}\0{limit}"
        if key in self._texts:
            return self._texts[key]
        text = None
        path = self.root / rel
        try:
            real = path.resolve()
            if not real.is_relative_to(self.root.resolve()):
                raise OSError("links outside the repository")
            if not real.is_file():
                raise OSError("not a regular file")
            size = real.stat().st_size
            if size > MAX_FILE_BYTES and limit >= MAX_FILE_BYTES:
                raise OSError(f"too big ({size} bytes)")
            with open(real, "rb") as fh:
                data = fh.read(limit)
            text = data.decode("utf-8", errors="replace")
            if text.startswith("\ufeff"):
                text = text[1:]
        except OSError as e:
            if not quiet:
                self.problem(rel, None, f"cannot read: {getattr(e, 'strerror', None) or e}")
        self._texts[key] = text
        return text


def resolve_rel(base_file: str, target: str) -> str | None:
    """`target` relative to the directory of `base_file`, normalized to a root-relative POSIX path (None when it
    leaves the repository)."""
    if target.startswith("/"):
        return None
    base_dir = base_file.rsplit("/", 1)[0] if "/" in base_file else ""
    joined = f"{base_dir}/{target}" if base_dir else target
    parts: list[str] = []
    for part in joined.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts)
