"""Fetching sources for `envyard setup`: git repositories, source archives, and the `fetch` dispatcher.

Local fixtures only (a git repository built here, archives written here, an http.server thread), except two
unreachable hosts that must fail fast. Every test runs with a private temporary directory, so it can check
that no `envyard-fetch-*` directory is left behind.
"""

from __future__ import annotations

import functools
import http.server
import io
import os
import signal
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import pytest

from envyard.errors import BadInput
from envyard.setup import sources_fetch
from envyard.setup.sources_fetch import FetchError, Fetched, fetch, fetch_archive, fetch_git

DATES = ["2021-03-04T05:06:07+02:00", "2021-06-01T00:00:00+00:00", "2022-01-02T03:04:05-05:00"]


def leftovers() -> list[str]:
    return sorted(p.name for p in Path(tempfile.gettempdir()).glob("envyard-fetch-*"))


@pytest.fixture(autouse=True)
def private_tmp(tmp_path, monkeypatch):
    """A private tempfile directory: the leak checks cannot see other processes' fetches."""
    d = tmp_path / "tempdir"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    yield d


def git(cwd, *args, date=None):
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    out = subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.org", *args], cwd=cwd,
                         env=env, check=True, capture_output=True, text=True)
    return out.stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """main: c1 (tag v1.0, annotated) → c2 (no ref) → c3 (HEAD)."""
    r = tmp_path_factory.mktemp("git") / "demo-project"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    shas = []
    for i, name in enumerate(["a.txt", "b.txt", "c.txt"]):
        (r / name).write_text(f"{i}\n")
        git(r, "add", name)
        git(r, "commit", "-q", "-m", f"commit {i + 1}", date=DATES[i])
        shas.append(git(r, "rev-parse", "HEAD"))
        if i == 0:
            git(r, "tag", "-a", "v1.0", "-m", "release 1.0", date=DATES[0])
    return r, shas


def files(f: Fetched) -> set[str]:
    return {p.name for p in f.root.iterdir()}


def done(f: Fetched) -> None:
    f.cleanup()
    assert leftovers() == []


# ------------------------------------------------------------------------------------------------------ git

def test_local_directory_without_rev_is_used_as_is(repo, tmp_path):
    r, _ = repo
    assert fetch(str(r)) is None
    plain = tmp_path / "plain"
    plain.mkdir()
    assert fetch(str(plain)) is None


def test_git_local_path_default_head(repo):
    r, (c1, c2, c3) = repo
    f = fetch_git(str(r))
    assert (f.kind, f.name, f.commit, f.version) == ("git", "demo-project", c3, c3[:12])
    assert files(f) == {".git", "a.txt", "b.txt", "c.txt"}  # .git kept
    assert f.upload_time == "2022-01-02T08:04:05Z"  # committer date, in UTC
    assert f.root.parent == f.tmp and f.tmp.name.startswith("envyard-fetch-")
    status = subprocess.run(["git", "status", "--porcelain"], cwd=f.root, capture_output=True, text=True)
    assert status.returncode == 0 and status.stdout == ""
    done(f)


def test_git_file_url_and_tag(repo):
    r, (c1, c2, c3) = repo
    f = fetch(f"file://{r}", "v1.0")
    assert (f.commit, f.version, f.name) == (c1, "v1.0", "demo-project")
    assert files(f) == {".git", "a.txt"}
    assert f.upload_time == "2021-03-04T03:06:07Z"
    # the tag comes along, so `git describe` (setuptools-scm) sees it
    assert git(f.root, "describe", "--tags") == "v1.0"
    done(f)


def test_git_by_branch(repo):
    r, (c1, c2, c3) = repo
    f = fetch(str(r), "main")
    assert f.commit == c3 and f.version == c3[:12]
    done(f)


def test_git_by_full_sha_of_an_unadvertised_commit(repo):
    r, (c1, c2, c3) = repo
    f = fetch(str(r), c2)
    assert f.commit == c2 and files(f) == {".git", "a.txt", "b.txt"}
    assert f.upload_time == "2021-06-01T00:00:00Z"
    done(f)


