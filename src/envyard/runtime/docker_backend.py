"""The Docker backend: envyard's sandbox API over a Docker engine (the `docker` SDK), `Yard(backend="docker")`.

What it does (docs/docker.md):
- images: an envyard image is exported to the engine once, as a `docker load` archive tagged
  `envyard-cache/img:<key>` (key: the digest of its layer ids); layers the engine already has (by diff_id) are
  left out of the archive, so a snapshot or a verifier view over an exported image sends only its new layer.
  An image only the engine has (`yard.sandbox("nginx:1.27")` where the store has no such image) is imported
  into the store first (docker save -> envyard's load_image), once.
- a sandbox is a container running a sleep loop as root, labelled with its owner (pid + start time) and
  store; commands are `docker exec`s (argv through `/bin/sh -c 'exec "$@"'`, so a missing program is 127).
  A timeout kills the command's process tree (found in the container's pid namespace from this host), or,
  when the engine is not on this host, every process of the container but its pid-1.
- files go through the engine's archive API (get/put_archive): no program inside the container runs.
- snapshot: `docker commit` (the container paused), the new layer (the engine's image diff) is streamed out
  of `docker save` and unpacked as an envyard layer, so the snapshot is an ordinary image of the store; the
  committed engine image is kept, tagged as that snapshot's export, so sandboxes over it start at once.
- reset: the container is removed and created again from its image. stop: the container is killed, its
  files stay; `upper_dir` then is the container's diff as an overlayfs-format directory (for the verifier).
- limits: memory, pids, cpus (HostConfig); networks: none, host. No disk limits, pod networks or shell
  sessions: asking for them is BackendUnsupported.
- owner death: nothing stops the containers at once; `envyard gc` (and the next DockerBackend of the store)
  removes containers whose owner process is dead.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import select
import shutil
import signal
import socket
import stat
import struct
import sys
import tarfile
import tempfile
import threading
import time
import uuid
from pathlib import Path

from .. import procinfo
from ..errors import (BadInput, FileTooLarge, HostUnsupported, NotRegularFile, SandboxClosed, SandboxDied,
                      SandboxError)
from .backend import Capabilities, SandboxSpec, check_spec
from .limits import Limits
from .result import DEFAULT_MAX_OUTPUT, DEFAULT_MAX_SPILL, ExecResult, OutputBuffer, SpillBudget

LABEL = "envyard.sandbox"
CACHE_REPO = "envyard-cache/img"
KEEPER = ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"]
TIMEOUT_EXIT = 124
_GO_DIR, _GO_SYMLINK = 1 << 31, 1 << 27
_GO_SPECIAL = (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21)  # device, named pipe, socket, char device


def docker_socket_present() -> bool:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://"):
        return os.path.exists(host[len("unix://"):])
    return bool(host)


def _client():
    try:
        import docker
    except ImportError as e:
        raise HostUnsupported("the docker backend needs the `docker` Python package", fix="pip install docker") from e
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as e:  # noqa: BLE001 - docker raises DockerException, requests errors, FileNotFoundError
        raise HostUnsupported(f"no Docker engine answers ({e})",
                              fix="start dockerd, or set DOCKER_HOST to an engine's socket") from e
    return client


def _owner() -> dict[str, str]:
    pid = os.getpid()
    return {"pid": str(pid), "start": str(procinfo.start_time(pid))}


class DockerBackend:
    name = "docker"
    capabilities = Capabilities(
        snapshot=True, fork=True, reset=True, network_policies=("none", "host"),
        limits=("memory", "pids", "cpus"), shell_sessions=True, binds=True, attached=True, stop=True,
        warm_pools=True,
        notes=("no disk limits or pod networks",
               "shell sessions keep cwd and exported variables only",
               "run_attached streams output without a terminal",
               "containers of a dead owner stay until `envyard gc`"),
    )

    def __init__(self, store, client=None):
        self.store = store
        self.client = client or _client()
        self.api = self.client.api
        self.dir = store.home / "docker"
        (self.dir / "layers").mkdir(parents=True, exist_ok=True)
        self._export_lock = threading.Lock()
        self.local_engine = self._engine_is_local()
        reap_containers(store, client=self.client)

    def _engine_is_local(self) -> bool:
        """Whether the engine's processes are this host's (we can kill a command's tree ourselves)."""
        try:
            return self.client.info().get("Name") == socket.gethostname() and os.path.isdir("/proc/1")
        except Exception:  # noqa: BLE001
            return False

    # ---- the Backend protocol -----------------------------------------------------------------------------

    def create(self, spec: SandboxSpec) -> "DockerSandbox":
        check_spec(self, spec)
        return DockerSandbox(self, spec)

    def check(self) -> dict:
        v = self.client.version()
        return {"backend": self.name, "engine": v.get("Version"), "api": v.get("ApiVersion"),
                "engine_on_this_host": self.local_engine, "disk_limits": "not supported"}

    def can_limit_disk(self) -> bool:
        return False

    def reap(self) -> dict:
        return reap_containers(self.store, client=self.client)

    def close(self) -> None:
        pass

    def run_attached(self, spec: SandboxSpec, argv: list[str], timeout: float | None = None) -> int:
        """No terminal: the command's output is streamed to ours, stdin is not connected."""
        sb = self.create(spec)
        try:
            def out(stream, chunk):
                target = sys.stdout.buffer if stream == "stdout" else sys.stderr.buffer
                target.write(chunk)
                target.flush()

            r = sb.exec(argv, timeout=timeout, on_output=out, max_output=1 << 20, max_spill=0)
            return TIMEOUT_EXIT if r.timed_out else r.exit_code
        finally:
            sb.close()

    # ---- images -------------------------------------------------------------------------------------------

    def engine_image(self, image) -> str:
        """The engine's tag for envyard image `image`, exported on first use."""
        tag = self.tag_for(image.layers)
        with self._export_lock:
            if not self._has_image(tag):
                self._export(image, tag)
        return tag

    def tag_for(self, layers: list[str]) -> str:
        return f"{CACHE_REPO}:{hashlib.sha256(chr(10).join(layers).encode()).hexdigest()[:32]}"

    def _has_image(self, ref: str) -> bool:
        import docker

        try:
            self.client.images.get(ref)
            return True
        except docker.errors.ImageNotFound:
            return False

    def _engine_diff_ids(self) -> set[str]:
        have: set[str] = set()
        for img in self.client.images.list(all=True):
            have.update(img.attrs.get("RootFS", {}).get("Layers") or [])
        return have

    def _diff_id(self, layer_id: str) -> str | None:
        try:
            return json.loads((self.dir / "layers" / f"{layer_id}.json").read_text())["diff_id"]
        except (OSError, ValueError, KeyError):
            return None

    def _export(self, image, tag: str) -> None:
        """`docker load` an archive of `image`: manifest.json, its config, and the layers the engine lacks."""
        from ..bases.host import HOST_ROOT_LAYER
        from ..images.push import image_document
        from ..layertar import pack_layer

        if HOST_ROOT_LAYER in image.layers:
            from ..errors import BackendUnsupported

            raise BackendUnsupported("docker", "the host image (the machine's own root)",
                                     fix="use an image of the store such as debian:bookworm, or the local backend")
        have = self._engine_diff_ids()
        with tempfile.TemporaryDirectory(dir=self.dir) as tmp:
            archive = Path(tmp) / "image.tar"
            diff_ids, paths = [], []
            with tarfile.open(archive, "w") as out:
                for layer_id in image.layers:
                    known = self._diff_id(layer_id)
                    path = f"{layer_id}/layer.tar"
                    paths.append(path)
                    if known and known in have:
                        diff_ids.append(known)
                        continue
                    raw = Path(tmp) / "layer.tar"
                    with open(raw, "wb") as f:
                        hashing = _Hashing(f)
                        pack_layer(self.store.layer(layer_id).path, hashing)
                    diff_id = "sha256:" + hashing.hash.hexdigest()
                    (self.dir / "layers" / f"{layer_id}.json").write_text(json.dumps({"diff_id": diff_id}))
                    diff_ids.append(diff_id)
                    out.add(raw, path)
                    raw.unlink()
                config = json.dumps(image_document(self.store, image, diff_ids)).encode()
                _add_bytes(out, "config.json", config)
                manifest = [{"Config": "config.json", "RepoTags": [tag], "Layers": paths}]
                _add_bytes(out, "manifest.json", json.dumps(manifest).encode())
            with open(archive, "rb") as f:
                self.client.images.load(f)
        if not self._has_image(tag):
            raise SandboxError(f"the Docker engine did not load image {image.name} as {tag}")

    def import_engine_image(self, yard, ref: str):
        """Bring an image only the engine has into the store (docker save -> load_image), once."""
        import docker

        try:
            img = self.client.images.get(ref)
        except docker.errors.ImageNotFound:
            return None
        with tempfile.TemporaryDirectory(dir=self.dir) as tmp:
            path = Path(tmp) / "save.tar"
            with open(path, "wb") as f:
                for chunk in img.save(named=False):
                    f.write(chunk)
            return yard.load_image(path, name=ref)

    def layer_from_image(self, engine_ref: str) -> Path:
        """The top layer of engine image `engine_ref` as an envyard layer directory (not sealed)."""
        from ..layertar import scan_blob, unpack_blob

        img = self.client.images.get(engine_ref)
        top = img.attrs["RootFS"]["Layers"][-1]
        dest = self.store.new_layer_dir()
        if self._copy_overlay2_diff(img.attrs.get("GraphDriver") or {}, dest):
            return dest
        with tempfile.TemporaryDirectory(dir=self.dir) as tmp:
            blob = Path(tmp) / "top.tar"
            if not _extract_layer(img.save(named=False), top, blob):
                raise SandboxError(f"docker save of {engine_ref} holds no layer {top}")
            scan_blob(blob)
            unpack_blob(blob, dest)
        return dest


    def _copy_overlay2_diff(self, driver: dict, dest: Path) -> bool:
        """With the engine on this host on overlay2, copy the image's top layer from its diff directory (already
        in overlayfs format: 0:0 character-device whiteouts) instead of streaming `docker save`: time in
        proportion to the changes, not the image. Opaque directories' trusted.overlay.opaque becomes envyard's
        marks; the engine's other overlay xattrs are dropped. False when this does not apply."""
        import subprocess

        from ..overlay import mark_opaque

        upper = (driver.get("Data") or {}).get("UpperDir")
        if not (self.local_engine and driver.get("Name") == "overlay2" and upper and os.path.isdir(upper)):
            return False
        r = subprocess.run(["cp", "-a", "--reflink=auto", f"{upper}/.", f"{dest}/"], capture_output=True)
        if r.returncode != 0:
            for p in Path(dest).iterdir():
                subprocess.run(["rm", "-rf", str(p)], check=False)
            return False
        for root, dirs, _files in os.walk(dest):
            for d in [root, *(os.path.join(root, x) for x in dirs)]:
                try:
                    names = os.listxattr(d, follow_symlinks=False)
                except OSError:
                    continue
                opaque = False
                for name in names:
                    if name.startswith("trusted.overlay."):
                        if name == "trusted.overlay.opaque":
                            opaque = os.getxattr(d, name, follow_symlinks=False) == b"y"
                        os.removexattr(d, name, follow_symlinks=False)
                if opaque:
                    mark_opaque(d)
        return True


class _Hashing:
    def __init__(self, out):
        self.out, self.hash = out, hashlib.sha256()

    def write(self, data) -> int:
        self.hash.update(data)
        return self.out.write(data)

    def flush(self) -> None:
        self.out.flush()


def _add_bytes(tf: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, int(time.time())
    tf.addfile(info, io.BytesIO(data))


class _ChunkReader(io.RawIOBase):
    def __init__(self, chunks):
        self.chunks, self.buf = iter(chunks), b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self.buf:
            try:
                self.buf = next(self.chunks)
            except StopIteration:
                return 0
        n = min(len(b), len(self.buf))
        b[:n], self.buf = self.buf[:n], self.buf[n:]
        return n


def _extract_layer(chunks, diff_id: str, dest: Path) -> bool:
    """Stream a `docker save` and keep the (uncompressed) layer whose sha256 is `diff_id` in `dest`: every
    layer candidate is hashed while written, the others are dropped, so at most one layer sits on disk."""
    stream = io.BufferedReader(_ChunkReader(chunks), 1 << 20)
    with tarfile.open(fileobj=stream, mode="r|") as tf:
        for member in tf:
            if not member.isfile() or not (member.name.endswith("layer.tar") or "/sha256/" in member.name):
                continue
            src = tf.extractfile(member)
            h = hashlib.sha256()
            with open(dest, "wb") as f:
                while chunk := src.read(1 << 20):
                    h.update(chunk)
                    f.write(chunk)
            if "sha256:" + h.hexdigest() == diff_id:
                return True
    dest.unlink(missing_ok=True)
    return False


# ---- sandboxes ------------------------------------------------------------------------------------------------


class DockerSandbox:
    def __init__(self, backend: DockerBackend, spec: SandboxSpec):
        self.backend = backend
        self.spec = spec
        self.id = uuid.uuid4().hex[:12]
        self.workdir = spec.workdir or spec.image.config.workdir or "/"
        self.engine_ref = backend.engine_image(spec.image)
        self.dir = backend.dir / "sandboxes" / self.id
        (self.dir / "spill").mkdir(parents=True)
        self.spill_budget = SpillBudget()
        self._ids = iter(range(1, 1 << 62))
        self._closed = False
        self._stopped = False
        self._upper: Path | None = None
        self.container = None
        self._start()

    def _create_args(self) -> dict:
        spec, limits = self.spec, self.spec.limits
        env = {**self.spec.image.config.env, **spec.env}
        args = dict(image=self.engine_ref, entrypoint=KEEPER[:1], command=KEEPER[1:], user="0",
                    working_dir=self.workdir, environment=[f"{k}={v}" for k, v in env.items()],
                    labels={LABEL: self.id, "envyard.store": str(self.backend.store.home),
                            "envyard.owner.pid": _owner()["pid"], "envyard.owner.start": _owner()["start"]},
                    network_mode=spec.network, detach=True, name=f"envyard-{self.id}")
        if spec.network != "host":
            args["hostname"] = spec.hostname or f"envyard-{self.id}"
        if limits.memory is not None:
            args["mem_limit"] = limits.memory_bytes
            args["memswap_limit"] = args["mem_limit"]
        if limits.pids is not None:
            args["pids_limit"] = int(limits.pids)
        if limits.cpus is not None:
            args["nano_cpus"] = int(float(limits.cpus) * 1e9)
        if limits.cpu_shares is not None:
            args["cpu_shares"] = limits.cpu_shares
        volumes = {h: {"bind": c, "mode": "rw"} for h, c in spec.binds}
        volumes.update({h: {"bind": c, "mode": "ro"} for h, c in spec.ro_binds})
        if volumes:
            args["volumes"] = volumes
        if spec.security == "relaxed":
            args["security_opt"] = ["seccomp=unconfined"]
        return args

    def _start(self) -> None:
        import docker

        try:
            self.container = self.backend.client.containers.run(**self._create_args())
        except docker.errors.APIError as e:
            raise SandboxError(f"sandbox {self.id}: the Docker engine refused to start it: {e.explanation or e}",
                               fix="check the image has /bin/sh and sleep; `docker info` for the engine") from e
        self.container.reload()
        self.pid = self.container.attrs["State"]["Pid"]

    # ---- state --------------------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        if self._closed or self._stopped or self.container is None:
            return False
        try:
            self.container.reload()
        except Exception:  # noqa: BLE001
            return False
        return self.container.status == "running"

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosed(f"sandbox {self.id} is closed")
        if self._stopped:
            raise SandboxClosed(f"sandbox {self.id} was stopped", fix="close it; start a new one or reset() first")
        if not self.alive:
            raise SandboxDied(f"sandbox {self.id} is no longer running (its container stopped)",
                              fix="create a new sandbox or call reset(); check memory limits if this repeats")

    def _remove(self) -> None:
        import docker

        if self.container is not None:
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                self.container.remove(force=True)
            self.container = None

    def reset(self) -> None:
        self._check_open_or_stopped()
        self._remove()
        self._stopped = False
        self._drop_upper()
        self._start()

    def _check_open_or_stopped(self) -> None:
        if self._closed:
            raise SandboxClosed(f"sandbox {self.id} is closed")

    def stop(self) -> None:
        self._check_open_or_stopped()
        self._stopped = True
        with contextlib.suppress(Exception):
            self.container.kill()
        with contextlib.suppress(Exception):
            self.container.wait(timeout=30)

    @property
    def upper_dir(self) -> Path:
        """The stopped container's changes as an overlayfs-format directory (made on first use)."""
        if self._upper is None:
            self._upper = self._commit_layer(pause=False)
        return self._upper / ""

    def _drop_upper(self) -> None:
        if self._upper is not None:
            self.backend.store.discard_dir(self._upper, background=True)
            self._upper = None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._remove()
            if getattr(self, "_last_commit", None):  # a commit for upper_dir that no snapshot adopted
                with contextlib.suppress(Exception):
                    self.backend.client.images.remove(self._last_commit, force=True)
        finally:
            self._drop_upper()
            shutil.rmtree(self.dir, ignore_errors=True)

    def snapshot_layer(self) -> Path:
        self._check_open()
        return self._commit_layer(pause=True)

    def _commit_layer(self, pause: bool) -> Path:
        """Commit the container (paused meanwhile when running) and unpack its diff as a layer directory. The
        committed image stays in the engine, tagged as the export of (this image's layers + that layer) once
        the caller seals it: see DockerBackend.adopt."""
        img = self.backend.api.commit(self.container.id, conf={"Labels": {}, "Env": [], "Entrypoint": None,
                                                                "Cmd": None}, pause=pause)
        ref = img["Id"]
        try:
            layer = self.backend.layer_from_image(ref)
            self._last_commit = ref
            return layer
        except BaseException:
            with contextlib.suppress(Exception):
                self.backend.client.images.remove(ref, force=True)
            raise

    def snapshot_sealed(self, image) -> None:
        """Tag the last commit as the engine's copy of the sealed snapshot `image`, so that sandboxes over it
        start without an export."""
        ref = getattr(self, "_last_commit", None)
        if ref is None:
            return
        repo, tag = self.backend.tag_for(image.layers).split(":")
        with contextlib.suppress(Exception):
            self.backend.client.images.get(ref).tag(repo, tag)
        self._last_commit = None

    # ---- exec ---------------------------------------------------------------------------------------------

    def exec(self, cmd, *, timeout=None, cwd=None, env=None, stdin=None, max_output=DEFAULT_MAX_OUTPUT,
             max_spill=DEFAULT_MAX_SPILL, cancel=None, on_output=None, user: str | None = None) -> ExecResult:
        self._check_open()
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else ["/bin/sh", "-c", 'exec "$@"', "sh", *cmd]
        eid = f"x{next(self._ids)}"
        out = OutputBuffer(max_output, self.dir / "spill" / f"{eid}.stdout", _stream_to(on_output, "stdout"),
                           max_spill=max_spill, budget=self.spill_budget)
        err = OutputBuffer(max_output, self.dir / "spill" / f"{eid}.stderr", _stream_to(on_output, "stderr"),
                           max_spill=max_spill, budget=self.spill_budget)
        api = self.backend.api
        start = time.perf_counter()
        ex = api.exec_create(self.container.id, argv, stdout=True, stderr=True, stdin=stdin is not None,
                             environment=[f"{k}={v}" for k, v in (env or {}).items()] or None,
                             workdir=cwd or self.workdir, user=user or "0", tty=False)
        sock = api.exec_start(ex["Id"], socket=True)
        raw = getattr(sock, "_sock", sock)
        timed_out = False
        try:
            if stdin is not None:
                data = stdin.encode() if isinstance(stdin, str) else stdin
                threading.Thread(target=_feed, args=(raw, data), daemon=True).start()
            deadline = None if timeout is None else time.monotonic() + timeout
            reader = _Frames(raw, {1: out, 2: err})
            while not reader.eof:
                wait = 0.25 if deadline is None else max(0.0, min(0.25, deadline - time.monotonic()))
                if cancel is not None and getattr(cancel, "fired", False):
                    self._kill_exec(ex["Id"])
                    deadline = None
                if deadline is not None and time.monotonic() >= deadline:
                    timed_out = True
                    self._kill_exec(ex["Id"])
                    deadline = None
                    reader.drain(5.0)
                    break
                reader.read(wait)
        finally:
            with contextlib.suppress(OSError):
                raw.close()
        code = None
        for _ in range(100):
            info = api.exec_inspect(ex["Id"])
            if not info.get("Running"):
                code = info.get("ExitCode")
                break
            time.sleep(0.05)
        if code is None:
            code = 137 if timed_out else -1
        duration = time.perf_counter() - start
        oom = False
        if code == 137 and self.spec.limits.memory is not None:
            with contextlib.suppress(Exception):
                self.container.reload()
                oom = bool(self.container.attrs["State"].get("OOMKilled")) or not timed_out
        return ExecResult(exit_code=code, stdout_bytes=out.value(), stderr_bytes=err.value(), duration=duration,
                          timed_out=timed_out, truncated=out.truncated or err.truncated, oom_killed=oom,
                          stdout_file=out.spill_file, stderr_file=err.spill_file)

    def _kill_exec(self, exec_id: str) -> None:
        """Kill the exec's process tree: from this host through the container's pid namespace when the engine
        runs here, else every process of the container but its pid-1 (from inside, with kill -9)."""
        pid = self.backend.api.exec_inspect(exec_id).get("Pid")
        if self.backend.local_engine and pid and procinfo.pid_namespace(self.pid) is not None:
            _kill_tree(procinfo.pid_namespace(self.pid), pid)
            return
        with contextlib.suppress(Exception):
            self.container.exec_run(["/bin/sh", "-c", "kill -9 -1"], user="0")

    def shell(self, user: str | None = None) -> "DockerShell":
        self._check_open()
        return DockerShell(self, f"s{next(self._ids)}", user)

    # ---- files --------------------------------------------------------------------------------------------

    def _stat(self, path: str) -> dict | None:
        import docker

        try:
            stream, st = self.backend.api.get_archive(self.container.id, path)
        except docker.errors.NotFound:
            return None
        with contextlib.suppress(Exception):
            stream.close()
        return st

    def _resolve_file(self, parts: list[str]) -> tuple[str, dict | None]:
        """Follow symlinks of the file itself (inside the container, as the engine resolves them)."""
        path = "/" + "/".join(parts)
        for _ in range(40):
            st = self._stat(path)
            if st is None or not st["mode"] & _GO_SYMLINK:
                return path, st
            target = st.get("linkTarget") or ""
            path = target if target.startswith("/") else os.path.normpath(os.path.join(os.path.dirname(path), target))
        raise BadInput(f"too many levels of symlinks at /{'/'.join(parts)}")

    def read_file(self, parts: list[str], max_bytes: int) -> bytes:
        self._check_files()
        path, st = self._resolve_file(parts)
        if st is None:
            raise FileNotFoundError(f"no such file in sandbox {self.id}: /{'/'.join(parts)}")
        if st["mode"] & (_GO_DIR | _GO_SPECIAL):
            raise NotRegularFile(f"/{'/'.join(parts)} is not a regular file")
        if st["size"] > max_bytes:
            raise FileTooLarge(f"/{'/'.join(parts)} is {st['size']} bytes, more than max_bytes={max_bytes}",
                               size=st["size"], limit=max_bytes, fix="raise max_bytes, or use download()")
        stream, _ = self.backend.api.get_archive(self.container.id, path)
        with tarfile.open(fileobj=io.BufferedReader(_ChunkReader(stream), 1 << 20), mode="r|") as tf:
            for member in tf:
                if member.isfile():
                    return tf.extractfile(member).read(max_bytes + 1)[:max_bytes]
        raise NotRegularFile(f"/{'/'.join(parts)} is not a regular file")

    def _check_files(self) -> None:
        if self._closed:
            raise SandboxClosed(f"sandbox {self.id} is closed")
        if self.container is None:
            raise SandboxDied(f"sandbox {self.id} has no container")

    def _ensure_dir(self, parts: list[str]) -> None:
        """Make the missing directories of `parts` (0755, root), leaving existing ones untouched."""
        have = 0
        for i in range(len(parts), 0, -1):
            st = self._stat("/" + "/".join(parts[:i]))
            if st is not None:
                if not st["mode"] & _GO_DIR:
                    raise NotADirectoryError(f"/{'/'.join(parts[:i])} is not a directory in sandbox {self.id}")
                have = i
                break
        if have == len(parts):
            return
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tf:
            for j in range(have + 1, len(parts) + 1):
                info = tarfile.TarInfo("/".join(parts[have:j]))
                info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
                tf.addfile(info)
        self.backend.api.put_archive(self.container.id, "/" + "/".join(parts[:have]), buf.getvalue())

    def write_file(self, parts: list[str], data: bytes, mode: int | None) -> None:
        self._check_files()
        if not parts:
            raise NotRegularFile("/ is not a regular file")
        path = "/" + "/".join(parts)
        st = self._stat(path)
        if st is not None and st["mode"] & _GO_SYMLINK:
            raise NotRegularFile(f"{path} is a symlink", fix="write to the file it points to")
        if st is not None and st["mode"] & (_GO_DIR | _GO_SPECIAL):
            raise NotRegularFile(f"{path} is not a regular file")
        self._ensure_dir(parts[:-1])
        if mode is None:
            mode = (st["mode"] & 0o7777) if st is not None else 0o644
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tf:
            _add_bytes(tf, parts[-1], data, mode)
        self.backend.api.put_archive(self.container.id, "/" + "/".join(parts[:-1]), buf.getvalue())

    def upload(self, src: Path, parts: list[str]) -> None:
        self._check_files()
        src = Path(src)
        if src.is_dir():
            self._ensure_dir(parts)
            target, arc = parts, "."
        else:
            self._ensure_dir(parts[:-1])
            target, arc = parts[:-1], parts[-1]

        def only_plain(info: tarfile.TarInfo):
            if not (info.isfile() or info.isdir() or info.issym() or info.islnk()):
                return None  # FIFOs, sockets, devices are skipped, as by the local backend
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            return info

        with tempfile.TemporaryFile(dir=self.backend.dir) as f:
            with tarfile.open(fileobj=f, mode="w") as tf:
                tf.add(src, arcname=arc, filter=only_plain)
            f.seek(0)
            self.backend.api.put_archive(self.container.id, "/" + "/".join(target), f)

    def download(self, parts: list[str], dest: Path, max_bytes: int, max_entries: int) -> list[str]:
        import docker

        self._check_files()
        path = "/" + "/".join(parts)
        try:
            stream, st = self.backend.api.get_archive(self.container.id, path)
        except docker.errors.NotFound:
            raise FileNotFoundError(f"no such file or directory in sandbox {self.id}: {path}") from None
        skipped: list[str] = []
        total = entries = 0
        dest = Path(dest)
        base = os.path.basename(path.rstrip("/")) or ""
        with tarfile.open(fileobj=io.BufferedReader(_ChunkReader(stream), 1 << 20), mode="r|") as tf:
            for member in tf:
                entries += 1
                if entries > max_entries:
                    raise BadInput(f"{path} holds more than max_entries={max_entries} entries",
                                   fix="raise max_entries, or download a smaller tree")
                name = member.name
                rel = name[len(base):].lstrip("/") if base and (name == base or name.startswith(base + "/")) else name
                inside = path if not rel else f"{path.rstrip('/')}/{rel}"
                if rel and (rel.startswith("/") or ".." in rel.split("/")):
                    skipped.append(inside)
                    continue
                target = dest / rel if rel else dest
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    os.chmod(target, member.mode & 0o7777 | 0o700)
                elif member.isfile():
                    total += member.size
                    if total > max_bytes:
                        raise FileTooLarge(f"{path} holds more than max_bytes={max_bytes} bytes", size=total,
                                           limit=max_bytes, fix="raise max_bytes")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with open(target, "wb") as f:
                        shutil.copyfileobj(tf.extractfile(member), f)
                    os.chmod(target, member.mode & 0o777)
                    os.utime(target, (member.mtime, member.mtime))
                elif member.issym() and rel and not member.linkname.startswith("/") and \
                        ".." not in os.path.normpath(os.path.join(os.path.dirname(rel), member.linkname)).split("/")[:1]:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.symlink(member.linkname, target)
                else:
                    skipped.append(inside)
        return skipped


# One command of a session: restore the saved cwd and exported variables, run the command in this shell (so
# `cd` and `export` take effect), save them again. The state lives in /dev/shm (a tmpfs of the container, never
# in a commit or a snapshot). Functions, aliases and unexported variables do not persist.
_SESSION_STEP = r"""
s=/dev/shm/.envyard-$1; shift
if [ -f "$s/env" ]; then . "$s/env" 2>/dev/null; fi
if [ -f "$s/cwd" ]; then cd "$(cat "$s/cwd")" 2>/dev/null; fi
eval "$1"
__rc=$?
mkdir -p "$s" 2>/dev/null && pwd > "$s/cwd" && export -p > "$s/env" 2>/dev/null
exit $__rc
"""


class DockerShell:
    """A shell session emulated over exec: each `run` is one `docker exec` of the image's bash (else sh) that
    restores and saves the cwd and the exported variables. Unlike the local backend's sessions, shell
    functions, aliases and unexported variables do not carry over, nor do background jobs' job control."""

    def __init__(self, sandbox: DockerSandbox, session_id: str, user: str | None):
        self.sb, self.id, self.user = sandbox, f"{sandbox.id}-{session_id}", user
        self._closed = False
        self._running = None
        shells = sandbox.exec(["/bin/sh", "-c", "command -v bash || echo /bin/sh"], max_output=4096)
        self.program = (shells.stdout.strip().splitlines() or ["/bin/sh"])[-1]

    @property
    def alive(self) -> bool:
        return not self._closed and self.sb.alive

    def run(self, command: str, *, timeout: float | None = None, max_output: int | None = DEFAULT_MAX_OUTPUT,
            max_spill: int = DEFAULT_MAX_SPILL, cancel=None, on_output=None) -> ExecResult:
        if self._closed:
            raise SandboxClosed(f"shell session {self.id} is closed")
        return self.sb.exec([self.program, "-c", _SESSION_STEP, "sh", self.id, command], timeout=timeout,
                            max_output=max_output, max_spill=max_spill, cancel=cancel, on_output=on_output,
                            user=self.user)

    def interrupt(self) -> None:
        pass  # each run ends with its command (or its timeout); nothing keeps running between runs

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self.sb.exec(["rm", "-rf", f"/dev/shm/.envyard-{self.id}"], max_output=4096)


def _stream_to(on_output, stream: str):
    return None if on_output is None else (lambda chunk: on_output(stream, chunk))


def _feed(sock, data: bytes) -> None:
    try:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class _Frames:
    """Docker's multiplexed exec stream: 8-byte headers (stream, 0, 0, 0, big-endian size) and payloads."""

    def __init__(self, sock, sinks: dict[int, OutputBuffer]):
        self.sock, self.sinks, self.buf, self.eof = sock, sinks, b"", False

    def read(self, wait: float) -> None:
        ready, _, _ = select.select([self.sock], [], [], wait)
        if not ready:
            return
        try:
            data = self.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.eof = True
            return
        self.buf += data
        while len(self.buf) >= 8:
            kind, size = self.buf[0], struct.unpack(">I", self.buf[4:8])[0]
            if len(self.buf) < 8 + size:
                break
            sink = self.sinks.get(kind)
            if sink is not None:
                sink.feed(self.buf[8:8 + size])
            self.buf = self.buf[8 + size:]

    def drain(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.eof and time.monotonic() < end:
            self.read(0.1)


def _kill_tree(pid_ns: int, leader: int) -> None:
    """SIGKILL `leader` (a host pid), its session and every descendant, in pid namespace `pid_ns`."""
    is_session = procinfo.session_id(leader) == leader
    for attempt in range(200):
        if attempt >= 3 and not (procinfo.is_alive(leader, None) and procinfo.pid_namespace(leader) == pid_ns):
            return
        tree = procinfo.process_tree(leader, procinfo.pids_in_namespace(pid_ns), is_session)
        for p in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        time.sleep(0.005)


# ---- owner death -----------------------------------------------------------------------------------------------


def reap_containers(store, *, client=None, required: bool = False) -> dict:
    """Remove this store's containers whose owner process is dead (and their spill directories)."""
    try:
        client = client or _client()
    except HostUnsupported:
        if required:
            raise
        return {}
    removed = []
    for c in client.containers.list(all=True, filters={"label": [LABEL, f"envyard.store={store.home}"]}):
        labels = c.labels
        try:
            pid, start = int(labels["envyard.owner.pid"]), int(labels["envyard.owner.start"])
        except (KeyError, ValueError):
            continue
        if procinfo.is_alive(pid, start):
            continue
        with contextlib.suppress(Exception):
            c.remove(force=True)
            removed.append(labels[LABEL])
        shutil.rmtree(store.home / "docker" / "sandboxes" / labels[LABEL], ignore_errors=True)
    return {"docker_containers": removed}
