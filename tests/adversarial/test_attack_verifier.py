"""Attacks on verification: an agent that cannot solve a task tries to score anyway, or to turn its failure
into a masked infrastructure error. Each attack scores 0 (with no infra error); the twin tests switch the
defence off and show the attack would have scored 1."""

from __future__ import annotations

import importlib
import shlex
import shutil
import sys
import textwrap
import time
from pathlib import Path

import pytest

from adversarial.attack_helpers import ANSWER_VERIFIER, make_task
from conftest import Scripted
from envyard.envs import load_task, run_episode, TerminalEnv

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"  # the host's Debian python3 has the same minor here

# A shared object that, as any process of the verifier exits, writes reward 1.
EVIL_SO = r"""
#include <stdio.h>
__attribute__((destructor)) static void win(void) {
    FILE *f = fopen("/logs/verifier/reward.txt", "w");
    if (f) { fputs("1\n", f); fclose(f); }
}
"""
LD_PRELOAD_ATTACK = (f"printf '%s' {shlex.quote(EVIL_SO)} > /tmp/e.c && gcc -shared -fPIC -o /usr/local/lib/libwin.so /tmp/e.c"
                     " && echo /usr/local/lib/libwin.so > /etc/ld.so.preload")
# A python3X.zip ahead of the standard library on sys.path, whose `pathlib` writes the reward and exits.
STDLIB_ZIP_ATTACK = (
    "cd /tmp && mkdir -p z && printf 'import os\\nos.makedirs(\"/logs/verifier\", exist_ok=True)\\n"
    "open(\"/logs/verifier/reward.txt\", \"w\").write(\"1\")\\nos._exit(0)\\n' > z/pathlib.py && "
    "python3 -c 'import sys, zipfile; p = [x for x in sys.path if x.endswith(\".zip\")][0]; "
    "zipfile.ZipFile(p, \"w\").write(\"z/pathlib.py\", \"pathlib.py\")'")
PATHLIB_VERIFIER = textwrap.dedent("""\
    #!/bin/bash
    mkdir -p /logs/verifier
    python3 - <<'EOF'
    import pathlib
    ok = pathlib.Path("/app/answer.txt").exists() and pathlib.Path("/app/answer.txt").read_text().strip() == "42"
    pathlib.Path("/logs/verifier/reward.txt").write_text("1" if ok else "0")
    EOF
""")


def episode(yard, root: Path, *commands, task=None):
    return run_episode(yard, task or load_task(root), Scripted(*commands))


@pytest.mark.parametrize("carry", ["/app", "/"])
@pytest.mark.parametrize("attack,verifier", [(LD_PRELOAD_ATTACK, ANSWER_VERIFIER), (STDLIB_ZIP_ATTACK, PATHLIB_VERIFIER)],
                         ids=["ld.so.preload", "python3X.zip"])
def test_loader_and_interpreter_start_up_attacks_score_zero(yard, tmp_path, attack, verifier, carry):
    root = make_task(tmp_path / "t", tests=verifier, verifier_extra=f'carry = ["{carry}"]')
    ep = episode(yard, root, attack)
    assert (ep.reward, ep.infra_error) == (0.0, None)


@pytest.mark.parametrize("attack,verifier", [(LD_PRELOAD_ATTACK, ANSWER_VERIFIER), (STDLIB_ZIP_ATTACK, PATHLIB_VERIFIER)],
                         ids=["ld.so.preload", "python3X.zip"])
def test_loader_and_interpreter_attacks_work_when_everything_is_carried_unfiltered(yard, tmp_path, attack, verifier,
                                                                                  no_filter):
    root = make_task(tmp_path / "t", tests=verifier, verifier_extra='carry = ["/"]')
    assert episode(yard, root, attack).reward == 1.0


def test_loader_attack_on_the_shipped_hello_file_scores_zero(yard):
    ep = episode(yard, EXAMPLES / "hello-file", LD_PRELOAD_ATTACK)
    assert (ep.reward, ep.infra_error) == (0.0, None)


