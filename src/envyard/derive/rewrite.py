"""Optional: a model rewrites each validated task's deterministic instruction the way a user writes an issue.

Two defences keep the answer out of the rewrite:
1. the model is sent only the deterministic instruction, which by construction names no file, line or fix;
2. its reply is checked against the task directory's secrets (solution/fix.diff and solve.sh, the hidden tests,
   the version a repair installs, the changed file, the commit) and against what the deterministic instruction
   promises (every failing test's name, the test command). Anything the deterministic instruction already says
   may be repeated; anything else from the secrets may not.

A rewrite that fails either way — or an endpoint that times out, errs, rate-limits or answers garbage — leaves
the deterministic instruction in place, with the reason recorded: a task is never lost to the rewrite. The
deterministic text is always kept as `instruction.deterministic.md`; `[metadata] instruction` says which one
`instruction.md` holds.
"""

from __future__ import annotations

import concurrent.futures as cf
import difflib
import html
import json
import os
import re
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from ..errors import BadInput

DETERMINISTIC = "instruction.deterministic.md"
MIN_CHARS = 20  # a reply shorter than this (without spaces) is taken as empty
MAX_CHARS = 1500  # a reply may be this long, or twice the deterministic instruction when that is longer
MIN_LINE = 12  # shorter lines of a hidden test or of solve.sh are too common to count as a leak

REASONS = {
    "rewrite-empty": "the model's reply was empty",
    "rewrite-too-long": "the reply was longer than allowed (or cut off by the server)",
    "rewrite-unchanged": "the reply was the deterministic instruction itself",
    "rewrite-drops-tests": "the reply left out a failing test's name or the test command",
    "rewrite-leaks-fix": "the reply contains code of the fix (solution/fix.diff, solve.sh)",
    "rewrite-leaks-version": "the reply names the version the repair installs",
    "rewrite-leaks-location": "the reply names the changed file, package or commit",
    "rewrite-leaks-hidden-tests": "the reply names or quotes a hidden test file",
    "rewrite-timeout": "the endpoint did not answer in time",
    "rewrite-rate-limited": "the endpoint kept answering 429 (rate limit)",
    "rewrite-http-error": "the endpoint answered an HTTP error",
    "rewrite-connection": "the endpoint could not be reached",
    "rewrite-bad-response": "the endpoint's answer was not a chat completion",
    "rewrite-error": "an unexpected error while rewriting (see detail)",
}

SYSTEM_PROMPT = """\
You turn a precise, machine-written bug report into the issue a developer would file: a short title line, then \
a few sentences in plain, natural language saying what they ran and what went wrong.

Rules:
- Keep the test command exactly as given, in backticks.
- Name every failing test exactly as given (e.g. `tests/test_x.py::test_y`), in backticks.
- You may quote the error messages given. Do not guess at the cause, the file to change or the fix, and do not \
mention anything that is not in the report.
- Keep any note that some tests are not in the reader's copy of the project, and the request not to edit tests.
- At most 200 words. Reply with the issue text only (Markdown), no preamble."""


class RewriteFailed(Exception):
    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail[:300]


