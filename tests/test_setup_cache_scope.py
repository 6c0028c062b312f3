"""The package cache of `envyard setup` is one per source (setup/pkgcache.py): a project's build runs its own
code with the cache writable, so a cache shared by every setup would let one repository change what the next
one installs. Attacked here with real setups: a repository whose setup.py plants code in every cached copy of
iniconfig (a dependency of pytest, so every verified environment imports it), then a clean project."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

import envyard
from envyard.diskuse import PACKAGE_CACHE, prune_cache
from envyard.setup import pkgcache
from envyard.setup.engine import setup_directory
from envyard.setup.interpreters import host_interpreter, uv_binary

SRC = str(Path(__file__).resolve().parents[1] / "src")  # this checkout's envyard

# Runs inside the setup sandbox whenever uv builds the project: appends to every unpacked iniconfig in the cache.
POISON_SETUP = textwrap.dedent('''
    import glob
    from setuptools import setup

    for path in glob.glob("/root/.cache/uv/archive-v*/*/iniconfig/__init__.py"):
        try:
            with open(path, "a") as f:
                f.write("\\nPLANTED = True\\n")
        except OSError:
            pass
    setup(name="planter", version="1.0", py_modules=["planter"])
''')


def _project(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def own_yard(tmp_path):
    """A store of its own: were the attack to succeed, it must not reach the session's shared store."""
    y = envyard.Yard(tmp_path / "home")
    yield y
    y.close()
    y.gc()


def test_a_repositorys_build_cannot_change_what_another_setup_installs(tmp_path, own_yard):
    planter = _project(tmp_path / "planter", {
        "setup.py": POISON_SETUP,
        "planter.py": "VALUE = 1\n",
        "requirements.txt": "iniconfig\n",  # installed before the project: iniconfig is in the cache when it builds
        "tests/test_planter.py": "import planter\n\ndef test_value():\n    assert planter.VALUE == 1\n",
    })
    victim = _project(tmp_path / "victim", {
        "pyproject.toml": '[project]\nname = "victim"\nversion = "1.0"\n[build-system]\n'
                          'requires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n',
        "victim.py": "VALUE = 2\n",
        "tests/test_victim.py": textwrap.dedent('''
            import iniconfig
            import victim

            def test_iniconfig_is_the_index_s():
                assert not hasattr(iniconfig, "PLANTED"), iniconfig.__file__

            def test_value():
                assert victim.VALUE == 2
        '''),
    })
    only_host = [host_interpreter()]
    first, _ = setup_directory(own_yard, planter, "setup/planter", available=only_host, jobs=1, complete=False)
    assert first.level >= 0, first.reason
    planted = list(pkgcache.scope_dir(own_yard.store.home, pkgcache.directory_identity(planter))
                   .glob("archive-v*/*/iniconfig/__init__.py"))
    assert planted and all("PLANTED" in p.read_text() for p in planted), "the attack did not run: the test proves nothing"

    second, _ = setup_directory(own_yard, victim, "setup/victim", available=only_host, jobs=1, complete=False)
    assert second.verified, second.reason
    assert second.tests and all(s == "passed" for s in second.tests.values()), second.tests


def test_the_same_source_keeps_its_cache_and_a_named_scope_is_shared(tmp_path):
    home = tmp_path / "home"
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    assert pkgcache.scope_dir(home, pkgcache.directory_identity(a)) == \
        pkgcache.scope_dir(home, pkgcache.directory_identity(a / "."))
    assert pkgcache.scope_dir(home, pkgcache.directory_identity(a)) != \
        pkgcache.scope_dir(home, pkgcache.directory_identity(b))
    # What the repairs learned goes with the cache: another project's setup never reads it.
    learned_a = pkgcache.learned_path(pkgcache.scope_dir(home, pkgcache.directory_identity(a)))
    assert learned_a != pkgcache.learned_path(pkgcache.scope_dir(home, pkgcache.directory_identity(b)))
    assert not learned_a.is_relative_to(home.joinpath(*PACKAGE_CACHE))  # uv would delete it from a cache dir
    named = pkgcache.named_identity("team")
    assert pkgcache.scope_dir(home, named) == pkgcache.scope_dir(home, pkgcache.named_identity("team"))
    # Two identities that slug alike stay apart (the key carries a hash of the whole identity).
    assert pkgcache.scope_dir(home, "dir:/x/a-b") != pkgcache.scope_dir(home, "dir:/x/a_b")
    for ident in ("dir:/x/a-b", "git:https://example.org/../../etc", "pypi:" + "x" * 500):
        d = pkgcache.scope_dir(home, ident)
        assert d.parent == home.joinpath(*PACKAGE_CACHE) and len(d.name) <= 80


