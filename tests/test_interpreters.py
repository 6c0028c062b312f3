"""Interpreter providers on the host: pyenv, uv-managed and /usr/bin-style python3.X, found with fake
interpreters (shell scripts that answer the probe) in tmp_path; `uv python install` as a cached last resort."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
from pathlib import Path

import pytest

from envyard.setup import interpreters as I
from envyard.setup.interpreters import Interpreter


def fake_python(path: Path, version: str, *, implementation="cpython", final=True, prefix=None, venv=True,
                works=True) -> Path:
    """A script that answers PROBE as an interpreter of `version` would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    info = {"implementation": implementation, "version": version, "final": final,
            "prefix": str(prefix or path.parent.parent), "modules": {"venv": venv, "zlib": True}}
    path.write_text("#!/bin/sh\n" + (f"echo '{json.dumps(info)}'\n" if works else "exit 1\n"))
    path.chmod(0o755)
    return path


def test_pyenv_versions_are_found_and_unusable_ones_left_out(tmp_path):
    root = tmp_path / "pyenv"
    v = root / "versions"
    fake_python(v / "3.8.18" / "bin" / "python3", "3.8.18")
    fake_python(v / "3.12.1" / "bin" / "python3", "3.12.1")
    (v / "3.8").symlink_to(v / "3.8.18")  # an alias: the same interpreter again
    fake_python(v / "pypy3.10" / "bin" / "python3", "3.10.14", implementation="pypy")
    fake_python(v / "3.14.0rc1" / "bin" / "python3", "3.14.0", final=False)
    fake_python(v / "3.5.10" / "bin" / "python3", "3.5.10")  # older than uv supports
    fake_python(v / "nove" / "bin" / "python3", "3.9.1", venv=False)
    fake_python(v / "broken" / "bin" / "python3", "3.9.2", works=False)
    (v / "2.7.18" / "bin").mkdir(parents=True)  # no python3 at all
    found = I.pyenv_interpreters([root])
    assert [(i.provider, i.version) for i in found] == [("pyenv:3.12.1", "3.12.1"), ("pyenv:3.8.18", "3.8.18")]
    py38 = found[1]
    assert py38.base == "host" and py38.path == str(v / "3.8.18" / "bin" / "python3")
    assert py38.prefix == str(v / "3.8.18") and py38.host_installed and "pyenv" in py38.origin
    assert py38.setup_base_name.startswith("setup-base/pyenv-3.8.18-")
    assert py38.setup_base_name.endswith(f":{I.BASE_TAG}-uv{I.uv_version()}")
    other_root = Interpreter(py38.provider, "host", "/opt/pyenv/versions/3.8.18/bin/python3", "3.8.18")
    assert other_root.setup_base_name != py38.setup_base_name


def test_pyenv_root_comes_from_pyenv_root_or_home(tmp_path, monkeypatch):
    fake_python(tmp_path / "custom" / "versions" / "3.7.16" / "bin" / "python3", "3.7.16")
    fake_python(tmp_path / "home" / ".pyenv" / "versions" / "3.10.13" / "bin" / "python3", "3.10.13")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "custom"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))  # no pyenv executable
    assert I.pyenv_roots() == [tmp_path / "custom", tmp_path / "home" / ".pyenv"]
    assert sorted(i.version for i in I.pyenv_interpreters()) == ["3.10.13", "3.7.16"]


def test_uv_managed_pythons_are_found_in_uvs_directory(tmp_path):
    d = tmp_path / "uv-python"
    fake_python(d / "cpython-3.12.4-linux-x86_64-gnu" / "bin" / "python3", "3.12.4")
    (d / "cpython-3.12-linux-x86_64-gnu").symlink_to(d / "cpython-3.12.4-linux-x86_64-gnu")
    fake_python(d / "pypy-3.10.14-linux-x86_64-gnu" / "bin" / "python3", "3.10.14", implementation="pypy")
    found = I.uv_interpreters(directory=d)
    assert [(i.provider, i.version, i.prefix) for i in found] == [
        ("uv:cpython-3.12.4-linux-x86_64-gnu", "3.12.4", str(d / "cpython-3.12.4-linux-x86_64-gnu"))]
    assert I.uv_interpreters(directory=tmp_path / "missing") == []


def test_uv_python_dir_honours_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path))
    assert I.uv_python_dir() == tmp_path


