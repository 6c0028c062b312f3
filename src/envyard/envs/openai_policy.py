"""OpenAIPolicy: drive an episode with any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, llama.cpp,
SGLang, Ollama, LiteLLM...) through tool calling.

The model gets two tools, `bash` ({"command": string}) and `submit` (no arguments). Each turn exactly one tool
call is executed: a `bash` call becomes the next shell command, `submit` ends the episode. The observation of a
command comes back to the model as the `tool` result of that call, cut in the middle when it is long.

A failure of the endpoint (timeout, refused connection, HTTP error, a body that is not a chat completion,
malformed tool arguments) raises `PolicyError`: it is a failure of the infrastructure, not of the agent, so a
rollout runner records the episode with `infra_error="policy_error"` instead of scoring it 0.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

from ..errors import BadInput, EnvyardError
from .env import SUBMIT
from .task import Task

INFRA_POLICY = "policy_error"

NUDGE = "Use the bash tool, or submit."
NUDGES = 2  # replies without a usable tool call that are answered with a nudge; one more and the policy submits
OLD_OUTPUT_CHARS = 400  # an old tool output elided to fit the context keeps about this many characters

TOOLS: list[dict] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run one bash command in the sandbox and return its output (stdout, then stderr) and "
                           "exit code. Each call runs in the same shell session, so cd and exported variables "
                           "persist. Commands must not wait for interactive input.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": "The bash command to run."}},
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Finish the task. Call this once the work is done; the result is then checked and "
                           "no further commands can be run.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]

DEFAULT_SYSTEM_PROMPT = """\
You are an autonomous agent working in a Linux sandbox. Complete the task the user gives you.

