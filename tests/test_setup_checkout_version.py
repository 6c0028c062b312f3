"""A project versioned from git tags, set up from an untagged checkout or a tree without git metadata, gets the
release it follows (envyard.setup.checkout_version): evidence, the index lookup, the recipe, and real setups of
pluggy both ways."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from bareenv import BARE, cli_cwd
from envyard.setup import checkout_version, gather
from envyard.setup.interpreters import available
from envyard.setup.plan import Candidate, plan
from envyard.setup.sources_fetch import fetch_pypi

SRC = str(Path(__file__).resolve().parents[1] / "src")
GIT_ENV = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def commit(root: Path, date: str, *, tag: str | None = None) -> None:
    env = {**os.environ, **GIT_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    if not (root / ".git").exists():
        subprocess.run([*git, "init", "-q"], check=True, env=env)
    subprocess.run([*git, "add", "-A"], check=True, env=env)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True, env=env)
    if tag:
        subprocess.run([*git, "tag", tag], check=True, env=env)


SCM_PYPROJECT = ('[build-system]\nrequires = ["setuptools>=64", "setuptools-scm>=8"]\n'
                 'build-backend = "setuptools.build_meta"\n[project]\nname = "pluggy"\ndynamic = ["version"]\n')


@pytest.mark.parametrize("files, tool, prefix", [
    ({"pyproject.toml": SCM_PYPROJECT}, "setuptools-scm", ""),
    ({"pyproject.toml": '[build-system]\nrequires = ["hatchling", "hatch-vcs"]\n[project]\nname = "x"\n'},
     "hatch-vcs", ""),
    ({"setup.cfg": "[metadata]\nname = x\n[versioneer]\nVCS = git\ntag_prefix = v\n", "versioneer.py": ""},
     "versioneer", "v"),
    ({"setup.cfg": "[metadata]\nname = x\n[versioneer]\nVCS = git\ntag_prefix = ''\n"}, "versioneer", ""),
    ({"pyproject.toml": '[tool.versioneer]\nVCS = "git"\ntag_prefix = "rel-"\n'}, "versioneer", "rel-"),
    ({"setup.py": "from setuptools import setup\nsetup(name='x', use_scm_version=True)\n"}, "setuptools-scm", ""),
])
def test_versioning_from_git_tags_is_recognised(tmp_path, files, tool, prefix):
    ev = gather(write(tmp_path, files))
    assert ev.values("vcs_version") == [{"tool": tool, "tag_prefix": prefix}]


def test_a_static_version_is_not_vcs_versioning(tmp_path):
    ev = gather(write(tmp_path, {"pyproject.toml": '[project]\nname = "x"\nversion = "1.0"\n', "x.py": ""}))
    assert ev.of("vcs_version") == []


def test_override_variables_per_tool():
    assert checkout_version.override("hatch-vcs", "Service_Identity") == \
        "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_SERVICE_IDENTITY"
    assert checkout_version.override("pbr", "x") == "PBR_VERSION"
    assert checkout_version.override("versioneer", "x") is None


def test_untagged_checkout_is_noticed_and_a_tag_behind_head_is_enough(tmp_path):
    write(tmp_path, {"pyproject.toml": SCM_PYPROJECT, "pluggy.py": ""})
    commit(tmp_path, "2024-04-20T20:00:00Z")
    assert gather(tmp_path).of("git_untagged")
    (tmp_path / "pluggy.py").write_text("# later\n")
    commit(tmp_path, "2024-04-21T20:00:00Z")
    subprocess.run(["git", "-C", str(tmp_path), "tag", "1.4.0", "HEAD~1"], check=True, env={**os.environ, **GIT_ENV})
    assert not gather(tmp_path).of("git_untagged")  # `git describe` finds 1.4.0 one commit back


def test_release_before_asks_the_real_index():
    at = datetime(2024, 4, 20, 21, 0, tzinfo=timezone.utc)  # pluggy 1.5.0 was uploaded at 21:34
    assert checkout_version.release_before("pluggy", at)[0] == "1.4.0"
    version, uploaded = checkout_version.release_before("Pluggy", at + checkout_version.GRACE)
    assert version == "1.5.0" and uploaded.startswith("2024-04-20T21:34")
    assert checkout_version.release_before("pluggy", datetime(2000, 1, 1, tzinfo=timezone.utc)) is None
    with pytest.raises(LookupError):
        checkout_version.release_before("no-such-project-envyard-xyz", at)


def test_the_recipe_tags_first_or_warns_when_the_index_cannot_say(tmp_path):
    checkout = write(tmp_path / "checkout", {"pyproject.toml": SCM_PYPROJECT, "pluggy.py": ""})
    commit(checkout, "2024-04-20T20:00:00Z")
    cand = Candidate(available()[0])
    ev = gather(checkout)
    checkout_version.resolve(ev)
    recipe = plan(ev, cand)
    assert [s.kind for s in recipe.steps][:2] == ["venv", "version"] and recipe.warnings == []
    assert "git tag 1.5.0" in recipe.steps[1].command and "pluggy 1.5.0" in recipe.steps[1].why

    down = gather(checkout)
    checkout_version.resolve(down, index="http://127.0.0.1:9/simple", timeout=5)  # nothing listens on port 9
    recipe = plan(down, cand)
    assert "version" not in [s.kind for s in recipe.steps]
    assert len(recipe.warnings) == 1 and "looking up pluggy's releases failed" in recipe.warnings[0]

    bare = write(tmp_path / "bare", {"pyproject.toml": SCM_PYPROJECT, "pluggy.py": ""})
    os.utime(bare / "pluggy.py", (1_713_600_000, 1_713_600_000))  # 2024-04-20 08:00 UTC
    os.utime(bare / "pyproject.toml", (1_713_600_000, 1_713_600_000))
    ev = gather(bare)
    checkout_version.resolve(ev)
    recipe = plan(ev, cand)
    assert "version" not in [s.kind for s in recipe.steps]
    assert recipe.env["SETUPTOOLS_SCM_PRETEND_VERSION_FOR_PLUGGY"] == "1.5.0"

    inside = write(tmp_path / "repo", {"pkg/pyproject.toml": SCM_PYPROJECT, "pkg/pluggy.py": ""})
    (inside / ".git").mkdir()  # a checkout git cannot read (another owner: "dubious ownership"): not a bare tree
    ev = gather(inside / "pkg")
    checkout_version.resolve(ev)
    assert [f.via for f in ev.of("source_date")] == ["mtime"] and ev.of("checkout_version") == []

    unpublished = write(tmp_path / "app", {"pyproject.toml": SCM_PYPROJECT.replace('"pluggy"',
                                                                                 '"no-such-project-envyard-xyz"')})
    commit(unpublished, "2024-04-20T20:00:00Z")
    ev = gather(unpublished)
    checkout_version.resolve(ev)
    assert ev.of("git_untagged") and ev.of("checkout_version") == []  # not on the index: nothing to pin, no warning

    tagged = tmp_path / "tagged"
    write(tagged, {"pyproject.toml": SCM_PYPROJECT, "pluggy.py": ""})
    commit(tagged, "2024-04-20T20:00:00Z", tag="1.5.0")
    ev = gather(tagged)
    checkout_version.resolve(ev)
    assert ev.of("checkout_version") == [] and "version" not in [s.kind for s in plan(ev, cand).steps]


def test_the_tag_step_leaves_tagged_and_plain_trees_alone(tmp_path):
    tagged, plain = tmp_path / "tagged", tmp_path / "plain"
    write(tagged, {"a.py": ""})
    commit(tagged, "2024-04-20T20:00:00Z", tag="0.9")
    write(plain, {"a.py": ""})
    env = {**os.environ, **GIT_ENV, "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    for root in (tagged, plain):
        subprocess.run(["sh", "-ec", checkout_version.tag_command("1.5.0")], cwd=root, check=True, env=env)
    tags = subprocess.run(["git", "tag"], cwd=tagged, capture_output=True, text=True, env=env).stdout.split()
    assert tags == ["0.9"] and not (plain / ".git").exists()


def pluggy_source(tmp_path: Path, *, git: bool) -> Path:
    """pluggy 1.5.0's sdist without PKG-INFO and its generated _version.py, so that only git could give its
    version (setuptools-scm): as a checkout with no tag, committed an hour before the release's upload, or as
    a plain tree (file dates from the sdist)."""
    fetched = fetch_pypi("pypi:pluggy==1.5.0")
    try:
        repo = tmp_path / "pluggy"
        subprocess.run(["cp", "-a", str(fetched.root), str(repo)], check=True)
    finally:
        fetched.cleanup()
    for junk in ("PKG-INFO", "src/pluggy/_version.py"):
        (repo / junk).unlink()
    subprocess.run(["rm", "-rf", *map(str, repo.glob("src/*.egg-info"))], check=True)
    if git:
        commit(repo, "2024-04-20T20:30:00Z")
    return repo


@pytest.mark.timeout(900)
@pytest.mark.parametrize("git", [True, False], ids=["untagged-checkout", "no-git-metadata"])
def test_setup_of_pluggy_without_its_version_reaches_l4(tmp_path, git):
    """Without a version pluggy is 0.1.dev1 (or 0.0.0 by setuptools-scm's repair): pytest, which needs
    pluggy>=1.5, resolves to a release from 2016 that cannot import on 3.11, and setup stops at L1. As the
    release it follows, 1.5.0, the suite passes and the replay verifies it."""
    repo = pluggy_source(tmp_path, git=git)
    out = tmp_path / "contract"
    env = {"ENVYARD_HOME": str(tmp_path / "home"), **BARE, "PYTHONPATH": SRC}
    try:
        r = subprocess.run([sys.executable, "-m", "envyard.cli.main", "setup", str(repo), "--python", "3.11",
                            "--out", str(out), "--json"], capture_output=True, text=True, timeout=880, cwd=cli_cwd(),
                           env=env)
    finally:
        subprocess.run([sys.executable, "-m", "envyard.cli.main", "gc"], env=env, capture_output=True)
    assert r.returncode == 0, (r.stderr[-3000:], r.stdout[-2000:])
    data = json.loads(r.stdout)
    assert data["level"] == 4 and data["pass_ratio"] >= 0.99 and data["verified"] is True, data["reason"]
    setup_sh = (out / "setup.sh").read_text()
    if git:
        assert setup_sh.index("git tag 1.5.0") < setup_sh.index(" -e '.[")  # before the project's install
        assert not subprocess.run(["git", "tag"], cwd=repo, capture_output=True, text=True).stdout  # the user's
    else:
        assert "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_PLUGGY=1.5.0" in setup_sh and "git tag" not in setup_sh
