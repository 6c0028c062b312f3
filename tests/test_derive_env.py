"""`envyard derive`'s environment-breakage and commit-inversion generators, proven in forks of a real setup image
(without the derive core's validator): each kind's break script makes baseline-passing tests fail, its fix
script makes them pass again, and the fix survives the verifier's carry filter."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import envyard
from envyard.derive import commits, envbreak
from envyard.derive.mutation import SourceFacts
from envyard.envs.carry import MAX_ENTRIES, carry_changes
from envyard.setup.search import host_trust
from envyard.store.store import Image

from bareenv import BARE, cli_cwd

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "derive" / "envproj"
SRC = str(Path(__file__).resolve().parents[1] / "src")
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
# each env kind, by the mutation-name prefix that names it
ENV_KINDS = ("uninstall-", "conflict-", "rmmodule-", "rmlib-", "script-gone-", "script-shebang-", "pth-",
             "interp-links", "venvcfg-gone")


def _git(repo, *args):
    subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True)


def make_repo(dest: Path) -> Path:
    """The fixture as a git repository with history: init (no count_words), a commit adding count_words and
    its tests, a docs-only commit on top."""
    shutil.copytree(FIXTURE, dest)
    init = (dest / "src/envproj/__init__.py").read_text()
    words_test = (dest / "tests/test_words.py").read_text()
    (dest / "src/envproj/__init__.py").write_text(
        re.sub(r"# count_words: begin\n.*?# count_words: end\n\n\n", "", init, flags=re.S))
    (dest / "tests/test_words.py").unlink()
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-qm", "init")
    (dest / "src/envproj/__init__.py").write_text(init)
    (dest / "tests/test_words.py").write_text(words_test)
    _git(dest, "add", "-A")
    _git(dest, "commit", "-qm", "count distinct words")
    (dest / "README.md").write_text("envproj\n")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-qm", "readme")
    return dest


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """One setup of the fixture repository, probed once by both generators."""
    home = tmp_path_factory.mktemp("derive-env-home")
    repo = make_repo(tmp_path_factory.mktemp("derive-env-src") / "envproj")
    r = subprocess.run([sys.executable, "-m", "envyard.cli.main", "setup", str(repo), "--name", "envproj", "--json"],
                       capture_output=True, text=True, timeout=900, cwd=cli_cwd(),
                       env={"ENVYARD_HOME": str(home), **BARE, "PYTHONPATH": SRC})
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout)["status"] == "verified"
    yard = envyard.Yard(home)
    image = yard.image("envproj")
    prov = image.config.provenance
    extra = {}
    with yard.sandbox(image) as sb:
        for key, module in (("env", envbreak), ("commit", commits)):
            p = sb.exec(["sh", "-c", module.probe_script()], cwd=image.config.workdir, timeout=120)
            assert p.exit_code == 0, p.stderr
            extra[key] = json.loads(p.stdout)
        baseline = run_tests(sb, prov["test_command"], image.config.workdir)
    facts = SourceFacts(image="envproj", workdir=image.config.workdir, test_runner=prov["test_runner"],
                        test_command=prov["test_command"], packages=tuple(prov["packages"]),
                        python=extra["env"]["python"], baseline=baseline, extra=extra)
    yield yard, image, facts
    yard.close()
    yard.gc()


def run_tests(sb, command: str, workdir: str) -> dict[str, str]:
    """Per-test statuses from one pytest run (a test of a file that fails to import counts as not passed)."""
    r = sb.exec(["sh", "-c", f"{command} -q -rA -p no:cacheprovider --continue-on-collection-errors"], cwd=workdir, timeout=180)
    statuses = {}
    for m in re.finditer(r"^(PASSED|FAILED|ERROR|SKIPPED) (\S+::\S+)", r.stdout, re.M):
        statuses[m.group(2)] = m.group(1).lower()
    return statuses


def passed(statuses: dict[str, str]) -> set[str]:
    return {t for t, s in statuses.items() if s == "passed"}


def prove(yard, image, facts, m) -> dict:
    """Break in one sandbox, snapshot that as the task's image; in a fork of it, check the tests fail, run the
    oracle, check they pass; then carry the oracle's work as the verifier would and run the tests over it."""
    trust_binds, trust_env = host_trust()  # installs from PyPI behind this machine's TLS proxy, as setup does
    net = dict(network="host", ro_binds=trust_binds, env=trust_env)
    want = passed(facts.baseline)
    with yard.sandbox(image, **net) as b:
        r = b.exec(["sh", "-c", m.break_script], cwd=facts.workdir, timeout=300)
        assert r.exit_code == 0, f"{m.name}: break failed: {r.stdout}{r.stderr}"
        broken = b.snapshot()
    store = yard.store
    agent = yard.sandbox(broken, **net)
    try:
        broken_passed = passed(run_tests(agent, facts.test_command, facts.workdir))
        assert want - broken_passed, f"{m.name}: no baseline-passing test broke"
        r = agent.exec(["sh", "-c", m.fix_script], cwd=facts.workdir, timeout=300)
        assert r.exit_code == 0, f"{m.name}: fix failed: {r.stdout}{r.stderr}"
        assert want <= passed(run_tests(agent, facts.test_command, facts.workdir)), m.name
        agent.stop()
        dest = store.new_layer_dir()
        carried = carry_changes(agent.upper_dir(), dest, list(m.carry or (facts.workdir,)),
                                store.layer_paths(broken.layers), [], 1 << 30)
    finally:
        agent.close()
    assert not carried.too_large and carried.entries < MAX_ENTRIES
    layer = store.seal_layer(dest, {"verifier_view": m.name})
    try:
        view = Image(name=broken.name, layers=[*broken.layers, layer.id], config=broken.config, created=broken.created)
        with yard.sandbox(view) as v:
            verified = passed(run_tests(v, facts.test_command, facts.workdir))
    finally:
        store.remove_layer(layer.id)
    assert want <= verified, f"{m.name}: the carried repair did not reach the verifier; dropped: {carried.dropped}"
    return {"broken": sorted(want - broken_passed), "dropped": carried.dropped}


