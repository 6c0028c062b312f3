"""Attacks on the owner's secrets and on what the `host` image shows of the machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path


import envyard


def test_owner_environment_never_reaches_the_sandbox(yard, host, secret_env):
    """bwrap is the sandbox's pid-1: its /proc/1/environ used to be the owner's whole environment."""
    with yard.sandbox(host) as sb:
        r = sb.exec("cat /proc/1/environ; for p in /proc/[0-9]*; do cat $p/environ; done 2>/dev/null; env")
    assert r.exit_code == 0 and "PATH=" in r.stdout
    assert secret_env not in r.stdout and "ENVYARD_ATTACK_TEST_SECRET" not in r.stdout


def test_owner_environment_never_reaches_an_attached_run(yard, secret_env):
    r = subprocess.run([sys.executable, "-m", "envyard.cli.main", "run", "host", "--", "sh", "-c",
                        "cat /proc/1/environ; env"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "ENVYARD_HOME": str(yard.store.home)})
    assert r.returncode == 0 and "PATH=" in r.stdout
    assert secret_env not in r.stdout


def test_explicit_env_still_arrives(yard, host):
    with yard.sandbox(host, env={"API_KEY": "given"}) as sb:
        assert sb.exec("echo $API_KEY").stdout == "given\n"


def test_no_descriptor_of_the_owner_reaches_commands(sb):
    """stdin, stdout, stderr and ls's own handle; at most one more, which bwrap leaves open when the owner's
    descriptor number is above 9 (a POSIX shell cannot close it): the sandbox's own user namespace."""
    own_userns = sb.exec("readlink /proc/self/ns/user").stdout.strip()
    listing = sb.exec(["ls", "-l", "/proc/self/fd"]).stdout.splitlines()[1:]
    fds = {line.split()[-3]: line.split()[-1] for line in listing}
    extra = [target for fd, target in fds.items() if fd not in ("0", "1", "2", "3")]
    assert extra in ([], [own_userns]), listing


# ---- the host image --------------------------------------------------------------------------------------------


def test_home_directories_and_root_are_empty(sb):
    assert any(Path("/root").iterdir()), "the test needs a /root with files on the host"
    r = sb.exec("ls -A /root /home; stat -c %a /root")
    assert r.stdout == "/home:\n\n/root:\n700\n", r.stdout


def test_password_hashes_are_scrubbed(sb):
    from envyard.bases import hostmask

    inside = sb.exec("cat /etc/shadow").stdout
    assert inside == hostmask._scrub_user_database(Path("/etc/shadow").read_text())
    assert sb.exec("getent passwd root nobody | cut -d: -f1").stdout.split() == ["root", "nobody"]


def test_scrubbing_keeps_entries_and_locks():
    from envyard.bases import hostmask

    text = "root:$6$salt$hash:19000:0:99999:7:::\nbob:!$6$x$y:1::::::\nsvc:*:1::::::\nnopw::1::::::\n"
    assert hostmask._scrub_user_database(text) == "root:*:19000:0:99999:7:::\nbob:!*:1::::::\nsvc:*:1::::::\nnopw::1::::::\n"


def test_another_store_on_the_machine_is_hidden(yard, host):
    """A store outside the masked directories: its database and files must not be readable."""
    home = Path(f"/var/lib/envyard-attack-{uuid.uuid4().hex[:8]}")
    other = envyard.Yard(home)
    try:
        (home / "secret-marker").write_text("other store\n")
        with yard.sandbox("host") as sb:
            assert sb.exec(f"ls -A {home}").stdout == "", "the other store is visible"
            assert sb.exec(f"cat {home}/store.db {home}/secret-marker").exit_code != 0
            assert sb.exec(f"ls -A {yard.store.home}").stdout == ""  # and its own store, as before
    finally:
        other.close()
        shutil.rmtree(home, ignore_errors=True)


def test_a_hidden_path_is_shown_when_bound_explicitly(yard, host):
    secret = Path(f"/root/envyard-attack-{uuid.uuid4().hex[:8]}.txt")
    secret.write_text("opt-in\n")
    try:
        with yard.sandbox(host) as sb:
            assert sb.exec(f"cat {secret}").exit_code != 0
        with yard.sandbox(host, ro_binds={str(secret): str(secret)}) as sb:
            assert sb.exec(f"cat {secret}").stdout == "opt-in\n"
    finally:
        secret.unlink()


