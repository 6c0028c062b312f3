"""The setup benchmark's git corpus (benchmarks/setup/git_corpus.toml, git_corpus.py): the corpus file is
complete and covers issue 11's categories, and a tarball always becomes the same commit. No network."""

from __future__ import annotations

import hashlib
import io
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "setup"
sys.path.insert(0, str(BENCH))
import git_corpus  # noqa: E402
import report  # noqa: E402

ISSUE_CATEGORIES = {"services-postgresql", "services-mysql", "services-redis", "django", "non-pytest", "src-layout",
                    "monorepo", "old-python", "scientific"}
# beyond the issue's: more services, an X display; and the held-out sample's plain projects and C extensions
MORE_CATEGORIES = {"services-memcached", "services-rabbitmq", "gui", "plain", "c-extension"}


def test_corpus_file_complete_and_covers_the_issue_categories():
    entries = git_corpus.load(BENCH / "git_corpus.toml")
    assert len(entries) >= 40
    names = [e["name"] for e in entries]
    assert len(set(names)) == len(names), "names must be unique"
    assert len({e["commit"] for e in entries}) == len(entries)
    for e in entries:
        missing = [k for k in git_corpus.REQUIRED if not e.get(k)]
        assert not missing, (e.get("name"), missing)
        assert re.fullmatch(r"[0-9a-f]{64}", e["sha256"]), e["name"]
        assert re.fullmatch(r"[0-9a-f]{40}", e["commit"]), e["name"]
        assert e["suite"] in {"bullseye", "bookworm", "trixie"}, e["name"]
        assert e["directory"].startswith("pool/main/") and e["tarball"].startswith(e["source"] + "_"), e["name"]
        assert ".orig.tar." in e["tarball"], e["name"]
        assert e["tree"] in {"repository", "sdist"}, e["name"]
        assert e["category"] in ISSUE_CATEGORIES | MORE_CATEGORIES, e["name"]
        if e["category"].startswith("services-"):
            assert e["service"] == e["category"].removeprefix("services-"), e["name"]
    cats = {c: sum(1 for e in entries if e["category"] == c) for c in ISSUE_CATEGORIES}
    assert all(n >= 3 for n in cats.values()), cats
    assert sum(1 for e in entries if e["tree"] == "repository") >= len(entries) // 2


def _tarball(path: Path, mtime: int = 1_600_000_000) -> Path:
    """A small upstream-like tarball: one top directory, a debian/ dir, an executable, a symlink, and a file the
    project's own .gitignore would hide."""
    files = {"proj-1.0/setup.py": b"from setuptools import setup\nsetup(name='proj')\n",
             "proj-1.0/.gitignore": b"*.cfg\n", "proj-1.0/setup.cfg": b"[metadata]\nname = proj\n",
             "proj-1.0/tests/test_a.py": b"def test_a():\n    assert True\n",
             "proj-1.0/run.sh": b"#!/bin/sh\necho hi\n", "proj-1.0/debian/control": b"Source: proj\n"}
    with tarfile.open(path, "w:gz") as tf:
        for i, (name, data) in enumerate(sorted(files.items())):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), mtime + i
            info.mode = 0o755 if name.endswith(".sh") else 0o644
            tf.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("proj-1.0/tests/link.py")
        link.type, link.linkname, link.mtime = tarfile.SYMTYPE, "test_a.py", mtime
        tf.addfile(link)
    return path


