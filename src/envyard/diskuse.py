"""Real disk use of a store (`envyard df`) and pruning of its package cache (`envyard gc --cache`).

`du` on a store is wrong in two ways: the `host` image's view of `/` is mounted inside the store (du counts the
whole host disk through it), and a file hard-linked into several layers is counted once per layer. Here:

- every walk stays on its own side of every mount point (from /proc/self/mountinfo; btrfs subvolumes are
  not mount points and are walked), so the host view is never entered;
- sizes are allocated blocks (st_blocks), like `du`; a file with several links is counted once per walk,
  and once in the store's total however many layers hold it;
- a layer used by several images is listed once, with the images using it; an image's `unique` bytes are
  those of layers no other image uses (what `envyard rmi` would free);
- the sandbox volume (runtime/volume.py) is a btrfs file system in the sparse file `volume.img`: what it
  costs the disk is that file's allocated blocks, which is what the total counts. Per-sandbox and snapshot
  layer sizes on it are walked, so extents btrfs shares between a snapshot and its source count in both; a
  sandbox's `attic` (the layer's files it started from, runtime/volume.py) is not its own and is left out.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

from .bases.host import HOST_ROOT_LAYER
from .errors import BadInput, StoreError
from .runtime.volume import ATTIC
from .store import Store

# The package caches `envyard setup` binds into its sandboxes, one directory per source (setup/pkgcache.py).
PACKAGE_CACHE = ("cache", "packages")
# The one cache every setup shared before they were split per source: never used again, removed by `gc --cache`.
LEGACY_PACKAGE_CACHE = ("cache", "uv")


def mount_points() -> set[str]:
    points = set()
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                raw = line.split(" ")[4]
                points.add(raw.encode().decode("unicode_escape"))  # \040 for a space, and so on
    except OSError:
        pass
    return points


class Walker:
    """Sums allocated bytes under directories without crossing mount points; remembers every inode it counted
    so that `fresh` bytes (first time seen in any walk) give a total with shared files counted once."""

    def __init__(self):
        self.mounts = mount_points()
        self.seen: set[tuple[int, int]] = set()

    def size(self, root: Path) -> tuple[int, int]:
        """(bytes under `root`, bytes not counted by an earlier walk of this Walker)."""
        total = fresh = 0
        local: set[tuple[int, int]] = set()

        def count(st: os.stat_result) -> None:
            nonlocal total, fresh
            key = (st.st_dev, st.st_ino)
            if key in local:
                return
            local.add(key)
            total += st.st_blocks * 512
            if key not in self.seen:
                self.seen.add(key)
                fresh += st.st_blocks * 512

        root = os.path.realpath(root)  # mountinfo names real paths
        try:
            st = os.lstat(root)
        except OSError:
            return 0, 0
        count(st)
        stack = [root] if stat.S_ISDIR(st.st_mode) else []
        while stack:
            try:
                with os.scandir(stack.pop()) as it:
                    for entry in it:
                        if entry.path in self.mounts:
                            continue  # another file system mounted here: the host view, the volume, a bind
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        count(st)
                        if stat.S_ISDIR(st.st_mode):
                            stack.append(entry.path)
            except OSError:
                pass
        return total, fresh


def usage(store: Store) -> dict:
    """What the store holds on disk, by image, layer, sandbox, cache and the rest (sizes in bytes)."""
    w = Walker()
    home = store.home
    images = store.images()
    users: dict[str, list[str]] = {}
    for img in images:
        for lid in img.layers:
            users.setdefault(lid, []).append(img.name)
    layers = []
    layer_bytes: dict[str, int] = {}
    for row in store.db.query("SELECT id, path FROM layers ORDER BY created"):
        lid, path = row["id"], Path(row["path"])
        if lid == HOST_ROOT_LAYER or str(path) in w.mounts:
            size, note = 0, "the host's own files, mounted: not stored"
        elif not path.exists():
            size, note = 0, "missing"
        else:
            size, _ = w.size(path)
            note = "on the sandbox volume" if path.is_relative_to(store.volume_dir) else ""
        layer_bytes[lid] = size
        layers.append({"id": lid, "bytes": size, "images": sorted(users.get(lid, [])), "note": note})
    image_rows = []
    for img in images:
        own = [lid for lid in img.layers if len(set(users.get(lid, []))) == 1]
        image_rows.append({"name": img.name, "layers": len(img.layers),
                           "bytes": sum(layer_bytes.get(lid, 0) for lid in img.layers),
                           "unique_bytes": sum(layer_bytes.get(lid, 0) for lid in own)})
    sandboxes = []
    for rec in store.sandboxes():
        size = sum(w.size(part)[0] for part in _sandbox_parts(store, rec.id))
        sandboxes.append({"id": rec.id, "image": rec.image, "bytes": size,
                          "owner": "alive" if rec.owner_alive() else "dead (gc reclaims)"})
    package_cache = sum(_size_of(w, home.joinpath(*parts)) for parts in (PACKAGE_CACHE, LEGACY_PACKAGE_CACHE))
    other_cache = (w.size(home / "cache")[0] - package_cache) if (home / "cache").exists() else 0
    parts = {
        "layers": sum(layer_bytes[lid] for lid in layer_bytes),
        "sandboxes": sum(s["bytes"] for s in sandboxes),
        "package_cache": package_cache,
        "other_cache": other_cache,
        "downloads": _size_of(w, store.downloads_dir),
        "trash": _size_of(w, store.trash_dir),
    }
    # The real total: one walk of the whole store (mounts skipped, every inode once), plus the volume's file.
    total_walker = Walker()
    total, _ = total_walker.size(home)
    volume_file = home / "volume.img"
    volume = {"file": str(volume_file), "allocated_bytes": _allocated(volume_file), "used_bytes": _fs_used(
        store.volume_dir)}
    return {
        "home": str(home), "total_bytes": total, "parts": parts, "volume": volume,
        "images": image_rows, "layers": layers, "sandboxes": sandboxes,
        "shared_layers": sum(1 for lid in layer_bytes if len(set(users.get(lid, []))) > 1),
    }


def _sandbox_parts(store: Store, sandbox_id: str) -> list[Path]:
    """What a sandbox holds: its directory, and its subvolumes on the volume without their `attic` (the files
    of the layer it started from, shared with the layer: runtime/volume.py)."""
    parts = [store.sandboxes_dir / sandbox_id]
    try:
        for sub in (store.volume_dir / sandbox_id).iterdir():
            parts += [entry for entry in sub.iterdir() if entry.name != ATTIC] if sub.is_dir() else [sub]
    except OSError:  # none there, or it closed meanwhile
        pass
    return [part for part in parts if part.exists()]


def _size_of(w: Walker, path: Path) -> int:
    return w.size(path)[0] if path.exists() else 0


def _allocated(path: Path) -> int:
    try:
        return os.lstat(path).st_blocks * 512
    except OSError:
        return 0


def _fs_used(path: Path) -> int | None:
    """Bytes in use on the file system mounted at `path`, or None when nothing is mounted there."""
    if not os.path.ismount(path):
        return None
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def parse_size(text: str) -> int:
    """'500M', '2G', '0' -> bytes."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    num, unit = (t[:-1], t[-1]) if t and t[-1] in units else (t, "")
    try:
        value = float(num)
    except ValueError:
        raise BadInput(f"not a size: {text!r}", fix="give e.g. 0, 500M or 2G") from None
    if value < 0:
        raise BadInput(f"a size cannot be negative: {text!r}")
    return int(value * units[unit])