def test_system_pythons_copy_their_prefix_only_when_the_host_image_hides_it(tmp_path):
    fake_python(tmp_path / "bin" / "python3.12", "3.12.7", prefix="/usr")
    fake_python(tmp_path / "bin" / "python3.10", "3.10.4", prefix="/root/.local/py310")
    fake_python(tmp_path / "bin" / "python3.12-config", "3.12.7")  # not an interpreter name
    found = {i.version: i for i in I.system_interpreters([str(tmp_path / "bin")])}
    assert sorted(found) == ["3.10.4", "3.12.7"]
    assert found["3.12.7"].provider == "system:python3.12" and found["3.12.7"].prefix == ""
    assert found["3.10.4"].prefix == "/root/.local/py310"


def test_the_real_host_interpreters_probe(tmp_path):
    info = I.probe("/usr/bin/python3")
    assert info and info["implementation"] == "cpython" and info["modules"]["venv"]
    assert I.probe(str(tmp_path / "nothing")) is None


def test_select_a_release_and_mark_it_forced():
    a = Interpreter("pyenv:3.8.18", "host", "/p/3.8.18/bin/python3", "3.8.18", prefix="/p/3.8.18")
    b = Interpreter("debian:bullseye", "debian:bullseye", "/usr/bin/python3", "3.9")
    c = Interpreter("pyenv:3.9.18", "host", "/p/3.9.18/bin/python3", "3.9.18", prefix="/p/3.9.18")
    assert [i.provider for i in I.select([a, b, c], "3.9")] == ["debian:bullseye", "pyenv:3.9.18"]
    assert [i.provider for i in I.select([a, b, c], "3.9.18")] == ["pyenv:3.9.18"]
    assert I.select([a, b, c], "3.1") == [] and I.select([a, b, c], "3.10") == []
    assert all(i.forced for i in I.select([a, b, c], "3.8"))


def test_a_host_installed_interpreter_checks_itself_and_has_a_docker_stand_in():
    i = Interpreter("pyenv:3.8.18", "host", "/root/.pyenv/versions/3.8.18/bin/python3", "3.8.18",
                    prefix="/root/.pyenv/versions/3.8.18", origin="from pyenv on the host: /root/.pyenv/versions/3.8.18")
    check = i.base_commands()[0]
    assert check.startswith("/root/.pyenv/versions/3.8.18/bin/python3 -c ") and "(3, 8, 18)" in check
    assert "exit 1" in check and "pyenv" in check
    assert i.docker_base() == "python:3.8.18-slim"
    assert i.docker_commands() == ["mkdir -p /root/.pyenv/versions/3.8.18/bin && "
                                   "ln -sf /usr/local/bin/python3.8 /root/.pyenv/versions/3.8.18/bin/python3"]
    host = Interpreter("host", "host", "/usr/bin/python3", "3.11.2")
    assert host.docker_base() == "debian:bookworm" and host.docker_commands() == [] and len(host.base_commands()) == 1
    assert Interpreter("debian:trixie", "debian:trixie", "/usr/bin/python3", "3.13").docker_base() == "debian:trixie"


def test_the_check_command_passes_and_fails_for_real(tmp_path):
    import subprocess

    ok = Interpreter("system:python3.11", "host", "/usr/bin/python3", I.probe("/usr/bin/python3")["version"])
    assert subprocess.run(["sh", "-c", ok.check_command()], capture_output=True).returncode == 0
    wrong = Interpreter("system:python3.11", "host", "/usr/bin/python3", "3.11.99")
    r = subprocess.run(["sh", "-c", wrong.check_command()], capture_output=True, text=True)
    assert r.returncode == 1 and "needs Python 3.11.99" in r.stderr


def fake_uv(tmp_path: Path, *, installs: Path | None = None) -> Path:
    """A uv that counts its calls; `python install` fails unless `installs` (a fake build) is given."""
    calls = tmp_path / "calls"
    uv = tmp_path / "uv"
    body = f'echo "$@" >> {calls}\n'
    if installs:
        body += f'if [ "$1 $2" = "python dir" ]; then echo {installs.parent}; exit 0; fi\n'
        body += 'if [ "$1 $2" = "python install" ]; then exit 0; fi\n'
    body += 'echo "error: Failed to install cpython-$3" >&2\necho "  cause: dns error" >&2\nexit 1\n'
    uv.write_text("#!/bin/sh\n" + body)
    uv.chmod(0o755)
    return uv


def test_uv_python_install_failure_is_reported_and_remembered(tmp_path):
    uv = fake_uv(tmp_path)
    cache = tmp_path / "cache"
    assert I.install_with_uv("3.14", cache, uv=str(uv)) is None
    assert "Failed to install cpython-3.14" in I.install_failure("3.14", cache)
    assert I.install_with_uv("3.14", cache, uv=str(uv)) is None  # remembered: uv is not asked again
    assert (tmp_path / "calls").read_text().splitlines() == ["python install 3.14"]
    record = json.loads((cache / I.INSTALL_RECORD).read_text())
    record["3.14"]["at"] -= I.INSTALL_NEGATIVE_TTL + 1  # a day later it is tried again
    (cache / I.INSTALL_RECORD).write_text(json.dumps(record))
    I.install_with_uv("3.14", cache, uv=str(uv))
    assert len((tmp_path / "calls").read_text().splitlines()) == 2
    assert I.install_with_uv("not-a-version", cache, uv=str(uv)) is None


