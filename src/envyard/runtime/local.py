"""The local backend: bubblewrap + overlayfs + cgroups, no daemon.

A sandbox is one bwrap process tree: bwrap mounts an overlay (the image's layers read-only, a private upper
dir on top) as the root of new mount/pid/ipc/uts (and, by default, network) namespaces and runs the holder
shell (see holder.py) as its main process. The overlay exists only inside the sandbox's mount namespace, so
when the sandbox's pid-1 dies the kernel removes every mount and process with it: nothing can leak on the
host but the sandbox's directory, which leases let gc reclaim.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import resource
import select
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path, PurePosixPath

from .. import janitor, procinfo, validate
from ..bases.host import host_view_pinned
from ..errors import EnvyardError, HostUnsupported, SandboxClosed, SandboxDied, SandboxError, Terminated
from ..store import SandboxRecord, Store
from .backend import Capabilities, SandboxSpec, check_spec
from .bwrap import check_overlay_support, find_bwrap
from . import seccomp, setsid, userns
from .cgroups import Cgroups
from .kernelview import mask_args
from .limits import Limits
from .podnet import PodNetwork
from .volume import ATTIC, SandboxVolume
from .holder import (AS_USER_SCRIPT, HOLDER_SCRIPT, IPC_MOUNT, ROOT_USERS, check_env, command_script,
                     session_loop_script)
from .result import DEFAULT_MAX_OUTPUT, DEFAULT_MAX_SPILL, ExecResult, OutputBuffer, SpillBudget
from ..log import log
from ..which import which


# Docker's default capability set minus MKNOD (a device node could expose the host's disks).
SANDBOX_CAPS = (
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID",
    "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
)
START_TIMEOUT = 20.0
EOF_GRACE = 0.1  # after a command exits, how long to wait for background jobs to release its output pipes
KILL_GRACE = 5.0
NO_PROCESS_EXIT = 254  # the holder's answer when it cannot fork a runner for a command
TIMEOUT_EXIT = 124  # what `envyard run --timeout` exits with, as coreutils' timeout does
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BWRAP_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
USER_NAMESPACE = True  # sandboxes run in a user namespace (benchmarks switch it off to measure its cost)


@functools.cache
def _warn_once(message: str) -> None:
    log.warning("envyard: %s", message)


def raise_fd_limit() -> None:
    """Each sandbox holds a few descriptors in the owner; lift the soft limit so hundreds fit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class LocalBackend:
    name = "local"
    capabilities = Capabilities(
        snapshot=True, fork=True, reset=True, network_policies=("none", "host", "pod"),
        limits=("memory", "pids", "cpus", "disk"), shell_sessions=True,
    )

    def __init__(self, store: Store):
        if not hasattr(os, "pidfd_open"):
            raise HostUnsupported("this Python lacks os.pidfd_open", fix="use CPython >= 3.9 on Linux >= 5.3")
        self.store = store
        self.bwrap = find_bwrap(store.home / "cache")
        check_overlay_support()
        self.cgroups = Cgroups()
        self.volume = SandboxVolume(store.home)
        self.disk_limits = True  # False: no per-sandbox disk limit (benchmarks switch it to measure its cost)
        userns.namespace_fd()  # made now, while a descriptor below 10 is likely free
        raise_fd_limit()

    def check(self) -> dict:
        return {"backend": self.name, "bwrap": self.bwrap, "cgroups": self.cgroups.mode,
                "cgroups_note": self.cgroups.reason, "root": os.geteuid() == 0,
                "seccomp": f"filter of {len(seccomp.filter_program(self.store.home / 'cache')) // 8} BPF instructions",
                "user_namespace": "identity map; capabilities count only inside" if USER_NAMESPACE else "off",
                "disk_limits": self.volume.available() or "btrfs volume with a quota per sandbox"}

    def writable_dir(self, sandbox_id: str, limits: Limits, lower_paths: list[Path]) -> Path | None:
        """Where a sandbox's upper and work dirs go: a subvolume capped at its disk limit (runtime/volume.py),
        or None (its own directory, unbounded) where disk limits do not work and none was asked for. Over an
        image with layers on the volume, the subvolume numbers its files after theirs (volume._numbered_after)."""
        if not self.disk_limits:
            return None
        why = self.volume.available()
        if why is None:
            return self.volume.create(sandbox_id, limits.disk_bytes, top_volume_layer(self.store, lower_paths))
        if limits.disk is not None:
            raise HostUnsupported(f"cannot limit this sandbox's disk: {why}",
                                  fix="install btrfs-progs, or leave `disk` out to run without a disk limit")
        _warn_once(f"sandboxes run without a disk limit: {why}")
        return None

    def create(self, spec: SandboxSpec) -> "LocalSandbox":
        check_spec(self, spec)
        return LocalSandbox(self, spec)

    def can_limit_disk(self) -> bool:
        return self.disk_limits and self.volume.available() is None

    def reap(self) -> dict:
        return {}  # gc.collect covers local sandboxes (leases in the store)

    def close(self) -> None:
        self.volume.close()  # our handle would keep gc from unmounting an idle volume

    def run_attached(self, spec: SandboxSpec, argv: list[str], timeout: float | None = None) -> int:
        """Run `argv` as the main process of a throwaway sandbox wired to this terminal; return its exit code
        (TIMEOUT_EXIT when `timeout` seconds pass first)."""
        sb = LocalSandbox(self, spec, attached=argv, timeout=timeout)
        return sb.returncode