class Rewriter:
    """An OpenAI-compatible chat endpoint that rewrites instructions. The configuration follows OpenAIPolicy's:
    `base_url` (else $OPENAI_BASE_URL), `api_key` (else $OPENAI_API_KEY; a placeholder when unset, which local
    servers accept). A configuration that cannot work raises BadInput here, before any task is derived."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 request_timeout: float = 60, max_retries: int = 2, concurrency: int = 4):
        import openai

        if not model or not model.strip():
            raise BadInput("--rewrite-model needs a model name", fix="e.g. --rewrite-model gpt-4o-mini")
        if concurrency < 1:
            raise BadInput(f"rewrite concurrency must be at least 1, got {concurrency}")
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if key is not None and not key.strip():
            raise BadInput("api_key is empty" if api_key is not None else "OPENAI_API_KEY is set but empty",
                           fix="set OPENAI_API_KEY to your key, or unset it for a placeholder (which local servers "
                           "accept): `unset OPENAI_API_KEY`")
        url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        if url is None and key is None:
            raise BadInput(f"--rewrite-model {model} has no endpoint: neither --base-url nor OPENAI_BASE_URL is "
                           "set, and OPENAI_API_KEY is not set for api.openai.com",
                           fix="pass --base-url http://HOST:PORT/v1 (or set OPENAI_BASE_URL), or set "
                           "OPENAI_API_KEY")
        if url is not None and not re.match(r"https?://[^/\s]+", url):
            raise BadInput(f"endpoint {url!r} is not an http(s) URL", fix="e.g. --base-url http://127.0.0.1:8000/v1")
        try:
            self.client = openai.OpenAI(base_url=url, api_key=key or "not-needed", timeout=request_timeout,
                                        max_retries=max_retries)
        except openai.OpenAIError as e:
            raise BadInput(f"cannot set up the OpenAI client: {e}",
                           fix="check OPENAI_API_KEY, OPENAI_BASE_URL and --base-url") from None
        self.model = model
        self.base_url = str(self.client.base_url).rstrip("/")
        self.request_timeout = request_timeout
        self.max_retries = max_retries
        self.concurrency = concurrency

    def ask(self, instruction: str) -> str:
        """The model's rewrite of `instruction` (not yet checked); RewriteFailed when the endpoint fails."""
        import openai

        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": instruction}]
        try:
            raw = self.client.chat.completions.with_raw_response.create(model=self.model, messages=messages)
            text = raw.http_response.text
        except openai.APITimeoutError:
            raise RewriteFailed("rewrite-timeout", f"no answer within {self.request_timeout:g} s "
                                f"({self.max_retries + 1} attempt(s))") from None
        except openai.APIConnectionError as e:
            cause = e.__cause__ or e
            raise RewriteFailed("rewrite-connection", f"{type(cause).__name__}: {cause}") from None
        except openai.RateLimitError as e:
            raise RewriteFailed("rewrite-rate-limited", f"HTTP 429 after {self.max_retries + 1} attempt(s): "
                                f"{e.response.text[:200]}") from None
        except openai.APIStatusError as e:
            raise RewriteFailed("rewrite-http-error", f"HTTP {e.status_code}: {e.response.text[:200]}") from None
        except (openai.OpenAIError, ValueError) as e:
            raise RewriteFailed("rewrite-bad-response", f"{type(e).__name__}: {e}") from None
        return _content(text)