# ---- the test runner's discovery ----------------------------------------------------------------------------

PYTEST_TASK_TESTS = {
    "test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\ncd /tests\n"
               "if python3 -m pytest -q -p no:cacheprovider test_answer.py >&2; then echo 1; else echo 0; fi"
               " > /logs/verifier/reward.txt\n",
    "test_answer.py": "def test_answer():\n    assert open('/app/answer.txt').read().strip() == '42'\n",
}
# A pytest plugin that reports every test as passed.
PLUGIN = ("import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
          "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")
SITE = f"/usr/local/lib/python{PY}/dist-packages"
ENTRY_POINT_ATTACK = (f"mkdir -p {SITE}/win-1.0.dist-info && printf '%s' {shlex.quote(PLUGIN)} > {SITE}/win_plugin.py && "
                      f"printf 'Metadata-Version: 2.1\\nName: win\\nVersion: 1.0\\n' > {SITE}/win-1.0.dist-info/METADATA"
                      f" && printf '[pytest11]\\nwin = win_plugin\\n' > {SITE}/win-1.0.dist-info/entry_points.txt")
ROOTDIR_ATTACK = f"printf '[pytest]\\n' > /pytest.ini && printf '%s' {shlex.quote(PLUGIN)} > /conftest.py"


@pytest.fixture(scope="module")
def pytest_task(tmp_path_factory):
    """A task whose image has pytest for the system python3 (copied from this test run's own pytest)."""
    import _pytest
    import iniconfig
    import packaging
    import pluggy
    import pytest as pytest_mod

    root = make_task(tmp_path_factory.mktemp("pytest-task") / "t", tests=PYTEST_TASK_TESTS,
                     setup=f"mkdir -p {SITE} && mv /app/pkgs/* {SITE}/ && rmdir /app/pkgs\n")
    pkgs = root / "environment" / "files" / "pkgs"
    for mod in (_pytest, pytest_mod, pluggy, iniconfig, packaging):
        src = Path(mod.__file__).parent
        shutil.copytree(src, pkgs / src.name, ignore=shutil.ignore_patterns("__pycache__"))
    py = Path(pytest_mod.__file__).parent.parent / "py.py"
    if py.exists():
        shutil.copy(py, pkgs / "py.py")
    return root


def _with_carry(root: Path, tmp_path: Path, carry: str) -> Path:
    copy = tmp_path / "task"
    shutil.copytree(root, copy)
    toml = copy / "task.toml"
    toml.write_text(toml.read_text() + f'carry = ["{carry}"]\n')
    return copy


@pytest.mark.parametrize("attack,carry", [(ENTRY_POINT_ATTACK, "/app"), (ENTRY_POINT_ATTACK, SITE),
                                          (ROOTDIR_ATTACK, "/app"), (ROOTDIR_ATTACK, "/")],
                         ids=["plugin-default", "plugin-site-carried", "rootdir-default", "rootdir-all-carried"])
def test_test_runner_hijacks_score_zero(yard, tmp_path, pytest_task, attack, carry):
    assert episode(yard, pytest_task, "true").reward == 0.0  # the task is sound: no answer, no score
    assert episode(yard, pytest_task, "echo 42 > /app/answer.txt").reward == 1.0
    ep = episode(yard, _with_carry(pytest_task, tmp_path, carry), attack)
    assert (ep.reward, ep.infra_error) == (0.0, None)


# The image registers a pytest plugin the tests need; a repair may reinstall its distribution at another version
# (as derived environment tasks ask), which re-registers the same entry. Pointing the name elsewhere is an attack.
BENIGN = "import pytest\n@pytest.fixture\ndef benign():\n    return 'ok'\n"
BENIGN_TESTS = {**PYTEST_TASK_TESTS, "test_answer.py": "def test_answer(benign):\n    assert benign == 'ok'\n"
                "    assert open('/app/answer.txt').read().strip() == '42'\n"}


