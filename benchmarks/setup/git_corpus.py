#!/usr/bin/env python3
"""The git-repository corpus of the setup benchmark: upstream source trees from Debian's archive, as git
repositories at pinned, reproducible commits.

This machine reaches Debian's archive but not GitHub, and many Debian source packages use the upstream
repository's export (tests, tox.ini, CI files, docs) as their `.orig.tar.*`. For each `[[repo]]` entry of
git_corpus.toml this script

  1. downloads `<pool dir>/<orig tarball>` from deb.debian.org (cached) and checks its sha256 against the
     entry (copied from the suite's Sources index when the entry was written);
  2. unpacks it (tarfile's `data` filter; the single top directory stripped; a top-level `debian/` dropped);
  3. commits the tree to a fresh git repository with a fixed author, committer, message and date (the
     newest member time of the tarball), so the commit hash is the same on every machine — and checks it
     against the entry's `commit`.

    python benchmarks/setup/git_corpus.py                 # all entries, into /var/tmp/envyard-git-corpus
    python benchmarks/setup/git_corpus.py --only decorator --cache DIR
    python benchmarks/setup/git_corpus.py --print-commits  # the hashes to write into a new entry

Idempotent: a repository already at its pinned commit is left alone. Exit 0 when every entry is ready, 1 when
any failed (each failure printed on one line with its cause and what to do).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE / "git_corpus.toml"
DEFAULT_CACHE = Path("/var/tmp/envyard-git-corpus")
MIRROR = "http://deb.debian.org/debian"
REQUIRED = ("name", "category", "source", "version", "suite", "directory", "tarball", "sha256", "commit", "note")
# Fixed identity and message: with the tree and the date they make the commit hash.
IDENTITY = {"GIT_AUTHOR_NAME": "envyard corpus", "GIT_AUTHOR_EMAIL": "corpus@envyard.invalid",
            "GIT_COMMITTER_NAME": "envyard corpus", "GIT_COMMITTER_EMAIL": "corpus@envyard.invalid"}


class CorpusError(Exception):
    """One entry could not be made ready; the message says why and what to do."""


def load(path: Path = DEFAULT_CORPUS) -> list[dict]:
    return tomllib.loads(Path(path).read_text())["repo"]


def fetch_tarball(entry: dict, cache: Path, mirror: str = MIRROR) -> Path:
    """The entry's orig tarball in `cache/tarballs`, downloaded once and checked against its sha256."""
    dest = cache / "tarballs" / entry["tarball"]
    if dest.exists() and _sha256(dest) == entry["sha256"]:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    url = f"{mirror}/{entry['directory']}/{entry['tarball']}"
    tmp = dest.with_suffix(dest.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=60) as r, open(tmp, "wb") as f:
            shutil.copyfileobj(r, f)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise CorpusError(f"{entry['name']}: cannot download {url}: {e} — check that deb.debian.org is "
                          f"reachable, or that {entry['suite']} still ships {entry['source']} {entry['version']}")
    got = _sha256(tmp)
    if got != entry["sha256"]:
        tmp.unlink(missing_ok=True)
        raise CorpusError(f"{entry['name']}: {url} has sha256 {got}, the corpus says {entry['sha256']} — "
                          "the archive changed under that name; re-pin the entry from the suite's Sources index")
    tmp.replace(dest)
    return dest


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def unpack(tarball: Path, dest: Path) -> int:
    """Unpack `tarball` into `dest` without its single top directory and without a top-level `debian/`.
    Returns the newest member mtime (the commit's date)."""
    with tarfile.open(tarball) as tf:
        members = [m for m in tf.getmembers() if m.name not in (".", "./")]
        tops = {m.name.lstrip("./").split("/", 1)[0] for m in members}
        # one top directory (named as a member or only as the prefix of every path): strip it
        strip = len(tops) == 1 and any("/" in m.name.lstrip("./").rstrip("/") for m in members)
        newest = 0
        keep = []
        for m in members:
            parts = m.name.lstrip("./").split("/")
            if strip:
                parts = parts[1:]
            if not parts or not parts[0] or parts[0] == "debian" or ".git" in parts:
                continue
            m.name = "/".join(parts)
            if m.islnk() and strip:  # hard links name their target with the top directory too
                m.linkname = "/".join(m.linkname.lstrip("./").split("/")[1:])
            newest = max(newest, int(m.mtime))
            keep.append(m)
        for m in keep:
            try:
                tf.extract(m, dest, filter="data")
            except tarfile.FilterError:  # e.g. a symlink pointing outside the tree: left out, the same way each time
                pass
    return newest


