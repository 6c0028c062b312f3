"""A client of one repository on a registry (the OCI distribution protocol, registry API v2) over httpx.

It answers the registry's `WWW-Authenticate` challenges (Bearer: a token from the realm, anonymous or with
Basic credentials; Basic: the configured credentials), tries Docker Hub's mirrors before Docker Hub, falls
back to plain HTTP for insecure registries, resumes interrupted blob downloads with HTTP Range requests, and
verifies every digest. Failures are typed errors (errors.py) that say what to do.
"""

from __future__ import annotations

import base64
import hashlib
import re
import ssl
from contextlib import closing
from pathlib import Path
from typing import BinaryIO, Callable, Iterator
from urllib.parse import urlencode, urljoin, urlsplit

import httpx

from ..errors import DigestMismatch, RegistryAuthError, RegistryError, RegistryUnreachable, RemoteImageNotFound
from ..store.names import DOCKER_HUB
from .oci import ACCEPT, MAX_MANIFEST
from .registries import Endpoint, RegistryConfig

CHUNK = 1 << 20
TIMEOUT = httpx.Timeout(60.0, connect=10.0)
DOWNLOAD_ATTEMPTS = 3  # a dropped connection mid-blob is resumed this many times within one pull
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')
_AUTH_FIX = "add credentials for it under \"auths\" in $ENVYARD_HOME/registries.json (see docs/images.md)"

BytesFn = Callable[[int], None]  # told how many bytes have arrived (or gone) so far


