"""Wheels that one setup run built from source distributions, offered to its clean replay.

uv keeps the wheels it builds from an sdist in its cache, but reuses them only while the index's HTTP response for
that sdist counts as fresh. An index or mirror that sends no cache headers (no Cache-Control, no ETag: the case
on machines that reach PyPI through a caching proxy) makes every install download the sdist again under a new
revision and build it again: cytoolz 18 s, lxml or PyNaCl minutes — once in the branch, once more in the
replay. The replay installs the versions the branch installed, on the same interpreter and base, so the wheels
the branch built are what a rebuild would give: each branch's `Built NAME==VERSION` lines are looked up in uv's
cache, the wheels hard-linked into a directory of this run (one per interpreter), and the replay's sandboxes see
it read-only with UV_FIND_LINKS pointing there. setup.sh and the Dockerfile do not use it. (For PyPI itself, the
setup sandboxes' uv configuration restates PyPI's cache headers, pkgcache.index_policy, and uv reuses its built
wheels on its own; this still serves projects that name indexes of their own.)
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import uuid
from pathlib import Path

from packaging.utils import canonicalize_name

from .interpreters import Interpreter

MOUNT = "/root/.cache/envyard-wheels"  # where the replay's sandboxes see their interpreter's directory
BUILT = re.compile(r"^\s*Built ([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)\s*$", re.M)


def built(uv_output: str) -> list[tuple[str, str]]:
    """(name, version) of each distribution that uv output says it built from a registry sdist (not the project
    itself, nor a URL or path requirement: those print `Built NAME @ URL`)."""
    return [(m.group(1), m.group(2)) for m in BUILT.finditer(uv_output)]


def interpreter_key(interp: Interpreter) -> str:
    """A directory name per interpreter and base: a wheel built on one is offered to the same one only."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{interp.provider}-{interp.version}-{interp.base}")


class Wheelhouse:
    """This run's directory of built wheels (`root`, removed by `close`), filled from `uv_cache`."""

    def __init__(self, uv_cache: Path, parent: Path):
        self.uv_cache = uv_cache
        parent.mkdir(parents=True, exist_ok=True)
        _remove_orphans(parent)
        self.root = parent / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.root.mkdir()
        self._lock = threading.Lock()

    def directory(self, interp: Interpreter) -> Path:
        d = self.root / interpreter_key(interp)
        d.mkdir(exist_ok=True)
        return d

    def record(self, interp: Interpreter, uv_output: str) -> list[str]:
        """Link the wheels the output says uv built into the interpreter's directory; their file names."""
        names = []
        for name, version in built(uv_output):
            wheel = self._newest_build(name, version)
            if wheel is None:
                continue
            target = self.directory(interp) / wheel.name
            with self._lock:
                if not target.exists():
                    try:
                        os.link(wheel, target)
                    except OSError:  # another filesystem, or the cache entry went: a copy, or nothing
                        try:
                            shutil.copyfile(wheel, target)
                        except OSError:
                            continue
            names.append(wheel.name)
        return names

    def _newest_build(self, name: str, version: str) -> Path | None:
        """The wheel uv built last for NAME==VERSION: its sdist cache keeps one per revision
        (sdists-v*/<index>/<name>/<version>/<revision>/*.whl; other indexes add a level)."""
        norm = canonicalize_name(name)
        found = [p for pattern in (f"sdists-v*/*/{norm}/{version}/*/*.whl", f"sdists-v*/*/*/{norm}/{version}/*/*.whl")
                 for p in self.uv_cache.glob(pattern)]
        found = [p for p in found if canonicalize_name(p.name.split("-")[0]) == norm]
        return max(found, key=lambda p: p.stat().st_mtime, default=None)

    def binds(self, interp: Interpreter) -> dict[str, str]:
        """The read-only bind that shows a sandbox of this interpreter its wheels."""
        return {str(self.directory(interp)): MOUNT}

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def find_links_env(env: dict[str, str]) -> dict[str, str]:
    """UV_FIND_LINKS for the replay's commands, unless the recipe sets its own."""
    return {} if "UV_FIND_LINKS" in env else {"UV_FIND_LINKS": MOUNT}


def _remove_orphans(parent: Path) -> None:
    """Directories of runs whose process is gone (killed before it could remove its own)."""
    for d in parent.iterdir():
        pid = d.name.split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass
