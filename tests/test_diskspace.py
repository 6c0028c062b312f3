"""A full disk is told apart from a project's failure (envyard.diskspace), on a real full filesystem."""

from __future__ import annotations

import os
import subprocess

import pytest

from envyard import diskspace
from envyard.errors import DiskFull

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")


@pytest.fixture
def full_disk(tmp_path):
    """A 4 MB tmpfs, filled up."""
    d = tmp_path / "small"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(d)], check=True)
    try:
        with pytest.raises(OSError), open(d / "fill", "wb") as f:
            while True:
                f.write(b"x" * 65536)
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=True)


def test_no_space_on_the_stores_disk_is_diskfull_naming_it(full_disk):
    err = diskspace.diagnose(full_disk, "OSError: [Errno 28] No space left on device", "64G")
    assert isinstance(err, DiskFull) and err.exit_code == 25
    assert str(full_disk) in err.message and "envyard gc --cache" in err.fix


def test_no_space_with_room_on_the_disk_is_the_projects_own_output(tmp_path):
    # e.g. a test of the project's ENOSPC handling prints the message while the disk is fine
    assert diskspace.free_bytes(tmp_path) > diskspace.MIN_FREE
    assert diskspace.diagnose(tmp_path, "test_write_full: No space left on device", "64G") is None
    assert diskspace.diagnose(tmp_path, "AssertionError: 1 != 2", "64G") is None


def test_over_quota_is_diskfull_only_where_disks_are_limited(tmp_path):
    err = diskspace.diagnose(tmp_path, "OSError: [Errno 122] Disk quota exceeded", "64G")
    assert isinstance(err, DiskFull) and "disk limit (64G)" in err.message
    assert diskspace.diagnose(tmp_path, "OSError: [Errno 122] Disk quota exceeded", None) is None


def test_check_refuses_a_disk_with_less_free_than_needed(full_disk, tmp_path):
    with pytest.raises(DiskFull, match="has 0.0 GB free"):
        diskspace.check(full_disk)
    diskspace.check(tmp_path)  # the test machine's own disk has room
