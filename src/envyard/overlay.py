"""overlayfs's on-disk marks, as every layer directory holds them.

A whiteout (a character device 0:0) says "this name is deleted here"; an opaque directory (the xattr
`overlay.opaque=y`) says "nothing of the lower layers shows through me". bubblewrap mounts overlays with
`userxattr`, which reads `user.overlay.*`; a root-mounted overlay reads `trusted.overlay.*`: envyard writes both.
"""

from __future__ import annotations

import os
import stat

OPAQUE_XATTRS = ("user.overlay.opaque", "trusted.overlay.opaque")


def is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def is_opaque(path: str | os.PathLike) -> bool:
    for name in OPAQUE_XATTRS:
        try:
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
        except OSError:
            pass
    return False


def make_whiteout(path: str | os.PathLike) -> None:
    os.mknod(path, stat.S_IFCHR, os.makedev(0, 0))


def mark_opaque(path: str | os.PathLike) -> None:
    for name in OPAQUE_XATTRS:
        os.setxattr(path, name, b"y")


def unmark_opaque(path: str | os.PathLike) -> None:
    for name in OPAQUE_XATTRS:
        try:
            os.removexattr(path, name)
        except OSError:
            pass
