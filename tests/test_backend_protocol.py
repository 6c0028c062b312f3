"""The backend boundary (runtime/backend.py): Yard, Sandbox and the layers above (envs/, serve/) use a backend
and its sandboxes only through the Backend / SandboxHandle protocols. A backend wrapped so that anything
outside the protocol is an AttributeError still runs episodes; capabilities a backend lacks are typed errors."""

from __future__ import annotations

from pathlib import Path

import pytest

import envyard
from envyard import BackendUnsupported
from envyard.envs import NoopPolicy, OraclePolicy, TerminalEnv, load_task, run_episode
from envyard.runtime.backend import Backend, SandboxHandle, Shell
from envyard.runtime.local import LocalBackend

HELLO = Path(__file__).resolve().parents[1] / "examples" / "tasks" / "hello-file"

HANDLE_API = {"id", "spec", "alive", "workdir", "exec", "shell", "write_file", "read_file", "upload", "download",
              "snapshot_layer", "snapshot_sealed", "stop", "upper_dir", "reset", "close"}
BACKEND_API = {"name", "capabilities", "create", "check", "run_attached", "can_limit_disk", "reap", "close"}


class ProtocolOnly:
    """Forwards the protocol's attributes to `target` and nothing else; records what was used."""

    def __init__(self, target, allowed: set[str], used: set[str], wrap_create=False):
        object.__setattr__(self, "_t", target)
        object.__setattr__(self, "_allowed", allowed)
        object.__setattr__(self, "_used", used)
        object.__setattr__(self, "_wrap", wrap_create)

    def __getattr__(self, name):
        if name not in self._allowed:
            raise AttributeError(f"{name!r} is not part of the backend protocol")
        self._used.add(name)
        value = getattr(self._t, name)
        if self._wrap and name == "create":
            return lambda spec: ProtocolOnly(value(spec), HANDLE_API, self._used)
        return value


class Restricted:
    """A local backend with fewer capabilities, as a backend that lacks them would declare."""

    def __init__(self, inner: LocalBackend, **caps):
        self.inner = inner
        self.name = "restricted"
        self.capabilities = inner.capabilities.replace(**caps)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def create(self, spec):
        from envyard.runtime.backend import check_spec

        check_spec(self, spec)
        return self.inner.create(spec)


@pytest.fixture(scope="module")
def wrapped(yard):
    used: set[str] = set()
    y = envyard.Yard(yard.store.home, backend=ProtocolOnly(LocalBackend(yard.store), BACKEND_API, used,
                                                         wrap_create=True))
    yield y, used
    y.close()


def test_local_backend_and_sandbox_satisfy_the_protocols(yard, sb):
    assert isinstance(yard.backend, Backend)
    assert isinstance(sb._h, SandboxHandle)
    assert isinstance(sb.shell(), Shell)


def test_yard_rejects_an_unknown_backend(tmp_path):
    with pytest.raises(envyard.BadInput, match="unknown backend"):
        envyard.Yard(tmp_path, backend="kubernetes")


def test_sandbox_api_uses_only_the_protocol(wrapped, tmp_path):
    y, used = wrapped
    with y.sandbox("host") as sb:
        assert sb.exec("echo hi").stdout == "hi\n"
        sb.write_file("/tmp/f", "x")
        assert sb.read_file("/tmp/f") == b"x"
        (tmp_path / "up").write_text("up")
        sb.upload(tmp_path / "up", "/tmp/up")
        sb.download("/tmp/up", tmp_path / "down")
        assert sb.shell().run("echo $((1+1))").stdout == "2\n"
        snap = sb.snapshot()
        sb.reset()
        assert sb.exec("cat /tmp/f").exit_code != 0
    with y.sandbox(snap) as child:
        assert child.read_file("/tmp/f") == b"x"
    y.remove_image(snap.name)
    assert {"exec", "write_file", "read_file", "upload", "download", "shell", "snapshot_layer", "reset"} <= used


def test_episodes_run_against_the_protocol_only(wrapped):
    y, used = wrapped
    task = load_task(HELLO)
    assert run_episode(y, task, OraclePolicy()).reward == 1.0
    assert run_episode(y, task, NoopPolicy()).reward == 0.0
    env = TerminalEnv(task, yard=y)
    env.reset()
    obs, *_ = env.step("pwd")
    env.close()
    assert {"stop", "upper_dir"} <= used


def test_missing_capabilities_are_typed_errors(yard, host):
    y = envyard.Yard(yard.store.home, backend=Restricted(LocalBackend(yard.store), snapshot=False, reset=False,
                                                        shell_sessions=False, network_policies=("none",),
                                                        limits=("memory",), fork=False))
    try:
        with pytest.raises(BackendUnsupported, match="restricted backend does not support network 'host'"):
            y.sandbox(host, network="host")
        with pytest.raises(BackendUnsupported, match="a pids limit") as e:
            y.sandbox(host, limits={"pids": 10})
        assert e.value.backend == "restricted" and e.value.exit_code == 22
        with pytest.raises(BackendUnsupported, match="fork"):
            y.fork(host, 2)
        with y.sandbox(host) as sb:
            for call, feature in ((sb.snapshot, "snapshots"), (sb.reset, "reset"), (sb.shell, "shell sessions")):
                with pytest.raises(BackendUnsupported, match=feature):
                    call()
            assert sb.exec("true").exit_code == 0
    finally:
        y.close()
