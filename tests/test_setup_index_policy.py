"""PyPI's cache policy restated for uv in setup sandboxes (pkgcache.index_policy): a proxy that strips PyPI's
cache headers must not make every install fetch every page and file again, a project's own indexes must keep
winning, and the image keeps nothing of it. Real uv against the real PyPI in real setup sandboxes."""

from __future__ import annotations

import tomllib

import pytest

import envyard
from envyard.setup import pkgcache
from envyard.setup.evidence import gather
from envyard.setup.interpreters import host_interpreter, setup_base
from envyard.setup.search import Search, setup_env, setup_sandbox


def test_the_policy_restates_pypis_headers_for_pypi_only(tmp_path):
    (tmp_path / "proj").mkdir()
    path = pkgcache.index_policy(tmp_path, [tmp_path / "proj"], False)
    assert path is not None and path.is_relative_to(tmp_path / "cache")
    assert tomllib.loads(path.read_text())["index"] == [
        {"url": "https://pypi.org/simple", "default": True,
         "cache-control": {"api": "max-age=600", "files": "max-age=365000000, immutable"}}]
    assert pkgcache.index_policy(tmp_path, [tmp_path / "proj"], False) == path  # written once, reused
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind


@pytest.mark.parametrize("name, text", [
    ("uv.toml", ""),
    ("pyproject.toml", '[tool.uv]\nindex-url = "https://mirror.example/simple"\n'),
    ("pyproject.toml", '[[tool.uv.index]]\nurl = "https://download.example/whl/cpu"\n'),
    ("pyproject.toml", '[tool.uv.pip]\nextra-index-url = ["https://mirror.example/simple"]\n'),
])
def test_a_project_that_configures_its_own_indexes_gets_no_policy(tmp_path, name, text):
    """The policy's default index would override a project's `index-url` (uv merges the system file's [[index]]
    over it): such a project keeps uv's behaviour unchanged."""
    (tmp_path / name).write_text(text)
    assert pkgcache.index_policy(tmp_path, [tmp_path], False) is None


def test_other_uv_settings_and_broken_files_do_not_stop_the_policy(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "pyproject.toml").write_text('[tool.uv]\ndev-dependencies = ["pytest"]\n')
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "pyproject.toml").write_text("[tool.uv\n")
    assert pkgcache.index_policy(tmp_path, [tmp_path / "a", tmp_path / "b"], False) is not None


PIPFILE = '[[source]]\nurl = "{url}"\nverify_ssl = true\nname = "pypi"\n\n[packages]\nsix = "*"\n'


def test_a_requirements_file_or_pipfile_that_names_an_index_turns_the_policy_off(tmp_path):
    """uv lets the policy's default index win over a requirements file's `-i` line, so a project whose
    requirements name an index of their own (a mirror, a wheel server) gets none; one that names none, or
    PyPI itself (every Pipfile's default source), gets it."""
    yard = envyard.Yard(tmp_path / "home")
    try:
        for name, file, text, expect in (
                ("mirror", "requirements.txt", "-i https://mirror.example/simple\nsix\n", False),
                ("plain", "requirements.txt", "six\n", True),
                ("pypi-named", "requirements.txt", "--index-url https://pypi.org/simple/\nsix\n", True),
                ("pipfile", "Pipfile", PIPFILE.format(url="https://pypi.org/simple"), True),
                ("pipfile-mirror", "Pipfile", PIPFILE.format(url="https://mirror.example/pypi/simple"), False)):
            src = tmp_path / name
            src.mkdir()
            (src / file).write_text(text)
            search = Search(yard, gather(src), src, f"/work/{name}", [host_interpreter()])
            try:
                assert bool(search.policy_binds) is expect, name
            finally:
                search.wheels.close()
    finally:
        yard.close()


def test_uv_in_a_setup_sandbox_reuses_pypis_pages_and_the_image_keeps_none_of_it(yard, tmp_path):
    """On these machines PyPI is reached through a proxy that sends no cache headers: without the policy uv's
    second install asks for the same page again ("Found stale response"). With it, the page is fresh. The
    file is read-only, and a snapshot keeps neither it nor the /etc/uv directory made for it."""
    policy = pkgcache.index_policy(yard.store.home, [tmp_path], False)
    (tmp_path / "uv").mkdir()
    base = setup_base(yard, host_interpreter())
    install = "uv pip install -v --no-deps six==1.17.0"
    with setup_sandbox(yard, base, tmp_path / "uv", ro_binds={str(policy): pkgcache.INDEX_POLICY_INSIDE}) as sb:
        first = sb.exec(f"uv venv -q /opt/venv && {install}", env=setup_env(), timeout=180)
        assert first.exit_code == 0, first.stderr
        again = sb.exec(f"uv pip uninstall -q six && {install}", env=setup_env(), timeout=180)
        assert again.exit_code == 0, again.stderr
        assert "Found fresh response for: https://pypi.org/simple/six/" in again.stderr, again.stderr[-2000:]
        assert sb.exec(f"echo x >> {pkgcache.INDEX_POLICY_INSIDE}", timeout=30).exit_code != 0
        snap = sb.snapshot(temporary=True)
    try:
        top = yard.store.layer_paths(snap.layers[-1:])[0]
        assert (top / "opt" / "venv").is_dir()  # what the sandbox made stays
        assert not (top / "etc" / "uv").exists()
    finally:
        yard.remove_image(snap.name)
