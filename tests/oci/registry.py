"""Test helpers: a real registry (Debian's docker-registry, the CNCF distribution registry) on a free loopback
port, a token service for its Bearer auth, a stalling proxy, and a small raw client that writes blobs and
manifests exactly as a test wants them (independently of envyard's own push)."""

from __future__ import annotations

import base64
import datetime
import gzip
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import threading
import time
import uuid
import warnings
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

REGISTRY_BIN = shutil.which("docker-registry") or "/usr/bin/docker-registry"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_registry() -> None:
    if not os.path.exists(REGISTRY_BIN):
        if os.environ.get("CI"):
            pytest.fail("docker-registry is not installed (scripts/install.sh --test installs it)")
        pytest.skip("docker-registry is not installed: apt-get install docker-registry (scripts/install.sh --test)")


class Registry:
    """A distribution registry process with its own storage; `auth` is its config's `auth:` section."""

    def __init__(self, root: Path, auth: dict | None = None):
        self.root = root
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.host}"
        self.storage = root / "storage"
        self.storage.mkdir(parents=True)
        config = {
            "version": 0.1,
            "log": {"level": "error", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(self.storage)}, "delete": {"enabled": True}},
            "http": {"addr": self.host},
        }
        if auth:
            config["auth"] = auth
        (root / "config.yml").write_text(json.dumps(config))  # JSON is YAML
        self.log = open(root / "registry.log", "wb")
        self.proc = subprocess.Popen([REGISTRY_BIN, "serve", str(root / "config.yml")], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while True:
            try:
                if httpx.get(f"{self.url}/v2/", timeout=1).status_code in (200, 401):
                    break
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"docker-registry did not start: {(root / 'registry.log').read_text()[-2000:]}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def blob_file(self, digest: str) -> Path:
        """Where the filesystem driver keeps a blob (tests corrupt it to see a digest mismatch)."""
        hexd = digest.split(":")[1]
        return self.storage / "docker/registry/v2/blobs/sha256" / hexd[:2] / hexd / "data"


# --- building images by hand ---------------------------------------------------------------------------------


def tar_layer(entries: list[tuple]) -> bytes:
    """An uncompressed layer tar from (name, data) for files, (name, None) for directories, or (TarInfo, data)
    for anything else."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in entries:
            if isinstance(name, tarfile.TarInfo):
                tf.addfile(name, io.BytesIO(data) if data else None)
                continue
            info = tarfile.TarInfo(name)
            info.mtime = 1_700_000_000
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tf.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def compress(data: bytes, kind: str) -> bytes:
    if kind == "gzip":
        return gzip.compress(data, mtime=0)
    if kind == "zstd":
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    return data


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


LAYER_TYPES = {"gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
               "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
               "plain": "application/vnd.oci.image.layer.v1.tar",
               "docker": "application/vnd.docker.image.rootfs.diff.tar.gzip"}


@dataclass
class Raw:
    """Writes blobs and manifests to a registry over plain HTTP, exactly as given."""

    url: str
    auth: tuple[str, str] | None = None

    def blob(self, repo: str, data: bytes) -> str:
        digest = digest_of(data)
        r = httpx.post(f"{self.url}/v2/{repo}/blobs/uploads/", auth=self.auth)
        assert r.status_code == 202, r.text
        location = httpx.URL(self.url).join(r.headers["Location"])
        r = httpx.put(location.copy_merge_params({"digest": digest}), content=data, auth=self.auth,
                      headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 201, r.text
        return digest

    def manifest(self, repo: str, ref: str, doc: dict, media_type: str) -> str:
        body = json.dumps(doc).encode()
        r = httpx.put(f"{self.url}/v2/{repo}/manifests/{ref}", content=body, auth=self.auth,
                      headers={"Content-Type": media_type})
        assert r.status_code == 201, r.text
        return digest_of(body)

    def image(self, repo: str, tag: str | None, layers: list[tuple[bytes, str]], *, arch: str = "amd64",
              config_extra: dict | None = None, docker: bool = False,
              config_type: str | None = None, diff_ids: list[str] | None = None) -> dict:
        """Push an image of uncompressed layer tars with the given compressions ('gzip', 'zstd', 'plain');
        returns its manifest descriptor (with digest and size)."""
        descriptors = []
        for tar, kind in layers:
            blob = compress(tar, kind)
            descriptors.append({"mediaType": LAYER_TYPES["docker" if docker else kind], "digest": self.blob(repo, blob),
                                "size": len(blob)})
        config = {"architecture": arch, "os": "linux",
                  "rootfs": {"type": "layers", "diff_ids": diff_ids or [digest_of(t) for t, _ in layers]},
                  "config": {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "HELLO=world"], **(config_extra or {})}}
        config_bytes = json.dumps(config).encode()
        ctype = config_type or ("application/vnd.docker.container.image.v1+json" if docker
                                else "application/vnd.oci.image.config.v1+json")
        mtype = ("application/vnd.docker.distribution.manifest.v2+json" if docker
                 else "application/vnd.oci.image.manifest.v1+json")
        doc = {"schemaVersion": 2, "mediaType": mtype,
               "config": {"mediaType": ctype, "digest": self.blob(repo, config_bytes), "size": len(config_bytes)},
               "layers": descriptors}
        body = json.dumps(doc).encode()
        self.manifest(repo, tag or digest_of(body), doc, mtype)
        return {"mediaType": mtype, "digest": digest_of(body), "size": len(body)}


# --- a token service for the registry's Bearer auth ----------------------------------------------------------


class TokenService:
    """Issues JWTs (ES256, the signing certificate in the `x5c` header) that the distribution registry
    verifies against `cert.pem`, to callers presenting `user`/`password` with Basic auth."""

    def __init__(self, root: Path, user: str, password: str, service: str = "envyard-test"):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.user, self.password, self.service, self.issuer = user, password, service, "envyard-test-issuer"
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "envyard test token signer")])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(self.key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(self.key, hashes.SHA256()))
        self.cert_path = root / "token-cert.pem"
        self.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.x5c = base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()
        self.requests: list[dict] = []
        service_self = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                service_self._answer(self)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.realm = f"http://127.0.0.1:{self.server.server_address[1]}/token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def registry_auth(self) -> dict:
        return {"token": {"realm": self.realm, "service": self.service, "issuer": self.issuer,
                          "rootcertbundle": str(self.cert_path)}}

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        import jwt

        query = httpx.URL(handler.path).params
        header = handler.headers.get("Authorization", "")
        expected = "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        self.requests.append({"scopes": query.get_list("scope"), "authorized": header == expected})
        if header != expected:
            handler.send_response(401)
            handler.end_headers()
            return
        access = []
        for scope in query.get_list("scope"):
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": self.user, "aud": query.get("service"), "exp": now + 300,
                  "nbf": now - 10, "iat": now, "jti": uuid.uuid4().hex, "access": access}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            token = jwt.encode(claims, self.key, algorithm="ES256", headers={"x5c": [self.x5c]})
        body = json.dumps({"token": token}).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def htpasswd_line(user: str, password: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt

        return f"{user}:{crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))}\n"


# --- a proxy that stops forwarding after some bytes ------------------------------------------------------------


class StallingProxy:
    """Forwards loopback TCP to `target_port`, but passes only `budget` bytes from the server in all, then
    holds every connection open without forwarding: a download that hangs mid-blob."""

    def __init__(self, target_port: int, budget: int):
        self.target_port, self.budget = target_port, budget
        self.sent = 0
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.threads: list[threading.Thread] = []
        self._spawn(self._accept)

    def _spawn(self, fn, *args) -> None:
        t = threading.Thread(target=fn, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    def _accept(self) -> None:
        self.listener.settimeout(0.2)
        while not self.closing.is_set():
            try:
                client, _ = self.listener.accept()
            except (socket.timeout, OSError):
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self._spawn(self._pump, client, upstream, False)
            self._spawn(self._pump, upstream, client, True)

    def _pump(self, src: socket.socket, dst: socket.socket, limited: bool) -> None:
        src.settimeout(0.2)
        try:
            while not self.closing.is_set():
                try:
                    data = src.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    break
                if limited:
                    with self.lock:
                        allowed = max(0, min(len(data), self.budget - self.sent))
                        self.sent += allowed
                    data = data[:allowed]
                    if not data:
                        self.closing.wait()  # stall: hold the connection, forward nothing more
                        break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def stop(self) -> None:
        self.closing.set()
        self.listener.close()
        for t in self.threads:
            t.join(2)
