"""Identical files across layers stored once (store/dedupe.py), checked with the extents the kernel reports."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from envyard.store.dedupe import MIN_SIZE, dedupe

SIZE = (3 << 20) + 123  # incompressible, and not a whole number of blocks: the last one is shared too


def extents(path: Path) -> list[int]:
    """The physical start of each extent of a file, as the kernel reports them (FIEMAP, through filefrag)."""
    os.sync()  # data still in the page cache has no extents yet
    filefrag = shutil.which("filefrag", path="/usr/sbin:/sbin:/usr/bin") or "filefrag"
    out = subprocess.run([filefrag, "-v", "-b4096", str(path)], capture_output=True, text=True, check=True).stdout
    return [int(m.group(1)) for m in re.finditer(r"^\s*\d+:\s+\d+\.\.\s*\d+:\s+(\d+)\.\.", out, re.M)]


@pytest.fixture
def three_layers(yard, host):
    """Three snapshot layers with /opt/blob: two with the same bytes, one of the same size with others."""
    if not yard.can_limit_disk:
        pytest.skip("no sandbox volume (btrfs) on this machine: layers cannot share extents")
    same, other = os.urandom(SIZE), os.urandom(SIZE)
    images = []
    for content in (same, same, other):
        with yard.sandbox(host) as sb:
            sb.write_file("/opt/blob", content)
            sb.write_file("/opt/small", content[: MIN_SIZE - 1])  # too small to be worth it: left alone
            images.append(sb.snapshot())
    yield images, same, other
    for img in images:
        yard.store.remove_image(img.name)


def test_identical_files_in_two_layers_share_their_extents(yard, three_layers):
    images, same, other = three_layers
    tops = [img.layers[-1] for img in images]
    blobs = [yard.store.layer(i).path / "opt" / "blob" for i in tops]
    before = [extents(b) for b in blobs]
    assert all(before) and len({tuple(e) for e in before}) == 3  # three copies on disk

    report = dedupe(yard.store, tops)

    assert report["layers"] == 3 and report["files"] == 1 and report["bytes"] == SIZE
    after = [extents(b) for b in blobs]
    assert after[1] == after[0]  # the second copy now points at the first one's extents
    assert after[2] == before[2] and set(after[2]).isdisjoint(after[0])  # same size, other bytes: not shared
    small = [extents(yard.store.layer(i).path / "opt" / "small") for i in tops[:2]]
    assert small[0] != small[1]  # below MIN_SIZE: left alone
    # what sandboxes read is unchanged
    for img, content in zip(images, (same, same, other)):
        with yard.sandbox(img) as sb:
            assert sb.read_file("/opt/blob") == content
    assert dedupe(yard.store, tops)["layers"] == 0  # each layer is looked at once


def test_a_later_layer_shares_with_one_indexed_earlier_and_a_removed_one_is_forgotten(yard, host, three_layers):
    images, same, _ = three_layers
    dedupe(yard.store, [img.layers[-1] for img in images])
    yard.store.remove_image(images[0].name)  # the first copy's layer goes; the index still names its file
    with yard.sandbox(host) as sb:
        sb.write_file("/opt/again", same)
        late = sb.snapshot()
    try:
        report = dedupe(yard.store, [late.layers[-1]])
        assert report["files"] == 1  # shared with the second image's copy
        second = yard.store.layer(images[1].layers[-1]).path / "opt" / "blob"
        assert extents(yard.store.layer(late.layers[-1]).path / "opt" / "again") == extents(second)
        with yard.sandbox(late) as sb:
            assert sb.read_file("/opt/again") == same
    finally:
        yard.store.remove_image(late.name)
        images.pop(0)


def test_a_damaged_index_is_reported_never_raised(yard, three_layers):
    # saving space must not fail a setup or a gc: a broken dedupe.db ends the run with an error in the report
    images, _, _ = three_layers
    index = yard.store.home / "dedupe.db"
    saved = index.read_bytes() if index.exists() else None
    index.write_bytes(b"not a database" * 100)
    try:
        report = dedupe(yard.store, [img.layers[-1] for img in images])
        assert "error" in report and report["files"] == 0
    finally:
        index.unlink()
        if saved is not None:
            index.write_bytes(saved)