def test_probes_see_the_environment_and_the_history(source):
    _yard, _image, facts = source
    env = facts.extra["env"]
    dists = {d["name"]: d for d in env["dists"]}
    assert dists["six"]["required"] and not dists["six"]["runner"] and dists["six"]["imported"] == ["six"]
    assert dists["envproj"]["project"] and dists["pytest"]["runner"] and not dists["pluggy"]["required"]
    assert any(lib["soname"].startswith("libsqlite3") and lib["owner"].get("deb") for lib in env["libs"])
    assert [s["name"] for s in env["scripts"] if s["used_by_tests"]] == ["envproj-shout"]
    history = facts.extra["commit"]
    assert [c["subject"] for c in history["commits"]] == ["count distinct words"]  # init has no parent; readme: no tests
    assert history["commits"][0]["files"] == ["src/envproj/__init__.py"]
    assert len(passed(facts.baseline)) == 5


def test_same_seed_same_candidates(source):
    _yard, _image, facts = source
    for module in (envbreak, commits):
        a = list(module.candidates(facts, random.Random(7)))
        b = list(module.candidates(facts, random.Random(7)))
        assert a and a == b
    orders = {tuple(m.name for m in envbreak.candidates(facts, random.Random(s))) for s in range(6)}
    assert len(orders) > 1  # the seed decides the order
    names = [m.name for m in envbreak.candidates(facts, random.Random(0))]
    assert len(names) == len(set(names))
    for kind in ENV_KINDS:
        assert any(n.startswith(kind) for n in names), kind


def test_candidates_need_their_probe(source):
    _yard, _image, facts = source
    bare = SourceFacts(image=facts.image, workdir=facts.workdir, test_runner="pytest", test_command="x",
                       packages=(), python=facts.python)
    failed = SourceFacts(**{**bare.__dict__, "extra": {"env": {"error": "probe exit 127"},
                                                       "commit": {"error": "probe exit 127"}}})
    for f in (bare, failed):  # no probe, or a probe that failed: nothing to propose
        assert list(envbreak.candidates(f, random.Random(0))) == []
        assert list(commits.candidates(f, random.Random(0))) == []


@pytest.mark.parametrize("kind", ENV_KINDS)
def test_env_kind_breaks_and_its_inverse_repairs_through_the_carry(source, kind):
    yard, image, facts = source
    m = next(m for m in envbreak.candidates(facts, random.Random(0)) if m.name.startswith(kind))
    assert m.kind == "env" and m.carry and facts.workdir not in m.carry  # an env repair, not a code edit
    got = prove(yard, image, facts, m)
    if kind in ("script-gone-", "script-shebang-"):
        assert got["broken"] == ["tests/test_envproj.py::test_script"]
    if kind not in ("interp-links", "venvcfg-gone"):  # without the interpreter or the venv nothing runs
        assert "tests/test_plain.py::test_plain" not in got["broken"]  # needs nothing the mutation touched


def test_downgrade_below_the_previous_major_has_no_release_so_the_break_fails(source):
    """six has no 0.x wheel: the break script fails, and the validator drops the candidate for that reason."""
    yard, image, facts = source
    m = next(m for m in envbreak.candidates(facts, random.Random(0)) if m.name == "downgrade-six")
    trust_binds, trust_env = host_trust()
    with yard.sandbox(image, network="host", ro_binds=trust_binds, env=trust_env) as sb:
        assert sb.exec(["sh", "-c", m.break_script], cwd=facts.workdir, timeout=300).exit_code != 0