class RegistryClient:
    """Requests for `repository` on `registry`; `push` asks the registry for push rights too."""

    def __init__(self, config: RegistryConfig, registry: str, repository: str, *, push: bool = False):
        self.config, self.registry, self.repository = config, registry, repository
        self.endpoints = config.endpoints(registry)
        self.scope = f"repository:{repository}:{'pull,push' if push else 'pull'}"
        self._clients: dict[object, httpx.Client] = {}
        self._base: dict[str, str] = {}  # endpoint url → the url in use (http:// after a fallback)
        self._auth: dict[tuple[str, str], str] = {}  # (endpoint url, scope) → Authorization header
        self._preferred: Endpoint | None = None

    def __enter__(self) -> "RegistryClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    # ---- reading ------------------------------------------------------------------------------------------

    def get_manifest(self, ref: str) -> tuple[bytes, str | None, str]:
        """The manifest or index that tag or digest `ref` names: (bytes, Content-Type, sha256 digest)."""
        def attempt(ep: Endpoint):
            resp = self._request(ep, "GET", f"/manifests/{ref}", headers={"Accept": ACCEPT}, stream=True,
                                 what=f"{self.registry}/{self.repository}:{ref}" if ":" not in ref
                                 else f"{self.registry}/{self.repository}@{ref}")
            with closing(resp):
                body = _read_bounded(resp, MAX_MANIFEST, "manifest")
            digest = "sha256:" + hashlib.sha256(body).hexdigest()
            claimed = resp.headers.get("Docker-Content-Digest")
            expected = ref if ref.startswith("sha256:") else claimed
            if expected and expected.startswith("sha256:") and expected != digest:
                raise DigestMismatch(f"the manifest {ref} from {ep.host} has digest {digest}, not {expected}",
                                     fix="the registry or something between served altered content; try again")
            return body, resp.headers.get("Content-Type"), digest

        return self._on_endpoints(attempt)

    def get_blob(self, digest: str, max_size: int) -> bytes:
        """A small blob (an image config), read whole and verified."""
        def attempt(ep: Endpoint):
            with closing(self._request(ep, "GET", f"/blobs/{digest}", stream=True, what=f"blob {digest}")) as resp:
                body = _read_bounded(resp, max_size, f"blob {digest}")
            _check_digest(hashlib.sha256(body), digest, ep.host)
            return body

        return self._on_endpoints(attempt)

    def download_blob(self, digest: str, size: int, part: BinaryIO, on_bytes: BytesFn) -> None:
        """Complete the download of blob `digest` (`size` bytes) into `part`, an open file that may already
        hold its first bytes from an interrupted pull: those are kept and the rest asked for with a Range
        request. Verified when done; a file whose content turns out wrong is emptied and the error raised."""
        def attempt(ep: Endpoint):
            for tries in range(1, DOWNLOAD_ATTEMPTS + 1):
                try:
                    return self._download_once(ep, digest, size, part, on_bytes)
                except RegistryUnreachable:
                    if tries == DOWNLOAD_ATTEMPTS:
                        raise

        self._on_endpoints(attempt)

    def _download_once(self, ep: Endpoint, digest: str, size: int, part: BinaryIO, on_bytes: BytesFn) -> None:
        hasher, have = _hash_file(part)
        if have > size:
            have, hasher = _restart(part)
        if have < size:
            headers = {"Range": f"bytes={have}-"} if have else {}
            with closing(self._request(ep, "GET", f"/blobs/{digest}", headers=headers, stream=True,
                                       what=f"blob {digest}")) as resp:
                if have and not _continues_at(resp, have):
                    have, hasher = _restart(part)  # the registry sent the whole blob instead
                on_bytes(have)
                try:
                    for chunk in resp.iter_bytes(CHUNK):
                        have += len(chunk)
                        if have > size:
                            _restart(part)
                            raise DigestMismatch(f"blob {digest} from {ep.host} is larger than the {size} bytes "
                                                 "its manifest says", fix="the registry served altered content")
                        part.write(chunk)
                        hasher.update(chunk)
                        on_bytes(have)
                except httpx.TransportError as e:
                    part.flush()
                    raise RegistryUnreachable(f"the download of {digest} from {ep.host} broke off: {e}",
                                              fix="run the pull again: it resumes where it stopped") from e
        part.flush()
        if have < size:
            raise RegistryUnreachable(f"the download of {digest} from {ep.host} ended at {have} of {size} bytes",
                                      fix="run the pull again: it resumes where it stopped")
        try:
            _check_digest(hasher, digest, ep.host)
        except DigestMismatch:
            _restart(part)
            raise

    def blob_exists(self, digest: str) -> bool:
        ep = self.endpoints[-1]
        resp = self._request(ep, "HEAD", f"/blobs/{digest}", what=f"blob {digest}", missing_ok=True)
        return resp.status_code == 200

    # ---- writing ------------------------------------------------------------------------------------------

    def mount_blob(self, digest: str, source_repository: str) -> bool:
        """Ask the registry to link blob `digest` from another of its repositories (no upload). False when it
        will not (then nothing was changed)."""
        ep = self.endpoints[-1]
        scope = f"{self.scope} repository:{source_repository}:pull"
        query = urlencode({"mount": digest, "from": source_repository})
        resp = self._request(ep, "POST", f"/blobs/uploads/?{query}", scope=scope, what=f"blob {digest}")
        if resp.status_code == 201:
            return True
        if resp.status_code == 202 and resp.headers.get("Location"):  # an upload was opened instead: drop it
            try:
                self._request(ep, "DELETE", self._location(ep, resp), what="an upload", missing_ok=True)
            except RegistryError:
                pass
        return False

    def upload_blob(self, digest: str, path: Path, on_bytes: BytesFn) -> None:
        """Upload a blob in one PUT (the monolithic upload every registry takes)."""
        ep = self.endpoints[-1]
        resp = self._request(ep, "POST", "/blobs/uploads/", what="a blob upload", expect=(202,))
        location = self._location(ep, resp)
        sep = "&" if "?" in location else "?"
        size = path.stat().st_size

        def body() -> Iterator[bytes]:
            sent = 0
            with open(path, "rb") as f:
                while chunk := f.read(CHUNK):
                    sent += len(chunk)
                    on_bytes(sent)
                    yield chunk

        self._request(ep, "PUT", f"{location}{sep}{urlencode({'digest': digest})}", content=body(),
                      headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)},
                      what=f"blob {digest}", expect=(201,))

    def upload_bytes(self, digest: str, data: bytes) -> None:
        ep = self.endpoints[-1]
        resp = self._request(ep, "POST", "/blobs/uploads/", what="a blob upload", expect=(202,))
        location = self._location(ep, resp)
        sep = "&" if "?" in location else "?"
        self._request(ep, "PUT", f"{location}{sep}{urlencode({'digest': digest})}", content=data,
                      headers={"Content-Type": "application/octet-stream"}, what=f"blob {digest}", expect=(201,))

    def put_manifest(self, tag: str, body: bytes, media_type: str) -> str:
        ep = self.endpoints[-1]
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        resp = self._request(ep, "PUT", f"/manifests/{tag}", content=body, headers={"Content-Type": media_type},
                             what=f"{self.registry}/{self.repository}:{tag}", expect=(201,))
        echoed = resp.headers.get("Docker-Content-Digest")
        if echoed and echoed != digest:
            raise DigestMismatch(f"the registry recorded the manifest as {echoed}, not {digest}",
                                 fix="the registry altered the manifest; check what sits between envyard and it")
        return digest

    # ---- plumbing -----------------------------------------------------------------------------------------

    def _on_endpoints(self, attempt):
        """Run `attempt` on the endpoint that last worked, else on each in order (mirrors first): a mirror's
        failure of any kind passes the request on to the next one."""
        order = list(self.endpoints)
        if self._preferred in order:
            order.remove(self._preferred)
            order.insert(0, self._preferred)
        failures: list[str] = []
        for ep in order:
            try:
                result = attempt(ep)
                self._preferred = ep
                return result
            except RegistryError as e:
                if not ep.mirror:
                    if failures and isinstance(e, RegistryUnreachable):
                        e.message += f" (mirrors failed too: {'; '.join(failures)})"
                    raise
                failures.append(f"{ep.host}: {e.message}")
        raise RegistryUnreachable("every mirror failed: " + "; ".join(failures))  # only mirrors: unreachable

    def _url(self, ep: Endpoint, path: str) -> str:
        if path.startswith(("http://", "https://")):
            return path
        base = self._base.get(ep.url, ep.url)
        return f"{base}/v2/{self.repository}{path}"

    def _location(self, ep: Endpoint, resp: httpx.Response) -> str:
        location = resp.headers.get("Location")
        if not location:
            raise RegistryError(f"{ep.host} opened an upload without saying where (no Location header)",
                                fix="the registry does not follow the distribution protocol")
        return urljoin(str(resp.request.url), location)

    def _http(self, verify: bool | str) -> httpx.Client:
        """One connection pool per TLS setting: the CA bundle (a path), the default trust, or none."""
        if verify not in self._clients:
            tls = ssl.create_default_context(cafile=verify) if isinstance(verify, str) else verify
            self._clients[verify] = httpx.Client(verify=tls, timeout=TIMEOUT, follow_redirects=True,
                                                 headers={"User-Agent": "envyard"})
        return self._clients[verify]

    def _send(self, ep: Endpoint, method: str, path: str, headers: dict, content, stream: bool) -> httpx.Response:
        """One HTTP exchange; an insecure registry's TLS failure switches that endpoint to plain HTTP."""
        url = self._url(ep, path)
        try:
            request = self._http(ep.verify).build_request(method, url, headers=headers, content=content)
            return self._http(ep.verify).send(request, stream=stream)
        except httpx.ConnectError as e:
            if ep.http_fallback and url.startswith("https://") and ep.url not in self._base:
                self._base[ep.url] = "http://" + ep.url.split("://", 1)[1]
                return self._send(ep, method, path.replace("https://", "http://", 1), headers, content, stream)
            raise self._unreachable(ep, e) from e
        except httpx.TransportError as e:
            raise self._unreachable(ep, e) from e

    def _unreachable(self, ep: Endpoint, e: Exception) -> RegistryUnreachable:
        cause = str(e) or type(e).__name__
        if "CERTIFICATE_VERIFY_FAILED" in cause:
            return RegistryUnreachable(
                f"cannot verify the TLS certificate of {ep.host} (for {self.registry}/{self.repository}): {cause}",
                fix=f"add its CA to the machine's CA bundle, or list {ep.host} under insecure-registries "
                    "(docs/images.md)")
        repo = f"{self.registry}/{self.repository}"
        if self.registry == DOCKER_HUB and not ep.mirror:
            return RegistryUnreachable(
                f"cannot reach Docker Hub ({ep.host}) for {repo}: {cause}; this machine may have no route to "
                "public registries",
                fix="configure a reachable mirror (registry-mirrors in $ENVYARD_HOME/registries.json or "
                    "ENVYARD_REGISTRY_MIRRORS), or push the image to a registry this machine reaches")
        return RegistryUnreachable(f"cannot reach registry {ep.host} for {repo}: {cause}",
                                   fix=f"check that {ep.host} is up and reachable from this machine")

    def _request(self, ep: Endpoint, method: str, path: str, *, headers: dict | None = None, content=None,
                 stream: bool = False, scope: str | None = None, what: str = "", expect: tuple = (),
                 missing_ok: bool = False) -> httpx.Response:
        """Send a request, answering one authentication challenge; map failures to typed errors."""
        scope = scope or self.scope
        for attempt in range(2):
            auth = self._auth.get((ep.url, scope))
            resp = self._send(ep, method, path, {**(headers or {}), **({"Authorization": auth} if auth else {})},
                              content, stream)
            if resp.status_code != 401 or attempt == 1 or not isinstance(content, (bytes, type(None))):
                break
            challenge = resp.headers.get("WWW-Authenticate", "")
            resp.close()
            self._auth[(ep.url, scope)] = self._answer(ep, challenge, scope)
        code = resp.status_code
        if code < 400 and (not expect or code in expect):
            return resp
        if code == 404 and missing_ok:
            return resp
        detail = _error_detail(resp)
        resp.close()
        if code in (401, 403):
            creds = self.config.credentials(ep.host)
            raise RegistryAuthError(
                f"{ep.host} refused access to {what or self.repository}"
                f"{' for user ' + creds[0] if creds else ' without credentials'}{detail}",
                fix=("check the user name and password configured for it" if creds else
                     "the repository may not exist, or it needs credentials: " + _AUTH_FIX))
        if code == 404:
            raise RemoteImageNotFound(f"{ep.host} has no {what or 'such content'}{detail}",
                                      fix="check the repository name and the tag or digest")
        raise RegistryError(f"{ep.host} answered {method} {what or path} with HTTP {code}{detail}",
                            fix="the registry failed or refused the request; try again, or check its logs")

    def _answer(self, ep: Endpoint, challenge: str, scope: str) -> str:
        """The Authorization header that answers a `WWW-Authenticate` challenge."""
        scheme = challenge.split(" ", 1)[0].lower()
        params = dict(_CHALLENGE_PARAM.findall(challenge))
        creds = self.config.credentials(ep.host)
        if scheme == "basic":
            if not creds:
                raise RegistryAuthError(f"{ep.host} needs credentials and none are configured", fix=_AUTH_FIX)
            return "Basic " + base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()
        if scheme != "bearer" or not params.get("realm"):
            raise RegistryAuthError(f"{ep.host} asks for an authentication envyard does not speak: {challenge!r}",
                                    fix="use a registry with Basic or Bearer token authentication")
        return "Bearer " + self._token(ep, params, scope, creds)

    def _token(self, ep: Endpoint, params: dict, scope: str, creds: tuple[str, str] | None) -> str:
        realm = params["realm"]
        realm_host = urlsplit(realm).netloc
        query = [("service", params["service"])] if params.get("service") else []
        query += [("scope", s) for s in scope.split(" ")]
        verify = False if self.config.is_insecure(realm_host) else ep.verify
        try:
            resp = self._http(verify).get(realm, params=query, auth=httpx.BasicAuth(*creds) if creds else None)
        except httpx.TransportError as e:
            raise RegistryUnreachable(f"cannot reach the token service {realm_host} of {ep.host}: {e}",
                                      fix=f"check that {realm_host} is reachable from this machine") from e
        if resp.status_code in (401, 403):
            raise RegistryAuthError(
                f"the token service {realm_host} refused {'user ' + creds[0] if creds else 'anonymous access'}",
                fix="check the user name and password configured for it" if creds else _AUTH_FIX)
        try:
            body = resp.json()
            token = body.get("token") or body.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if resp.status_code != 200 or not isinstance(token, str) or not token:
            raise RegistryAuthError(f"the token service {realm_host} gave no token (HTTP {resp.status_code})",
                                    fix="check the registry's authentication set-up")
        return token