class LocalSandbox:
    def __init__(self, backend: LocalBackend, spec: SandboxSpec, attached: list[str] | None = None,
                 timeout: float | None = None):
        self.backend = backend
        self.store = backend.store
        self.spec = spec
        self.id = os.urandom(6).hex()
        self.dir = self.store.sandboxes_dir / self.id
        self.ipc = self.dir / "ipc"
        self.spill = self.dir / "spill"
        self.spill_budget = SpillBudget()  # host disk all of this sandbox's spill files may use
        self.env = {"PATH": DEFAULT_PATH, "HOME": "/root", **spec.image.config.env, **check_env(spec.env)}
        self.workdir = spec.workdir or spec.image.config.workdir or "/"
        self.hostname = spec.hostname or f"envyard-{self.id}"
        self._ids = itertools.count(1)
        self._ctl_lock = threading.Lock()
        self._closed = False
        self._stopped = False
        self._sessions: list[LocalShell] = []
        self.proc: subprocess.Popen | None = None
        self.holder: tuple[int, int] | None = None
        self.fs = self.dir  # where the upper and work dirs live: the sandbox's subvolume when its disk is limited
        self.lower_paths = self.store.layer_paths(spec.image.layers)
        if backend.disk_limits and unnumbered_layers(self.store, self.lower_paths):
            _warn_once(f"image {spec.image.name}: some of its layers were made before envyard numbered the files "
                       "of snapshot layers apart (2026-12-07), so two of its files may pass for one (an import "
                       "that fails with 'dynamic module does not define module export function'): rebuild it")
        self.mount_points = made_mount_points(self.lower_paths, spec)
        me = os.getpid()
        planned_cgroups = backend.cgroups.planned_dirs(self.id, spec.limits)
        # The lease row goes in first, naming the cgroups to be made: whatever happens after, gc can find and
        # reclaim what we make. Until it is in, the host view (if we stand on it) is pinned against gc.
        with host_view_pinned(self.store, spec.image.layers):
            self.store.add_sandbox(SandboxRecord(
                id=self.id, image=spec.image.name, layers=spec.image.layers, dir=self.dir, owner_pid=me,
                owner_start=procinfo.start_time(me), init_pid=None, init_start=None, cgroups=planned_cgroups,
                network=str(spec.network), created=time.time(),
            ))
        try:
            for d in (self.ipc, self.spill):
                d.mkdir(parents=True)
            self.fs = backend.writable_dir(self.id, spec.limits, self.lower_paths) or self.dir
            self.cg = backend.cgroups.create(self.id, spec.limits)
            if self.cg.dirs != planned_cgroups:
                self.store.update_sandbox(self.id, cgroups=self.cg.dirs)
            if attached is None:
                self._start()
                return
            self.returncode = self._run_attached(attached, timeout)
        except BaseException:
            self._teardown()
            raise
        self._closed = True
        self._teardown()

    def _record_attached_init(self, outer_pid: int) -> None:
        """Find bwrap's pid-1 (the outer bwrap's only child) so `envyard rm`/`snapshot` and gc can reach it."""
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            try:
                children = Path(f"/proc/{outer_pid}/task/{outer_pid}/children").read_text().split()
            except OSError:
                return
            if children and procinfo.pid_namespace(int(children[0])) != procinfo.pid_namespace(outer_pid):
                self.init_pid = int(children[0])
                self.init_start = procinfo.start_time(self.init_pid)
                self.pid_ns = procinfo.pid_namespace(self.init_pid)
                self.store.update_sandbox(self.id, init_pid=self.init_pid, init_start=self.init_start)
                return
            time.sleep(0.001)

    def _run_attached(self, argv: list[str], timeout: float | None = None) -> int:
        proc = self._popen_bwrap(self._bwrap_args(argv), {})
        self._record_attached_init(proc.pid)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            # Ctrl-C reaches the sandboxed program through the terminal; we just wait for it to finish.
            while True:
                try:
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    return proc.wait(left)
                except Terminated:
                    raise  # SIGTERM reached only us: the finally below kills the sandbox with bwrap
                except KeyboardInterrupt:
                    continue
                except subprocess.TimeoutExpired:
                    proc.kill()  # bwrap's pid-1 dies with it (--die-with-parent), and with it every process
                    proc.wait()
                    return TIMEOUT_EXIT
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    # ---- lifecycle ----------------------------------------------------------------------------------------

    def _bwrap_args(self, attached: list[str] | None = None) -> list[str]:
        """bwrap's command line; `attached` replaces the holder with a program wired to the caller's terminal
        (then no --new-session, so the program keeps the terminal for job control and Ctrl-C)."""
        upper, work = self.fs / "upper", self.fs / "work"
        upper.mkdir(exist_ok=True)
        work.mkdir(exist_ok=True)
        args = [self.backend.bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", self.hostname,
                "--cap-drop", "ALL"]
        # bwrap leaves the --userns descriptor open in the sandbox: the first program closes it when it can
        # (a POSIX shell closes only fds 0-9). Left open it is harmless: it names the namespace the sandbox
        # is already in, and setns is refused by the seccomp filter.
        close_ns = ""
        if USER_NAMESPACE:
            ns_fd = userns.namespace_fd()
            args += ["--userns", str(ns_fd)]
            close_ns = f"exec {ns_fd}<&-; " if ns_fd <= 9 else ""
        if attached is None:
            args.append("--new-session")
        for cap in SANDBOX_CAPS:
            args += ["--cap-add", cap]
        if self.spec.network == "none":
            args.append("--unshare-net")
        for path in self.lower_paths:
            args += ["--overlay-src", str(path)]
        args += ["--overlay", str(upper), str(work), "/", "--proc", "/proc", "--dev", "/dev",
                 "--ro-bind", "/sys", "/sys", *mask_args(),
                 "--ro-bind", str(self.ipc), IPC_MOUNT]
        if self.spec.network == "host":
            args += ["--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf"]
        elif isinstance(self.spec.network, PodNetwork):
            args += self._pod_files(self.spec.network)
        # A mount point's missing parents would be made 0700, which a non-root user cannot cross; Docker makes
        # them 0755. `--dir` leaves existing directories alone.
        parents = {p for _, inside in (*self.spec.binds, *self.spec.ro_binds) for p in PurePosixPath(inside).parents}
        for parent in sorted(parents - {PurePosixPath("/")}, key=lambda p: len(p.parts)):
            args += ["--perms", "0755", "--dir", str(parent)]
        for host_path, inside in self.spec.binds:
            args += ["--bind", host_path, inside]
        for host_path, inside in self.spec.ro_binds:
            args += ["--ro-bind", host_path, inside]
        args += ["--clearenv"]
        for k, v in self.env.items():
            args += ["--setenv", k, v]
        if self.spec.security == "default":
            args += ["--seccomp", "{SECCOMP_FD}"]
        if attached is not None:
            # --die-with-parent is safe here: the caller's main thread waits for the program. The program goes
            # behind /bin/sh so that an argument starting with '-' can never be read as a bwrap option.
            return args + ["--die-with-parent", "--chdir", self.workdir, "/bin/sh", "-c", close_ns + 'exec "$@"', "sh",
                           *attached]
        return args + ["--chdir", "/", "--info-fd", "{INFO_FD}", "/bin/sh", "-c", close_ns + HOLDER_SCRIPT]

    def _pod_files(self, pod: PodNetwork) -> list[str]:
        """Bind the pod's /etc/hosts (its service names) and, with internet, /etc/resolv.conf: per-sandbox
        copies, writable as Docker's are, outside the upper dir so that no snapshot keeps them."""
        hosts = self.dir / "hosts"
        hosts.write_text(pod.hosts_file(self.hostname))
        args = ["--bind", str(hosts), "/etc/hosts"]
        if (resolv := pod.resolv_conf()) is not None:
            (self.dir / "resolv.conf").write_text(resolv)
            args += ["--bind", str(self.dir / "resolv.conf"), "/etc/resolv.conf"]
        return args

    def _start(self) -> None:
        self._next_runner = 1
        os.mkfifo(self.ipc / "spare.1", 0o600)  # the holder's first runner waits on it
        (self.ipc / "as").write_text(AS_USER_SCRIPT)
        setsid.install(str(self.ipc))
        info_r, info_w = _info_file(self.dir)
        log_file = open(self.dir / "bwrap.log", "wb")
        try:
            self.proc = self._popen_bwrap(self._bwrap_args(), {"{INFO_FD}": info_w}, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=log_file, start_new_session=True)
        finally:
            os.close(info_w)
            log_file.close()
        try:
            self.pidfd = os.pidfd_open(self.proc.pid)
            info = self._read_startup(info_r)
            self.init_pid = int(info["child-pid"])
            self.init_start = procinfo.start_time(self.init_pid)
            self.pid_ns = int(info.get("pid-namespace") or procinfo.pid_namespace(self.init_pid))
            self.holder = _holder_of(self.init_pid)
            self.store.update_sandbox(self.id, init_pid=self.init_pid, init_start=self.init_start)
        except BaseException:
            self._abort_start()
            raise
        finally:
            os.close(info_r)

    def _abort_start(self) -> None:
        """A start failed half-way (an error, Ctrl-C, a timeout): kill bwrap's pid-1 — the outer bwrap's child,
        which would otherwise sit blocked in its namespaces with nobody to reap it — then bwrap itself."""
        proc = self.proc
        try:
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        except OSError:
            children = []
        for pid in [*map(int, children), proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
        if hasattr(self, "pidfd"):
            os.close(self.pidfd)
            del self.pidfd
        self.proc = None

    def _popen_bwrap(self, args: list[str], fds: dict[str, int], **popen) -> subprocess.Popen:
        """Start bwrap (behind the cgroup shim) with the descriptors its arguments name. Its environment is
        empty on purpose: bwrap stays the sandbox's pid-1, whose environment anyone inside can read at
        /proc/1/environ, so nothing of the owner's (API keys, tokens) may reach it."""
        cache = self.backend.store.home / "cache"
        own = {"{SECCOMP_FD}": seccomp.program_fd(cache)} if "{SECCOMP_FD}" in args else {}
        fds = {**fds, **own}
        pass_fds = (*fds.values(), *((userns.namespace_fd(),) if USER_NAMESPACE else ()))
        pod = self.spec.network if isinstance(self.spec.network, PodNetwork) else None
        try:
            argv = [str(fds[a]) if a in fds else a for a in args]
            if pod is not None:  # bwrap cannot join a network namespace itself: it starts inside the pod's
                argv = [*pod.nsenter_prefix(), *argv]
                pass_fds += (pod.fd,)
            return subprocess.Popen(self._with_shim(argv), env=BWRAP_ENV, pass_fds=pass_fds, **popen)
        finally:
            for fd in own.values():
                os.close(fd)

    def _with_shim(self, args: list[str]) -> list[str]:
        """Prefix bwrap with a /bin/sh that joins the cgroups / sets rlimits first; none when there are none."""
        prefix = self.cg.shim_prefix()
        return ["/bin/sh", "-c", prefix + ' && exec "$@"', "sh", *args] if prefix else args

    def _read_startup(self, info_fd: int) -> dict:
        """Wait for bwrap's info JSON and the holder's `ready` line; explain bwrap's complaint if it fails."""
        deadline = time.monotonic() + START_TIMEOUT
        info_buf, out_buf = b"", b""
        out_fd = self.proc.stdout.fileno()
        poller = select.poll()  # not select(): descriptors go past 1024 with hundreds of sandboxes
        for fd in (info_fd, out_fd):
            poller.register(fd, select.POLLIN)
        while b"ready\n" not in out_buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxError(f"sandbox {self.id} did not start within {START_TIMEOUT:.0f}s", fix="see `envyard doctor`")
            for fd, _ev in poller.poll(int(left * 1000) + 1):
                chunk = os.read(fd, 4096)
                if not chunk:
                    poller.unregister(fd)
                    if fd == out_fd:
                        raise self._start_failure()
                elif fd == info_fd:
                    info_buf += chunk
                else:
                    out_buf += chunk
        while True:  # bwrap writes the info before running the holder, so it is complete by now
            try:
                return json.loads(info_buf)
            except json.JSONDecodeError:
                chunk = os.read(info_fd, 4096)
                if not chunk:
                    raise SandboxError(f"sandbox {self.id}: bwrap gave no process info")
                info_buf += chunk

    def _start_failure(self) -> SandboxError:
        self.proc.wait(timeout=10)
        msg = (self.dir / "bwrap.log").read_text(errors="replace").strip().splitlines()
        why = msg[-1] if msg else f"bwrap exited with status {self.proc.returncode}"
        fix = "run `envyard doctor` to check bubblewrap, overlayfs and namespaces"
        if "/bin/sh" in why or "execvp" in why:
            fix = "the image needs /bin/sh; check the image's layers"
        return SandboxError(f"sandbox {self.id} failed to start: {why}", fix=fix)

    @property
    def alive(self) -> bool:
        """Running, with its holder shell: a killed holder means the sandbox is going down (bwrap's pid-1
        follows it within moments), so it no longer counts as alive."""
        return (not self._closed and self.proc is not None and self.proc.poll() is None
                and (self.holder is None or procinfo.is_alive(*self.holder)))

    def _signal_kill(self) -> None:
        """SIGKILL pid-1, which ends the sandbox's whole pid namespace (and its mounts) at once."""
        for s in self._sessions:
            s._release(kill=False)
        self._sessions.clear()
        if self.proc is None:
            return
        if procinfo.is_alive(getattr(self, "init_pid", None), getattr(self, "init_start", None)):
            try:
                os.kill(self.init_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def _reap(self) -> None:
        """Wait until bwrap has exited after `_signal_kill` and release our descriptors."""
        if self.proc is not None:
            _reap_bwrap(self.proc, self.pidfd)
            self.proc = None

    def _kill_all(self) -> None:
        self._signal_kill()
        self._reap()

    def reset(self) -> None:
        """Back to the image: kill everything, swap in a fresh upper dir, start afresh. Limits and id stay.
        The old instance's teardown and deletion happen on the janitor thread."""
        self._check_open()
        self._signal_kill()
        old_proc, old_pidfd = self.proc, self.pidfd
        self.proc = None
        janitor.later(lambda: _reap_bwrap(old_proc, old_pidfd))
        if self.fs != self.dir:  # a fresh subvolume, so the old one's bytes do not count while it is deleted
            old_fs, self.fs = self.fs, self.backend.writable_dir(self.id, self.spec.limits, self.lower_paths)
            janitor.later(lambda: self.backend.volume.remove(self.id, old_fs))
        else:
            for name in ("upper", "work"):
                self.store.discard_dir(self.dir / name, background=True)
        for p in self.ipc.iterdir():
            p.unlink()
        self._start()

    def stop(self) -> None:
        """Kill every process now but keep the files: the upper dir then holds still (see `upper_dir`)."""
        if self._closed:
            raise SandboxClosed(f"sandbox {self.id} is closed")
        self._stopped = True
        self._kill_all()

    @property
    def upper_dir(self) -> Path:
        return self.fs / "upper"

    def close(self) -> None:
        """Kill now; wait for the teardown and delete files on the janitor thread (gc finishes it if we die)."""
        if self._closed:
            return
        self._closed = True
        self._signal_kill()
        janitor.later(self._teardown)

    def _teardown(self) -> None:
        try:
            self._kill_all()
        finally:
            Cgroups.remove(self.cg.dirs if hasattr(self, "cg") else [])
            if self.fs != self.dir:
                self.backend.volume.remove(self.id)
            self.store.discard_dir(self.dir, background=True)
            self.store.remove_sandbox(self.id)

    # ---- files (from the host, through the sandbox's root: files.py) -------------------------------------

    # files.py and applylayer.py are imported here, not at the top: `envyard run` never needs them.

    @contextlib.contextmanager
    def _root(self):
        from . import files

        pid, start = self.root_process()
        with files.sandbox_root(pid, start, self.id) as root:
            yield root

    def write_file(self, parts: list[str], data: bytes, mode: int | None) -> None:
        from . import files

        with self._root() as root:
            files.write_file(root, parts, data, mode)

    def read_file(self, parts: list[str], max_bytes: int) -> bytes:
        from . import files

        with self._root() as root:
            return files.read_file(root, parts, max_bytes)

    def upload(self, src: Path, parts: list[str]) -> None:
        from . import files

        with self._root() as root:
            files.upload(root, src, parts)

    def download(self, parts: list[str], dest: Path, max_bytes: int, max_entries: int) -> list[str]:
        from . import files

        with self._root() as root:
            return files.download(root, parts, dest, max_bytes, max_entries)

    def apply_layer(self, layer: Path) -> None:
        from . import applylayer

        with self._root() as root:
            applylayer.apply_layer(root, layer)

    def root_process(self) -> tuple[int, int]:
        """Host pid and start time of the sandbox's pid-1, whose root directory is the sandbox's filesystem."""
        self._check_open()
        return self.init_pid, self.init_start

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosed(f"sandbox {self.id} is closed")
        if self._stopped:
            raise SandboxClosed(f"sandbox {self.id} was stopped", fix="close it; start a new one or reset() first")
        if self.proc is None or self.proc.poll() is not None:
            raise SandboxDied(
                f"sandbox {self.id} is no longer running (its main process exited)",
                fix="create a new sandbox or call reset(); check memory limits if this repeats",
            )

    def _send(self, line: str) -> None:
        with self._ctl_lock:
            self._write_ctl(line)

    def _write_ctl(self, line: str) -> None:
        self._check_open()
        try:
            os.write(self.proc.stdin.fileno(), line.encode())
        except (BrokenPipeError, OSError) as e:
            raise SandboxDied(f"sandbox {self.id} stopped accepting commands: {e}") from e

    def _hand_to_runner(self, eid: str, has_stdin: bool) -> int:
        """Give a request to the waiting runner — straight through its FIFO when it is there, else through the
        holder — and have the holder start its successor; make the FIFO the successor will wait on first."""
        with self._ctl_lock:
            k = self._next_runner
            os.mkfifo(f"{self.ipc}/spare.{k + 1}", 0o600)
            self._next_runner = k + 1
            self._check_open()
            try:  # non-blocking: succeeds only when the runner has the FIFO open for reading
                fd = os.open(f"{self.ipc}/spare.{k}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:  # ENXIO: not there (yet); the holder waits for it or starts it
                self._write_ctl(f"run {eid} {int(has_stdin)} {k}\n")
                return k
            try:
                os.write(fd, f"{eid} {int(has_stdin)}\n".encode())  # one small write: atomic on a FIFO
            finally:
                os.close(fd)
            self._write_ctl(f"next {k + 1}\n")
            return k

    # ---- processes ----------------------------------------------------------------------------------------

    def host_pids(self) -> list[int]:
        # Every process of the sandbox descends from its pid-1 (orphans are reparented to it): walking down
        # from there costs what the sandbox holds, where scanning /proc cost ~0.25 ms per host process.
        return [p for p in procinfo.descendants(self.init_pid) if procinfo.pid_namespace(p) == self.pid_ns]

    def _host_pid_of(self, inner: int) -> int | None:
        for pid in self.host_pids():
            if procinfo.inner_pid(pid) == inner:
                return pid
        return None

    def kill_tree(self, leader: int, *, keep_leader: bool = False, sig: int = signal.SIGKILL) -> None:
        """Signal a command's whole tree: its session (commands run under setsid) and every descendant,
        including ones that moved to their own process group. Repeats to catch processes forked meanwhile."""
        is_session = procinfo.session_id(leader) == leader
        for _ in range(3):
            tree = procinfo.process_tree(leader, self.host_pids(), is_session)
            if keep_leader:
                tree.remove(leader)
            if not tree:
                return
            for p in tree:
                try:
                    os.kill(p, sig)
                except ProcessLookupError:
                    pass
            if sig != signal.SIGKILL:
                return
            time.sleep(0.005)

    # ---- exec ---------------------------------------------------------------------------------------------

    def exec(self, cmd, *, timeout=None, cwd=None, env=None, stdin=None, max_output=DEFAULT_MAX_OUTPUT,
             max_spill=DEFAULT_MAX_SPILL, cancel: "Cancel | None" = None, on_output=None,
             user: str | None = None) -> ExecResult:
        self._check_open()
        eid = f"x{next(self._ids)}"
        base = f"{self.ipc}/{eid}"  # plain strings: pathlib's parsing was a tenth of the owner's time per exec
        used = [f"{base}.sh"]
        _write_new(used[0], command_script(cmd, cwd or self.workdir, check_env(env), user).encode())
        if stdin is not None:
            used.append(f"{base}.in")
            _write_new(used[-1], stdin.encode() if isinstance(stdin, str) else stdin)
        fifos = {}
        runner = None
        try:
            for kind in ("out", "err", "rc"):
                used.append(f"{base}.{kind}")
                os.mkfifo(used[-1], 0o600)
                fifos[kind] = os.open(used[-1], os.O_RDONLY | os.O_NONBLOCK)
            oom_before = self.cg.oom_kills()
            start = time.perf_counter()
            runner = self._hand_to_runner(eid, stdin is not None)
            spill = f"{self.spill}/{eid}"
            out = OutputBuffer(max_output, f"{spill}.stdout", _stream_to(on_output, "stdout"),
                               max_spill=max_spill, budget=self.spill_budget)
            err = OutputBuffer(max_output, f"{spill}.stderr", _stream_to(on_output, "stderr"),
                               max_spill=max_spill, budget=self.spill_budget)
            run = _Run(self, fifos["out"], fifos["err"], fifos["rc"], out, err)
            with self._closing_is_an_error():
                code, timed_out = run.wait(timeout, finished=lambda lines: _last_exit(lines), cancel=cancel)
            duration = time.perf_counter() - start
        finally:
            for fd in fifos.values():
                os.close(fd)
            if runner is not None:
                used.append(f"{self.ipc}/spare.{runner}")
            for path in used:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
        oom = code in (137, -9) and self.cg.oom_kills() > oom_before
        stderr = err.value()
        if code == NO_PROCESS_EXIT and not out.total and not err.total:
            stderr += b"envyard: the sandbox could not start a process for this command (is its pids limit reached?)\n"
        return ExecResult(
            exit_code=code, stdout_bytes=out.value(), stderr_bytes=stderr, duration=duration,
            timed_out=timed_out, truncated=out.truncated or err.truncated, oom_killed=oom,
            stdout_file=out.spill_file, stderr_file=err.spill_file,
        )

    @contextlib.contextmanager
    def _closing_is_an_error(self):
        """A close() from another thread pulls descriptors from under a running command: say so plainly."""
        try:
            yield
        except (OSError, ValueError) as e:
            if self._closed or self.proc is None:
                raise SandboxClosed(f"sandbox {self.id} was closed while a command ran") from e
            raise

    def shell(self, user: str | None = None) -> "LocalShell":
        self._check_open()
        sh = LocalShell(self, f"s{next(self._ids)}", user)
        self._sessions.append(sh)
        return sh

    def snapshot_sealed(self, image) -> None:
        pass

    def snapshot_layer(self) -> Path:
        """The sandbox's changes (its upper dir) as a new layer directory, taken while the sandbox is frozen:
        a btrfs snapshot of its subvolume in O(1) when it has one (disk limits), else a copy."""
        self._check_open()
        with self._ctl_lock:  # the holder is not frozen: let no command of ours reach it meanwhile
            if self.fs != self.dir:
                layer = snapshot_subvolume(self.store, self.backend.volume, self.fs, self.pid_ns, self.init_pid)
            else:
                layer = copy_upper(self.store, self.upper_dir, self.pid_ns, self.init_pid)
            drop_mount_points(layer, self.mount_points)
            return layer


def _info_file(sandbox_dir: Path) -> tuple[int, int]:
    """Read and write descriptors of the file bwrap's --info-fd goes to. Not a pipe: bwrap writes the info
    before it lets pid-1 go on, and if we died meanwhile a pipe would kill bwrap there (EPIPE) and leave pid-1
    blocked forever. Written to a file, pid-1 goes on, and the holder sees we are gone and ends the sandbox."""
    path = sandbox_dir / "info.json"
    info_w = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    return os.open(path, os.O_RDONLY | os.O_CLOEXEC), info_w


def _write_new(path: str, data: bytes) -> None:
    """Write a small control file with bare system calls (the io layer's objects were a measurable part of an
    exec's owner CPU)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _mkfifo(path: Path, mode: int) -> None:
    os.mkfifo(path, mode)
    if mode & 0o066:
        os.chmod(path, mode)  # mkfifo's mode is masked by the umask


def _holder_of(init_pid: int) -> tuple[int, int] | None:
    """(pid, start time) of the holder shell, bwrap's pid-1's only child; None if it cannot be read."""
    try:
        children = Path(f"/proc/{init_pid}/task/{init_pid}/children").read_text().split()
    except OSError:
        return None
    return (int(children[0]), procinfo.start_time(int(children[0]))) if children else None


def _reap_bwrap(proc: subprocess.Popen, pidfd: int) -> None:
    # Wait on the pidfd: Popen.wait(timeout) polls with sleeps of up to 50 ms.
    if not _readable(pidfd, 10.0):  # only the shim could be stuck; it holds no sandbox state
        proc.kill()
    proc.wait()
    proc.stdout.close()
    os.close(pidfd)


def _readable(fd: int, timeout: float) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(int(timeout * 1000)))


def freeze(pid_ns: int, init_pid: int) -> list[int]:
    """SIGSTOP every process of a sandbox but pid-1 and the holder so its upper dir holds still; returns what
    to SIGCONT. The holder writes nothing there, and left running it still reads EOF if the owner dies
    mid-snapshot and takes the whole namespace down, stopped processes included."""
    if pid_ns is None or pid_ns == procinfo.pid_namespace(os.getpid()):
        raise SandboxError("refusing to freeze: the sandbox's pid namespace is unknown or is the host's")
    keep = {init_pid, (_holder_of(init_pid) or (None,))[0]}
    stopped: set[int] = set()
    for _ in range(5):  # repeat: a process may fork while we sweep
        new = [p for p in procinfo.pids_in_namespace(pid_ns) if p not in keep and p not in stopped]
        if not new:
            break
        for p in new:
            try:
                os.kill(p, signal.SIGSTOP)
                stopped.add(p)
            except ProcessLookupError:
                pass
    return sorted(stopped)


def thaw(pids: list[int]) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGCONT)
        except ProcessLookupError:
            pass


def top_volume_layer(store: Store, lower_paths: list[Path]) -> Path | None:
    """The subvolume of the topmost of the layers (listed lowest first) on the sandbox volume, if any. Layers
    made on the volume since each sandbox numbers its files after this one's hold disjoint inode numbers
    (volume._numbered_after)."""
    for path in reversed(lower_paths):
        root = store.volume_layer_root(path)
        if root is not None:
            return root
    return None


def unnumbered_layers(store: Store, lower_paths: list[Path]) -> int:
    """How many of the layers on the sandbox volume, above the lowest one there, were made by a sandbox that did
    not start from a snapshot of the layer below (no `attic`: made before volume._numbered_after existed), so
    that their files' inode numbers may equal those of other layers' files."""
    roots = [root for root in map(store.volume_layer_root, lower_paths) if root is not None]
    return sum(1 for root in roots[1:] if not (root / ATTIC).is_dir())


def images_to_rebuild(store: Store) -> list[str]:
    """The images with layers made before the numbering (unnumbered_layers), for `envyard doctor`."""
    names = []
    for image in store.images():
        try:
            if unnumbered_layers(store, store.layer_paths(image.layers)):
                names.append(image.name)
        except EnvyardError:  # a layer gone or unreadable: not this check's business
            continue
    return sorted(names)


def upper_dir_of(store: Store, sandbox_id: str) -> Path:
    """A sandbox's upper dir, for a process that is not its owner (`envyard snapshot`)."""
    return (SandboxVolume(store.home).current(sandbox_id) or store.sandboxes_dir / sandbox_id) / "upper"


def made_mount_points(lower_paths: list[Path], spec: SandboxSpec) -> list[str]:
    """The bind targets (and the host's resolv.conf) that the image lacks, deepest first, with their parent
    directories that it lacks too: bwrap makes each one, as an empty file or directory in the upper dir, to
    mount over (a parent with --dir). They are not the sandbox's content."""
    targets = [inside for _, inside in (*spec.binds, *spec.ro_binds)]
    if spec.network == "host" and os.path.exists("/etc/resolv.conf"):
        targets.append("/etc/resolv.conf")
    elif isinstance(spec.network, PodNetwork):
        targets += ["/etc/hosts", "/etc/resolv.conf"]  # _pod_files
    made = {str(p) for t in targets for p in (PurePosixPath(t), *PurePosixPath(t).parents) if str(p) != "/"}
    missing = [t for t in made if not any(os.path.lexists(p / t.lstrip("/")) for p in lower_paths)]
    return sorted(missing, key=lambda t: (-len(PurePosixPath(t).parts), t))


def drop_mount_points(layer: Path, mount_points: list[str]) -> None:
    """Leave bwrap's mount points (see made_mount_points, deepest first) out of a layer made from the upper dir.
    Only as made: an empty file or directory (nothing inside the sandbox can write to a path while something is
    mounted on it; a parent the sandbox wrote into is not empty, and stays)."""
    for inside in mount_points:
        parts = PurePosixPath(inside.lstrip("/")).parts
        try:
            # The sandbox may have moved a parent away and put a symlink in its place: never follow one out of
            # the layer (it would name a path on the host).
            if any(stat.S_ISLNK(os.lstat(layer.joinpath(*parts[:i])).st_mode) for i in range(1, len(parts))):
                continue
            path = layer.joinpath(*parts)
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                path.rmdir()
            elif stat.S_ISREG(st.st_mode) and st.st_size == 0:
                path.unlink()
        except OSError:
            pass


def snapshot_subvolume(store: Store, volume: SandboxVolume, subvolume: Path, pid_ns: int, init_pid: int) -> Path:
    """Snapshot a running sandbox's subvolume (frozen meanwhile) onto the volume; returns the snapshot's upper
    dir, which store.seal_layer publishes as a layer without copying it."""
    stopped = freeze(pid_ns, init_pid)
    try:
        snap = volume.snapshot(subvolume, store.new_layer_name())
    except OSError as e:
        raise SandboxError(f"snapshot of {subvolume} failed: {e}") from e
    finally:
        thaw(stopped)
    try:
        (snap / "upper" / IPC_MOUNT.lstrip("/")).rmdir()  # bwrap's mount point, not the sandbox's content
    except OSError:
        pass
    return snap / "upper"


def copy_upper(store: Store, upper: Path, pid_ns: int, init_pid: int) -> Path:
    """Copy a running sandbox's upper dir into a fresh layer dir (whiteouts and xattrs kept), frozen meanwhile."""
    dest = store.new_layer_dir()
    stopped = freeze(pid_ns, init_pid)
    try:
        cp = ["cp", "-a", "--reflink=auto", f"{upper}/.", str(dest)]
        done = subprocess.run(_dies_with_us(cp), capture_output=True, text=True)
    finally:
        thaw(stopped)
    if done.returncode != 0:
        store.discard_dir(dest)
        raise SandboxError(f"snapshot of {upper} failed: {done.stderr.strip()[-300:]}")
    # bwrap made this mount point in the upper dir; it is not part of the sandbox's content.
    try:
        (dest / IPC_MOUNT.lstrip("/")).rmdir()
    except OSError:
        pass
    return dest


@functools.cache
def _pdeathsig_prefix() -> tuple[str, ...]:
    """util-linux's setpriv, if it can set PR_SET_PDEATHSIG (2.33+): the kernel then kills the program when the
    thread that started it dies. subprocess cannot do this without a preexec_fn, unsafe with threads."""
    setpriv = which("setpriv")
    prefix = (setpriv, "--pdeathsig", "KILL", "--")
    if setpriv and subprocess.run([*prefix, "true"], capture_output=True).returncode == 0:
        return prefix
    return ()


def _dies_with_us(argv: list[str]) -> list[str]:
    """`argv`, killed by the kernel if this process dies first (gc finds it by its arguments otherwise)."""
    return [*_pdeathsig_prefix(), *argv]


def _stream_to(on_output, stream: str):
    return None if on_output is None else (lambda chunk: on_output(stream, chunk))


def _last_exit(lines: list[str]) -> int | None:
    for line in lines:
        if line.startswith("exit "):
            return int(line.split()[1])
    return None


class _Run:
    """Pumps one command's stdout/stderr FIFOs and status FIFO until it finishes, times out or the sandbox dies."""

    def __init__(self, sandbox: LocalSandbox, out_fd: int, err_fd: int, rc_fd: int, out: OutputBuffer,
                 err: OutputBuffer, rc_lines: "_LineReader | None" = None):
        self.sb = sandbox
        self.streams = {out_fd: out, err_fd: err}
        self.rc = rc_lines or _LineReader(rc_fd)
        self.rc_fd = rc_fd

    def wait(self, timeout: float | None, finished, on_timeout=None, cancel: "Cancel | None" = None) -> tuple[int, bool]:
        """Returns (exit code, timed out). A fired `cancel` kills the command like a timeout would."""
        poller = select.poll()
        for fd in (*self.streams, self.rc.fd, self.sb.pidfd, *((cancel.fd,) if cancel else ())):
            poller.register(fd, select.POLLIN)
        open_streams = set(self.streams)
        deadline = None if timeout is None else time.monotonic() + timeout
        timed_out = False
        code = None
        done_at = None
        kill_deadline = None
        while True:
            if code is None:
                code = finished(self.rc.lines)
                if code is not None:
                    done_at = time.monotonic()
            if code is not None and (not open_streams or time.monotonic() - done_at > EOF_GRACE):
                return code, timed_out
            now = time.monotonic()
            wait_until = [t for t in (deadline if not timed_out else None, kill_deadline,
                                      done_at + EOF_GRACE if done_at else None) if t is not None]
            wait_ms = None if not wait_until else max(0, int((min(wait_until) - now) * 1000) + 1)
            for fd, _ev in poller.poll(wait_ms):
                if cancel is not None and fd == cancel.fd:
                    poller.unregister(fd)
                    if code is None and kill_deadline is None:
                        (on_timeout or self._kill_command)()
                        kill_deadline = time.monotonic() + KILL_GRACE
                elif fd == self.sb.pidfd:
                    poller.unregister(fd)
                    self._drain(open_streams, poller)
                    code = finished(self.rc.read_available())
                    if code is None:
                        raise SandboxDied(
                            f"sandbox {self.sb.id} died while running a command",
                            fix="check the sandbox's memory and pids limits",
                        )
                    done_at = time.monotonic()
                elif fd == self.rc.fd:
                    self.rc.read_available()
                    if self.rc.eof:
                        poller.unregister(fd)
                        if code is None:
                            code = finished(self.rc.lines)
                        if code is None and kill_deadline is not None:  # the runner died with the tree it led
                            code = 137
                        elif code is None and self.rc.closes_on_exit:
                            # The runner vanished without reporting. If the sandbox itself is closed or dead, that
                            # is the news; otherwise it could not fork the command (an exhausted pids limit) or
                            # something killed it: say so now instead of waiting for the timeout.
                            if self.sb._closed:
                                raise SandboxClosed(f"sandbox {self.sb.id} was closed while a command ran")
                            if _readable(self.sb.pidfd, 0.05):
                                raise SandboxDied(f"sandbox {self.sb.id} died while running a command",
                                                  fix="check the sandbox's memory and pids limits")
                            code = NO_PROCESS_EXIT
                        if code is not None:
                            done_at = time.monotonic()
                else:
                    self._read(fd, open_streams, poller)
            now = time.monotonic()
            if deadline is not None and not timed_out and code is None and now >= deadline:
                timed_out = True
                (on_timeout or self._kill_command)()
                kill_deadline = now + KILL_GRACE
            elif kill_deadline is not None and code is None and now >= kill_deadline:
                return -9, timed_out

    def _kill_command(self) -> None:
        inner = self.rc.pid()
        host = self.sb._host_pid_of(inner) if inner else None
        if host:
            self.sb.kill_tree(host)

    def _read(self, fd: int, open_streams: set, poller) -> None:
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:
                open_streams.discard(fd)
                poller.unregister(fd)
                return
            self.streams[fd].feed(chunk)

    def _drain(self, open_streams: set, poller) -> None:
        for fd in list(open_streams):
            self._read(fd, open_streams, poller)


class Cancel:
    """A wake-up the async API fires to kill a running command when its awaiting task is cancelled."""

    def __init__(self):
        self.fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.fired = False

    def fire(self) -> None:
        self.fired = True
        os.eventfd_write(self.fd, 1)

    def close(self) -> None:
        os.close(self.fd)


class _LineReader:
    """Reads newline-terminated status lines from a non-blocking FIFO."""

    def __init__(self, fd: int, closes_on_exit: bool = True):
        self.fd = fd
        self.closes_on_exit = closes_on_exit  # one command per FIFO: EOF means its runner is gone
        self.lines: list[str] = []
        self._buf = b""
        self.eof = False

    def read_available(self) -> list[str]:
        while True:
            try:
                chunk = os.read(self.fd, 4096)
            except BlockingIOError:
                break
            if not chunk:
                self.eof = True
                break
            self._buf += chunk
        *complete, self._buf = self._buf.split(b"\n")
        self.lines += [c.decode(errors="replace") for c in complete]
        return self.lines

    def pid(self) -> int | None:
        for line in self.read_available():
            if line.startswith("pid "):
                return int(line.split()[1])
        return None


class LocalShell:
    """A persistent shell (bash if the image has it, else /bin/sh) that keeps cwd, variables and functions.

    Commands are sourced one at a time from files; each reports its status on a private FIFO, so output holds
    only what the command printed. A command that outlives its timeout is killed with its whole tree while the
    shell lives on; if the shell itself is stuck (a busy builtin loop) it is restarted, and stderr says so.
    """

    def __init__(self, sandbox: LocalSandbox, session_id: str, user: str | None = None):
        self.sb = sandbox
        self.id = session_id
        self.user = None if user in ROOT_USERS else user
        # A session of another user opens its FIFOs and command files itself: they must be open to it.
        self._mode = 0o600 if self.user is None else 0o666
        self._n = itertools.count(1)
        self._lock = threading.Lock()
        self._closed = False
        self._start()

    def _start(self) -> None:
        base = self.sb.ipc / self.id
        base.with_suffix(".loop").write_text(session_loop_script(self.id, self.sb.workdir))
        for suffix in (".cmd", ".rc"):
            p = base.with_suffix(suffix)
            if p.exists():
                p.unlink()
            _mkfifo(p, self._mode)
        self.cmd_fd = os.open(base.with_suffix(".cmd"), os.O_RDWR)  # O_RDWR: never blocks, never EOFs
        self.rc = _LineReader(os.open(base.with_suffix(".rc"), os.O_RDONLY | os.O_NONBLOCK), closes_on_exit=False)
        self.sb._send(f"shell {self.id} {self.user or '-'}\n")
        deadline = time.monotonic() + START_TIMEOUT
        while (inner := self.rc.pid()) is None:
            if time.monotonic() > deadline or not self.sb.alive:
                raise SandboxError(f"shell session in sandbox {self.sb.id} did not start")
            _readable(self.rc.fd, 0.05)
        self.shell_pid = self.sb._host_pid_of(inner)
        self.rc.lines.clear()

    @property
    def alive(self) -> bool:
        return not self._closed and self.sb.alive and not any(l.startswith("exit ") for l in self.rc.lines)

    def run(self, command: str, *, timeout: float | None = None, max_output: int | None = DEFAULT_MAX_OUTPUT,
            max_spill: int = DEFAULT_MAX_SPILL, cancel: Cancel | None = None, on_output=None) -> ExecResult:
        """Run one command in the session. `on_output(stream, chunk)`, if given, sees output as it arrives.
        Output is bounded as for exec: `max_output` in memory, `max_spill` in a file."""
        validate.text(command, "command")
        timeout, max_output, max_spill, on_output = validate.run_options(timeout, max_output, max_spill, on_output)
        if self._closed:
            raise SandboxClosed(f"shell session {self.id} is closed")
        with self._lock:
            if not self.alive:
                raise SandboxClosed(f"shell session {self.id} has ended (its shell exited)",
                                    fix="open a new one with sandbox.shell()")
            n = next(self._n)
            base = self.sb.ipc / f"{self.id}-{n}"
            base.with_suffix(".sh").write_text(command + "\n")
            fds = []
            try:
                for kind in ("out", "err"):
                    _mkfifo(base.with_suffix("." + kind), self._mode)
                    fds.append(os.open(base.with_suffix("." + kind), os.O_RDONLY | os.O_NONBLOCK))
                out = OutputBuffer(max_output, self.sb.spill / f"{self.id}-{n}.stdout", _stream_to(on_output, "stdout"),
                                   max_spill=max_spill, budget=self.sb.spill_budget)
                err = OutputBuffer(max_output, self.sb.spill / f"{self.id}-{n}.stderr", _stream_to(on_output, "stderr"),
                                   max_spill=max_spill, budget=self.sb.spill_budget)
                start = time.perf_counter()
                os.write(self.cmd_fd, f"{n}\n".encode())
                run = _Run(self.sb, fds[0], fds[1], self.rc.fd, out, err, rc_lines=self.rc)
                restarted = False

                def finished(lines):
                    for line in lines:
                        if line == f"done {n}" or line.startswith(f"done {n} "):
                            return int(line.split()[2])
                        if line.startswith("exit "):
                            return int(line.split()[1])
                    return None

                def on_timeout():
                    self.sb.kill_tree(self.shell_pid, keep_leader=True)

                with self.sb._closing_is_an_error():
                    code, timed_out = run.wait(timeout, finished, on_timeout=on_timeout, cancel=cancel)
                if code == -9:  # the shell itself never answered: replace it
                    self._restart()
                    restarted = True
                duration = time.perf_counter() - start
            finally:
                for fd in fds:
                    os.close(fd)
                for suffix in (".sh", ".out", ".err"):
                    try:
                        os.unlink(base.with_suffix(suffix))
                    except FileNotFoundError:
                        pass
            self.rc.lines = [l for l in self.rc.lines if l.startswith("exit ")]
            stderr = err.value()
            if restarted:
                stderr += b"\n[envyard: the shell did not respond after the timeout and was restarted; cwd and variables were reset]\n"
            return ExecResult(code, out.value(), stderr, duration, timed_out=timed_out,
                              truncated=out.truncated or err.truncated,
                              stdout_file=out.spill_file, stderr_file=err.spill_file)

    def interrupt(self) -> None:
        """Send SIGINT to whatever the shell is running (not to the shell). Safe to call from another thread."""
        if self.shell_pid:
            self.sb.kill_tree(self.shell_pid, keep_leader=True, sig=signal.SIGINT)

    def _restart(self) -> None:
        self._release()
        self._closed = False
        self._start()

    def _release(self, kill: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        if kill and self.shell_pid and self.sb.alive:
            self.sb.kill_tree(self.shell_pid)
        for fd in (self.cmd_fd, self.rc.fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        self._release()
        if self in self.sb._sessions:
            self.sb._sessions.remove(self)

