"""Commands and sessions as another user, and an image's USER honoured for agents and verifiers."""

from __future__ import annotations


import pytest

import envyard
from envyard.envs import TerminalEnv
from envyard.envs.task import Task


def test_exec_as_a_user_by_name_or_uid(sb):
    r = sb.exec("id -u; id -g; echo $HOME $USER $LOGNAME; touch /tmp/mine; stat -c %u /tmp/mine", user="nobody")
    assert r.stdout.split() == ["65534", "65534", "/nonexistent", "nobody", "nobody", "65534"], r.stderr
    assert sb.exec(["id", "-un"], user=65534).stdout == "nobody\n"
    assert sb.exec("id -u").stdout == "0\n"  # root stays the default, for the harness
    assert sb.exec("cat /etc/shadow >/dev/null", user="nobody").exit_code != 0  # really unprivileged


def test_user_and_group_as_docker_resolves_them(sb):
    sb.exec("groupadd -f -g 4321 staff2")
    assert sb.exec("id -u; id -g", user="nobody:staff2").stdout.split() == ["65534", "4321"]
    assert sb.exec("id -u; id -g; id -G", user="4242").stdout.split() == ["4242", "0", "0"]  # no passwd entry: gid 0
    assert sb.exec("id -g", user="4242:7").stdout == "7\n"
    assert "no group 'nogroupx'" in sb.exec("true", user="nobody:nogroupx").stderr


def test_supplementary_groups_come_with_the_user(sb):
    sb.exec("groupadd -f crew && useradd -m -G crew sailor")
    assert "crew" in sb.exec("id -Gn", user="sailor").stdout.split()
    assert sb.exec("echo $HOME", user="sailor").stdout == "/home/sailor\n"


def test_a_session_as_a_user_keeps_its_state(sb):
    sh = sb.shell(user="nobody")
    try:
        assert sh.run("id -u; cd /tmp && export X=1").stdout == "65534\n"
        assert sh.run("echo $X $PWD").stdout == "1 /tmp\n"
    finally:
        sh.close()


def test_unknown_users_and_bad_values(sb):
    r = sb.exec("true", user="no-such-user")
    assert r.exit_code == 126 and "no user 'no-such-user'" in r.stderr
    for bad in ("a b", "../x", "", True, -1, 1.5, "x" * 40, "a:b:c", ":g"):
        with pytest.raises(envyard.BadInput, match="user"):
            sb.exec("true", user=bad)
    with pytest.raises(envyard.BadInput):
        sb.shell(user="$(id)")


def test_the_image_user_runs_the_agent_and_the_verifier(yard, host, tmp_path):
    """A task whose image says USER nobody: the agent's commands and the tests run as nobody."""
    with yard.sandbox(host) as sb:
        sb.exec("mkdir -p /app && chown 65534:65534 /app")
        snap = sb.snapshot()
    image = yard.store.put_image("test/as-nobody:latest", snap.layers,
                                 snap.config.replace(user="nobody", workdir="/app"))
    root = tmp_path / "task"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test.sh").write_text(
        "#!/bin/bash\n[ \"$(id -u)\" = 65534 ] && [ \"$(stat -c %u /app/answer.txt)\" = 65534 ] "
        "&& echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n")
    task = Task(root=root, name="as-nobody", description="", instruction="Write 42 to /app/answer.txt.",
                metadata={}, image=image.name, workdir=None, format="harbor", docker_image=image.name)
    env = TerminalEnv(task, yard=yard)
    try:
        env.reset()
        obs, *_ = env.step("id -un; echo 42 > answer.txt")
        assert obs.startswith("nobody\n")
        obs, reward, terminated, truncated, info = env.step("submit")
        assert (reward, info["infra_error"]) == (1.0, None), info
    finally:
        env.close()
        yard.remove_image(image.name)
        yard.remove_image(snap.name)