def _read_bounded(resp: httpx.Response, limit: int, what: str) -> bytes:
    data = bytearray()
    for chunk in resp.iter_bytes(CHUNK):
        data += chunk
        if len(data) > limit:
            raise RegistryError(f"the {what} is larger than {limit} bytes", fix="this is envyard's bound for it")
    return bytes(data)


def _check_digest(hasher, digest: str, host: str) -> None:
    got = "sha256:" + hasher.hexdigest()
    if got != digest:
        raise DigestMismatch(f"content from {host} has digest {got}, not {digest}",
                             fix="the registry or something between served altered content; try again")


def _hash_file(f: BinaryIO):
    """sha256 of what `f` holds so far, and its length; leaves the position at the end."""
    hasher = hashlib.sha256()
    f.seek(0)
    have = 0
    while chunk := f.read(CHUNK):
        hasher.update(chunk)
        have += len(chunk)
    return hasher, have


def _restart(f: BinaryIO):
    f.seek(0)
    f.truncate()
    return 0, hashlib.sha256()


def _continues_at(resp: httpx.Response, offset: int) -> bool:
    """Whether a response to a Range request carries the blob from `offset` on."""
    if resp.status_code != 206:
        return False
    m = re.match(r"bytes (\d+)-", resp.headers.get("Content-Range", ""))
    return bool(m) and int(m.group(1)) == offset


def _error_detail(resp: httpx.Response) -> str:
    """The registry's own error codes, when it sent them (distribution's {"errors": [...]})."""
    try:
        resp.read()
        errors = resp.json().get("errors")
        parts = [f"{e.get('code')}: {e.get('message')}" for e in errors if isinstance(e, dict)]
        return f" ({'; '.join(parts)})" if parts else ""
    except (ValueError, AttributeError, TypeError, httpx.HTTPError):
        return ""
