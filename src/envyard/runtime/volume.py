"""Per-sandbox disk limits: sandboxes' writable layers live on a btrfs volume with a quota each.

The kernel gives an overlay's upper dir no size limit of its own, and this machine's kind of kernel builds
neither ext4's nor XFS's quota support (the usual way, Docker's `--storage-opt size`, needs XFS project
quotas). btrfs is built in and its *simple quotas* (Linux 6.7+) cost next to nothing: each sandbox's upper and
work dirs sit in a subvolume of their own whose quota group is capped at the sandbox's disk limit, so a
writer past it gets EDQUOT ("Disk quota exceeded") inside the sandbox while the sandbox, its neighbours and
the host go on. Creating or deleting a subvolume is one ioctl (~0.05 ms).

The volume is one sparse file per store (`<store>/volume.img`, sized like the filesystem holding the store,
so it caps nothing by itself), formatted once with mkfs.btrfs and loop-mounted at `<store>/volume`. Freed
blocks go back to the host (discard). If the host's filesystem itself fills up, writes to the volume fail
as they would on any disk; gc unmounts the volume when no sandbox uses it.

Snapshots of sandboxes on the volume are btrfs snapshots too: `snapshot()` clones a sandbox's subvolume in
O(1) (no file is copied, whatever the upper dir holds) into `<volume>/layers/`, where the store keeps it as a
read-only layer (store.py). The volume then holds layers, so it stays mounted while any exists. A sandbox
over such layers starts from a snapshot of the topmost one, not an empty subvolume, so that its files and the
layers' never share an inode number (`_numbered_after`).

Hosts without btrfs, loop devices or mkfs.btrfs run sandboxes without disk limits; `available()` says why.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import subprocess
from pathlib import Path

from ..errors import HostUnsupported
from ..log import log
from ..which import which


# btrfs ioctls (linux/btrfs.h): _IOC(dir, 0x94, nr, size).
_SUBVOL_CREATE = 0x5000940E  # _IOW(14, struct btrfs_ioctl_vol_args: s64 fd + char name[4088])
_SNAP_DESTROY = 0x5000940F  # _IOW(15, btrfs_ioctl_vol_args)
_SNAP_CREATE_V2 = 0x50009417  # _IOW(23, struct btrfs_ioctl_vol_args_v2: s64 fd, u64 transid, u64 flags, ...)
_SUBVOL_SETFLAGS = 0x4008941A  # _IOW(26, u64)
_SUBVOL_RDONLY = 1 << 1
_FIRST_FREE_OBJECTID = 256  # the inode number of every subvolume's root directory
LAYERS = "layers"  # <volume>/layers/: layers made by snapshots (not a sandbox's directory)
ATTIC = "attic"  # in a snapshot a sandbox writes in: the files of the layer it was made from (_numbered_after)
_QUOTA_CTL = 0xC0109428  # _IOWR(40, struct btrfs_ioctl_quota_ctl_args: u64 cmd, u64 status)
_QGROUP_CREATE = 0x4010942A  # _IOW(42, struct btrfs_ioctl_qgroup_create_args: u64 create, u64 qgroupid)
_QGROUP_LIMIT = 0x8030942B  # _IOR(43, struct btrfs_ioctl_qgroup_limit_args: u64 qgroupid + 5 x u64 limit)
_QUOTA_ENABLE, _QUOTA_ENABLE_SIMPLE = 1, 4
_LIMIT_MAX_RFER = 1  # btrfs_qgroup_limit.flags: cap the bytes the subvolume refers to


def _vol_args(name: str) -> bytearray:
    args = bytearray(4096)
    args[8 : 8 + len(name)] = name.encode()
    return args


SYSTEM_PATH = "/usr/sbin:/sbin:/usr/bin:/bin"


class SandboxVolume:
    def __init__(self, home: Path):
        self.home = home
        self.root = home / "volume"
        self.image = home / "volume.img"
        self._lock_path = home / "volume.lock"
        self._fd: int | None = None
        self._why_not: str | None = None
        self._checked = False

    # ---- the volume --------------------------------------------------------------------------------------

    def available(self) -> str | None:
        """None when disk limits work here (the volume is mounted, made on first use); else why not."""
        if not self._checked:
            self._checked = True
            try:
                self.ensure()
            except HostUnsupported as e:
                self._why_not = e.message
        return self._why_not

    def ensure(self) -> None:
        """Mount the volume (formatting it the first time); safe with several processes at once."""
        if self._fd is not None and os.path.ismount(self.root):
            return
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self._lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not os.path.ismount(self.root):
                self._mount()
        if self._fd is not None:
            os.close(self._fd)
        self._fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def _mount(self) -> None:
        if os.geteuid() != 0:
            raise HostUnsupported("per-sandbox disk limits need root (a loop-mounted volume)")
        mkfs = which("mkfs.btrfs") or which("mkfs.btrfs", path="/usr/sbin:/sbin")
        if "btrfs" not in Path("/proc/filesystems").read_text():
            raise HostUnsupported("the kernel has no btrfs, which per-sandbox disk limits use")
        fresh = not self.image.exists()
        if fresh:
            if mkfs is None:
                raise HostUnsupported("mkfs.btrfs is not installed (per-sandbox disk limits use a btrfs volume)",
                                      fix="apt-get install btrfs-progs")
            st = os.statvfs(self.home)
            tmp = self.image.with_suffix(".new")
            with open(tmp, "wb") as f:
                f.truncate(max(st.f_blocks * st.f_frsize, 1 << 30))  # sparse: costs what is written
            done = subprocess.run([mkfs, "-q", "-f", str(tmp)], capture_output=True, text=True)
            if done.returncode != 0:
                tmp.unlink()
                raise HostUnsupported(f"mkfs.btrfs failed: {done.stderr.strip()[-200:]}")
            os.rename(tmp, self.image)
        self.root.mkdir(exist_ok=True)
        done = subprocess.run(["mount", "-o", "loop,discard=async,noatime", str(self.image), str(self.root)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise HostUnsupported(f"cannot mount the sandbox volume {self.image}: {done.stderr.strip()[-200:]}",
                                  fix="check loop devices are available (losetup -f)")
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self._enable_quota(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _enable_quota(fd: int) -> None:
        for cmd in (_QUOTA_ENABLE_SIMPLE, _QUOTA_ENABLE):  # simple quotas (6.7+) are cheaper; full ones work too
            try:
                fcntl.ioctl(fd, _QUOTA_CTL, bytearray(struct.pack("QQ", cmd, 0)))
                return
            except OSError as e:
                if e.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.EEXIST):
                    raise HostUnsupported(f"cannot enable quotas on the sandbox volume: {e}") from e
                if e.errno == errno.EEXIST:
                    return

    def close(self) -> None:
        """Let go of the volume's directory (an open descriptor keeps the volume from being unmounted)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._checked = False

    def __enter__(self) -> "SandboxVolume":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def release(self) -> bool:
        """Unmount the volume (gc): refused by the kernel while a sandbox or an envyard process uses it.
        True if it was unmounted."""
        self.close()
        if not os.path.ismount(self.root):
            return False
        with open(self._lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            subprocess.run(["umount", str(self.root)], capture_output=True)
        return not os.path.ismount(self.root)  # (umount fails with EBUSY while it is in use)

    def trim(self) -> int:
        """Give the volume's free space back to the host's disk; the bytes the image file shrank by. Deleted
        sandboxes and layers free their blocks inside btrfs, but the sparse image file keeps them allocated
        until they are discarded: `discard=async` gets to it late or not at all (a test store's 2.2 GB file held
        6 MB of data). fstrim discards them now. 0 when the volume is not mounted or fstrim is missing."""
        fstrim = which("fstrim", path=SYSTEM_PATH)
        if fstrim is None or not os.path.ismount(self.root):
            return 0
        before = os.stat(self.image).st_blocks
        # (btrfs frees a deleted subvolume's blocks in the background, which can take tens of seconds: gc does
        # not wait for it; what is freed after this trim goes back at the next gc)
        subprocess.run([fstrim, str(self.root)], capture_output=True)
        return max(0, before - os.stat(self.image).st_blocks) * 512

    # ---- one sandbox's space -----------------------------------------------------------------------------
    #
    # <volume>/<sandbox id>/ is a plain directory holding the sandbox's subvolume; reset() swaps in a fresh one
    # (g1, g2, ...) so that the old one, still in use by the dying overlay, is deleted in the background
    # without its bytes counting against the new one's quota.

    def create(self, sandbox_id: str, limit: int, after: Path | None = None) -> Path:
        """A fresh subvolume for one sandbox, capped at `limit` bytes; returns its path. With `after` (the
        subvolume of the image's topmost layer on this volume), a snapshot of it whose files are moved out of
        the way (see `_numbered_after`) instead of an empty subvolume."""
        self.ensure()
        parent = self.root / sandbox_id
        parent.mkdir(exist_ok=True)
        taken = {p.name for p in parent.iterdir()}
        name = next(f"g{i}" for i in range(len(taken) + 1) if f"g{i}" not in taken)
        fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if after is None:
                fcntl.ioctl(fd, _SUBVOL_CREATE, _vol_args(name))
            else:
                _snapshot(after, fd, name)
                _numbered_after(parent / name)
            sub = os.open(parent / name, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.ioctl(sub, _QGROUP_LIMIT, bytearray(struct.pack("6Q", 0, _LIMIT_MAX_RFER, limit, 0, 0, 0)))
            finally:
                os.close(sub)
        except OSError:
            self._destroy(parent, fd, name)
            raise
        finally:
            os.close(fd)
        return parent / name

    def remove(self, sandbox_id: str, subvolume: Path | None = None) -> None:
        """Delete one of a sandbox's subvolumes, or all of them and its directory, whatever they hold (btrfs
        reclaims the blocks in the background)."""
        parent = self.root / sandbox_id
        if not parent.is_dir():
            return
        fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for name in [subvolume.name] if subvolume else os.listdir(parent):
                self._destroy(parent, fd, name)
        finally:
            os.close(fd)
        if subvolume is None:
            try:
                parent.rmdir()
            except OSError:
                pass  # a create raced us; gc comes back for it

    @staticmethod
    def _destroy(parent: Path, parent_fd: int, name: str) -> None:
        try:
            fcntl.ioctl(parent_fd, _SNAP_DESTROY, _vol_args(name))
        except FileNotFoundError:
            pass
        except OSError as e:  # not a subvolume (a stray file or directory): an ordinary delete
            if e.errno not in (errno.EINVAL, errno.ENOTTY, errno.EPERM):
                raise
            subprocess.run(["rm", "-rf", "--one-file-system", str(parent / name)], check=False)

    def current(self, sandbox_id: str) -> Path | None:
        """The newest subvolume of a sandbox (for processes that are not its owner)."""
        parent = self.root / sandbox_id
        try:
            names = [p.name for p in parent.iterdir() if p.name[1:].isdigit()]
        except OSError:
            return None
        return parent / max(names, key=lambda n: int(n[1:])) if names else None

    def sandbox_ids(self) -> list[str]:
        """Sandboxes with space on the volume (none when it is not mounted)."""
        if not os.path.ismount(self.root):
            return []
        return [p.name for p in self.root.iterdir() if p.name != LAYERS]

    # ---- layers made by snapshots ------------------------------------------------------------------------

    @property
    def layers_dir(self) -> Path:
        return self.root / LAYERS

    def snapshot(self, subvolume: Path, name: str) -> Path:
        """A writable snapshot of a sandbox's subvolume at <volume>/layers/<name>: O(1), the data is shared
        copy-on-write. The caller holds the sandbox still meanwhile and seals the copy as a layer."""
        self.ensure()
        self.layers_dir.mkdir(exist_ok=True)
        dest = os.open(self.layers_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            _snapshot(subvolume, dest, name)
        finally:
            os.close(dest)
        return self.layers_dir / name


    def clear_stale_quota_groups(self) -> int:
        """Drop the quota groups of deleted subvolumes (btrfs keeps them). Returns how many went."""
        self.ensure()
        out = subprocess.run(["btrfs", "qgroup", "show", str(self.root)], capture_output=True, text=True).stdout
        n = 0
        for line in out.splitlines():
            fields = line.split()
            if fields and fields[-1] == "<stale>" and fields[0].startswith("0/"):
                try:
                    qgroupid = int(fields[0].split("/")[1])
                    fcntl.ioctl(self._fd, _QGROUP_CREATE, bytearray(struct.pack("QQ", 0, qgroupid)))
                    n += 1
                except (OSError, ValueError):
                    continue  # still being cleaned up: next time
        return n


def _snapshot(subvolume: Path, parent_fd: int, name: str) -> None:
    """A writable snapshot of `subvolume` named `name` in the directory open as `parent_fd`."""
    src = os.open(subvolume, os.O_RDONLY | os.O_DIRECTORY)
    try:
        args = bytearray(4096)
        struct.pack_into("qQQ", args, 0, src, 0, 0)
        args[56 : 56 + len(name)] = name.encode()  # name[4040], after fd, transid, flags and a 32-byte union
        fcntl.ioctl(parent_fd, _SNAP_CREATE_V2, args)
    finally:
        os.close(src)


def _numbered_after(subvolume: Path) -> None:
    """Make a snapshot of a layer's subvolume into an empty place for a sandbox's upper and work dirs, whose new
    files get inode numbers above every file of that layer and of the layers it was itself made over.

    Why: overlayfs reports one device for all the layers it finds on one filesystem, and every btrfs subvolume
    numbers its inodes from 257, so files of two layers (or of a layer and the upper dir) showed the same
    device and inode number inside a sandbox. Programs take that for "the same file": the dynamic loader
    handed scipy a module of pandas' instead of its own (`dynamic module does not define module export
    function`), `cp` and `mv` refuse ("are the same file"), tar and rsync store hard links that are not.
    A btrfs snapshot numbers new inodes after the highest it holds; the layer's own files (and its `attic` of
    earlier generations, all shared copy-on-write, costing no space or quota) stay in `attic`, out of sight."""
    attic = subvolume / ATTIC
    attic.mkdir(exist_ok=True)
    tag = os.urandom(4).hex()
    for name in os.listdir(subvolume):
        if name != ATTIC:
            os.rename(subvolume / name, attic / f"{tag}-{name}")


def is_subvolume(path: Path) -> bool:
    try:
        return os.stat(path, follow_symlinks=False).st_ino == _FIRST_FREE_OBJECTID and os.path.isdir(path)
    except OSError:
        return False


def set_readonly(subvolume: Path) -> None:
    fd = os.open(subvolume, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, _SUBVOL_SETFLAGS, bytearray(struct.pack("Q", _SUBVOL_RDONLY)))
    finally:
        os.close(fd)


def destroy_subvolume(subvolume: Path) -> None:
    """Delete a subvolume and all it holds at once (read-only ones too; btrfs frees the blocks later)."""
    fd = os.open(subvolume.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, _SNAP_DESTROY, _vol_args(subvolume.name))
    finally:
        os.close(fd)