def _content(text: str) -> str:
    """The reply's text from a chat.completion body, without a reasoning block or a fence around all of it."""
    try:
        body = json.loads(text)
        choice = body["choices"][0]
        content = choice["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise RewriteFailed("rewrite-bad-response", f"not a chat completion: {text.strip()[:200]}") from None
    if not isinstance(content, str):
        raise RewriteFailed("rewrite-bad-response", "the message has no text content")
    if choice.get("finish_reason") == "length":
        raise RewriteFailed("rewrite-too-long", "the server cut the reply off (finish_reason=length)")
    content = re.sub(r"(?s)<think>.*?</think>", "", content).strip()
    fenced = re.fullmatch(r"(?s)```[a-zA-Z]*\n(.*)\n```", content)
    return (fenced.group(1) if fenced else content).strip()


# ---- the checks -------------------------------------------------------------------------------------------------

def _squash(s: str) -> str:
    return re.sub(r"\s+", "", s)


def _code(s: str) -> str:
    """Spacing normalized: one space between words, none around operators and brackets, so code compares equal
    however the model spaced it (`a<b` and `a < b`; `while True :` and `while True:`)."""
    return re.sub(r" ?([^\w ]) ?", r"\1", re.sub(r"\s+", " ", s)).strip()


_TOKEN = re.compile(r"\w+(?:\.\w+)*|==|!=|<=|>=|//|\*\*|<<|>>|->|\+=|-=|\S")


def _fix_snippets(diff: str) -> set[str]:
    """Code only the fixed version has, in context: for each token a `+` line of the diff adds or changes
    (against the `-` lines it replaces), that token with its neighbours; and each whole added line."""
    snippets: set[str] = set()
    hunks = re.split(r"(?m)^@@.*\n", diff)[1:]
    for hunk in hunks:
        old = [l[1:] for l in hunk.splitlines() if l.startswith("-") and not l.startswith("---")]
        new = [l[1:] for l in hunk.splitlines() if l.startswith("+") and not l.startswith("+++")]
        a, b = _TOKEN.findall("\n".join(old)), _TOKEN.findall("\n".join(new))
        for op, _, _, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if op in ("replace", "insert"):
                for j in range(j1, j2):
                    snippets.add(_code(" ".join(b[max(0, j - 1):j + 2])))
            elif op == "delete" and 0 < j1 < len(b):  # the fix removes tokens: its neighbours meet (`while True`)
                snippets.add(_code(" ".join(b[j1 - 1:j1 + 1])))
        snippets.update(_code(l) for l in new if len(l.strip()) >= MIN_LINE)
    return {s for s in snippets if len(s) >= 3}


@dataclass
class Secrets:
    """What a rewrite must not say unless the deterministic instruction already does, read from a task dir."""

    fix: set[str]  # code of the fix (spacing normalized: _code)
    version: str  # the version a repair installs ("" if none)
    locations: set[str]  # changed file (and its base name), Debian package, commit
    hidden_names: set[str]  # hidden test files and their base names
    hidden_lines: set[str]  # lines of the hidden test files (_code)
    command: str  # the test command the deterministic instruction gives ("" if none)
    tests: list[str]  # the failing tests it names

    @classmethod
    def of(cls, task: Path, deterministic: str) -> "Secrets":
        meta = tomllib.loads((task / "task.toml").read_text()).get("metadata", {})
        fix: set[str] = set()
        diff = task / "solution" / "fix.diff"
        if diff.is_file():
            fix |= _fix_snippets(diff.read_text(errors="replace"))
        solve = task / "solution" / "solve.sh"
        if solve.is_file():
            fix |= {_code(l) for l in solve.read_text(errors="replace").splitlines()  # e.g. a restored script
                    if len(l.strip()) >= MIN_LINE and not l.lstrip().startswith(("#", "cd ", "set "))}
        locations: set[str] = set()
        for key in ("file", "script", "library", "package", "commit", "parent", "subject"):
            value = meta.get(key)
            if isinstance(value, str) and len(value.strip()) >= 3:
                locations.add(value.strip())
                if key == "file":
                    locations.add(value.rsplit("/", 1)[-1])
                if key in ("commit", "parent") and len(value) > 7:
                    locations.add(value[:7])
        hidden_names: set[str] = set()
        hidden_lines: set[str] = set()
        root = task / "tests" / "hidden"
        for p in sorted(root.rglob("*")) if root.is_dir() else ():
            if p.is_file():
                rel = str(p.relative_to(root))
                hidden_names |= {rel, p.name}
                hidden_lines |= {_code(l) for l in p.read_text(errors="replace").splitlines()
                                 if len(l.strip()) >= MIN_LINE and not l.lstrip().startswith(("#", "import ", "from "))}
        version = meta.get("version") if isinstance(meta.get("version"), str) and "." in meta.get("version") else ""
        m = re.search(r"test suite \(`([^`]+)`", deterministic)
        shown = re.findall(r"(?m)^- `([^`]+)`", deterministic)
        return cls(fix=fix, version=version or "", locations=locations, hidden_names=hidden_names,
                   hidden_lines=hidden_lines, command=m.group(1) if m else "", tests=shown)


def _names(text: str, name: str) -> bool:
    """`name` occurs in `text` as a whole word (`text.py` is not named by `test_text.py`)."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None


def check(deterministic: str, rewrite: str, secrets: Secrets) -> tuple[str, str] | None:
    """None when `rewrite` may replace `deterministic`, else (reason, detail)."""
    if len(_squash(rewrite)) < MIN_CHARS:
        return "rewrite-empty", f"{len(rewrite.strip())} characters"
    limit = max(MAX_CHARS, 2 * len(deterministic))
    if len(rewrite.strip()) > limit:
        return "rewrite-too-long", f"{len(rewrite.strip())} characters, at most {limit}"
    if _squash(rewrite) == _squash(deterministic):
        return "rewrite-unchanged", "the reply is the deterministic instruction"
    # The reply as written and as a Markdown viewer shows it (`\*` is `*`, `&lt;` is `<`): what must be there may be
    # in either; what must not be there may be in neither (escaping must not hide code from the checks).
    raw = rewrite.strip()
    views = [raw, html.unescape(re.sub(r"\\(?=[^\w\s])", "", raw))]
    has = lambda s: any(s in v for v in views)  # noqa: E731
    if secrets.command and not any(" ".join(secrets.command.split()) in " ".join(v.split()) for v in views):
        return "rewrite-drops-tests", f"the test command `{secrets.command}` is missing"
    for test in secrets.tests:
        if not has(test.rsplit("::", 1)[-1]):
            return "rewrite-drops-tests", f"the failing test {test} is missing"
    det, code = _code(deterministic), [_code(v) for v in views]
    new = lambda s: s not in det and any(s in c for c in code)  # noqa: E731  (said by the reply, not the instruction)
    for s in sorted(secrets.fix):
        if new(s):
            return "rewrite-leaks-fix", f"contains {s!r}"
    if secrets.version:
        pattern = rf"(?<![\w.]){re.escape(secrets.version)}(?![\w.])"
        if any(re.search(pattern, v) for v in views) and not re.search(pattern, deterministic):
            return "rewrite-leaks-version", f"names version {secrets.version}"
    for s in sorted(secrets.locations):
        if any(_names(v, s) for v in views) and not _names(deterministic, s):
            return "rewrite-leaks-location", f"names {s!r}"
    for s in sorted(secrets.hidden_names):
        if any(_names(v, s) for v in views) and not _names(deterministic, s):
            return "rewrite-leaks-hidden-tests", f"names {s!r}"
    for s in sorted(secrets.hidden_lines):
        if new(s):
            return "rewrite-leaks-hidden-tests", f"quotes {s!r}"
    return None


# ---- applying it to task directories ------------------------------------------------------------------------

@dataclass
class Result:
    task: str
    instruction: str  # "rewritten" | "deterministic"
    reason: str = ""
    detail: str = ""


def rewrite_task(task: Path, rewriter: Rewriter) -> Result:
    """Rewrite one task's instruction in place when the rewrite passes the checks; record the outcome in
    task.toml [metadata]. The deterministic instruction is kept in instruction.deterministic.md either way."""
    instruction = task / "instruction.md"
    deterministic = instruction.read_text()
    (task / DETERMINISTIC).write_text(deterministic)
    try:
        reply = rewriter.ask(deterministic)
        bad = check(deterministic, reply, Secrets.of(task, deterministic))
        if bad is None:
            instruction.write_text(reply + "\n")
            result = Result(task.name, "rewritten")
        else:
            result = Result(task.name, "deterministic", *bad)
    except RewriteFailed as e:
        result = Result(task.name, "deterministic", e.reason, e.detail)
    except Exception as e:  # never lose a task to the rewrite
        result = Result(task.name, "deterministic", "rewrite-error", f"{type(e).__name__}: {e}"[:300])
    if result.instruction == "deterministic":
        instruction.write_text(deterministic)
    meta = {"instruction": f"rewritten by {rewriter.model}" if result.instruction == "rewritten" else
            "deterministic", "instruction_deterministic": DETERMINISTIC}
    if result.reason:
        meta["instruction_rewrite_rejected"] = result.reason
    _add_metadata(task / "task.toml", meta)
    return result


def _add_metadata(path: Path, values: dict[str, str]) -> None:
    """Append keys to the [metadata] table of a task.toml written by derive/writer.py."""
    lines = path.read_text().splitlines()
    start = lines.index("[metadata]")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    lines[end:end] = [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    path.write_text("\n".join(lines) + "\n")


def rewrite_tasks(tasks: Iterable[Path], rewriter: Rewriter, *, cancel: threading.Event | None = None,
                  on_done: Callable[[Result], None] | None = None) -> list[Result]:
    """Rewrite many tasks, `rewriter.concurrency` at once; results in the order of `tasks`."""
    tasks = list(tasks)
    cancel = cancel or threading.Event()

    def one(task: Path) -> Result:
        if cancel.is_set():
            return Result(task.name, "deterministic", "rewrite-error", "cancelled")
        r = rewrite_task(task, rewriter)
        if on_done:
            on_done(r)
        return r

    pool = cf.ThreadPoolExecutor(max_workers=rewriter.concurrency, thread_name_prefix="rewrite")
    try:
        return list(pool.map(one, tasks))
    except BaseException:  # Ctrl-C: no new request starts; the running ones end with their timeout
        cancel.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=False)
