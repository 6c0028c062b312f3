"""Harbor runs jobs on envyard sandboxes: `harbor run --env envyard.integrations.harbor:EnvyardEnvironment`.

Harbor needs Python >= 3.12 and envyard runs on 3.11, so Harbor runs in its own venv, the one
`scripts/install.sh --test` makes (ENVYARD_HARBOR_VENV, default /var/tmp/envyard-harbor-venv), with this
checkout's src/ first on its path. Without that venv the tests are skipped, with the reason. The jobs run on the
test cache store that holds debian:bookworm (tests/conftest.py), and the results are read from Harbor's own
output files.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "tests" / "fixtures" / "tasks"
CHECKS = ROOT / "tests" / "fixtures" / "harbor" / "env_checks.py"
HARBOR_VENV = Path(os.environ.get("ENVYARD_HARBOR_VENV", "/var/tmp/envyard-harbor-venv"))
ENVIRONMENT = "envyard.integrations.harbor:EnvyardEnvironment"


@pytest.fixture(scope="module")
def harbor_env(debian_yard):
    """The environment Harbor's processes run with: this checkout's envyard, the test store."""
    if not (HARBOR_VENV / "bin" / "harbor").exists():
        pytest.skip(f"no Harbor venv at {HARBOR_VENV}: run scripts/install.sh --test on a machine with Python >= "
                    "3.12 (Harbor's minimum)")
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "ENVYARD_HOME": str(debian_yard.store.home),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # no fetch of LiteLLM's price list (there is no network)


def dataset(tmp_path: Path, *names: str) -> Path:
    """A local Harbor dataset: a directory of task directories."""
    root = tmp_path / "dataset"
    for name in names:
        shutil.copytree(TASKS / name, root / name)
    return root


def harbor_run(harbor_env, tmp_path: Path, tasks: Path, agent: str, yard) -> dict[str, dict]:
    """Run a Harbor job; return each trial's result.json by task name. No sandbox of Harbor's may outlive it."""
    jobs = tmp_path / "jobs"
    proc = subprocess.Popen([HARBOR_VENV / "bin" / "harbor", "run", "-p", tasks, "-a", agent, "--env", ENVIRONMENT,
                             "-o", jobs, "--job-name", agent, "-n", "2", "-y", "-q"],
                            env=harbor_env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output[-3000:]
    assert [s.id for s in yard.sandboxes() if s.owner_pid == proc.pid] == []
    job = jobs / agent
    trials = {}
    for result in job.glob("*/result.json"):
        data = json.loads(result.read_text())
        trials[data["task_name"]] = {**data, "dir": result.parent}
    assert len(trials) == len(list(tasks.iterdir())), output[-3000:]
    return trials


def reward(trial: dict) -> float | None:
    return (trial["verifier_result"] or {}).get("rewards", {}).get("reward")


def test_the_oracle_solves_every_task(harbor_env, tmp_path, debian_yard):
    tasks = dataset(tmp_path, "harbor-hello", "harbor-user", "harbor-separate", "harbor-compose")
    trials = harbor_run(harbor_env, tmp_path, tasks, "oracle", debian_yard)
    for name, trial in trials.items():
        assert trial["exception_info"] is None, (name, trial["exception_info"])
        assert reward(trial) == 1.0, name
        # the verifier's and the agent's logs came back through download_dir
        assert (trial["dir"] / "verifier" / "reward.txt").read_text().strip() == "1"
        assert (trial["dir"] / "agent" / "oracle.txt").exists()
    assert set(trials) == {"harbor-hello", "envyard-tests/harbor-user", "harbor-separate", "harbor-compose"}
    assert trials["harbor-separate"]["verifier_environment_mode"] == "separate"  # a second sandbox verified it


def test_the_nop_agent_scores_zero_and_a_broken_build_is_harbors_build_failure(harbor_env, tmp_path, debian_yard):
    tasks = dataset(tmp_path, "harbor-hello", "harbor-user", "harbor-separate", "harbor-compose")
    broken = tasks / "harbor-broken"
    shutil.copytree(TASKS / "harbor-hello", broken)
    (broken / "environment" / "Dockerfile").write_text("FROM debian:bookworm\nRUN echo building; exit 7\n")
    trials = harbor_run(harbor_env, tmp_path, tasks, "nop", debian_yard)
    for name in ("harbor-hello", "envyard-tests/harbor-user", "harbor-separate", "harbor-compose"):
        assert trials[name]["exception_info"] is None, (name, trials[name]["exception_info"])
        assert reward(trials[name]) == 0.0, name
    failure = trials["harbor-broken"]["exception_info"]
    assert failure["exception_type"] == "SandboxBuildFailedError"  # Harbor's type: not graded as a 0
    assert "Dockerfile line 2" in failure["exception_message"] and "exited 7: building" in failure["exception_message"]
    assert "(fix: " in failure["exception_message"]  # envyard's cause and fix, in Harbor's result
    assert reward(trials["harbor-broken"]) is None


@pytest.fixture(scope="module")
def seen(harbor_env, tmp_path_factory):
    """What tests/fixtures/harbor/env_checks.py observed driving the environment as Harbor's trial does."""
    work = tmp_path_factory.mktemp("harbor-env-checks")
    r = subprocess.run([HARBOR_VENV / "bin" / "python", CHECKS, work], env=harbor_env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def test_commands_run_with_bash_as_the_images_user_with_harbors_env_and_cwd(seen):
    assert seen["user"] == [[0, "agent\n", None], [0, "root\n", None], [0, "0\n", None]]
    assert seen["default_user"] == [0, "root\n", None]  # with_default_user, as Harbor sets the agent's user
    assert seen["cwd"] == [[0, "/home/agent\n", None], [0, "/tmp\n", None]]
    # image ENV < task env < persistent env < per-exec env < scoped env
    assert seen["env"] == [0, "image task exec exec\n", None]
    assert seen["scoped_env"] == [0, "scoped\n", None]
    assert seen["bash"] == [0, "bash\n", None]
    assert seen["exit"] == [3, "out\n", "err\n"]
    assert seen["compose_env"] == [0, "compose image\n", None]  # a compose file's `main` service environment


def test_limits_timeouts_and_cancellation(seen):
    assert seen["memory"][1] == "rc=137\n"  # memory_mb=256: the 400 MB reader is killed
    assert seen["timeout"]["type"] == "RuntimeError" and "timed out after 1 seconds" in seen["timeout"]["message"]
    assert seen["timeout"]["seconds"] < 10
    assert seen["timeout_left"] == [0, "0\n", None]  # the timed-out command's process is gone
    assert seen["cancel_left"] == [0, "0\n", None]  # so is one whose awaiting task Harbor cancelled


def test_files_go_in_and_out_through_the_host_side_file_api(seen):
    assert seen["uploaded"] == [0, "from hostoneoneoneroot\n", None]
    assert seen["downloaded"] == ["from host", "one", "one"]  # the stale host file was overwritten
    assert seen["download_missing"]["type"] == "FileNotFoundError"
    assert seen["streamed"] == [["stdout", "a\n"], ["stderr", "b\n"]]  # Harbor's live output callback
    assert seen["streamed_result"] == [0, "a\n", "b\n"]


def test_stop_closes_the_sandbox(seen):
    assert seen["left_after_stop"] == []
    assert seen["exec_after_stop"]["type"] == "RuntimeError" and "not running" in seen["exec_after_stop"]["message"]


def test_network_policies_and_images(seen):
    assert len(seen["public_interfaces"][1].split()) > 1  # public: the host's interfaces, not only lo
    assert seen["prebuilt_user"][1].startswith("root\n12.")  # [environment].docker_image taken from the store
    assert "allowlist" in seen["allowlist"]["message"] and seen["allowlist"]["type"] == "ValueError"
    assert seen["missing_image"]["type"] == "SandboxBuildFailedError"
    assert "nosuch/image:1" in seen["missing_image"]["message"]
    assert seen["main_volumes"]["type"] == "ValueError" and "volumes" in seen["main_volumes"]["message"]


def test_options_are_checked(seen):
    assert "Unknown option 'nope'" in seen["unknown_option"]["message"]
    assert "security" in seen["bad_security"]["message"]
    assert seen["unshare_default"][0] != 0  # the seccomp filter refuses new user namespaces
    assert seen["unshare_relaxed"] == [0, "nested\n", None]


def test_host_mounts_are_binds(seen):
    assert seen["mounted_write"] == [0, "read-only", None]
    assert seen["host_sees"] == ["in\n", "1\n"]  # auto_mounting: /logs/verifier is the trial's verifier dir
    assert seen["is_path_mounted"] is True
    assert seen["mounted_upload"] == ["host", [0, "host", None]]
    assert seen["mounted_download"] == "in\n"
    assert seen["ro_upload"]["type"] == "PermissionError"
    assert seen["ro_write"][0] != 0 and "Read-only" in seen["ro_write"][2]
    assert "'volume'" in seen["volume_mount"]["message"]


def test_importing_without_harbor_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "harbor", None)  # as on Python 3.11, where Harbor cannot be installed
    monkeypatch.delitem(sys.modules, "envyard.integrations.harbor", raising=False)
    with pytest.raises(ImportError, match=r"needs Harbor.*pip install harbor"):
        importlib.import_module("envyard.integrations.harbor")
