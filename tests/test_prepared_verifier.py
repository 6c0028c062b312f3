"""The verifier prepared ahead (envs/prepared.py, runtime/applylayer.py): same files as a fresh verifier, one
episode each, and a fresh verifier when the prepared one is gone."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from envyard.envs import SUBMIT, TerminalEnv

# Lists every entry under /w: type, mode, owner, size, link target, content hash, hard links.
LISTING = ("cd /w && find . -printf '%y %m %U:%G %p %l\\n' | sort && find . -type f -printf '%n %s %p\\n' | sort && "
           "find . -type f -exec sha256sum {} + | sort && "
           "python3 -c 'import os; print(os.getxattr(\"new.txt\", \"user.note\"))'")

CHANGES = " && ".join([
    "echo new > /w/new.txt", "echo changed >> /w/keep/a.txt", "rm /w/keep/b.txt",     # add, change, delete
    "rm -rf /w/gone",                                                                  # a whole directory
    "rm -rf /w/redo && mkdir /w/redo && echo only > /w/redo/only.txt",                 # opaque directory
    "mkdir -p /w/deep/er && echo x > /w/deep/er/x", "chmod 750 /w/deep", "chown -R 1234:5678 /w/deep",
    "ln -s ../new.txt /w/keep/link", "ln -s /etc/passwd /w/abs", "ln /w/new.txt /w/hard",
    "mkfifo /w/fifo", "rm /w/file-then-dir && mkdir /w/file-then-dir",
    "rm -rf /w/dir-then-file && echo f > /w/dir-then-file",
    "chmod 4755 /w/keep/a.txt", "python3 -c 'import os; os.setxattr(\"/w/new.txt\", \"user.note\", b\"hi\")'",
])


def test_applying_a_layer_gives_the_files_of_a_sandbox_started_over_it(yard):
    with yard.sandbox("host") as base:
        assert base.exec("mkdir -p /w/keep /w/gone/sub /w/redo /w/dir-then-file && echo a > /w/keep/a.txt && "
                         "echo b > /w/keep/b.txt && echo g > /w/gone/sub/g && echo r > /w/redo/r && "
                         "touch /w/file-then-dir /w/dir-then-file/x").exit_code == 0
        image = base.snapshot()
    agent = yard.sandbox(image)
    try:
        r = agent.exec(CHANGES)
        assert r.exit_code == 0, r.stderr
        agent.stop()
        layer = yard.store.new_layer_dir()
        os.rmdir(layer)
        assert os.system(f"cp -a {agent.upper_dir()} {layer}") == 0
    finally:
        agent.close()
    sealed = yard.store.seal_layer(layer, {})
    try:
        over = image.__class__(name=image.name, layers=[*image.layers, sealed.id], config=image.config,
                               created=image.created)
        with yard.sandbox(over) as fresh, yard.sandbox(image) as applied:
            applied.apply_layer(yard.store.layer_paths([sealed.id])[0])
            want, got = fresh.exec(LISTING), applied.exec(LISTING)
            assert want.exit_code == got.exit_code == 0, (want.stderr, got.stderr)
            assert got.stdout == want.stdout
            assert "p 644 0:0 ./fifo" in got.stdout and "./redo/r" not in got.stdout
            assert applied.exec("cat /w/keep/link").stdout == "new\n"
    finally:
        yard.store.remove_layer(sealed.id)
        yard.remove_image(image.name)


LEFTOVER_VERIFIER = """#!/bin/bash
mkdir -p /logs/verifier
# A verifier that leaves traces everywhere it can; any trace of an earlier verification fails this one.
for f in /tmp/verifier-was-here /app/verifier-was-here /logs/verifier/was-here /tests/was-here; do
  [ -e "$f" ] && { echo "leftover $f"; echo 0 > /logs/verifier/reward.txt; exit 0; }
  echo "$HOSTNAME" > "$f"
done
if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""


def _task(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "task.toml").write_text('name = "prepared"\n[verifier]\ntimeout_sec = 30\n')
    (root / "instruction.md").write_text("Write 42 to /app/answer.txt.\n")
    (root / "tests").mkdir()
    (root / "tests" / "test.sh").write_text(LEFTOVER_VERIFIER)
    return root


def _verifier_lease(yard, env: TerminalEnv, timeout: float = 60.0):
    """The lease of the env's prepared verifier: the other running sandbox over the task's image."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for rec in yard.sandboxes():
            if (rec.owner_pid == os.getpid() and rec.image == env.image.name and rec.id != env.sandbox.id
                    and rec.init_pid):
                return rec
        time.sleep(0.05)
    raise AssertionError("no prepared verifier was started")


def test_a_prepared_verifier_serves_one_episode_and_leftovers_never_reach_the_next(yard, tmp_path):
    env = TerminalEnv(_task(tmp_path / "t"), yard=yard)
    try:
        used = set()
        for _ in range(3):
            env.reset()
            used.add(_verifier_lease(yard, env).id)
            env.step("echo 42 > /app/answer.txt")
            _, reward, term, _, info = env.step(SUBMIT)
            assert (reward, term, info["infra_error"]) == (1.0, True, None), info["verifier_output"]
        assert len(used) == 3  # a new verifier each episode
    finally:
        env.close()


def test_a_crashed_prepared_verifier_falls_back_to_a_fresh_one(yard, tmp_path):
    env = TerminalEnv(_task(tmp_path / "t"), yard=yard)
    try:
        env.reset()
        prepared = _verifier_lease(yard, env)
        os.kill(prepared.init_pid, signal.SIGKILL)
        env.step("echo 42 > /app/answer.txt")
        _, reward, term, _, info = env.step(SUBMIT)
        assert (reward, term, info["infra_error"]) == (1.0, True, None), info
        # and an episode whose agent never submits leaves no verifier behind
        env.reset()
        _verifier_lease(yard, env)
        env.close()
        yard.wait_closed()
        assert not [r for r in yard.sandboxes() if r.owner_pid == os.getpid() and r.image == env.image.name]
    finally:
        env.close()