def test_git_full_sha_falls_back_when_the_server_refuses_it(repo, tmp_path, monkeypatch):
    """Protocol v0 servers refuse unadvertised objects by default: a full fetch + checkout is the fallback."""
    r, (c1, c2, c3) = repo
    cfg = tmp_path / "gitconfig"
    cfg.write_text("[protocol]\n\tversion = 0\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(cfg))
    f = fetch_git(str(r), c2)
    assert f.commit == c2
    done(f)


def test_git_by_short_sha(repo):
    """Abbreviated shas (4+ hex digits) are supported: resolved in the fetched history."""
    r, (c1, c2, c3) = repo
    f = fetch(str(r), c2[:8])
    assert f.commit == c2 and f.version == c2[:12]
    done(f)


def test_git_pip_style_url_with_rev(repo):
    r, (c1, c2, c3) = repo
    f = fetch(f"git+file://{r}@v1.0")
    assert f.commit == c1 and f.version == "v1.0"
    done(f)
    with pytest.raises(BadInput, match="--rev"):
        fetch(f"git+file://{r}@v1.0", "main")


def test_git_missing_rev(repo):
    r, _ = repo
    with pytest.raises(BadInput, match="no commit, branch or tag named 'nope' in") as e:
        fetch(str(r), "nope")
    assert "v1.0" in e.value.fix and "main" in e.value.fix
    with pytest.raises(BadInput, match="no commit, branch or tag"):
        fetch(str(r), "0" * 40)
    with pytest.raises(BadInput, match="no commit, branch or tag"):
        fetch(str(r), "deadbeef")
    assert leftovers() == []


@pytest.mark.parametrize("rev", ["-x", "a b", "main..v1", "HEAD~1", ""])
def test_git_malformed_rev(repo, rev):
    r, _ = repo
    with pytest.raises(BadInput):
        fetch_git(str(r), rev)


def test_git_not_a_repository(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(BadInput, match="not a git repository"):
        fetch(str(plain), "main")  # --rev with a plain directory
    with pytest.raises(BadInput, match="not a git repository"):
        fetch_git(str(plain))
    with pytest.raises(BadInput, match="no such directory"):
        fetch_git(str(tmp_path / "missing"))
    with pytest.raises(BadInput, match="no git repository there"):
        fetch_git(f"file://{plain}")
    assert leftovers() == []


def test_git_bare_repository(repo, tmp_path):
    r, (c1, c2, c3) = repo
    bare = tmp_path / "demo.git"
    git(tmp_path, "clone", "-q", "--bare", str(r), str(bare))
    f = fetch(str(bare))  # a bare repository is always fetched, --rev or not
    assert f.commit == c3 and f.name == "demo"
    done(f)


def test_git_empty_repository(tmp_path):
    empty = tmp_path / "empty"
    git(tmp_path, "init", "-q", str(empty))
    with pytest.raises(BadInput, match="empty"):
        fetch_git(str(empty))
    assert leftovers() == []


@pytest.mark.parametrize("url", ["https://github.com/pallets/flask.git", "https://nonexistent.invalid/x.git",
                                 "git@nonexistent.invalid:x/y.git"])
def test_git_unreachable_host_fails_fast(url):
    start = time.monotonic()
    with pytest.raises((FetchError, BadInput)) as e:
        fetch(url)
    assert time.monotonic() - start < 30
    assert e.value.fix and "\n" not in str(e.value)
    if "invalid" in url:
        assert isinstance(e.value, FetchError) and e.value.exit_code == 5
    assert leftovers() == []


def test_git_connection_refused():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(FetchError, match="cannot reach"):
        fetch(f"http://127.0.0.1:{port}/x.git")
    assert leftovers() == []


def test_git_timeout_kills_git(tmp_path):
    """A server that accepts and never answers: the overall timeout kills git and its helpers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        start = time.monotonic()
        with pytest.raises(FetchError, match="within 2 s"):
            fetch_git(f"http://127.0.0.1:{port}/x.git", timeout=2)
        assert time.monotonic() - start < 15
        alive = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if f"127.0.0.1:{port}".encode() in cmdline.read_bytes():
                    alive.append(cmdline.parent.name)
            except OSError:
                pass
        assert alive == []
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()
    assert leftovers() == []


def test_git_interrupt_leaves_nothing(repo, monkeypatch):
    r, _ = repo

    def interrupted(git):
        raise KeyboardInterrupt

    monkeypatch.setattr(sources_fetch, "_ls_remote", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fetch_git(str(r))
    assert leftovers() == []


def test_git_credentials_do_not_stay_in_the_clone():
    assert sources_fetch._redact("https://user:s3cret@host.example/x.git") == "https://user@host.example/x.git"
    assert sources_fetch._redact("https://ghp_token@host.example/x.git") == "https://host.example/x.git"
    assert sources_fetch._redact("ssh://git@host.example/x.git") == "ssh://git@host.example/x.git"


def test_repo_names():
    assert sources_fetch._repo_name("https://github.com/pallets/flask.git") == "flask"
    assert sources_fetch._repo_name("git@github.com:pallets/flask.git") == "flask"
    assert sources_fetch._repo_name("/srv/git/demo/.git") == "demo"
    assert sources_fetch._repo_name("file:///srv/git/demo.git/") == "demo"



def superproject(tmp_path: Path, sub_url: str, name: str = "super") -> Path:
    """A repository with one submodule at vendor/lib whose URL is `sub_url`, committed."""
    r = tmp_path / name
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    (r / "setup.py").write_text("# needs vendor/lib\n")
    git(r, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub_url, "vendor/lib")
    git(r, "add", ".")
    git(r, "commit", "-q", "-m", "with a submodule")
    return r


def library(tmp_path: Path, secret: str = "int f(void);") -> Path:
    sub = tmp_path / "lib-src"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    (sub / "lib.h").write_text(secret)
    git(sub, "add", "lib.h")
    git(sub, "commit", "-q", "-m", "library")
    return sub


def test_git_submodules_are_checked_out(tmp_path):
    """Like `git clone --recursive`: C extensions often build from sources kept in a submodule."""
    sup = superproject(tmp_path, str(library(tmp_path)))
    f = fetch_git(str(sup))
    assert (f.root / "vendor" / "lib" / "lib.h").read_text() == "int f(void);"
    assert f.notes == [] and sources_fetch.missing_submodules(f.root) == []
    done(f)


def test_git_submodule_that_cannot_be_fetched_is_a_note(tmp_path):
    """An unreachable submodule does not fail the fetch (it may be docs or test data); it is noted."""
    sup = superproject(tmp_path, str(library(tmp_path)))
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    git(sup, "config", "-f", ".gitmodules", "submodule.vendor/lib.url", f"http://127.0.0.1:{port}/lib.git")
    git(sup, "commit", "-q", "-am", "moved")
    f = fetch_git(str(sup))
    assert (f.root / "setup.py").exists()
    assert sources_fetch.missing_submodules(f.root) == ["vendor/lib"]
    assert len(f.notes) == 1 and f.notes[0].startswith("git submodules not checked out (vendor/lib): cannot reach")
    done(f)


@pytest.fixture
def git_daemon(tmp_path):
    """A real git server (git daemon, git:// protocol) on loopback, serving the repositories under its root."""
    root = tmp_path / "served"
    root.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={root}",
                             "--listen=127.0.0.1", f"--port={port}", str(root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "git daemon did not start"
            time.sleep(0.05)
    yield root, f"git://127.0.0.1:{port}"
    os.killpg(proc.pid, signal.SIGKILL)  # `git daemon` runs git-daemon as its child: the whole group goes
    proc.wait()


def test_a_remote_repository_cannot_pull_local_repositories_in_as_submodules(tmp_path, git_daemon):
    """Attack: a repository served over the network names a path on envyard's machine as its submodule's URL,
    hoping to copy a private local repository into the sandbox. Only a local superproject may do that."""
    served, base = git_daemon
    secret = library(tmp_path, secret="TOKEN=hunter2")
    sup = superproject(tmp_path, str(secret))
    git(tmp_path, "clone", "-q", "--bare", str(sup), str(served / "super.git"))
    f = fetch_git(f"{base}/super.git")
    assert (f.root / "setup.py").exists()
    assert not any("hunter2" in p.read_text(errors="replace") for p in f.root.rglob("*") if p.is_file()
                   and ".git" not in p.parts)
    assert sources_fetch.missing_submodules(f.root) == ["vendor/lib"]
    assert f.notes and "vendor/lib" in f.notes[0]
    done(f)


def test_missing_submodules_are_the_declared_paths_left_empty(tmp_path):
    (tmp_path / ".gitmodules").write_text('[submodule "a"]\n\tpath = third_party/a\n\turl = ../a.git\n'
                                          '[submodule "b"]\n\tpath = b\n\turl = ../b.git\n'
                                          '[submodule "c"]\n\tpath = c\n\turl = ../c.git\n'
                                          '[submodule "d"]\n\tpath = ../../etc\n[submodule "e"]\n\tpath = /etc\n')
    (tmp_path / "third_party" / "a").mkdir(parents=True)  # empty: not checked out
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.c").write_text("")
    assert sources_fetch.submodule_paths(tmp_path) == ["third_party/a", "b", "c"]  # never outside the tree
    assert sources_fetch.missing_submodules(tmp_path) == ["third_party/a", "c"]
    assert sources_fetch.missing_submodules(tmp_path / "b") == []  # no .gitmodules

# -------------------------------------------------------------------------------------------------- archives

MTIME = 1_650_000_000  # 2022-04-15T05:20:00Z


def make_tar(path: Path, members: dict[str, bytes], *, mtime=MTIME, extra=()) -> Path:
    mode = {".gz": "w:gz", ".tgz": "w:gz", ".bz2": "w:bz2", ".xz": "w:xz"}.get(path.suffix, "w")
    with tarfile.open(path, mode) as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), mtime
            t.addfile(info, io.BytesIO(data))
        for info in extra:
            t.addfile(info)
    return path


def make_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(zipfile.ZipInfo(name, date_time=(2022, 4, 15, 5, 20, 0)), data)
    return path


@pytest.mark.parametrize("suffix", [".tar.gz", ".tgz", ".tar.bz2", ".tar.xz"])
def test_archive_tar(tmp_path, suffix):
    a = make_tar(tmp_path / f"proj-1.2{suffix}", {"proj-1.2/setup.py": b"", "proj-1.2/proj/__init__.py": b""})
    f = fetch(str(a))
    assert (f.kind, f.name, f.version, f.filename) == ("archive", "proj", "1.2", a.name)
    assert f.root.name == "proj-1.2" and files(f) == {"setup.py", "proj"}
    assert f.upload_time == "2022-04-15T05:20:00Z"  # newest member mtime
    assert f.commit is None
    done(f)


def test_archive_zip_with_pkg_info(tmp_path):
    a = make_zip(tmp_path / "download.zip", {"x/PKG-INFO": b"Metadata-Version: 2.1\nName: Real-Name\nVersion: 3.4\n",
                                             "x/setup.py": b""})
    f = fetch_archive(str(a))
    assert (f.name, f.version) == ("Real-Name", "3.4")
    assert f.upload_time == "2022-04-15T05:20:00Z"
    done(f)


def test_archive_zip_keeps_executable_bits(tmp_path):
    a = tmp_path / "tool-0.1.zip"
    with zipfile.ZipFile(a, "w") as z:
        info = zipfile.ZipInfo("tool-0.1/configure", date_time=(2022, 4, 15, 5, 20, 0))
        info.external_attr = 0o100755 << 16
        z.writestr(info, b"#!/bin/sh\n")
        z.writestr(zipfile.ZipInfo("tool-0.1/README", date_time=(2022, 4, 15, 5, 20, 0)), b"")
    f = fetch(str(a))
    assert os.access(f.root / "configure", os.X_OK) and not os.access(f.root / "README", os.X_OK)
    done(f)


def test_archive_name_from_top_directory(tmp_path):
    a = make_tar(tmp_path / "v2.0.1.tar.gz", {"flask-2.0.1/setup.py": b""})  # GitHub's archive/refs/tags/…
    f = fetch(str(a))
    assert (f.name, f.version) == ("flask", "2.0.1")
    done(f)
    b = make_tar(tmp_path / "snapshot.tar.gz", {"a.py": b"", "b.py": b""})
    f = fetch(str(b))
    assert (f.name, f.version) == ("snapshot", "") and f.root.name == "src"
    done(f)


def test_archive_dot_dot_member_rejected(tmp_path):
    outside = tmp_path / "evil"
    escape = "../" * 30 + str(outside).lstrip("/")
    for a in (make_tar(tmp_path / "bad-1.0.tar.gz", {"bad-1.0/ok.py": b"", escape: b"x"}),
              make_zip(tmp_path / "bad-1.0.zip", {"bad-1.0/ok.py": b"", escape: b"x"}),
              make_zip(tmp_path / "abs-1.0.zip", {str(outside): b"x"})):
        with pytest.raises(BadInput, match="unsafe"):
            fetch(str(a))
        assert not outside.exists()
    assert leftovers() == []


@pytest.mark.parametrize("target", ["/etc/passwd", "../../../../../../etc"])
def test_archive_escaping_symlink_rejected(tmp_path, target):
    link = tarfile.TarInfo("proj-1.0/link")
    link.type, link.linkname = tarfile.SYMTYPE, target
    a = make_tar(tmp_path / "proj-1.0.tar.gz", {"proj-1.0/setup.py": b""}, extra=[link])
    with pytest.raises(BadInput, match="unsafe"):
        fetch(str(a))
    assert leftovers() == []


def test_archive_bad_inputs(tmp_path):
    with pytest.raises(BadInput, match="no such file"):
        fetch(str(tmp_path / "missing-1.0.tar.gz"))
    with pytest.raises(BadInput, match="no such file or directory"):
        fetch(str(tmp_path / "missing"))
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(BadInput, match="not an archive"):
        fetch(str(tmp_path / "notes.txt"))
    (tmp_path / "broken-1.0.tar.gz").write_bytes(b"not really gzip")
    with pytest.raises(BadInput, match="not a readable archive"):
        fetch(str(tmp_path / "broken-1.0.tar.gz"))
    (tmp_path / "broken-1.0.zip").write_bytes(b"PK nope")
    with pytest.raises(BadInput, match="not a readable archive"):
        fetch(str(tmp_path / "broken-1.0.zip"))
    assert leftovers() == []


def test_archive_interrupt_leaves_nothing(tmp_path, monkeypatch):
    a = make_tar(tmp_path / "proj-1.0.tar.gz", {"proj-1.0/setup.py": b""})

    def interrupted(archive, dest):
        dest.mkdir()
        raise KeyboardInterrupt

    monkeypatch.setattr(sources_fetch, "_unpack", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fetch(str(a))
    assert leftovers() == []


@pytest.fixture
def http_dir(tmp_path):
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    t.join()


def test_archive_over_http(http_dir):
    root, base = http_dir
    make_tar(root / "proj-1.2.tar.gz", {"proj-1.2/setup.py": b""})
    f = fetch(f"{base}/proj-1.2.tar.gz")
    assert (f.kind, f.name, f.version, f.filename) == ("archive", "proj", "1.2", "proj-1.2.tar.gz")
    assert f.upload_time == "2022-04-15T05:20:00Z"
    done(f)


def test_archive_over_http_last_modified_when_members_have_no_date(http_dir):
    root, base = http_dir
    a = make_tar(root / "repro-1.0.tar.gz", {"repro-1.0/setup.py": b""}, mtime=1580601600)  # hatchling's stamp
    os.utime(a, (1_700_000_000, 1_700_000_000))
    f = fetch(f"{base}/repro-1.0.tar.gz")
    assert f.upload_time == "2023-11-14T22:13:20Z"  # from Last-Modified
    done(f)
    f = fetch(str(a))
    assert f.upload_time is None  # a local file has no Last-Modified
    done(f)


def test_archive_over_http_errors(http_dir):
    root, base = http_dir
    with pytest.raises(BadInput, match="404"):
        fetch(f"{base}/missing-1.0.tar.gz")
    (root / "junk-1.0.zip").write_bytes(b"<html>not a zip</html>")
    with pytest.raises(BadInput, match="not a readable archive"):
        fetch(f"{base}/junk-1.0.zip")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(FetchError):
        fetch(f"http://127.0.0.1:{port}/proj-1.0.tar.gz")
    assert leftovers() == []


# -------------------------------------------------------------------------------------------------- dispatch

def test_dispatch_rev_with_non_git_source_is_bad_input(tmp_path):
    a = make_tar(tmp_path / "proj-1.0.tar.gz", {"proj-1.0/setup.py": b""})
    for source in (str(a), "pypi:requests", str(tmp_path), "https://example.org/proj-1.0.tar.gz"):
        with pytest.raises(BadInput, match="not a git repository"):
            fetch(source, "v1")
    assert leftovers() == []


def test_dispatch_unknown_kinds(tmp_path):
    with pytest.raises(BadInput, match="neither an archive"):
        fetch("https://example.org/some/page")
    with pytest.raises(BadInput, match="unsupported URL scheme"):
        fetch("ftp://example.org/x.tar.gz")
    with pytest.raises(BadInput, match="empty"):
        fetch("")


def test_dispatch_routes(monkeypatch):
    seen = []
    monkeypatch.setattr(sources_fetch, "fetch_git", lambda url, rev=None, **kw: seen.append(("git", url, rev)))
    monkeypatch.setattr(sources_fetch, "fetch_archive", lambda src, **kw: seen.append(("archive", src)))
    monkeypatch.setattr(sources_fetch, "fetch_pypi", lambda spec, **kw: seen.append(("pypi", spec)))
    fetch("pypi:flask==3.0.0")
    fetch("git+https://github.com/pallets/flask.git@3.0.0")
    fetch("git+ssh://git@github.com/pallets/flask.git")
    fetch("git+git@github.com:pallets/flask.git@main")
    fetch("https://github.com/pallets/flask")
    fetch("https://example.org/repo.git")
    fetch("https://example.org/some/repo", "main")
    fetch("git@github.com:pallets/flask.git", "3.0.0")
    fetch("ssh://git@example.org/repo")
    fetch("git://example.org/repo")
    fetch("https://github.com/pallets/flask/archive/refs/tags/3.0.0.tar.gz")
    fetch("file:///srv/x/proj-1.0.zip")
    fetch("file:///srv/x/repo")
    assert seen == [
        ("pypi", "pypi:flask==3.0.0"),
        ("git", "https://github.com/pallets/flask.git", "3.0.0"),
        ("git", "ssh://git@github.com/pallets/flask.git", None),
        ("git", "git@github.com:pallets/flask.git", "main"),
        ("git", "https://github.com/pallets/flask", None),
        ("git", "https://example.org/repo.git", None),
        ("git", "https://example.org/some/repo", "main"),
        ("git", "git@github.com:pallets/flask.git", "3.0.0"),
        ("git", "ssh://git@example.org/repo", None),
        ("git", "git://example.org/repo", None),
        ("archive", "https://github.com/pallets/flask/archive/refs/tags/3.0.0.tar.gz"),
        ("archive", "file:///srv/x/proj-1.0.zip"),
        ("git", "file:///srv/x/repo", None),
    ]