def test_identity_of_fetched_sources():
    from envyard.setup.sources_fetch import Fetched

    def fetched(kind, name, filename):
        return Fetched(root=Path("/tmp/x"), name=name, version="1", filename=filename, upload_time=None,
                       tmp=Path("/tmp/x"), kind=kind)

    # Releases of one PyPI project share a cache; two projects do not.
    assert pkgcache.source_identity("pypi:Foo_Bar==1.0", fetched("pypi", "Foo_Bar", "foo_bar-1.0.tar.gz")) == \
        pkgcache.source_identity("pypi:foo-bar", fetched("pypi", "foo-bar", "foo_bar-2.0.tar.gz"))
    assert pkgcache.source_identity("pypi:foo", fetched("pypi", "foo", "foo-1.tar.gz")) != \
        pkgcache.source_identity("pypi:bar", fetched("pypi", "bar", "bar-1.tar.gz"))
    # Revisions of one repository share; the URL, not the name it claims, says which repository it is.
    g1 = pkgcache.source_identity("https://example.org/a/req.git", fetched("git", "requests", "https://example.org/a/req.git"))
    g2 = pkgcache.source_identity("https://example.org/b/req.git", fetched("git", "requests", "https://example.org/b/req.git"))
    assert g1 != g2


def _wheel(dest: Path) -> Path:
    """A 1 MiB wheel, so a cache that installed it holds an entry `uv cache prune` keeps."""
    name, dist = "demo_blob", "demo_blob-1.0.dist-info"
    files = {f"{name}/__init__.py": b"", f"{name}/blob.bin": os.urandom(1 << 20),
             f"{dist}/METADATA": b"Metadata-Version: 2.1\nName: demo-blob\nVersion: 1.0\n",
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    dest.mkdir()
    with zipfile.ZipFile(dest / "demo_blob-1.0-py3-none-any.whl", "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        z.writestr(f"{dist}/RECORD", "\n".join(record + [f"{dist}/RECORD,,"]) + "\n")
    return dest


def test_gc_cache_removes_the_least_recently_used_caches_first_and_the_old_shared_one(tmp_path):
    yard = envyard.Yard(tmp_path / "home")
    try:
        wheels = _wheel(tmp_path / "wheels")
        venv = tmp_path / "venv"
        subprocess.run([uv_binary(), "venv", "-q", "--python", sys.executable, str(venv)], check=True)
        old, new = pkgcache.scope_dir(yard.store.home, "dir:/old"), pkgcache.scope_dir(yard.store.home, "dir:/new")
        for d, age in ((old, 3600), (new, 0)):
            subprocess.run([uv_binary(), "pip", "install", "-q", "--reinstall", "--python", str(venv / "bin" / "python"),
                            "--no-index", "--find-links", str(wheels), "demo-blob"],
                           check=True, env={**os.environ, "UV_CACHE_DIR": str(d)})
            t = time.time() - age
            os.utime(d, (t, t))
        learned = pkgcache.learned_path(old)
        learned.parent.mkdir(parents=True)
        learned.write_text('{"humps": "pyhumps"}')
        legacy = yard.store.home / "cache" / "uv"
        legacy.mkdir(parents=True)
        (legacy / "blob").write_bytes(b"x" * 1000)

        report = prune_cache(yard.store, keep=(1 << 20) + (1 << 19))  # room for one of the two
        assert not legacy.exists()  # the shared cache of earlier versions is never used again
        assert not old.exists() and not learned.exists() and list(new.glob("archive-v*/*/demo_blob/blob.bin"))
        assert report["before_bytes"] > report["after_bytes"] >= 1 << 20
        assert report["steps"] == ["clean legacy", "prune", f"clean {old.name}"]
        assert prune_cache(yard.store)["after_bytes"] == 0 and not new.exists()
    finally:
        yard.close()


def test_an_empty_cache_scope_is_refused_before_any_work(tmp_path):
    src = _project(tmp_path / "p", {"p.py": "X = 1\n"})
    home = tmp_path / "home"
    r = subprocess.run([sys.executable, "-m", "envyard.cli.main", "setup", str(src), "--cache-scope", " "],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "ENVYARD_HOME": str(home), "PYTHONPATH": SRC})
    assert r.returncode == 2 and "--cache-scope is empty" in r.stderr, r.stderr
    assert not home.joinpath(*PACKAGE_CACHE).exists()