def test_commit_inversion_breaks_the_new_tests_and_the_commit_repairs_them(source):
    yard, image, facts = source
    [m] = list(commits.candidates(facts, random.Random(0)))
    assert m.kind == "commit" and m.site.startswith("commit:") and m.carry == () and m.files == ("src/envproj/__init__.py",)
    got = prove(yard, image, facts, m)
    assert got["broken"] == ["tests/test_words.py::test_count_no_words", "tests/test_words.py::test_count_words"]
    with yard.sandbox(image) as b:
        b.exec(["sh", "-c", m.break_script], cwd=facts.workdir, timeout=120)
        log = b.exec(["sh", "-c", "git log --format=%s; git cat-file --batch-all-objects --batch-check | wc -l"],
                     cwd=facts.workdir)
        assert log.stdout.split("\n")[0] == "snapshot" and "count distinct words" not in log.stdout  # no history
        assert "def count_words" not in b.read_file(f"{facts.workdir}/src/envproj/__init__.py").decode()
        assert b.exec(["test", "-f", "tests/test_words.py"], cwd=facts.workdir).exit_code == 0  # the new tests stay


def test_a_compiled_extension_of_a_wheel_is_removed_and_reinstalled(source):
    """The fixture is C-extension-free; this adds a wheel whose module is one compiled file (ujson, no pure-Python
    fallback) and a test that imports it, then proves the `rmext` kind on that image."""
    yard, image, facts = source
    trust_binds, trust_env = host_trust()
    with yard.sandbox(image, network="host", ro_binds=trust_binds, env=trust_env) as sb:
        r = sb.exec(["sh", "-c", f"uv pip install --python {facts.python} 'ujson>=5'"], timeout=300)
        assert r.exit_code == 0, r.stderr
        sb.write_file(f"{facts.workdir}/tests/test_fast.py",
                      b"import ujson\n\n\ndef test_dumps():\n    assert ujson.dumps([1]) == '[1]'\n")
        extended = sb.snapshot()
    with yard.sandbox(extended) as sb:
        env = json.loads(sb.exec(["sh", "-c", envbreak.probe_script()], cwd=facts.workdir, timeout=120).stdout)
        baseline = run_tests(sb, facts.test_command, facts.workdir)
    assert baseline["tests/test_fast.py::test_dumps"] == "passed"
    more = SourceFacts(**{**facts.__dict__, "image": extended.name, "baseline": baseline, "extra": {"env": env}})
    m = next(m for m in envbreak.candidates(more, random.Random(0)) if m.name.startswith("rmext-ujson"))
    assert m.site.endswith(".so") and m.meta["distribution"] == "ujson"
    assert prove(yard, extended, more, m)["broken"] == ["tests/test_fast.py::test_dumps"]


def test_breaks_the_tests_cannot_notice_are_not_proposed():
    """Predicted from the probe and the test files, no sandbox: a test runner's own distribution, a console
    script the tests only import, and a library only the standard library loads (for a module nobody imports
    directly) are left out; the others stay, in the seeded order."""
    env = {
        "python": "/v/bin/python", "site": ["/v/lib/site"], "bindir": "/v/bin", "tools": {},
        "dists": [{"name": n, "version": "2.0", "required": True, "project": False, "runner": False}
                  for n in ("pytest", "attrs")],
        "extensions": [{"path": "/usr/lib/_bz2.so", "top": "_bz2", "dist": None, "stdlib": True},
                       {"path": "/usr/lib/_sqlite3.so", "top": "_sqlite3", "dist": None, "stdlib": True},
                       {"path": "/v/lib/site/fast.so", "top": "fast", "dist": "attrs"}],
        "libs": [{"path": f"/usr/lib/{so}", "real": f"/usr/lib/{so}", "soname": so, "users": users,
                  "owner": {"deb": "libx"}}
                 for so, users in (("libbz2.so.1", ["_bz2"]), ("libsqlite3.so.0", ["_sqlite3"]),
                                   ("libfast.so.1", ["fast"]))],
        "imports": {"src": ["attrs"], "tests": ["pytest", "sqlite3"]},
        "scripts": [{"path": f"/v/bin/{n}", "name": n, "content": "#!/v/bin/python\nx\n", "mode": 0o755,
                     "used_by_tests": True} for n in ("pytest", "proj-cli")],
    }
    env["tools"] = {"apt-get": "/usr/bin/apt-get"}
    facts = SourceFacts(image="i", workdir="/w", test_runner="pytest", test_command="/v/bin/python -m pytest",
                        packages=("proj",), python="/v/bin/python", extra={"env": env},
                        test_files={"tests/test_a.py": "import pytest\nimport sqlite3\n\ndef test_cli():\n"
                                                       "    subprocess.run(['proj-cli', '--help'])\n"})
    unlikely = {"uninstall-pytest", "downgrade-pytest", "script-gone-pytest", "script-shebang-pytest",
                "rmlib-libbz2-so-1"}
    names = [m.name for m in envbreak.candidates(facts, random.Random(0))]
    assert not unlikely & set(names), names
    assert {"rmlib-libsqlite3-so-0", "rmlib-libfast-so-1", "script-gone-proj-cli", "downgrade-attrs"} <= set(names)
    assert all(envbreak.noticeable(m, facts, env) for m in envbreak.candidates(facts, random.Random(0)))
    assert envbreak.script_used("pytest", SourceFacts(**{**facts.__dict__, "test_command": "pytest -q"}))
    # nothing to judge by: the script counts as used
    assert envbreak.script_used("pytest", SourceFacts(**{**facts.__dict__, "test_files": {}}))
