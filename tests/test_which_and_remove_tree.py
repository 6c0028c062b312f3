"""Two small helpers of the run path that stand in for shutil (kept off it: importing shutil costs 1.3 ms of
every `envyard run`): envyard.which and store.remove_tree's flat-directory case."""

from __future__ import annotations

import os
import shutil

from envyard.store.store import remove_tree
from envyard.which import which


def test_which_agrees_with_shutil(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "tool").write_text("")  # not executable: skipped
    (b / "tool").write_text("#!/bin/sh\n")
    (b / "tool").chmod(0o755)
    (a / "dir.exe").mkdir()  # a directory is not a program
    path = os.pathsep.join([str(a), str(b), str(a)])
    for name in ("tool", "dir.exe", "missing", "sh"):
        assert which(name, path) == shutil.which(name, path=path)
    assert which("tool", path) == str(b / "tool")
    assert which(str(b / "tool")) == str(b / "tool") and which(str(a / "tool")) is None
    assert which("sh") == shutil.which("sh")  # $PATH by default


def test_remove_tree_flat_nested_and_links(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    flat = tmp_path / "sandbox"
    (flat / "ipc").mkdir(parents=True)
    (flat / "spill").mkdir()
    (flat / "file").write_text("x")
    (flat / "link").symlink_to(outside)  # removed, not followed
    remove_tree(flat)
    assert not flat.exists() and (outside / "keep").read_text() == "x"

    nested = tmp_path / "nested"
    (nested / "a" / "b").mkdir(parents=True)
    (nested / "a" / "b" / "f").write_text("x")
    (nested / "a" / "link").symlink_to(outside)
    remove_tree(nested)  # more than one level: shutil's rmtree finishes it
    assert not nested.exists() and (outside / "keep").exists()