def test_uv_python_install_success_gives_a_provider(tmp_path, monkeypatch):
    monkeypatch.delenv("UV_PYTHON_INSTALL_DIR", raising=False)
    build = tmp_path / "uvpy" / "cpython-3.14.1-linux-x86_64-gnu"
    fake_python(build / "bin" / "python3", "3.14.1")
    got = I.install_with_uv("3.14", tmp_path / "cache", uv=str(fake_uv(tmp_path, installs=build)))
    assert got is not None and got.provider == "uv:cpython-3.14.1-linux-x86_64-gnu" and got.prefix == str(build)


class FakeSandbox:
    """Records what upload_prefix asks of a sandbox."""

    def __init__(self):
        self.uploads, self.execs = [], []

    def upload(self, src, dest):
        self.uploads.append(str(src))
        assert str(src) == dest

    def exec(self, argv, **_kw):
        self.execs.append(argv)


def test_a_prefix_is_copied_without_site_packages_and_the_test_suite(tmp_path):
    prefix = tmp_path / "3.8.18"
    fake_python(prefix / "bin" / "python3", "3.8.18")
    lib = prefix / "lib" / "python3.8"
    for d in ("site-packages/numpy", "test/support", "json", "lib-dynload"):
        (lib / d).mkdir(parents=True)
    (lib / "os.py").write_text("")
    (prefix / "lib" / "libpython3.8.a").write_text("")
    (prefix / "include").mkdir()
    os.symlink("python3.8", lib.parent / "python3")  # a symlink is recreated, not followed
    sb = FakeSandbox()
    I.upload_prefix(sb, prefix)
    rel = sorted(os.path.relpath(u, prefix) for u in sb.uploads)
    assert rel == ["bin", "include", "lib/libpython3.8.a", "lib/python3.8/json", "lib/python3.8/lib-dynload",
                   "lib/python3.8/os.py"]
    assert ["mkdir", "-p", str(lib / "site-packages")] in sb.execs and ["mkdir", "-p", str(lib / "test")] in sb.execs
    assert ["ln", "-sfn", "python3.8", str(prefix / "lib" / "python3")] in sb.execs


def test_a_base_build_stops_at_its_next_progress_line_when_the_callback_raises(tmp_path):
    """How `envyard setup` stops a branch that is building a Debian setup base on Ctrl-C/SIGTERM (search.py raises
    Cancelled from the progress callback): debootstrap is killed within seconds, not waited for (30-120 s), and
    no process, image or layer of the build is left."""
    import subprocess
    import time

    import envyard

    if not shutil.which("debootstrap", path="/usr/sbin:/sbin:/usr/bin:/bin"):
        pytest.skip("debootstrap is not installed")
    yard = envyard.Yard(tmp_path / "home")
    interp = next(i for i in I.debian_interpreters() if i.base == "debian:bullseye")
    seen: list[str] = []

    class Stop(Exception):
        pass

    def progress(message: str) -> None:
        seen.append(message)
        if sum(m.startswith("debian:bullseye:") for m in seen) >= 4:  # debootstrap's own lines: it is downloading
            raise Stop()

    t = time.monotonic()
    with pytest.raises(Stop):
        I.setup_base(yard, interp, on_progress=progress)
    assert time.monotonic() - t < 60, seen
    home = str(tmp_path / "home")
    assert subprocess.run(["pgrep", "-f", "--", home], capture_output=True).returncode == 1  # no debootstrap left
    assert [i.name for i in yard.store.images()] == [] and not yard.store.has_image(interp.setup_base_name)
    yard.close()
    yard.gc()


def test_a_setup_base_is_named_after_the_uv_it_holds(monkeypatch):
    """A setup base keeps the uv it was built with; after an upgrade, recipes may use options only the new uv
    has (--exclude-newer-package). The uv version is part of the base's name, so a new uv gets a new base."""
    assert I.uv_version() == importlib.metadata.version("uv")
    interp = Interpreter("host", "host", "/usr/bin/python3", "3.11.2")
    before = interp.setup_base_name
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.99.1+local")
    I.uv_version.cache_clear()
    try:
        assert interp.setup_base_name == f"setup-base/host:{I.BASE_TAG}-uv0.99.1-local" != before
    finally:
        I.uv_version.cache_clear()
