"""The `host` base: the machine's own root filesystem, read-only, as the bottom layer. Zero set-up.

overlayfs refuses a lower layer that lies inside another lower layer's tree, and every store directory lies
inside `/`. So `/` is not used directly: it is exposed once per store through a read-only overlay mount
(`<store>/host/root`, lowers: an empty tmpfs and `/`), which is a filesystem of its own, so layers in the
store no longer count as "inside" it. gc unmounts it when no sandbox uses it; the next use mounts it again.
A create holds `host/.use` shared from "view mounted" until its sandbox row is in, and gc holds it exclusively
from "no row uses the view" until the unmount is done, so gc never unmounts the view under a create in flight.

On top sits the mask (hostmask.py): secrets, home directories, /tmp and every envyard store are hidden.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import HostUnsupported
from ..store import Image, ImageConfig, Store
from ..store.registry import KNOWN_STORES

HOST_IMAGE = "host:latest"
HOST_ROOT_LAYER = "host-root"
HOST_MASK_LAYER = "host-mask"  # see hostmask.py: what of the machine the host image hides


def ensure_host_image(store: Store) -> Image:
    """Return the `host` image, recording it on first use (and moving a store made by an older envyard,
    whose host image had a sealed mask layer, to the current mask)."""
    host_root_view(store)
    refresh_host_mask(store)
    if store.has_image(HOST_IMAGE):
        img = store.image(HOST_IMAGE)
        if img.layers == [HOST_ROOT_LAYER, HOST_MASK_LAYER]:
            return img
    _mask_seen.pop(str(store.home), None)  # gc may have dropped the mask's row along with an old host image
    refresh_host_mask(store)
    store.add_external_layer(HOST_ROOT_LAYER, host_root_view(store), {"provider": "host"})
    config = ImageConfig(provenance={"provider": "host"}, workdir="/")
    return store.put_image(HOST_IMAGE, [HOST_ROOT_LAYER, HOST_MASK_LAYER], config)


def with_current_mask(img: Image) -> Image:
    """An image over the host root as it must run now: with the `host-mask` layer right above the root, also
    for images built over an older envyard's host image (which carry a sealed mask that hides less)."""
    if HOST_ROOT_LAYER not in img.layers or HOST_MASK_LAYER in img.layers:
        return img
    i = img.layers.index(HOST_ROOT_LAYER) + 1
    return Image(img.name, [*img.layers[:i], HOST_MASK_LAYER, *img.layers[i:]], img.config, img.created)


CURRENT_MASK = "mask-current.json"  # beside host/masks: the state key of the last refresh and the mask it chose
_mask_seen: dict[str, tuple] = {}  # store home -> (state key, mask dir) of the last refresh in this process


def _mask_state_key() -> tuple:
    """Cheap to read; changes whenever the mask might: the registry, the user database, ssh keys, new dirs."""
    key = []
    for path in (KNOWN_STORES, "/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc", "/var/lib", "/"):
        try:
            key.append(os.stat(path).st_mtime_ns)
        except OSError:
            key.append(None)
    return tuple(key)


def refresh_host_mask(store: Store) -> Path:
    """Make sure the `host-mask` layer points at a mask of the machine as it is now; return its directory."""
    key = _mask_state_key()
    seen = _mask_seen.get(str(store.home))
    if seen and seen[0] == key and seen[1].is_dir():
        return seen[1]
    masks = store.home / "host" / "masks"
    # What an earlier process found for the same state: spares each CLI start reading the user database and
    # globbing the host.
    path = _current_mask(masks, key)
    if path is None:
        from . import hostmask  # here: a start that reuses the recorded mask (most) does not build one

        spec = hostmask.mask_spec(store.home)
        path = masks / hostmask.spec_digest(spec)
        if not path.is_dir():
            masks.mkdir(parents=True, exist_ok=True)
            tmp = masks / f".new-{os.getpid()}-{os.urandom(4).hex()}"
            try:
                hostmask.build_mask(tmp, spec)
                os.rename(tmp, path)
            except OSError:
                store.discard_dir(tmp)
                if not path.is_dir():  # not just another process winning the race
                    raise
        _save_current_mask(masks, key, path)
    rows = store.db.query("SELECT path FROM layers WHERE id=?", (HOST_MASK_LAYER,))
    if not rows or rows[0]["path"] != str(path):
        store.add_external_layer(HOST_MASK_LAYER, path, {"provider": "host", "role": "mask"})
    _mask_seen[str(store.home)] = (key, path)
    return path