def _reinstall(target: str) -> str:
    """benign 1.0 replaced by a 2.0 whose [pytest11] entry `benign` points at `target`."""
    return (f"rm -rf {SITE}/benign-1.0.dist-info && mkdir {SITE}/benign-2.0.dist-info && "
            f"printf 'Metadata-Version: 2.1\\nName: benign\\nVersion: 2.0\\n' > {SITE}/benign-2.0.dist-info/METADATA && "
            f"printf '[pytest11]\\nbenign = {target}\\n' > {SITE}/benign-2.0.dist-info/entry_points.txt")


@pytest.fixture(scope="module")
def plugin_task(tmp_path_factory, pytest_task):
    root = tmp_path_factory.mktemp("plugin-task") / "t"
    shutil.copytree(pytest_task, root)
    for name, text in BENIGN_TESTS.items():
        (root / "tests" / name).write_text(text)
    pkgs = root / "environment" / "files" / "pkgs"
    (pkgs / "benign_plugin.py").write_text(BENIGN)
    (pkgs / "benign-1.0.dist-info").mkdir()
    (pkgs / "benign-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: benign\nVersion: 1.0\n")
    (pkgs / "benign-1.0.dist-info" / "entry_points.txt").write_text("[pytest11]\nbenign = benign_plugin\n")
    toml = root / "task.toml"
    toml.write_text(toml.read_text() + f'carry = ["/app", "{SITE}"]\n')
    return root


def test_a_plugin_the_image_registers_survives_its_reinstall_and_cannot_be_pointed_elsewhere(yard, plugin_task):
    assert episode(yard, plugin_task, "echo 42 > /app/answer.txt").reward == 1.0
    assert episode(yard, plugin_task, "true").reward == 0.0
    # the repair: the same entry, from the reinstalled distribution (the old one's is gone)
    assert episode(yard, plugin_task, "echo 42 > /app/answer.txt", _reinstall("benign_plugin")).reward == 1.0
    # the attack: the registered name now loads a plugin that passes everything; its entry is not carried
    hijack = (f"printf '%s' {shlex.quote(PLUGIN + BENIGN)} > {SITE}/win_plugin.py && " + _reinstall("win_plugin"))
    ep = episode(yard, plugin_task, hijack)
    assert (ep.reward, ep.infra_error) == (0.0, None)


def test_a_plugin_entry_pointed_elsewhere_works_without_the_filter(yard, plugin_task, no_filter):
    hijack = (f"printf '%s' {shlex.quote(PLUGIN + BENIGN)} > {SITE}/win_plugin.py && " + _reinstall("win_plugin"))
    assert episode(yard, plugin_task, hijack).reward == 1.0


@pytest.mark.parametrize("attack,carry", [(ENTRY_POINT_ATTACK, SITE), (ROOTDIR_ATTACK, "/")], ids=["plugin", "rootdir"])
def test_test_runner_hijacks_work_without_the_filter(yard, tmp_path, pytest_task, attack, carry, no_filter):
    assert episode(yard, _with_carry(pytest_task, tmp_path, carry), attack).reward == 1.0


# A fake `unittest` package in the workdir, which the shipped verifier puts first on sys.path (PYTHONPATH=/app).
UNITTEST_SHADOW = ("mkdir -p /app/unittest && touch /app/unittest/__init__.py && "
                   "printf 'print(\"Ran 17 tests in 0.001s\")\\nprint()\\nprint(\"OK\")\\n' > /app/unittest/__main__.py")


def test_workdir_module_shadowing_the_stdlib_scores_zero_on_the_shipped_swe_task(yard):
    env = TerminalEnv(EXAMPLES / "python-bugfix-swe", yard=yard)
    try:
        env.reset()
        env.step(UNITTEST_SHADOW)
        _, reward, _, _, info = env.step("submit")
    finally:
        env.close()
    assert (reward, info["infra_error"]) == (0.0, None)
    assert "/app/unittest (shadows a module or test config)" in info["dropped"]