- Act only through the `bash` tool: each call runs one shell command and returns its output and exit code.
- Your working directory is {workdir}. There is no human to answer questions: decide for yourself.
- Use at most {max_steps} commands. Prefer short, non-interactive commands; long outputs are cut in the middle.
- When the task is done, call the `submit` tool. Submitting ends the episode: your work is then checked."""


class PolicyError(EnvyardError):
    """The policy's model endpoint failed (timeout, refused connection, HTTP error, garbage, bad tool call).

    An infrastructure failure, never the agent's: record the episode with `infra_error = PolicyError.infra_error`
    (`"policy_error"`) and `infra_detail = str(error)`, so a trainer can mask it.
    """

    exit_code = 5
    infra_error = INFRA_POLICY

    def __init__(self, message: str, *, model: str, base_url: str, kind: str, fix: str | None = None):
        super().__init__(f"model {model!r} at {base_url}: {message}", fix=fix)
        self.model = model
        self.base_url = base_url
        self.kind = kind  # timeout | connection | http_status | bad_response | bad_tool_call


def truncate_middle(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters: head and tail kept (the tail a little longer, so an exit code or
    the end of a traceback survives), the middle replaced by a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    limit = max(0, limit)
    marker = ""
    for _ in range(3):  # the marker's length depends on the count it reports; this settles in two rounds
        keep = max(0, limit - len(marker))
        marker = f"\n[... {len(text) - keep} characters cut ...]\n"
    keep = limit - len(marker)
    if keep <= 0:
        return text[:limit]
    head = keep // 2
    tail = keep - head
    return text[:head] + marker + text[len(text) - tail:]


def message_chars(message: dict) -> int:
    """Characters a message contributes to the context (content plus tool-call names and arguments)."""
    content = message.get("content")
    n = len(content) if isinstance(content, str) else len(json.dumps(content)) if content else 0
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        n += len(str(fn.get("name") or "")) + len(str(fn.get("arguments") or ""))
    return n


def fit_context(messages: list[dict], budget: int) -> list[dict]:
    """A copy of `messages` whose total size is at most `budget` characters when that is possible.

    In order, until it fits: the middle of old tool outputs (all but the latest turn's) is elided, oldest first;
    then the latest tool outputs are cut; then whole early turns (an assistant message and the tool results and
    nudges that answer it) are dropped, with a note. The system prompt, the instruction and the latest turn are
    always kept, and every tool call keeps its tool result, so the list stays valid for the API.
    """
    total = sum(message_chars(m) for m in messages)
    if total <= budget:
        return list(messages)
    out = [dict(m) for m in messages]
    # The latest tool outputs answer the last assistant message that called tools; all earlier ones are old.
    last_call = max((i for i, m in enumerate(out) if m.get("role") == "assistant" and m.get("tool_calls")), default=-1)
    old = [i for i, m in enumerate(out) if m.get("role") == "tool" and i < last_call]
    recent = [i for i, m in enumerate(out) if m.get("role") == "tool" and i > last_call]

    def shrink(i: int, to: int) -> None:
        nonlocal total
        content = out[i].get("content") or ""
        if len(content) > to:
            cut = truncate_middle(content, to)
            total -= len(content) - len(cut)
            out[i]["content"] = cut

    for i in old:
        if total <= budget:
            return out
        shrink(i, OLD_OUTPUT_CHARS)
    for i in recent:
        if total <= budget:
            return out
        content = out[i].get("content") or ""
        shrink(i, max(OLD_OUTPUT_CHARS, len(content) - (total - budget)))
    if total <= budget:
        return out
    # Drop the oldest whole turns; a turn runs from an assistant message to the next one.
    starts = [i for i, m in enumerate(out) if m.get("role") == "assistant"]
    if len(starts) < 2:
        return out
    head = out[:starts[0]]
    turns = [out[a:b] for a, b in zip(starts, starts[1:] + [len(out)])]
    dropped = 0
    while len(turns) > 1 and total > budget:
        total -= sum(message_chars(m) for m in turns.pop(0))
        dropped += 1
    note = {"role": "user", "content": f"[{dropped} earlier turns were removed to fit the context window]"}
    return head + [note] + [m for t in turns for m in t]


class OpenAIPolicy:
    """A policy backed by an OpenAI-compatible Chat Completions endpoint, acting through `bash`/`submit` tools.

    `messages` is the whole conversation in OpenAI format (observations already cut to `max_observation_chars`);
    each request sends a copy fitted to `context_chars` (see `fit_context`). `usage` sums the token counts the
    endpoint reported; `requests` counts the calls made. One object serves one episode at a time.
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 temperature: float | None = 0.0, max_observation_chars: int = 8000, context_chars: int = 200_000,
                 request_timeout: float = 120, max_retries: int = 2, system_prompt: str | None = None):
        import openai  # imported here so that importing PolicyError stays cheap

        if max_observation_chars < 64:
            raise BadInput(f"max_observation_chars={max_observation_chars} is too small", fix="use 64 or more")
        self.model = model
        self.name = f"openai:{model}"
        self.temperature = temperature
        self.max_observation_chars = max_observation_chars
        self.context_chars = context_chars
        self.system_prompt = system_prompt
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if key is not None and not key.strip():
            # the openai client takes an empty key for a missing one and fails with a traceback-worthy error
            raise BadInput("api_key is empty" if api_key is not None else "OPENAI_API_KEY is set but empty",
                           fix="pass a key, or api_key=None for a placeholder (which local servers accept)"
                           if api_key is not None else "set OPENAI_API_KEY to your key, or unset it for a "
                           "placeholder (which local servers accept): `unset OPENAI_API_KEY`")
        try:
            self.client = openai.OpenAI(base_url=base_url, api_key=key or "not-needed", timeout=request_timeout,
                                        max_retries=max_retries)
        except openai.OpenAIError as e:  # configuration, read before any request is made
            raise BadInput(f"cannot set up the OpenAI client: {e}",
                           fix="check OPENAI_API_KEY, OPENAI_BASE_URL and --base-url") from None
        self.base_url = str(self.client.base_url).rstrip("/")
        self.request_timeout = request_timeout
        self.max_retries = max_retries
        self.messages: list[dict] = []
        self.usage: dict[str, int] = {}
        self.requests = 0
        self.stop_reason: str | None = None  # "submit" or "no_tool_call" once the policy has submitted
        self._pending: str | None = None  # id of the bash call whose output the next act() receives
        self._started = False

    tools = TOOLS  # the function schemas offered to the model (recorded with each episode)

    # ---- Policy protocol ------------------------------------------------------------------------------------

    def start(self, task: Task, instruction: str) -> None:
        system = self.system_prompt if self.system_prompt is not None else DEFAULT_SYSTEM_PROMPT.format(
            workdir=task.workdir_label, max_steps=task.max_steps)
        self.messages = [{"role": "system", "content": system}, {"role": "user", "content": instruction}]
        self.usage = {}
        self.requests = 0
        self.stop_reason = None
        self._pending = None
        self._started = True

    def act(self, observation: str) -> str:
        if not self._started:
            raise EnvyardError("act() before start()", fix="call start(task, instruction) first")
        if self._pending is not None:
            self.messages.append({"role": "tool", "tool_call_id": self._pending,
                                  "content": truncate_middle(observation, self.max_observation_chars)})
            self._pending = None
        for attempt in range(NUDGES + 1):
            reply = self._complete()
            calls = reply.get("tool_calls") or []
            self.messages.append(reply)
            if not calls:
                if attempt < NUDGES:
                    self.messages.append({"role": "user", "content": NUDGE})
                continue
            first, extras = calls[0], calls[1:]
            name = first["function"]["name"]
            if name == "bash":
                command = self._command(first)
                self._pending = first["id"]
            elif name == "submit":
                self._answer(first, "Submitted.")
            else:
                self._answer(first, f"Error: there is no tool named {name!r}. Use the bash tool, or submit.")
            for call in extras:
                self._answer(call, "Skipped: only one tool call is executed per turn. Call it again if needed.")
            if name == "bash":
                return command
            if name == "submit":
                self.stop_reason = "submit"
                return SUBMIT
        self.stop_reason = "no_tool_call"
        return SUBMIT

    def finish(self, observation: str) -> None:
        """The episode ended after a bash call (a step or time budget ran out): record that call's output as
        its tool result, so the conversation ends with every tool call answered."""
        if self._pending is not None:
            self.messages.append({"role": "tool", "tool_call_id": self._pending,
                                  "content": truncate_middle(observation, self.max_observation_chars)})
            self._pending = None

    # ---- helpers --------------------------------------------------------------------------------------------

    def _error(self, message: str, kind: str, fix: str | None = None) -> PolicyError:
        return PolicyError(message, model=self.model, base_url=self.base_url, kind=kind, fix=fix)

    def _answer(self, call: dict, content: str) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})

    def _command(self, call: dict) -> str:
        raw = call["function"]["arguments"]
        try:
            args = raw if isinstance(raw, dict) else json.loads(raw or "")
        except ValueError:
            args = None
        command = args.get("command") if isinstance(args, dict) else None
        if not isinstance(command, str):
            raise self._error(f"malformed arguments for the bash tool: {str(raw)[:200]!r} "
                              '(expected a JSON object {"command": string})', "bad_tool_call",
                              fix="check that the served model supports tool calling")
        return command

    def _complete(self) -> dict:
        """One chat completion → the assistant message, normalized: {"role", "content", "tool_calls"}."""
        import openai

        kwargs: dict[str, Any] = {}
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        self.requests += 1
        try:
            raw = self.client.chat.completions.with_raw_response.create(
                model=self.model, messages=fit_context(self.messages, self.context_chars), tools=TOOLS, **kwargs)
            text = raw.http_response.text
        except openai.APITimeoutError as e:
            raise self._error(f"no response within {self.request_timeout:g} s "
                              f"({self.max_retries + 1} attempt(s)): {e}", "timeout",
                              fix="check the server's load, or raise request_timeout") from None
        except openai.APIConnectionError as e:
            cause = e.__cause__ or e
            raise self._error(f"cannot connect: {type(cause).__name__}: {cause}", "connection",
                              fix="check that the server runs and that base_url is right") from None
        except openai.APIStatusError as e:
            raise self._error(f"HTTP {e.status_code}: {_short(e.response.text)}", "http_status",
                              fix="check the model name, the API key and the server's log") from None
        except (openai.OpenAIError, ValueError) as e:
            raise self._error(f"request failed: {type(e).__name__}: {e}", "bad_response") from None
        return self._parse(text)

    def _parse(self, text: str) -> dict:
        bad = lambda why: self._error(f"not a chat completion ({why}): {_short(text)}", "bad_response",  # noqa: E731
                                      fix="check that base_url points at an OpenAI-compatible /v1 endpoint")
        try:
            body = json.loads(text)
        except ValueError:
            raise bad("not JSON") from None
        if not isinstance(body, dict):
            raise bad("not a JSON object")
        if isinstance(body.get("error"), dict | str):
            raise bad("the server returned an error")
        usage = body.get("usage")
        if isinstance(usage, dict):
            for k, v in usage.items():
                if isinstance(v, int):
                    self.usage[k] = self.usage.get(k, 0) + v
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise bad("no choices")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise bad("no message")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise bad("content is not a string")
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise bad("tool_calls is not a list")
        tool_calls = []
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise self._error(f"malformed tool call: {_short(json.dumps(call))}", "bad_tool_call")
            args = fn.get("arguments")
            if args is None:
                args = "{}"
            elif not isinstance(args, str):  # some servers send an object instead of a JSON string
                args = json.dumps(args)
            tool_calls.append({"id": str(call.get("id") or f"call_{uuid.uuid4().hex[:12]}"), "type": "function",
                               "function": {"name": fn["name"], "arguments": args}})
        reply: dict = {"role": "assistant", "content": content}
        if tool_calls:
            reply["tool_calls"] = tool_calls
        return reply


def _short(text: str, limit: int = 300) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"