def _current_mask(masks: Path, key: tuple) -> Path | None:
    """The mask directory recorded for this state key, if it is still there."""
    try:
        current = json.loads((masks.parent / CURRENT_MASK).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(current, dict) or current.get("key") != list(key):
        return None
    path = masks / str(current.get("mask", ""))
    return path if current.get("mask") and path.parent == masks and path.is_dir() else None


def _save_current_mask(masks: Path, key: tuple, path: Path) -> None:
    tmp = masks.parent / f".{CURRENT_MASK}-{os.getpid()}"
    try:
        tmp.write_text(json.dumps({"key": list(key), "mask": path.name}))
        os.replace(tmp, masks.parent / CURRENT_MASK)
    except OSError:  # only a cache: the next start computes the mask again
        with contextlib.suppress(OSError):
            tmp.unlink()


def _host_dirs(store: Store) -> tuple[Path, Path]:
    base = store.home / "host"
    return base / "empty", base / "root"


def host_root_view(store: Store) -> Path:
    """Mount (if needed) and return the read-only overlay view of `/` used as the host image's bottom layer."""
    empty, root = _host_dirs(store)
    if os.path.ismount(root):
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # several processes may get here at once; mount only once
        if not os.path.ismount(root):
            _mount_view(empty, root)
    return root


@contextlib.contextmanager
def host_view_pinned(store: Store, layer_ids: list[str]) -> Iterator[None]:
    """For a sandbox over these layers: mount the host view if they include it, and keep gc from unmounting
    it until the block ends (the caller records its sandbox row inside; from then on the row keeps it)."""
    if HOST_ROOT_LAYER not in layer_ids:
        yield
        return
    base = _host_dirs(store)[1].parent
    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".use", "a") as use:
        fcntl.flock(use, fcntl.LOCK_SH)
        host_root_view(store)
        yield


def _mount_view(empty: Path, root: Path) -> None:
    try:
        for d in (empty, root):
            d.mkdir(parents=True, exist_ok=True)
        if not os.path.ismount(empty):
            _mount(["-t", "tmpfs", "-o", "size=64k,mode=0755", "envyard-empty", str(empty)])
        _mount(["-t", "overlay", "-o", f"ro,lowerdir={empty}:/", "envyard-host", str(root)])
    except OSError as e:
        raise HostUnsupported(
            f"cannot mount the host root view at {root}: {e}",
            fix="the host base needs root (or CAP_SYS_ADMIN); use a debian base instead: envyard base pull debian:bookworm",
        ) from e


def release_host_root_view(store: Store) -> bool:
    """Unmount the host view if no sandbox stands on it and no create is about to (gc calls this). True if
    something was unmounted. A create that holds the view pinned makes us leave it for the next gc."""
    dirs = _host_dirs(store)
    if not any(os.path.ismount(d) for d in dirs):
        return False
    done = False
    with open(dirs[1].parent / ".use", "a") as use:
        try:
            fcntl.flock(use, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if any(HOST_ROOT_LAYER in r.layers for r in store.sandboxes()):
            return False
        with open(dirs[1].parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # not while another process mounts it
            for d in reversed(dirs):
                for _ in range(16):  # mounts may be stacked if an older envyard raced; peel them all
                    if not os.path.ismount(d):
                        break
                    subprocess.run(["umount", "-l", str(d)], check=False, capture_output=True)
                    done = True
    return done


MASK_KEEP_SECONDS = 600  # a mask younger than this may have been resolved by a create not yet recorded


def prune_host_masks(store: Store) -> list[str]:
    """Delete mask directories other than the current one (gc): the machine changed since they were made.
    Only when no sandbox stands on the host view and no create holds it, and only old ones."""
    masks = store.home / "host" / "masks"
    if not masks.is_dir():
        return []
    rows = store.db.query("SELECT path FROM layers WHERE id=?", (HOST_MASK_LAYER,))
    current = rows[0]["path"] if rows else None
    pruned = []
    with open(masks.parent / ".use", "a") as use:
        try:
            fcntl.flock(use, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return []
        if any(HOST_ROOT_LAYER in r.layers for r in store.sandboxes()):
            return []
        for d in masks.iterdir():
            if str(d) != current and time.time() - d.stat().st_mtime > MASK_KEEP_SECONDS:
                store.discard_dir(d)
                pruned.append(d.name)
    return pruned


def _mount(args: list[str]) -> None:
    r = subprocess.run(["mount", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise OSError(r.stderr.strip() or f"mount exited with {r.returncode}")