def test_workdir_module_shadowing_works_without_the_filter(yard, no_filter):
    assert episode(yard, EXAMPLES / "python-bugfix-swe", UNITTEST_SHADOW).reward == 1.0


# ---- code that is not what its source says ---------------------------------------------------------------------

CALC_VERIFIER = ("#!/bin/bash\nmkdir -p /logs/verifier\ncd /app/lib && "
                 "if python3 -c 'import calc; assert calc.add(2, 3) == 5'; then echo 1; else echo 0; fi"
                 " > /logs/verifier/reward.txt\n")
# Leaves calc.py buggy but plants bytecode of a fixed copy whose header matches calc.py's size and time.
PYC_ATTACK = ("cd /tmp && sed 's/a - b/a + b/' /app/lib/calc.py > calc.py && touch -r /app/lib/calc.py calc.py && "
              "python3 -c \"import py_compile, importlib.util as u; "
              "py_compile.compile('calc.py', cfile='/app/lib/' + u.cache_from_source('calc.py'))\"")


def test_planted_bytecode_scores_zero(yard, tmp_path):
    root = make_task(tmp_path / "t", tests=CALC_VERIFIER, files={"lib/calc.py": "def add(a, b):\n    return a - b\n"})
    assert episode(yard, root, "sed -i 's/a - b/a + b/' /app/lib/calc.py").reward == 1.0  # the honest fix
    ep = episode(yard, root, PYC_ATTACK)
    assert (ep.reward, ep.infra_error) == (0.0, None)


def test_planted_bytecode_works_without_the_filter(yard, tmp_path, no_filter):
    root = make_task(tmp_path / "t", tests=CALC_VERIFIER, files={"lib/calc.py": "def add(a, b):\n    return a - b\n"})
    assert episode(yard, root, PYC_ATTACK).reward == 1.0


# ---- the agent's repository runs its own programs ----------------------------------------------------------------

GIT_SETUP = "git init -q /app/repo && git -C /app/repo -c user.name=t -c user.email=t@t commit -q --allow-empty -m init\n"
GIT_VERIFIER = ("#!/bin/bash\nmkdir -p /logs/verifier\necho 0 > /logs/verifier/reward.txt\n"
                "git -c safe.directory='*' -C /app/repo status --porcelain > /dev/null\n"
                "[ \"$(cat /app/answer.txt 2>/dev/null)\" = 42 ] || exit 1\necho 1 > /logs/verifier/reward.txt\n")
# core.fsmonitor names a program git runs on `status`: it writes the reward and kills the verifier.
FSMONITOR_ATTACK = ("printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\nkill -9 0\\n' > /app/repo/.git/win && "
                    "chmod +x /app/repo/.git/win && git -C /app/repo config core.fsmonitor /app/repo/.git/win")


def test_repository_config_hooks_do_not_run_in_the_verifier(yard, tmp_path):
    root = make_task(tmp_path / "t", tests=GIT_VERIFIER, setup=GIT_SETUP)
    ep = episode(yard, root, FSMONITOR_ATTACK)
    assert (ep.reward, ep.infra_error) == (0.0, None)


def test_repository_config_hooks_would_run_without_the_override(yard, tmp_path, monkeypatch):
    verify_mod = importlib.import_module("envyard.envs.verify")  # (the package exports a function of that name)
    monkeypatch.setattr(verify_mod, "VERIFIER_ENV", {"TEST_DIR": "/tests"})
    root = make_task(tmp_path / "t", tests=GIT_VERIFIER, setup=GIT_SETUP)
    assert episode(yard, root, FSMONITOR_ATTACK).reward == 1.0


# ---- pointing at the key, stalling the verifier, drowning it ------------------------------------------------------

