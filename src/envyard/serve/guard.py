"""The gates in front of `envyard serve`: Host allowlist, bearer token, request-size limit.

They are plain ASGI middleware so that they answer before FastAPI routes the request or reads its body, and so
that HTTP requests and WebSocket handshakes are checked by the same code. A refused request gets the API's
usual JSON error `{"error", "fix"}`; a refused WebSocket handshake gets that answer as an HTTP response when
the server supports the ASGI "websocket.http.response" extension (uvicorn and Starlette's TestClient do), and
otherwise is closed before it is accepted with code 4000 + the HTTP status (4400, 4401).

Why not Starlette's TrustedHostMiddleware: it answers in plain text without a fix, and the Starlette versions
FastAPI >= 0.110 allows cut `[::1]:8000` at its first colon, refusing every IPv6 loopback client (starlette
issue #3357). The check it does is a few lines, written out here.
"""

from __future__ import annotations

import ipaddress
import json
import re
import secrets
from typing import Iterable

from ..errors import BadInput

Scope = dict
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
DEFAULT_MAX_BODY = 2 << 20  # bytes: an action of MAX_TEXT (1 Mi) characters, with room for JSON escapes
MIN_TOKEN_LENGTH = 16
_TOKEN_RE = re.compile(r"[\x21-\x7e]+")  # printable ASCII without spaces: it has to fit in a header
_PORT_RE = re.compile(r":\d{0,5}")
_HOST_NAME_RE = re.compile(r"[a-z0-9_.-]+|\[[0-9a-f:.]+\]")


def new_token() -> str:
    return secrets.token_urlsafe(32)


def check_token(token: str) -> None:
    if len(token) < MIN_TOKEN_LENGTH or not _TOKEN_RE.fullmatch(token):
        raise BadInput(f"the API token must be at least {MIN_TOKEN_LENGTH} printable ASCII characters without "
                       "spaces", fix="omit --token to have one generated, or make one with "
                                     "`python -c 'import secrets; print(secrets.token_urlsafe())'`")


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1); a host name other than localhost is
    not trusted to be one."""
    host = host.strip().lower().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_form(name: str) -> str:
    """A host name or address as a Host header carries it, without port: lower case, IPv6 in brackets."""
    name = name.strip().lower()
    if ":" in name and not name.startswith("["):
        name = f"[{name}]"
    if not _HOST_NAME_RE.fullmatch(name):
        raise BadInput(f"{name!r} is not a host name or IP address",
                       fix="give a bare name or address, without scheme, port or path: --allow-host envs.example.org")
    return name


def host_of(header: str | None) -> str | None:
    """The host part of a Host header value (`name`, `name:port`, `[v6]`, `[v6]:port`); None if malformed."""
    if not header:
        return None
    header = header.strip().lower()
    if header.startswith("["):
        name, bracket, rest = header.partition("]")
        name += bracket
    else:
        name, colon, port = header.partition(":")
        rest = colon + port
    if not name or (rest and not _PORT_RE.fullmatch(rest)):
        return None
    return name


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _route_path(scope: Scope) -> str:
    path, root = scope.get("path", ""), scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


async def refuse(scope: Scope, send, status: int, error: str, fix: str, headers: Iterable[tuple[str, str]] = ()):
    """Answer an HTTP request or a WebSocket handshake with `status` and a JSON error, without calling the app."""
    body = json.dumps({"error": error, "fix": fix}, separators=(",", ":")).encode()  # as FastAPI writes JSON
    raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw_headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    if scope["type"] == "http":
        prefix = "http."
        # the request body was not read, so the connection cannot carry another request: have the server drop it
        raw_headers.append((b"connection", b"close"))
    elif "websocket.http.response" in scope.get("extensions", {}):
        prefix = "websocket.http."
    else:  # the server cannot answer a handshake with an HTTP response: close it unaccepted
        reason = error.encode()[:120].decode(errors="ignore")  # a close reason is at most 123 bytes
        await send({"type": "websocket.close", "code": 4000 + status, "reason": reason})
        return
    await send({"type": prefix + "response.start", "status": status, "headers": raw_headers})
    await send({"type": prefix + "response.body", "body": body})


class HostAllowlist:
    """Refuse requests whose Host header is not an allowed name (any port): a web page that rebinds its own DNS
    name to 127.0.0.1 still sends its own name as Host, so it cannot reach the API through the browser."""

    def __init__(self, app, allowed: Iterable[str]):
        self.app = app
        self.allowed = frozenset(allowed)  # in host_form

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] in ("http", "websocket"):
            header = _header(scope, b"host")
            if host_of(header) not in self.allowed:
                shown = repr(header[:100]) if header else "(missing)"
                await refuse(scope, send, 400, f"Host header {shown} is not a name this server answers to",
                             fix="address the server as " + ", ".join(sorted(self.allowed)) +
                                 "; `envyard serve --allow-host NAME` admits another name")
                return
        await self.app(scope, receive, send)


class BearerAuth:
    """Require `Authorization: Bearer TOKEN` on every HTTP request and WebSocket handshake, except the paths in
    `open_paths` (the health check and the API docs, which hold no secrets). New routes are closed by default."""

    def __init__(self, app, token: str, open_paths: Iterable[str]):
        self.app = app
        self.token = token.encode()
        self.open_paths = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] in ("http", "websocket") and _route_path(scope) not in self.open_paths:
            problem = self._problem(_header(scope, b"authorization"))
            if problem:
                await refuse(scope, send, 401, problem,
                             fix="send the header `Authorization: Bearer TOKEN` with the token `envyard serve` "
                                 "printed at start-up (or the one given by --token or ENVYARD_SERVE_TOKEN)",
                             headers=[("www-authenticate", "Bearer")])
                return
        await self.app(scope, receive, send)

    def _problem(self, header: str | None) -> str | None:
        if not header:
            return "no Authorization header: this server needs a bearer token"
        scheme, _, credentials = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            return "the Authorization header is not `Bearer TOKEN`"
        # constant time, so the response time does not tell how much of a guess was right
        if not secrets.compare_digest(credentials.strip().encode("latin-1"), self.token):
            return "wrong bearer token"
        return None


class BodyLimit:
    """Refuse HTTP request bodies over `max_bytes` with 413 while they arrive, before the app sees them.

    A declared Content-Length over the limit is refused before any of the body is read. Otherwise (chunked, or
    within the limit) the body is read here, counting bytes as each `http.request` message arrives, and refused
    as soon as the count passes the limit: at most `max_bytes` are ever held, and the rest is never read (the
    answer says `Connection: close`, so the server drops the connection instead of draining it). A body within
    the limit is handed to the app in one message (FastAPI would read it whole anyway)."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                await refuse(scope, send, 400, f"Content-Length {declared[:40]!r} is not a number",
                             fix="send a valid Content-Length, or none")
                return
            if int(declared) > self.max_bytes:
                await self._too_large(scope, send)
                return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # http.disconnect: the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(scope, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        pending = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay():
            nonlocal pending
            if pending is not None:
                message, pending = pending, None
                return message
            return await receive()  # after the body: only http.disconnect is left to wait for

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, send) -> None:
        await refuse(scope, send, 413, f"the request body is over this server's limit of {self.max_bytes} bytes",
                     fix="send a smaller request, or start the server with a larger `envyard serve --max-body`")
