"""`envyard serve`: TerminalEnv episodes over HTTP and WebSocket (FastAPI).

Each live environment is one TerminalEnv (one sandbox) held in an in-process table keyed by a random id.
TerminalEnv calls block while sandbox commands run, so they go to a thread pool; calls on one environment are
serialised by a per-environment asyncio lock, and the event loop stays free for every other environment.

Limits: at most `max_envs` environments exist at once (creating, live or closing); one more is refused with 429
and a Retry-After hint. Environments untouched for `idle_timeout` seconds are closed by a background reaper
started in the app's lifespan, and shutting the app down closes them all.

Every request passes three gates first (serve/guard.py): the Host header must name this server (against DNS
rebinding), a bearer token is required (except on /health and the API docs), and request bodies over `max_body`
bytes are refused while they arrive.

Errors are JSON objects `{"error": ..., "fix": ...}` (plus `problems` for a malformed task or request body).
Failures of the infrastructure (a sandbox that would not start, died, or a verifier that crashed) are not HTTP
errors: the environment reports them in `info["infra_error"]`, as TerminalEnv does, so a trainer can mask them.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import json
import logging
import math
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import anyio
import anyio.to_thread
from fastapi import APIRouter, FastAPI, Request, Security, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..envs.env import MAX_TEXT, SUBMIT, TerminalEnv
from ..envs.task import TaskError, load_task
from ..errors import BadInput, EnvyardError, NotFound
from ..yard import Yard
from .guard import (DEFAULT_MAX_BODY, LOOPBACK_HOSTS, BearerAuth, BodyLimit, HostAllowlist, check_token,
                    host_form)

log = logging.getLogger("envyard.serve")

DEFAULT_RETRY_AFTER = 5  # seconds, when no idle environment is about to expire
SHUTDOWN_LOCK_WAIT = 5.0  # at shutdown, wait this long for a running step before closing its env anyway
WS_NOT_FOUND = 4404  # WebSocket close codes: 4000 + the HTTP status they stand for
WS_CONFLICT = 4409
WS_TOO_BIG = 1009  # the standard close code for a message over the size limit (what uvicorn's ws_max_size sends)


# ---- wire models (they are the OpenAPI schema) -------------------------------------------------------------


class ErrorBody(BaseModel):
    error: str = Field(description="What went wrong.")
    fix: str | None = Field(None, description="What to do about it.")
    problems: list[str] | None = Field(None, description="Every problem found: a malformed task ('file: field: why') "
                                                         "or request body.")


class Health(BaseModel):
    status: str = Field("ok", description="Always 'ok' when the server answers.")
    version: str
    envs: int = Field(description="Environments live now.")
    max_envs: int
    idle_timeout: float | None = Field(description="Seconds of inactivity before an environment is closed "
                                                   "(null: never).")


class TaskList(BaseModel):
    tasks_root: str | None = Field(description="Directory tasks are named under; null when tasks are named by "
                                               "absolute path.")
    tasks: list[str] = Field(description="Task names (directories holding a task.toml) accepted by POST /envs.")


class CreateEnv(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"task": "hello-file"}]})
    task: str = Field(min_length=1, max_length=4096,
                      description="A directory name under the server's tasks root, or an absolute path when the server "
                                  "has no tasks root.")


class Action(BaseModel):
    model_config = ConfigDict(extra="forbid",
                              json_schema_extra={"examples": [{"action": "echo 'Hello, world!' > /app/hello.txt"}]})
    action: str = Field(max_length=MAX_TEXT, description=f"A shell command run in the task's workdir, or `{SUBMIT}` to "
                                                         "end the episode and run the verifier.")


class EnvCreated(BaseModel):
    env_id: str
    instruction: str = Field(description="What the agent is asked to do (the task's instruction.md).")
    info: dict[str, Any] = Field(description="TerminalEnv's reset info: `task`, and `infra_error` (null unless the "
                                             "sandbox could not be set up; then the first step ends the episode).")


class StepResult(BaseModel):
    observation: str = Field(description="The command's output (stdout, then [stderr]) and its status line.")
    reward: float = Field(description="0 until the episode ends; then the verifier's reward.")
    terminated: bool = Field(description="The episode ended by `submit` (or an infrastructure failure).")
    truncated: bool = Field(description="The episode ended because the step or time budget ran out.")
    info: dict[str, Any] = Field(description="Per step: `step`, `exit_code`, `timed_out`. At the end: `reward`, "
                                             "`metrics`, `infra_error`, `infra_detail`, `verifier_exit_code`, "
                                             "`verifier_output`, `dropped`, `steps`.")


class EnvState(BaseModel):
    env_id: str
    task: str = Field(description="The task as it was named in POST /envs.")
    task_name: str | None = Field(description="The task's `name` from task.toml.")
    episode: int = Field(description="1 for the first episode; incremented by each reset.")
    steps: int = Field(description="Commands run in this episode (submit is not counted).")
    done: bool = Field(description="The episode has ended; step returns 409 until a reset.")
    reward: float | None = Field(description="The final reward once done.")
    infra_error: str | None
    busy: bool = Field(description="A call is running on this environment now.")
    websocket: bool = Field(description="A WebSocket is attached.")
    sandbox_id: str | None = Field(description="The agent's sandbox (null once the episode ended or it never started).")
    age_seconds: float
    idle_seconds: float = Field(description="Seconds since the last call finished (0 while busy).")


class EnvList(BaseModel):
    envs: list[EnvState]
    max_envs: int


ERRORS = {  # OpenAPI documentation of the error responses
    400: {"model": ErrorBody, "description": "Bad task name (path traversal, not absolute, ...)."},
    401: {"model": ErrorBody, "description": "No bearer token, or a wrong one (`WWW-Authenticate: Bearer`)."},
    404: {"model": ErrorBody, "description": "No such environment or task."},
    409: {"model": ErrorBody, "description": "The episode is over: reset or delete the environment."},
    413: {"model": ErrorBody, "description": "The request body is over the server's `max_body` limit."},
    422: {"model": ErrorBody, "description": "Malformed task or request body; `problems` lists every problem."},
    429: {"model": ErrorBody, "description": "max_envs environments exist; see the Retry-After header."},
    503: {"model": ErrorBody, "description": "The server is shutting down."},
}


def _errors(*codes: int) -> dict:
    return {c: ERRORS[c] for c in codes}


class ApiError(Exception):
    def __init__(self, status: int, error: str, fix: str | None = None, *, problems: list[str] | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(error)
        self.status, self.error, self.fix, self.problems, self.headers = status, error, fix, problems, headers

    def body(self) -> dict:
        return ErrorBody(error=self.error, fix=self.fix, problems=self.problems).model_dump(exclude_none=True)


def _jsonable(x):
    """Info dicts come from TerminalEnv: make them strict JSON (no NaN, no Paths or other objects)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if x is None or isinstance(x, (str, int, bool)):
        return x
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in x]
    return str(x)