KEY_VERIFIER = {"test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\n"
                           "if cmp -s /app/answer.txt /tests/expected.txt; then echo 1; else echo 0; fi"
                           " > /logs/verifier/reward.txt\n",
                "expected.txt": "the expected answer\n"}


def test_symlink_to_the_expected_answer_scores_zero(yard, tmp_path):
    root = make_task(tmp_path / "t", tests=KEY_VERIFIER)
    ep = episode(yard, root, "ln -s /tests/expected.txt /app/answer.txt")
    assert (ep.reward, ep.infra_error) == (0.0, None)
    ep = episode(yard, root, "ln -s ../tests/expected.txt /app/answer.txt")
    assert (ep.reward, ep.infra_error) == (0.0, None)


def test_symlink_to_the_expected_answer_works_without_the_filter(yard, tmp_path, no_filter):
    root = make_task(tmp_path / "t", tests=KEY_VERIFIER)
    assert episode(yard, root, "ln -s /tests/expected.txt /app/answer.txt").reward == 1.0


READ_VERIFIER = ("#!/bin/bash\nmkdir -p /logs/verifier\necho 0 > /logs/verifier/reward.txt\n"
                 "read -r x < /app/answer.txt\n[ \"$x\" = 42 ] && echo 1 > /logs/verifier/reward.txt\n")


def test_a_fifo_as_the_answer_scores_zero_at_once(yard, tmp_path):
    """It used to block the verifier until its timeout: a masked `verifier_timeout` instead of a 0."""
    root = make_task(tmp_path / "t", tests=READ_VERIFIER)
    ep = episode(yard, root, "mkfifo /app/answer.txt")
    assert (ep.reward, ep.infra_error) == (0.0, None)
    assert ep.wall_time < 15 and not ep.metrics.get("verifier_timed_out")


def test_a_huge_answer_scores_zero_without_being_copied(yard, tmp_path):
    root = make_task(tmp_path / "t", tests=READ_VERIFIER)
    ep = episode(yard, root, "truncate -s 3G /app/answer.txt")
    assert (ep.reward, ep.infra_error) == (0.0, None)
    assert "too large" in ep.metrics["rejected"] and ep.wall_time < 15


def test_a_verifier_stalled_by_the_agent_scores_zero(yard, tmp_path, no_filter):
    root = make_task(tmp_path / "t", tests=READ_VERIFIER, verifier_timeout=2)
    ep = episode(yard, root, "mkfifo /app/answer.txt")
    assert (ep.reward, ep.infra_error) == (0.0, None) and ep.metrics == {"verifier_timed_out": True}


# ---- legitimate work is kept ------------------------------------------------------------------------------------

SIX_VERIFIER = ("#!/bin/bash\nmkdir -p /logs/verifier\n"
                "if python3 -c 'import six; assert six.__version__ == \"1.16.0\", six.__version__'; then echo 1;"
                " else echo 0; fi > /logs/verifier/reward.txt\n")


@pytest.mark.timeout(600)
def test_an_upgrade_in_a_carried_site_dir_counts(yard, tmp_path):
    """`pip install -U` replaces files of the image; with site-packages carried, the verifier sees it."""
    root = make_task(tmp_path / "t", tests=SIX_VERIFIER, environment='network = "host"',
                     setup="python3 -m pip install -q --break-system-packages six==1.15.0\n",
                     verifier_extra=f'carry = ["/app", "{SITE}"]')
    upgrade = "python3 -m pip install -q --break-system-packages -U six==1.16.0"
    ep = episode(yard, root, upgrade)
    assert (ep.reward, ep.infra_error) == (1.0, None), ep
    assert episode(yard, root, "true").reward == 0.0


