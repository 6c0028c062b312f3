"""The `host` base: the machine's own root filesystem, read-only, as the bottom layer. Zero set-up.

overlayfs refuses a lower layer that lies inside another lower layer's tree, and every store directory lies
inside `/`. So `/` is not used directly: it is exposed once per store through a read-only overlay mount
(`<store>/host/root`, lowers: an empty tmpfs and `/`), which is a filesystem of its own, so layers in the
store no longer count as "inside" it. gc unmounts it when no sandbox uses it; the next use mounts it again.

On top sits a small mask layer of opaque directories that hide the host's /tmp, /var/tmp and the envyard
store itself, so sandboxes see an empty /tmp and cannot read other sandboxes' files.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

from ..errors import HostUnsupported
from ..store import Image, ImageConfig, Store

HOST_IMAGE = "host:latest"
HOST_ROOT_LAYER = "host-root"
# bwrap mounts overlays with `userxattr` (user.overlay.*); the trusted.* name serves a root-mounted overlay.
OPAQUE_XATTRS = ("user.overlay.opaque", "trusted.overlay.opaque")


def _masked_paths(store: Store) -> list[str]:
    paths = ["tmp", "var/tmp"]
    home = store.home
    if home.is_relative_to("/") and home != Path("/"):
        paths.append(str(home).lstrip("/"))
    return paths


def build_mask_layer(store: Store) -> Path:
    layer = store.new_layer_dir()
    for rel in _masked_paths(store):
        # Intermediate directories copy the host's ownership and mode: in an overlay the topmost layer that
        # has a directory decides its attributes.
        parts = Path(rel).parts
        for i in range(1, len(parts) + 1):
            sub = Path(*parts[:i])
            target = layer / sub
            if not target.exists():
                target.mkdir()
                host = Path("/") / sub
                if host.exists():
                    st = host.stat()
                    os.chown(target, st.st_uid, st.st_gid)
                    os.chmod(target, st.st_mode & 0o7777)
        for xattr in OPAQUE_XATTRS:
            os.setxattr(layer / rel, xattr, b"y")
    for tmp in ("tmp", "var/tmp"):
        os.chmod(layer / tmp, 0o1777)
    return layer


def ensure_host_image(store: Store) -> Image:
    """Return the `host` image, recording it (and building its mask layer) on first use."""
    if store.has_image(HOST_IMAGE):
        host_root_view(store)
        img = store.image(HOST_IMAGE)
        if all(_layer_exists(store, i) for i in img.layers):
            return img
    store.add_external_layer(HOST_ROOT_LAYER, host_root_view(store), {"provider": "host"})
    mask = store.seal_layer(build_mask_layer(store), {"provider": "host", "role": "mask"})
    config = ImageConfig(provenance={"provider": "host"}, workdir="/")
    return store.put_image(HOST_IMAGE, [HOST_ROOT_LAYER, mask.id], config)


def _layer_exists(store: Store, layer_id: str) -> bool:
    rows = store.db.query("SELECT path FROM layers WHERE id=?", (layer_id,))
    return bool(rows) and Path(rows[0]["path"]).is_dir()


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
    """Unmount the host view (gc calls this when no sandbox stands on it). True if something was unmounted."""
    done = False
    for d in reversed(_host_dirs(store)):
        for _ in range(16):  # mounts may be stacked if an older envyard raced; peel them all
            if not os.path.ismount(d):
                break
            subprocess.run(["umount", "-l", str(d)], check=False, capture_output=True)
            done = True
    return done


def _mount(args: list[str]) -> None:
    r = subprocess.run(["mount", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise OSError(r.stderr.strip() or f"mount exited with {r.returncode}")