# ---- the environment table ---------------------------------------------------------------------------------


@dataclass(eq=False)
class _Slot:
    id: str
    task_ref: str
    path: Path
    env: TerminalEnv
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    created: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    episode: int = 1
    steps: int = 0
    done: bool = False
    reward: float | None = None
    infra_error: str | None = None
    closed: bool = False
    websocket: bool = False

    def state(self) -> EnvState:
        now = time.monotonic()
        busy = self.lock.locked()
        sandbox = self.env.sandbox
        return EnvState(env_id=self.id, task=self.task_ref, task_name=self.env.task.name if self.env.task else None,
                        episode=self.episode, steps=self.steps, done=self.done, reward=self.reward,
                        infra_error=self.infra_error, busy=busy, websocket=self.websocket,
                        sandbox_id=sandbox.id if sandbox is not None else None,
                        age_seconds=round(now - self.created, 3),
                        idle_seconds=0.0 if busy else round(now - self.last_used, 3))


class EnvTable:
    """Live environments, the max_envs budget, the idle reaper. Only touched from the event loop."""

    def __init__(self, yard: Yard, tasks_root: Path | None, max_envs: int, idle_timeout: float | None,
                 step_timeout: float):
        self.yard = yard
        self.tasks_root = Path(tasks_root).resolve() if tasks_root is not None else None
        self.max_envs = max_envs
        self.idle_timeout = idle_timeout
        self.step_timeout = step_timeout
        self.slots: dict[str, _Slot] = {}
        self.held = 0  # creating + live + closing: what counts against max_envs
        self.shutting_down = False
        self._closing: set[asyncio.Task] = set()
        self._limiter: anyio.CapacityLimiter | None = None

    async def run(self, fn: Callable, *args, **kwargs):
        """Run a blocking call on the thread pool. Our own limiter: calls are bounded by max_envs (one per env via
        its lock, plus creates and closes, which also count against max_envs), so none waits on anyio's default 40."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.max_envs + 8)
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=self._limiter)

    # ---- tasks --------------------------------------------------------------------------------------------

    def task_names(self) -> list[str]:
        root = self.tasks_root
        if root is None or not root.is_dir():
            return []
        return sorted(d.name for d in root.iterdir() if (d / "task.toml").is_file())

    def resolve(self, ref: str) -> Path:
        if "\x00" in ref:
            raise ApiError(400, "task names may not contain NUL bytes")
        if any(part == ".." for part in re.split(r"[/\\]", ref)):
            raise ApiError(400, f"task {ref!r} climbs out of its directory ('..')",
                           fix="name a task as GET /tasks lists it")
        if self.tasks_root is not None:
            if "/" in ref or "\\" in ref or ref.startswith("."):
                raise ApiError(400, f"task {ref!r} is not a task name",
                               fix=f"name a directory directly under the tasks root {self.tasks_root} "
                                   "(GET /tasks lists them)")
            path = self.tasks_root / ref
        else:
            path = Path(ref)
            if not path.is_absolute():
                raise ApiError(400, f"task {ref!r} is not an absolute path",
                               fix="this server has no tasks root, so tasks are named by absolute path; "
                                   "or start it with `envyard serve --tasks DIR` and use names")
        if not path.is_dir():
            raise ApiError(404, f"no task {ref!r}", fix="GET /tasks lists the task names this server knows")
        return path

    # ---- lifecycle ----------------------------------------------------------------------------------------

    def get(self, env_id: str) -> _Slot:
        slot = self.slots.get(env_id)
        if slot is None:
            raise ApiError(404, f"no environment {env_id!r}", fix=self._gone_fix())
        return slot

    def _gone_fix(self) -> str:
        expiry = f"; environments idle for {self.idle_timeout:g} s are closed" if self.idle_timeout else ""
        return f"GET /envs lists live environments{expiry}; POST /envs creates one"

    def retry_after(self) -> int:
        """Seconds until an idle environment expires (a hint: a client may free one sooner)."""
        if not self.idle_timeout:
            return DEFAULT_RETRY_AFTER
        now = time.monotonic()
        waits = [self.idle_timeout - (now - s.last_used) for s in self.slots.values() if not s.lock.locked()]
        return max(1, min(60, math.ceil(min(waits)))) if waits else DEFAULT_RETRY_AFTER

    async def create(self, ref: str) -> tuple[_Slot, str, dict]:
        path = self.resolve(ref)
        if self.shutting_down:
            raise ApiError(503, "the server is shutting down", fix="retry against a running server")
        if self.held >= self.max_envs:
            wait = self.retry_after()
            raise ApiError(429, f"{self.max_envs} environments exist, the server's limit",
                           fix=f"DELETE /envs/{{id}} environments you are done with, or retry in {wait} s "
                               "(idle ones expire); `envyard serve --max-envs N` raises the limit",
                           headers={"Retry-After": str(wait)})
        self.held += 1
        env = None
        try:
            task = await self.run(load_task, path)
            env = TerminalEnv(yard=self.yard, step_timeout=self.step_timeout)
            instruction, info = await self.run(env.reset, options={"task": task})
            if self.shutting_down:
                raise ApiError(503, "the server is shutting down", fix="retry against a running server")
        except BaseException as e:
            if env is not None:
                env.close()  # fast (teardown is in the background); synchronous so a cancellation cannot skip it
            self.held -= 1
            if isinstance(e, TaskError):
                raise ApiError(422, f"task {ref!r} is malformed", fix=e.fix, problems=e.problems) from None
            raise
        slot = _Slot(id=uuid.uuid4().hex[:12], task_ref=ref, path=path, env=env, infra_error=info.get("infra_error"))
        self.slots[slot.id] = slot
        log.info("env %s created (task %s)", slot.id, ref)
        return slot, instruction, info

    @contextlib.asynccontextmanager
    async def using(self, slot: _Slot):
        async with slot.lock:
            if slot.closed:  # closed (deleted, expired) while this call waited for the lock
                raise ApiError(404, f"environment {slot.id!r} was closed", fix=self._gone_fix())
            slot.last_used = time.monotonic()
            try:
                yield
            finally:
                slot.last_used = time.monotonic()

    async def step(self, slot: _Slot, action: str, on_output=None) -> StepResult:
        async with self.using(slot):
            if slot.done:
                raise ApiError(409, f"the episode of environment {slot.id!r} is over",
                               fix=f"POST /envs/{slot.id}/reset starts a new episode; DELETE /envs/{slot.id} frees it")
            obs, reward, terminated, truncated, info = await self.run(slot.env.step, action, on_output=on_output)
            if action.strip() != SUBMIT:
                slot.steps += 1
            reward = float(reward) if math.isfinite(reward) else 0.0
            if terminated or truncated:
                slot.done, slot.reward, slot.infra_error = True, reward, info.get("infra_error")
            return StepResult(observation=obs, reward=reward, terminated=terminated, truncated=truncated,
                              info=_jsonable(info))

    async def reset(self, slot: _Slot) -> tuple[str, dict]:
        async with self.using(slot):
            try:
                task = await self.run(load_task, slot.path)  # re-read: edits to the task apply to the new episode
            except TaskError as e:
                raise ApiError(422, f"task {slot.task_ref!r} is malformed", fix=e.fix, problems=e.problems) from None
            instruction, info = await self.run(slot.env.reset, options={"task": task})
            slot.episode += 1
            slot.steps, slot.done, slot.reward, slot.infra_error = 0, False, None, info.get("infra_error")
            return instruction, info

    def close_soon(self, slot: _Slot, reason: str, *, force: bool = False) -> asyncio.Task | None:
        """Start closing `slot` (idempotent): it leaves the table now; its env is closed once its lock is free."""
        if self.slots.get(slot.id) is not slot:
            return None
        del self.slots[slot.id]
        slot.closed = True
        task = asyncio.get_running_loop().create_task(self._close(slot, reason, force))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
        return task

    async def close(self, slot: _Slot, reason: str) -> None:
        task = self.close_soon(slot, reason)
        if task is not None:
            await asyncio.shield(task)  # a cancelled caller does not stop the close

    async def _close(self, slot: _Slot, reason: str, force: bool) -> None:
        try:
            acquired = True
            if force:
                try:
                    await asyncio.wait_for(slot.lock.acquire(), SHUTDOWN_LOCK_WAIT)
                except TimeoutError:
                    acquired = False  # a step is still running: kill its sandbox from under it
            else:
                await slot.lock.acquire()
            try:
                await self.run(slot.env.close)
            finally:
                if acquired:
                    slot.lock.release()
            log.info("env %s closed (%s)", slot.id, reason)
        except Exception:
            log.exception("closing env %s failed", slot.id)
        finally:
            self.held -= 1

    async def reap_forever(self) -> None:
        interval = min(max(self.idle_timeout / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for slot in list(self.slots.values()):
                if not slot.lock.locked() and now - slot.last_used >= self.idle_timeout:
                    self.close_soon(slot, f"idle for {now - slot.last_used:.1f} s")

    async def shutdown(self) -> None:
        self.shutting_down = True
        for slot in list(self.slots.values()):
            self.close_soon(slot, "server shutdown", force=True)
        if self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)


# ---- the app -----------------------------------------------------------------------------------------------


def create_app(yard: Yard, *, tasks_root: Path | None, token: str | None, allow_hosts: Iterable[str] = (),
               max_body: int = DEFAULT_MAX_BODY, max_envs: int = 64, idle_timeout: float | None = 600,
               step_timeout: float = 60) -> FastAPI:
    """The HTTP/WebSocket server over `yard`. `tasks_root`: tasks are named by directory under it (None: by
    absolute path). `token`: every request but /health and the docs needs `Authorization: Bearer <token>`; None
    turns authentication off (only for a server reachable from this machine alone). Requests must name the
    server as localhost, 127.0.0.1, [::1] or one of `allow_hosts` in their Host header. Request bodies and
    WebSocket messages over `max_body` bytes are refused. `idle_timeout=None` never expires environments. The
    caller keeps owning `yard`."""
    if token is not None:
        check_token(token)
    allowed = {host_form(h) for h in (*LOOPBACK_HOSTS, *allow_hosts)}  # checked here: middleware starts lazily
    if max_body < 1:
        raise BadInput(f"max_body must be positive, got {max_body}")
    if max_envs < 1:
        raise BadInput(f"max_envs must be at least 1, got {max_envs}")
    if idle_timeout is not None and idle_timeout <= 0:
        raise BadInput(f"idle_timeout must be positive (or None for never), got {idle_timeout}")
    if step_timeout <= 0:
        raise BadInput(f"step_timeout must be positive, got {step_timeout}")
    table = EnvTable(yard, tasks_root, max_envs, idle_timeout, step_timeout)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        reaper = asyncio.create_task(table.reap_forever()) if idle_timeout else None
        try:
            yield
        finally:
            if reaper is not None:
                reaper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reaper
            await table.shutdown()

    app = FastAPI(
        title="envyard", version=__version__, lifespan=lifespan,
        description="Agent environments over HTTP: create a TerminalEnv on a task, send shell commands, `submit` "
                    "(or POST verify) to end the episode and get the verifier's reward. Errors are "
                    "`{\"error\", \"fix\"}`; infrastructure failures are reported in `info.infra_error`. "
                    "Every endpoint but /health needs `Authorization: Bearer TOKEN` (the token `envyard serve` "
                    "prints at start-up); use Authorize below. "
                    "WebSocket `/envs/{env_id}/ws` (not listed below; the same header on the handshake): send "
                    "`{\"action\": ...}`, receive a step result per message.",
    )
    app.state.envs = table

    # The gates, outermost first: Host, then the token (no body is read before it), then the body size.
    # add_middleware puts each new one outside the previous ones.
    app.add_middleware(BodyLimit, max_bytes=max_body)
    if token is not None:
        open_paths = {"/health", app.docs_url, app.redoc_url, app.openapi_url, app.swagger_ui_oauth2_redirect_url}
        app.add_middleware(BearerAuth, token=token, open_paths={p for p in open_paths if p})
    app.add_middleware(HostAllowlist, allowed=allowed)
    # The middleware enforces the token; this declares it in the OpenAPI schema, so /docs can send it.
    bearer = HTTPBearer(auto_error=False, description="The token `envyard serve` printed at start-up.")
    api = APIRouter(dependencies=[Security(bearer)] if token is not None else [],
                    responses=_errors(401) if token is not None else {})

    # ---- errors -------------------------------------------------------------------------------------------

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, e: ApiError):
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, e: RequestValidationError):
        problems = [f"{'.'.join(map(str, err.get('loc', ())))}: {err.get('msg')}" for err in e.errors()]
        return JSONResponse(ErrorBody(error="invalid request", fix="see /docs for the request shapes",
                                      problems=problems).model_dump(exclude_none=True), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, e: StarletteHTTPException):
        body = ErrorBody(error=str(e.detail), fix="see /docs for the endpoints").model_dump(exclude_none=True)
        return JSONResponse(body, status_code=e.status_code, headers=getattr(e, "headers", None))

    @app.exception_handler(EnvyardError)
    async def _envyard_error(request: Request, e: EnvyardError):
        status = 400 if isinstance(e, BadInput) else 404 if isinstance(e, NotFound) else 500
        return JSONResponse(ErrorBody(error=e.message, fix=e.fix).model_dump(exclude_none=True), status_code=status)

    # ---- endpoints ----------------------------------------------------------------------------------------

    @app.get("/health", response_model=Health, tags=["server"])
    async def health() -> Health:
        return Health(version=__version__, envs=len(table.slots), max_envs=max_envs, idle_timeout=idle_timeout)

    @api.get("/tasks", response_model=TaskList, tags=["tasks"])
    async def list_tasks() -> TaskList:
        names = await table.run(table.task_names)
        return TaskList(tasks_root=str(table.tasks_root) if table.tasks_root else None, tasks=names)

    @api.post("/envs", response_model=EnvCreated, status_code=201, tags=["envs"],
              responses=_errors(400, 404, 413, 422, 429, 503))
    async def create_env(body: CreateEnv) -> EnvCreated:
        """Create a TerminalEnv on a task and reset it: the agent's sandbox is started."""
        slot, instruction, info = await table.create(body.task)
        return EnvCreated(env_id=slot.id, instruction=instruction, info=_jsonable(info))

    @api.get("/envs", response_model=EnvList, tags=["envs"])
    async def list_envs() -> EnvList:
        return EnvList(envs=[s.state() for s in table.slots.values()], max_envs=max_envs)

    @api.get("/envs/{env_id}", response_model=EnvState, tags=["envs"], responses=_errors(404))
    async def get_env(env_id: str) -> EnvState:
        return table.get(env_id).state()

    @api.post("/envs/{env_id}/step", response_model=StepResult, tags=["envs"],
              responses=_errors(404, 409, 413, 422))
    async def step_env(env_id: str, body: Action) -> StepResult:
        """Run one shell command (or `submit`, which ends the episode and runs the verifier)."""
        return await table.step(table.get(env_id), body.action)

    @api.post("/envs/{env_id}/verify", response_model=StepResult, tags=["envs"], responses=_errors(404, 409))
    async def verify_env(env_id: str) -> StepResult:
        """End the episode and score it: the same as stepping `submit`."""
        return await table.step(table.get(env_id), SUBMIT)

    @api.post("/envs/{env_id}/reset", response_model=EnvCreated, tags=["envs"], responses=_errors(404, 422))
    async def reset_env(env_id: str) -> EnvCreated:
        """Start a new episode on the same task (a fresh sandbox; the task directory is re-read)."""
        slot = table.get(env_id)
        instruction, info = await table.reset(slot)
        return EnvCreated(env_id=slot.id, instruction=instruction, info=_jsonable(info))

    @api.delete("/envs/{env_id}", status_code=204, response_class=Response, tags=["envs"], responses=_errors(404))
    async def delete_env(env_id: str) -> Response:
        """Close the environment: its sandbox is killed (waits for a running call to finish first)."""
        await table.close(table.get(env_id), "deleted")
        return Response(status_code=204)

    app.include_router(api)

    @app.websocket("/envs/{env_id}/ws")
    async def env_ws(websocket: WebSocket, env_id: str):
        """Send `{"action": "..."}` (or `{"reset": true}`). While the command runs, its output streams as
        `{"type": "output", "stream": "stdout"|"stderr", "data": ...}` messages (up to 1 MiB per step); then one
        JSON message carries the step (or reset) result. Errors arrive as `{"error", "fix", "status"}`.
        Disconnecting mid-episode closes the environment. The token and Host were checked before the handshake
        (guard.py); a message over max_body bytes closes the socket with 1009, as uvicorn's ws_max_size does."""
        await websocket.accept()
        slot = table.slots.get(env_id)
        if slot is None or slot.websocket:
            e = (ApiError(404, f"no environment {env_id!r}", fix=table._gone_fix()) if slot is None else
                 ApiError(409, f"environment {env_id!r} already has a WebSocket attached",
                          fix="use one WebSocket per environment"))
            await _ws_send_error(websocket, e)
            await websocket.close(code=WS_NOT_FOUND if slot is None else WS_CONFLICT)
            return
        slot.websocket = True
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                # uvicorn enforces this already (ws_max_size); the check covers other ASGI servers. For text it
                # counts characters, which never exceed the UTF-8 size.
                if len(message.get("text") or message.get("bytes") or "") > max_body:
                    await _ws_send_error(websocket, ApiError(413, f"message over this server's limit of {max_body} "
                                                                  "bytes", fix="send a smaller message"))
                    await websocket.close(code=WS_TOO_BIG)
                    break
                try:
                    request = _ws_request(message)
                    if request.get("reset"):
                        instruction, info = await table.reset(slot)
                        reply = EnvCreated(env_id=slot.id, instruction=instruction, info=_jsonable(info)).model_dump()
                    else:
                        action = Action.model_validate(request).action
                        async with _OutputStream(websocket) as stream:
                            reply = (await table.step(slot, action, on_output=stream.feed)).model_dump()
                except ApiError as e:
                    await _ws_send_error(websocket, e)
                    if slot.closed:  # deleted or expired under us
                        await websocket.close(code=WS_NOT_FOUND)
                        return
                    continue
                except ValidationError as e:
                    problems = [f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()]
                    await _ws_send_error(websocket, ApiError(422, "invalid message", problems=problems,
                                                             fix='send {"action": "COMMAND"} or {"reset": true}'))
                    continue
                await websocket.send_json(reply)
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass  # the client went away while we were sending
        finally:
            slot.websocket = False
            if not slot.done and not slot.closed:
                await table.close(slot, "WebSocket disconnected mid-episode")

    return app