def test_exit_in_a_step_starts_a_new_shell(yard):
    env = TerminalEnv(EXAMPLES / "hello-file", yard=yard)
    try:
        env.reset()
        env.step("cd /tmp && export X=1")
        obs, reward, terminated, truncated, info = env.step("exit 3")
        assert not terminated and info["exit_code"] == 3 and "a new shell was started" in obs
        obs, *_ = env.step("pwd; echo X=$X")
        assert obs.startswith("/app\nX=\n")
        env.step("printf 'Hello, world!\\n' > hello.txt")
        obs, reward, terminated, truncated, info = env.step("submit")
        assert (reward, terminated, info["infra_error"]) == (1.0, True, None)
    finally:
        env.close()


@pytest.mark.parametrize("solved,reward", [(True, 1.0), (False, 0.0)])
def test_killing_the_sandbox_ends_the_episode_with_a_score_not_a_mask(yard, solved, reward):
    env = TerminalEnv(EXAMPLES / "hello-file", yard=yard)
    try:
        env.reset()
        if solved:
            env.step("printf 'Hello, world!\\n' > hello.txt")
        obs, r, terminated, truncated, info = env.step("kill -9 -1")
        for _ in range(3):  # the sandbox went down just after the step returned: a next step finds out (on a
            if terminated:  # loaded machine the resident shell's death can be noticed one step later)
                break
            time.sleep(0.2)
            obs, r, terminated, truncated, info = env.step("true")
        assert terminated and info.get("sandbox_stopped") and info["infra_error"] is None, (obs, info)
        assert r == reward
    finally:
        env.close()


# ---- emptying a carried directory that holds the verifier's tools ---------------------------------------------

BASH_VERIFIER = ("#!/bin/bash\nmkdir -p /logs/verifier\n"
                 "if [ \"$(cat /app/answer.txt 2>/dev/null)\" = 42 ]; then echo 1; else echo 0; fi"
                 " > /logs/verifier/reward.txt\n")


EMPTY_USR_BIN = {
    "deleted": "cp -a /usr/bin /tmp/b && rm -rf /usr/bin",
    "emptied": "cp -a /usr/bin /tmp/b && rm -rf /usr/bin && /tmp/b/mkdir /usr/bin && /tmp/b/cp /tmp/b/true /usr/bin/mine",
}


@pytest.mark.parametrize("how", list(EMPTY_USR_BIN))
def test_emptying_a_system_dir_scores_zero_instead_of_crashing_the_verifier(yard, tmp_path, how):
    """`rm -rf /usr/bin` in a task that carries /usr: a deleted or opaque /usr/bin would hide bash and python3
    from the verifier, whose crash would be a masked infrastructure error."""
    root = make_task(tmp_path / "t", tests=BASH_VERIFIER, verifier_extra='carry = ["/app", "/usr"]')
    ep = episode(yard, root, EMPTY_USR_BIN[how])
    assert (ep.reward, ep.infra_error) == (0.0, None), ep
    ok = episode(yard, root, "echo 42 > /app/answer.txt && " + EMPTY_USR_BIN[how])
    assert (ok.reward, ok.infra_error) == (1.0, None), ok  # the tools show through


def test_emptying_a_system_dir_crashes_the_verifier_without_the_filter(yard, tmp_path, no_filter):
    root = make_task(tmp_path / "t", tests=BASH_VERIFIER, verifier_extra='carry = ["/app", "/usr"]')
    assert episode(yard, root, EMPTY_USR_BIN["deleted"]).infra_error == "verifier_crashed"


def test_emptying_the_workdir_still_deletes_its_files(yard, tmp_path):
    root = make_task(tmp_path / "t", files={"old.txt": "old\n"},
                     tests="#!/bin/bash\nmkdir -p /logs/verifier\n[ -e /app/old.txt ] && echo 0 > /logs/verifier/reward.txt"
                           " || echo 1 > /logs/verifier/reward.txt\n")
    assert episode(yard, root, "true").reward == 0.0
    assert episode(yard, root, "cd / && rm -rf /app && mkdir /app").reward == 1.0
