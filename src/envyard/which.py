"""Find a program on a search path, as `shutil.which` does for a bare name, without importing shutil: shutil
loads zlib, bz2 and lzma for its archive functions, 1.3 ms of every `envyard run`, which needs only this."""

from __future__ import annotations

import os


def which(name: str, path: str | None = None) -> str | None:
    """The first executable regular file called `name` in `path` (default: $PATH, else os.defpath); a name with
    a slash is checked as it is. None when there is none."""
    if os.sep in name:
        return name if _executable(name) else None
    seen = set()
    for directory in (os.environ.get("PATH", os.defpath) if path is None else path).split(os.pathsep):
        if directory in seen:
            continue
        seen.add(directory)
        candidate = os.path.join(directory, name)
        if _executable(candidate):
            return candidate
    return None


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)
