"""The static setsid the runners start through (runtime/setsid.py), run on the host."""

from __future__ import annotations

import os
import subprocess

import pytest

from envyard.runtime import setsid

pytestmark = pytest.mark.skipif(setsid.program() is None, reason="no static setsid for this CPU")


@pytest.fixture
def helper(tmp_path):
    assert setsid.install(str(tmp_path))
    path = tmp_path / "setsid"
    assert os.stat(path).st_mode & 0o777 == 0o755
    return str(path)


def test_starts_a_session_and_execs_with_args_and_env(helper):
    # After the command name in /proc/PID/stat: state, parent, process group, session.
    out = subprocess.run([helper, "/bin/sh", "-c", 'set -- $(cut -d")" -f2 /proc/$$/stat); echo $$ $3 $4 "$V" "$0"',
                          "a b"], env={"V": "v 1"}, capture_output=True, text=True)
    pid, group, session, rest = out.stdout.split(" ", 3)
    assert out.returncode == 0 and pid == group == session and rest == "v 1 a b\n"
    assert int(session) != os.getsid(0)


def test_passes_the_exit_status_through(helper):
    assert subprocess.run([helper, "/bin/sh", "-c", "exit 7"]).returncode == 7


def test_a_missing_program_is_127(helper):
    assert subprocess.run([helper, "/no/such/program"]).returncode == 127
    assert subprocess.run([helper]).returncode == 127  # nothing to run


def test_refuses_to_run_outside_a_new_session(helper):
    # A process-group leader cannot start a session: the helper exits 126 instead of running the command.
    r = subprocess.run(["setsid", "/bin/sh", "-c", f'exec {helper} /bin/sh -c "echo ran"'], capture_output=True,
                       text=True)
    assert (r.returncode, r.stdout) == (126, "")


def test_install_refuses_to_overwrite(tmp_path, helper):
    with pytest.raises(FileExistsError):
        setsid.install(str(tmp_path))


def test_not_installed_on_a_noexec_filesystem(tmp_path):
    d = tmp_path / "noexec"
    d.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "noexec,size=64k", "tmpfs", str(d)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        assert not setsid.install(str(d))
        assert not (d / "setsid").exists()
    finally:
        subprocess.run(["umount", str(d)], check=True)