def prune_cache(store: Store, keep: int = 0) -> dict:
    """Shrink the package caches to at most `keep` bytes in all: the shared cache of earlier versions goes at
    once; then what uv no longer needs in each source's cache (`uv cache prune`); then, while still larger,
    whole caches, least recently used first (`uv cache clean`). uv waits for setups using a cache (its lock)
    rather than delete under them. Returns the sizes before and after."""
    from .setup.pkgcache import learned_path

    root = store.home.joinpath(*PACKAGE_CACHE)
    legacy = store.home.joinpath(*LEGACY_PACKAGE_CACHE)
    scopes = sorted((d for d in root.iterdir() if d.is_dir()), key=lambda d: d.stat().st_mtime) \
        if root.is_dir() else []
    sizes = {d: Walker().size(d)[0] for d in scopes}
    before = sum(sizes.values()) + _size_of(Walker(), legacy)
    steps = []
    if legacy.exists():
        _uv_cache("clean", legacy)
        shutil.rmtree(legacy, ignore_errors=True)  # what uv does not know as its own
        steps.append("clean legacy")
    if sum(sizes.values()) > keep and scopes:
        for d in scopes:
            _uv_cache("prune", d)
            sizes[d] = Walker().size(d)[0]
        steps.append("prune")
    for d in scopes:  # oldest first
        if sum(sizes.values()) <= keep:
            break
        _uv_cache("clean", d)
        shutil.rmtree(d, ignore_errors=True)
        learned_path(d).unlink(missing_ok=True)
        sizes[d] = 0
        steps.append(f"clean {d.name}")
    return {"package_cache": str(root), "before_bytes": before, "after_bytes": sum(sizes.values()), "steps": steps}


def _uv_cache(step: str, cache_dir: Path) -> None:
    from .setup.interpreters import uv_binary

    try:
        done = subprocess.run([uv_binary(), "cache", step, "--cache-dir", str(cache_dir)], capture_output=True,
                              text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise StoreError(f"cannot prune the package cache {cache_dir}: {e}") from e
    if done.returncode != 0:
        raise StoreError(f"`uv cache {step}` failed on {cache_dir}: {done.stderr.strip()[-300:]}",
                         fix="stop setups using the store, then try again")
