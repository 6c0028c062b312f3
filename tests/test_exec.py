"""exec and shell sessions against real sandboxes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import envyard
from conftest import sandbox_processes


def test_exec_string_and_argv(sb):
    r = sb.exec("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert not r.timed_out and not r.truncated and r.duration > 0
    r = sb.exec(["printf", "%s|", "a b", "$HOME", "'q'"])
    assert r.stdout == "a b|$HOME|'q'|"


def test_argv_is_never_shell_interpreted_but_a_string_is(sb):
    sb.exec("mkdir -p /tmp/globs && touch /tmp/globs/a1 /tmp/globs/a2")
    # Globs, separators, redirections, substitutions and quotes in a list reach the program as they are.
    odd = ["/tmp/globs/a*", "x; echo injected", "y && echo z", "> /tmp/globs/out", "$(id -u)", "`id`", 'say "hi"',
           "tab\there", "new\nline", "", "-n"]
    r = sb.exec(["printf", "[%s]", *odd])
    assert r.exit_code == 0 and r.stdout == "".join(f"[{a}]" for a in odd)
    assert sb.exec("ls /tmp/globs").stdout == "a1\na2\n"  # nothing was redirected into /tmp/globs/out
    # The same characters in a string are the shell's.
    assert sb.exec("printf '[%s]' /tmp/globs/a*; echo; echo $((1+2)) && echo x > /tmp/globs/out; cat /tmp/globs/out"
                   ).stdout == "[/tmp/globs/a1][/tmp/globs/a2]\n3\nx\n"


def test_each_exec_leads_a_session_of_its_own(yard, host):
    """A command's session is what lets a timeout find its double-forked descendants. The runner gets it from
    envyard's static setsid, so this holds in an image without util-linux's (hidden here)."""
    # Fields 4 and 6 of /proc/PID/stat are the parent pid and the session id.
    probe = ["sh", "-c", "set -- $(cut -d')' -f2 /proc/$$/stat); echo $2 $4"]
    for hide in (False, True):
        with yard.sandbox(host, ro_binds={"/dev/null": "/usr/bin/setsid"} if hide else None) as s:
            assert (s.exec("command -v setsid").exit_code != 0) == hide
            seen = set()
            for _ in range(3):
                parent, session = s.exec(probe).stdout.split()
                assert parent == session  # the runner that started the command leads the command's session
                seen.add(session)
            assert len(seen) == 3  # one session per command, none shared with the holder or each other
            r = s.exec("sleep 100 & sh -c 'sleep 101 &'; sleep 102", timeout=0.3)
            assert r.timed_out
            time.sleep(0.1)
            assert "sleep 10" not in s.exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '").stdout


def test_missing_command_is_127_not_an_exception(sb):
    assert sb.exec("definitely-not-a-command").exit_code == 127
    assert sb.exec(["definitely-not-a-command", "x"]).exit_code == 127


def test_non_utf8_bytes_survive(sb):
    r = sb.exec(r"printf '\377\376ok\200'")
    assert r.stdout_bytes == b"\xff\xfeok\x80"
    assert "ok" in r.stdout  # the str view decodes with replacement


def test_stdin_cwd_env(sb):
    assert sb.exec("cat", stdin=b"from stdin").stdout == "from stdin"
    assert sb.exec("pwd", cwd="/usr/bin").stdout == "/usr/bin\n"
    assert sb.exec("echo $FOO-$HOME", env={"FOO": "bar"}).stdout == "bar-/root\n"
    assert sb.exec("pwd", cwd="/no/such/dir").exit_code == 126
    with pytest.raises(envyard.BadInput):
        sb.exec("true", env={"BAD NAME": "x"})


def test_image_env_and_sandbox_env(yard, host):
    with yard.sandbox(host, env={"MODE": "test"}, workdir="/etc") as s:
        assert s.exec("echo $MODE; pwd").stdout == "test\n/etc\n"


def test_timeout_kills_the_whole_tree(sb):
    start = time.monotonic()
    # A grandchild in the background, one that starts its own process group, and a foreground sleeper.
    r = sb.exec("sleep 1000 & (set -m; sleep 1001 &) ; sh -c 'sleep 1002' ; echo never", timeout=0.5)
    assert r.timed_out and r.exit_code != 0
    assert time.monotonic() - start < 5
    time.sleep(0.1)
    left = sb.exec("ps -eo args 2>/dev/null || cat /proc/[0-9]*/cmdline").stdout
    assert "sleep 100" not in left
    assert sb.exec("echo still usable").stdout == "still usable\n"


def test_output_is_capped_head_and_tail_kept(sb):
    r = sb.exec("i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done", max_output=1000)
    assert r.truncated
    assert r.stdout.startswith("line0\n") and r.stdout.rstrip().endswith("line1999")
    assert "bytes omitted" in r.stdout
    full = Path(r.stdout_file).read_text()
    assert full.count("\n") == 2000 and full.startswith("line0\n")


def test_large_output_does_not_hang(sb):
    r = sb.exec("head -c 20000000 /dev/zero")
    assert r.exit_code == 0 and r.truncated
    assert Path(r.stdout_file).stat().st_size == 20_000_000
    assert len(r.stdout_bytes) < 1_100_000


def test_concurrent_execs_in_one_sandbox(sb):
    results = {}

    def run(i):
        results[i] = sb.exec(f"sleep 0.2; echo {i}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[i].stdout == f"{i}\n" for i in range(8))
    assert time.monotonic() - start < 1.5  # they ran side by side


def test_shell_keeps_state_and_output_is_exact(sb):
    sh = sb.shell()
    assert sh.run("cd /usr/lib && export A=1 && f() { echo fn$1; }").exit_code == 0
    r = sh.run("pwd; echo $A; f 2")
    assert r.stdout == "/usr/lib\n1\nfn2\n"  # nothing but the command's own output
    assert sh.run("false").exit_code == 1
    assert sh.run("echo err >&2; (exit 4)").stderr == "err\n"
    r = sh.run("cat <<'EOF'\nmulti\nline\nEOF")
    assert r.stdout == "multi\nline\n"


def test_shell_timeout_kills_command_but_keeps_shell(sb):
    sh = sb.shell()
    sh.run("cd /tmp; X=kept")
    r = sh.run("sleep 1000 & sleep 1000", timeout=0.5)
    assert r.timed_out
    assert sh.run("pwd; echo $X").stdout == "/tmp\nkept\n"


def test_shell_stuck_builtin_is_restarted(sb):
    sh = sb.shell()
    r = sh.run("while :; do :; done", timeout=0.3)
    assert r.timed_out and "restarted" in r.stderr
    assert sh.run("echo alive").stdout == "alive\n"


def test_shell_interrupt_from_another_thread(sb):
    sh = sb.shell()
    threading.Timer(0.3, sh.interrupt).start()
    start = time.monotonic()
    r = sh.run("sleep 30")
    assert time.monotonic() - start < 5
    assert r.exit_code == 130  # killed by SIGINT
    assert sh.run("echo ok").stdout == "ok\n"


def test_shell_exit_ends_session(sb):
    sh = sb.shell()
    sh.run("exit 5")
    with pytest.raises(envyard.SandboxClosed):
        sh.run("true")
    assert sb.shell().run("echo new").stdout == "new\n"


def test_closed_sandbox_refuses_and_close_is_idempotent(yard, host):
    s = yard.sandbox(host)
    pids = sandbox_processes(s)
    assert pids
    s.close()
    s.close()
    assert not s.alive
    with pytest.raises(envyard.SandboxClosed):
        s.exec("true")
    yard.wait_closed()
    assert sandbox_processes(s) == []
    assert yard.store.sandbox(s.id) is None


def test_bad_exec_arguments(sb):
    with pytest.raises(envyard.BadInput):
        sb.exec([])
    with pytest.raises(envyard.BadInput):
        sb.exec("true", timeout=0)
    with pytest.raises(envyard.BadInput):
        sb.exec(42)


def test_close_from_another_thread_ends_a_running_command(yard, host):
    s = yard.sandbox(host)
    sh = s.shell()
    threading.Timer(0.3, s.close).start()
    with pytest.raises(envyard.SandboxError):
        sh.run("sleep 30")
    s2 = yard.sandbox(host)
    threading.Timer(0.3, s2.close).start()
    with pytest.raises(envyard.SandboxError):
        s2.exec("sleep 30")


def test_output_streams_to_a_callback_as_it_arrives(sb):
    got = []
    r = sb.exec("echo a; sleep 0.2; echo b >&2; sleep 0.2; echo c",
                on_output=lambda stream, chunk: got.append((stream, chunk, time.monotonic())))
    assert [(s, c) for s, c, _ in got] == [("stdout", b"a\n"), ("stderr", b"b\n"), ("stdout", b"c\n")]
    assert got[-1][2] - got[0][2] > 0.3  # delivered while the command ran, not at the end
    assert r.stdout == "a\nc\n"
    sh_got = []
    sb.shell().run("echo x; echo y >&2", on_output=lambda s, c: sh_got.append((s, c)))
    assert sorted(sh_got) == [("stderr", b"y\n"), ("stdout", b"x\n")]


def test_terminal_programs_get_a_pty_inside(sb):
    """Agents that drive a terminal (tmux send-keys / capture-pane, as Harbor's Terminus does) get real ptys."""
    if sb.exec("command -v tmux").exit_code != 0:
        pytest.skip("no tmux in the host image")
    r = sb.exec("tmux new-session -d -s t -x 80 -y 20 bash && tmux send-keys -t t 'tty; echo ok-$((40+2))' Enter"
                " && sleep 0.5 && tmux capture-pane -p -t t; tmux kill-server")
    assert "/dev/pts/" in r.stdout and "ok-42" in r.stdout, r.stdout + r.stderr