STREAM_LIMIT = 1 << 20  # bytes of output streamed per step; the step result still carries the observation


class _OutputStream:
    """Forwards a running command's output to the WebSocket as {"type": "output", "stream", "data"} messages.

    `feed` is called on the worker thread running the step; it hands chunks to the event loop, where a task
    sends them in order. On exit every chunk has been sent, so the step result always comes last."""

    def __init__(self, websocket: WebSocket):
        self.websocket = websocket
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue = asyncio.Queue()
        self.sent = 0
        self.decoders = {name: codecs.getincrementaldecoder("utf-8")("replace") for name in ("stdout", "stderr")}

    def feed(self, stream: str, chunk: bytes) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, (stream, chunk))

    async def _pump(self) -> None:
        while True:
            item = await self.queue.get()
            if item is None:
                return
            stream, chunk = item
            if self.sent >= STREAM_LIMIT:
                continue
            text = self.decoders[stream].decode(chunk[: STREAM_LIMIT - self.sent])
            self.sent += len(chunk)
            message = {"type": "output", "stream": stream, "data": text}
            if self.sent >= STREAM_LIMIT:
                message["truncated"] = True  # the rest is in the step result's (cut) observation
            await self.websocket.send_json(message)

    async def __aenter__(self) -> "_OutputStream":
        self.task = asyncio.create_task(self._pump())
        return self

    async def __aexit__(self, *exc) -> None:
        self.queue.put_nowait(None)
        await self.task


def _ws_request(message: dict) -> dict:
    text = message.get("text")
    if text is None and message.get("bytes") is not None:
        try:
            text = message["bytes"].decode()
        except UnicodeDecodeError:
            raise ApiError(400, "message is not UTF-8", fix='send JSON text: {"action": "COMMAND"}') from None
    try:
        request = json.loads(text or "")
    except json.JSONDecodeError as e:
        raise ApiError(400, f"message is not JSON: {e}", fix='send {"action": "COMMAND"}') from None
    if not isinstance(request, dict):
        raise ApiError(400, "message is not a JSON object", fix='send {"action": "COMMAND"}')
    if request.get("reset") and set(request) != {"reset"}:
        raise ApiError(400, "a reset message carries nothing else", fix='send {"reset": true}')
    return request


async def _ws_send_error(websocket: WebSocket, e: ApiError) -> None:
    await websocket.send_json({**e.body(), "status": e.status})