def git(repo: Path, *args: str, env: dict | None = None) -> str:
    r = subprocess.run(["git", "-C", str(repo), "-c", "core.autocrlf=false", "-c", "core.fileMode=true",
                        "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", *args],
                       capture_output=True, text=True, env={**os.environ, **(env or {})})
    if r.returncode != 0:
        raise CorpusError(f"git {' '.join(args)} in {repo} failed: {r.stderr.strip()[-300:]}")
    return r.stdout.strip()


def make_repo(tarball: Path, dest: Path, message: str) -> str:
    """A git repository at `dest` with one commit holding the tarball's tree; returns its hash. The same
    tarball and message always give the same hash (fixed identity; date = the newest member time)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    newest = unpack(tarball, dest)
    date = f"{newest} +0000"
    git(dest, "init", "-q", "--template=", "-b", "main")
    git(dest, "add", "-A", "-f", ".")  # -f: the project's .gitignore must not drop shipped files
    git(dest, "commit", "-q", "--allow-empty", "-m", message,
        env={**IDENTITY, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "TZ": "UTC"})
    return git(dest, "rev-parse", "HEAD")


def ensure(entry: dict, cache: Path = DEFAULT_CACHE, *, check_commit: bool = True,
           mirror: str = MIRROR) -> tuple[Path, str]:
    """The entry's repository under `cache/repos/<name>`, at its pinned commit (made if missing or wrong)."""
    missing = [k for k in REQUIRED if not entry.get(k)]
    if missing:
        raise CorpusError(f"{entry.get('name', '?')}: corpus entry lacks {', '.join(missing)} — add them")
    dest = cache / "repos" / entry["name"]
    if (dest / ".git").is_dir():
        try:
            if git(dest, "rev-parse", "HEAD") == entry["commit"] and not git(dest, "status", "--porcelain"):
                return dest, entry["commit"]
        except CorpusError:
            pass
    tarball = fetch_tarball(entry, cache, mirror)
    commit = make_repo(tarball, dest, commit_message(entry))
    if check_commit and commit != entry["commit"]:
        raise CorpusError(f"{entry['name']}: made commit {commit}, the corpus pins {entry['commit']} — the "
                          "tarball or the git version changed how the tree is stored; re-pin with --print-commits")
    return dest, commit


def commit_message(entry: dict) -> str:
    return (f"{entry['source']} {entry['version']} ({entry['suite']}): {entry['tarball']}\n\n"
            f"sha256 {entry['sha256']}\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"default {DEFAULT_CACHE}")
    ap.add_argument("--only", default="", help="comma-separated entry names")
    ap.add_argument("--print-commits", action="store_true", help="make the repositories without checking the "
                    "pinned hashes and print `name commit` (to pin new entries)")
    args = ap.parse_args()
    if shutil.which("git") is None:
        print("error: git is not installed — apt-get install git", file=sys.stderr)
        return 2
    entries = load(args.corpus)
    if args.only:
        wanted = {n.strip() for n in args.only.split(",")}
        unknown = wanted - {e["name"] for e in entries}
        if unknown:
            print(f"error: not in {args.corpus}: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        entries = [e for e in entries if e["name"] in wanted]
    failed = 0
    for e in entries:
        try:
            path, commit = ensure(e, args.cache, check_commit=not args.print_commits)
            print(f"{e['name']} {commit}" if args.print_commits else f"ok {e['name']:28} {commit[:12]} {path}")
        except CorpusError as err:
            failed += 1
            print(f"FAILED {err}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