def test_mask_directory_hides_keys_and_engines(tmp_path):
    """The mask that would be built on a machine with SSH host keys and a Docker engine."""
    from envyard.bases import hostmask

    spec = {"hidden": ["var/lib/docker", "root"], "scrubbed": {"etc/shadow": "root:*:1::::::\n"},
            "removed": ["etc/ssh/ssh_host_ed25519_key"]}
    hostmask.build_mask(tmp_path / "mask", spec)
    key = os.lstat(tmp_path / "mask/etc/ssh/ssh_host_ed25519_key")
    assert key.st_rdev == 0 and (key.st_mode & 0o170000) == 0o020000  # an overlay whiteout
    assert os.getxattr(tmp_path / "mask/var/lib/docker", "user.overlay.opaque") == b"y"
    assert (tmp_path / "mask/etc/shadow").read_text() == "root:*:1::::::\n"


def test_mask_spec_lists_ssh_keys_and_engines_that_exist(monkeypatch, tmp_path):
    from envyard.bases import hostmask

    keys = tmp_path / "etc" / "ssh"
    keys.mkdir(parents=True)
    (keys / "ssh_host_rsa_key").write_text("private")
    (keys / "ssh_host_rsa_key.pub").write_text("public")
    monkeypatch.setattr(hostmask, "REMOVED_GLOBS", (str(keys / "ssh_host_*_key").lstrip("/"),))
    spec = hostmask.mask_spec(tmp_path / "store")
    assert spec["removed"] == [str(keys / "ssh_host_rsa_key").lstrip("/")]
    assert "root" in spec["hidden"] and "tmp" in spec["hidden"]


def test_gc_drops_masks_of_an_earlier_machine_state(tmp_path):
    yard = envyard.Yard(tmp_path / "home")
    try:
        with yard.sandbox("host") as sb:
            sb.exec("true")
        masks = yard.store.home / "host" / "masks"
        old = masks / "0123456789abcdef"
        old.mkdir()
        os.utime(old, (1, 1))  # made long ago
        current = sorted(p.name for p in masks.iterdir() if p != old)
        report = yard.gc()
        assert report["old_host_masks"] == [old.name]
        assert sorted(p.name for p in masks.iterdir()) == current
    finally:
        yard.close()
        yard.gc()


def test_a_new_process_reuses_the_mask_only_while_the_machine_is_unchanged(tmp_path, monkeypatch):
    """Each CLI start used to rebuild the mask's spec (read the user database, glob for keys); the choice is now
    recorded with the machine-state key it was made for. A record for another state, or one that points outside
    the store's masks, must never stand in for the mask of the machine as it is."""
    from envyard.bases import host, hostmask

    yard = envyard.Yard(tmp_path / "home")
    try:
        first = host.refresh_host_mask(yard.store)
        record = yard.store.home / "host" / host.CURRENT_MASK
        calls = []
        real_spec = hostmask.mask_spec
        monkeypatch.setattr(hostmask, "mask_spec", lambda home: calls.append(home) or real_spec(home))

        host._mask_seen.clear()  # as in a new process
        assert host.refresh_host_mask(yard.store) == first and calls == []  # unchanged machine: the record holds

        host._mask_seen.clear()
        key = host._mask_state_key()
        monkeypatch.setattr(host, "_mask_state_key", lambda: (*key[:-1], (key[-1] or 0) + 1))  # e.g. a new dir in /
        assert host.refresh_host_mask(yard.store) == first and len(calls) == 1  # recomputed, not trusted

        host._mask_seen.clear()
        outside = tmp_path / "outside"
        outside.mkdir()
        record.write_text(json.dumps({"key": list(host._mask_state_key()), "mask": "../../../outside"}))
        assert host.refresh_host_mask(yard.store) == first and len(calls) == 2
    finally:
        host._mask_seen.clear()
        yard.close()
        yard.gc()