def test_repository_creation_is_deterministic(tmp_path):
    tarball = _tarball(tmp_path / "proj_1.0.orig.tar.gz")
    a = git_corpus.make_repo(tarball, tmp_path / "a", "proj 1.0\n")
    b = git_corpus.make_repo(tarball, tmp_path / "b", "proj 1.0\n")
    assert a == b and re.fullmatch(r"[0-9a-f]{40}", a)
    files = subprocess.run(["git", "-C", str(tmp_path / "a"), "ls-files", "-s"], capture_output=True, text=True,
                           check=True).stdout
    assert "debian/" not in files  # Debian's packaging is dropped, the top directory stripped
    assert "\tsetup.cfg" in files  # kept although the project's .gitignore hides it
    assert re.search(r"^100755 .*\trun\.sh$", files, re.M)  # exec bit kept
    assert re.search(r"^120000 .*\ttests/link\.py$", files, re.M)  # symlink kept
    log = subprocess.run(["git", "-C", str(tmp_path / "a"), "log", "-1", "--format=%an <%ae> %ct %cn"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert log == "envyard corpus <corpus@envyard.invalid> 1600000005 envyard corpus"  # the newest member time
    # a different tarball (one member's time changed) gives a different commit
    other = _tarball(tmp_path / "other.tar.gz", mtime=1_600_000_100)
    assert git_corpus.make_repo(other, tmp_path / "c", "proj 1.0\n") != a


def _entry(tarball: Path, commit: str = "0" * 40) -> dict:
    return {"name": "proj", "category": "src-layout", "source": "proj", "version": "1.0", "suite": "trixie",
            "directory": "pool/main/p/proj", "tarball": tarball.name, "tree": "repository",
            "sha256": hashlib.sha256(tarball.read_bytes()).hexdigest(), "commit": commit, "note": "test"}


def test_ensure_uses_the_cache_and_checks_the_pinned_commit(tmp_path):
    cache = tmp_path / "cache"
    (cache / "tarballs").mkdir(parents=True)
    tarball = _tarball(cache / "tarballs" / "proj_1.0.orig.tar.gz")
    expected = git_corpus.make_repo(tarball, tmp_path / "ref", git_corpus.commit_message(_entry(tarball)))
    entry = _entry(tarball, expected)
    unreachable = "http://127.0.0.1:9/debian"  # nothing listens there: any download fails at once
    repo, commit = git_corpus.ensure(entry, cache, mirror=unreachable)
    assert commit == expected and repo == cache / "repos" / "proj"
    assert git_corpus.ensure(entry, cache, mirror=unreachable) == (repo, expected)  # idempotent
    with pytest.raises(git_corpus.CorpusError, match="re-pin"):
        git_corpus.ensure(_entry(tarball, "1" * 40), tmp_path / "cache", mirror=unreachable)


def test_ensure_errors_are_one_line_with_a_fix(tmp_path):
    cache = tmp_path / "cache"
    (cache / "tarballs").mkdir(parents=True)
    tarball = _tarball(cache / "tarballs" / "proj_1.0.orig.tar.gz")
    entry = {**_entry(tarball), "sha256": "f" * 64}  # the cached file does not match: a download is tried
    with pytest.raises(git_corpus.CorpusError, match=r"cannot download .*check that deb\.debian\.org"):
        git_corpus.ensure(entry, cache, mirror="http://127.0.0.1:9/debian")
    with pytest.raises(git_corpus.CorpusError, match="lacks commit"):
        git_corpus.ensure({**_entry(tarball), "commit": ""}, cache)


def test_cli_exit_codes(tmp_path):
    script = str(BENCH / "git_corpus.py")
    r = subprocess.run([sys.executable, script, "--only", "no-such-entry"], capture_output=True, text=True)
    assert r.returncode == 2 and "not in" in r.stderr
    cache = tmp_path / "cache"
    (cache / "tarballs").mkdir(parents=True)
    tarball = _tarball(cache / "tarballs" / "proj_1.0.orig.tar.gz")
    corpus = tmp_path / "c.toml"
    e = _entry(tarball, "2" * 40)
    corpus.write_text("[[repo]]\n" + "".join(f'{k} = "{v}"\n' for k, v in e.items()))
    r = subprocess.run([sys.executable, script, "--corpus", str(corpus), "--cache", str(cache)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "FAILED proj: made commit" in r.stderr


def test_report_category_table():
    projects = [{"name": "a", "category": "django", "envyard": {"level": 4, "pass_ratio": 1.0, "wall_time": 10},
                 "baseline": {"l3": True, "l4": True, "pass_ratio": 0.95, "wall_time": 4}},
                {"name": "b", "category": "django", "envyard": {"level": 3, "pass_ratio": 0.5, "wall_time": 30},
                 "baseline": {"l3": False, "wall_time": 6}},
                {"name": "c", "category": "monorepo", "envyard": {"level": None, "process_time": 600},
                 "baseline": {"l3": False, "wall_time": None}}]
    rows = report.category_table(projects).splitlines()
    assert rows[2] == "| django | 2 | 2 | 1 | 1 | 1 | 20 s | 5 s |"
    assert rows[3] == "| monorepo | 1 | 0 | 0 | 0 | 0 | 600 s | – |"


def test_report_time_ratios_over_all_projects_and_like_for_like():
    # a: both set it up (ratio 2.5); b: the baseline fails fast (ratio 5); c: the baseline passes too (ratio 1);
    # d: no baseline time (left out)
    projects = [{"name": n, "envyard": {"level": 4, "pass_ratio": 1.0, "wall_time": w, "missing_imports": 0},
                 "baseline": {"l3": l4, "l4": l4, "pass_ratio": 1.0 if l4 else None, "wall_time": b}}
                for n, w, b, l4 in [("a", 10, 4, True), ("b", 30, 6, False), ("c", 5, 5, True), ("d", 9, None, False)]]
    rows = report.targets(projects).splitlines()
    assert "| median of per-project time ratios | 2.50× (3 projects) | ≤ 2× | ✗ |" in rows
    assert "| same, where the baseline reaches L4 ≥ 0.9 too | 1.75× (2 projects) | | |" in rows


def test_baseline_counts_and_time_ratios():
    import run  # beside git_corpus

    assert run.pytest_counts("..F\n3 failed, 10 passed, 1 skipped, 2 errors in 2.10s\n") == {
        "failed": 3, "passed": 10, "skipped": 1, "error": 2}
    assert run.pytest_counts("===== 5 passed, 1 warning in 0.12s =====") == {"passed": 5}
    assert run.pytest_counts("ERROR: file or directory not found: tests\n\nno tests ran in 0.01s") == {}
    assert run.pytest_counts("test_x.py::test_a 3 passed in text\n") == {}  # not a summary line
    rows = [{"envyard": {"level": 4, "pass_ratio": 1.0, "wall_time": w, "disk": 1},
             "baseline": {"l3": True, "l4": l4, "pass_ratio": r, "wall_time": b, "wall_time_collect": c}}
            for w, l4, r, b, c in [(30, True, 0.95, 10, 6), (10, True, 0.5, 10, 5), (40, False, None, 10, 10)]]
    s = run.summarize(rows)
    assert s["baseline"]["l4_pass_ge_0.9"] == 1 / 3  # the second ran, below 0.9; the third did not run
    assert s["median_time_ratio"] == 3.0 and s["median_time_ratio_collect"] == 4.0
