"""Setup sandboxes get the package indexes' addresses resolved once on the host (setup/hosts.py): a resolver that
loses queries must not stall every install for 5 s, and nothing of it may end up in the image."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from envyard.setup import hosts
from envyard.setup.search import setup_env, setup_sandbox


def test_a_lost_query_is_asked_again_instead_of_waiting_for_its_timeout(monkeypatch):
    calls = []

    def lossy(name, port, *args, **kwargs):
        calls.append(time.monotonic())
        if len(calls) == 1:  # the first query is lost: glibc would wait its 5 s timeout
            time.sleep(4)
            raise socket.gaierror("timed out")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.0.2.7", port)),
                (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("2001:db8::7", port, 0, 0)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.0.2.7", port))]

    monkeypatch.setattr(hosts.socket, "getaddrinfo", lossy)
    t = time.monotonic()
    assert hosts.lookup("pypi.example") == ["192.0.2.7", "2001:db8::7"]  # deduplicated, one list per family
    assert time.monotonic() - t < 2.5
    assert len(calls) == 2


def test_a_name_the_resolver_refuses_is_not_asked_again(monkeypatch):
    asked = []

    def refuses(*_a, **_k):
        asked.append(1)
        raise socket.gaierror("Name or service not known")

    monkeypatch.setattr(hosts.socket, "getaddrinfo", refuses)
    t = time.monotonic()
    assert hosts.lookup("nothing.invalid") == []
    assert time.monotonic() - t < 0.5 and len(asked) == 1  # an answer, not a lost query: no waiting, no re-asking


def test_a_resolver_that_never_answers_is_given_up_on(monkeypatch):
    release = threading.Event()

    def silent(*_a, **_k):
        release.wait(30)
        raise socket.gaierror("timed out")

    monkeypatch.setattr(hosts.socket, "getaddrinfo", silent)
    monkeypatch.setattr(hosts, "GIVE_UP", 1.5)
    monkeypatch.setattr(hosts, "HEDGE_AFTER", 0.2)
    t = time.monotonic()
    try:
        assert hosts.lookup("pypi.example") == []
        assert time.monotonic() - t < 3
    finally:
        release.set()  # the asking threads end now, not during a later test


def test_the_file_keeps_the_hosts_entries_and_is_reused_until_it_ages(tmp_path, monkeypatch):
    asked = []

    def lookup(name):
        asked.append(name)
        return {"a.example": ["192.0.2.1"], "b.example": []}[name]

    monkeypatch.setattr(hosts, "lookup", lookup)
    path = hosts.hosts_file(tmp_path, ("a.example", "b.example"))
    text = path.read_text()
    assert text.startswith(open("/etc/hosts").read().rstrip("\n"))  # the host's own names still resolve
    assert "192.0.2.1\ta.example" in text and "b.example" not in text  # an unresolved name is left to DNS
    assert hosts.hosts_file(tmp_path, ("a.example", "b.example")) == path
    assert sorted(asked) == ["a.example", "b.example"]  # once each, the second call reused the file
    monkeypatch.setattr(hosts, "MAX_AGE", 0.0)
    hosts.hosts_file(tmp_path, ("a.example", "b.example"))
    assert len(asked) == 4  # looked up again: a CDN that moves is followed


def test_no_file_when_nothing_resolves_and_no_second_wait(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(hosts, "lookup", lambda name: asked.append(name) or [])
    assert hosts.hosts_file(tmp_path / "fresh", ("a.example",)) is None
    assert hosts.hosts_file(tmp_path / "fresh", ("a.example",)) is None
    assert asked == ["a.example"]  # offline: the next sandbox does not wait for the lookups again
    assert not (tmp_path / "fresh").exists()


def test_res_options_leave_a_host_setting_alone(monkeypatch):
    monkeypatch.delenv("RES_OPTIONS", raising=False)
    assert setup_env()["RES_OPTIONS"] == hosts.RES_OPTIONS
    monkeypatch.setenv("RES_OPTIONS", "ndots:2")
    assert "RES_OPTIONS" not in setup_env()


def _resolved(yard) -> str:
    path = hosts.hosts_file(yard.store.home / "cache")
    if path is None:
        pytest.skip("no DNS answer for the package indexes on this machine")
    return path.read_text()


def test_a_setup_sandbox_resolves_the_indexes_from_its_hosts_file_and_keeps_none_of_it(yard, host, tmp_path):
    text = _resolved(yard)
    addr = next(line.split("\t")[0] for line in text.splitlines() if line.endswith("\tpypi.org"))
    (tmp_path / "uv").mkdir()
    with setup_sandbox(yard, host, tmp_path / "uv") as sb:
        r = sb.exec("getent hosts pypi.org; echo $RES_OPTIONS", env=setup_env(), timeout=60)
        assert r.exit_code == 0, r.stderr
        assert r.stdout.split()[0] == addr and hosts.RES_OPTIONS in r.stdout
        assert sb.exec("echo x >> /etc/hosts", timeout=30).exit_code != 0  # read-only: no step can rewrite it
        sb.stop()
        assert not (sb.upper_dir() / "etc" / "hosts").exists()


def test_an_image_without_etc_hosts_gets_it_while_setting_up_and_keeps_none(debian_yard, debian, tmp_path):
    """The Debian bases have no /etc/hosts: bwrap makes an empty mount point in the upper dir for the bind,
    which a snapshot must leave out (else every setup image would carry an empty /etc/hosts, and the CA
    bundle's and the uv cache's mount points beside it)."""
    _resolved(debian_yard)
    assert not any((p / "etc" / "hosts").exists() for p in debian_yard.store.layer_paths(debian.layers))
    (tmp_path / "uv").mkdir()
    with setup_sandbox(debian_yard, debian, tmp_path / "uv") as sb:
        assert "pypi.org" in sb.exec("cat /etc/hosts", timeout=30).stdout
        assert sb.exec("mkdir -p /root/.cache/pip && echo kept > /root/.cache/pip/x", timeout=30).exit_code == 0
        snap = sb.snapshot(temporary=True)
    try:
        top = debian_yard.store.layer_paths(snap.layers[-1:])[0]
        for made in ("etc/hosts", "etc/envyard-host-ca.crt", "root/.cache/uv"):
            assert not (top / made).exists(), made
        assert (top / "root/.cache/pip/x").read_text() == "kept\n"  # what the sandbox wrote beside them stays
        with debian_yard.sandbox(snap) as plain:  # the image alone: no /etc/hosts, as before the setup
            assert plain.exec("test -e /etc/hosts || test -e /etc/envyard-host-ca.crt", timeout=30).exit_code == 1
    finally:
        debian_yard.remove_image(snap.name)


def test_concurrent_setups_write_one_whole_file(tmp_path, monkeypatch):
    monkeypatch.setattr(hosts, "lookup", lambda name: ["192.0.2.9"])
    monkeypatch.setattr(hosts, "MAX_AGE", 0.0)
    errors = []

    def many():
        try:
            for _ in range(20):
                assert "192.0.2.9\ta.example" in hosts.hosts_file(tmp_path, ("a.example",)).read_text()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert [p.name for p in tmp_path.iterdir()] == ["setup-hosts"]  # no temporary file left behind


def test_a_sandbox_cannot_point_a_dropped_mount_point_at_the_host(debian_yard, debian, tmp_path):
    """Attack: the sandbox renames the directory holding a mount point (bwrap made /root/.cache, so the overlay
    lets it move) and puts a symlink to a host directory in its place. Leaving the mount points out of the
    snapshot must not follow it: the host's empty `uv` directory stays."""
    target = tmp_path / "host-side"
    (target / "uv").mkdir(parents=True)
    (tmp_path / "cache").mkdir()
    with setup_sandbox(debian_yard, debian, tmp_path / "cache") as sb:
        r = sb.exec(f"mv /root/.cache /root/.moved && ln -s {target} /root/.cache && ls -ld /root/.cache",
                    timeout=30)
        assert r.exit_code == 0, r.stderr
        snap = sb.snapshot(temporary=True)
    try:
        assert (target / "uv").is_dir()
    finally:
        debian_yard.remove_image(snap.name)
