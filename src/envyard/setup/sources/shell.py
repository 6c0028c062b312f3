"""Reading shell command lines found in CI files, tox, nox, Makefiles, Dockerfiles and docs — as text, never run:
which ones run tests (and with which runner), which install packages, which `apt-get install` packages they name,
and which environment variables point at a service."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from .base import Sink
from .knowledge import service_for_env

RUNNERS = ("pytest", "unittest", "django", "nose")

_PYTHON_RE = re.compile(r"^(?:python(?:[23](?:\.\d+)?)?|py|pypy3?|\{envpython\}|\$\(PYTHON\)|\$\{PYTHON\}|\$PYTHON"
                        r"|\$\{\{\s*env\.PYTHON\s*\}\}|python\.exe)$", re.I)
_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = {"sudo", "time", "exec", "nice", "command", "stdbuf"}
# tool runners that take "run" and then the command: `poetry run pytest`
_RUN_PREFIXES = {"poetry", "pdm", "uv", "pipenv", "rye", "hatch", "conda", "mamba", "micromamba", "pixi", "tox"}
# options of those runners (and of python/coverage) that consume the next token
_ARG_OPTIONS = {"-n", "--name", "-p", "--prefix", "--with", "--extra", "--group", "--python", "-e", "--env",
                "--source", "--rcfile", "--data-file", "--concurrency", "--only-group", "--package", "-W", "-X",
                "--directory", "--project", "--context", "--include", "--omit"}


@dataclass(frozen=True)
class Classified:
    tool: str | None          # "pytest", "unittest", "nose", "django", "tox", "nox", "runtests", "script", "make"...
    runner: str | None        # one of RUNNERS when the command names a test runner


def split_commands(line: str) -> list[str]:
    """A shell line split at `&&`, `||`, `;` and `|`, outside quotes."""
    out, buf, quote, i = [], [], None, 0
    while i < len(line):
        c = line[i]
        if quote:
            buf.append(c)
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"' and i + 1 < len(line):
                buf.append(line[i + 1])
                i += 1
        elif c in "\"'":
            quote = c
            buf.append(c)
        elif line.startswith(("&&", "||"), i):
            out.append("".join(buf))
            buf = []
            i += 1
        elif c in ";|":
            out.append("".join(buf))
            buf = []
        else:
            buf.append(c)
        i += 1
    out.append("".join(buf))
    return [c.strip() for c in out if c.strip()]


def _tokens(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return command.split()


def classify(command: str) -> Classified:
    toks = _tokens(command)
    i = 0
    while i < len(toks):
        t = toks[i]
        base = t.rsplit("/", 1)[-1]
        if _ASSIGN_RE.match(t) or base in _WRAPPERS or base == "env":
            i += 1
        elif base in ("xvfb-run", "timeout"):
            i += 1
            while i < len(toks) and (toks[i].startswith("-") or toks[i][:1].isdigit()):
                i += 1
        elif base in _RUN_PREFIXES and i + 1 < len(toks) and toks[i + 1] in ("run", "exec"):
            if base == "hatch" and i + 2 < len(toks) and ":" in toks[i + 2]:
                toks[i + 2] = toks[i + 2].split(":", 1)[1]      # hatch run env:pytest
            i = _skip_options(toks, i + 2)
            if i < len(toks) and toks[i] == "--":
                i += 1
        else:
            break
    return _classify_head(toks[i:])


def _skip_options(toks: list[str], i: int) -> int:
    while i < len(toks) and toks[i].startswith("-") and toks[i] != "--" and toks[i] not in ("-m", "-c"):
        i += 2 if toks[i] in _ARG_OPTIONS else 1
    return i


def _classify_head(toks: list[str]) -> Classified:
    if not toks:
        return Classified(None, None)
    head = toks[0].rsplit("/", 1)[-1]
    rest = toks[1:]
    if head in ("pytest", "py.test"):
        return Classified("pytest", "pytest")
    if head in ("nosetests", "nose2"):
        return Classified("nose", "nose")
    if head == "coverage" and rest[:1] == ["run"]:
        i = _skip_options(rest, 1)
        if i < len(rest) and rest[i] == "-m":
            return _module(rest[i + 1:])
        return _script(rest[i:])
    if head in ("tox", "nox"):
        return Classified(head, None)
    if head == "hatch" and rest[:1] == ["test"]:
        return Classified("hatch test", "pytest")
    if head == "django-admin" and "test" in rest[:1]:
        return Classified("django", "django")
    if head in ("make", "gmake") and any(t in ("test", "tests", "check", "unittest", "pytest") for t in rest):
        return Classified("make", None)
    if head == "trial":
        return Classified("trial", None)
    if _is_install(head, rest):
        return Classified("install", None)
    if _PYTHON_RE.match(head) or head.startswith("python3."):
        i = 0
        while i < len(rest) and rest[i].startswith("-") and rest[i] not in ("-m", "-c"):
            i += 2 if rest[i] in ("-W", "-X") else 1
        if i < len(rest) and rest[i] == "-m":
            return _module(rest[i + 1:])
        return _script(rest[i:])
    if head in ("runtests.py", "manage.py", "setup.py"):
        return _script(toks)
    return Classified(None, None)


def _is_install(head: str, rest: list[str]) -> bool:
    if head in ("pip", "pip3"):
        return rest[:1] == ["install"]
    if head in ("poetry", "pdm", "pipenv"):
        return rest[:1] in (["install"], ["sync"])
    if head == "uv":
        return rest[:1] == ["sync"] or rest[:2] == ["pip", "install"]
    if head in ("conda", "mamba", "micromamba"):
        return rest[:1] in (["install"], ["env"])
    return False


def _module(toks: list[str]) -> Classified:
    if not toks:
        return Classified(None, None)
    mod = toks[0]
    if mod in ("pytest", "py.test"):
        return Classified("pytest", "pytest")
    if mod in ("unittest", "testtools.run", "subunit.run"):  # testtools' and subunit's take unittest's arguments
        return Classified("unittest", "unittest")
    if mod in ("nose", "nose2"):
        return Classified("nose", "nose")
    if mod == "twisted.trial":
        return Classified("trial", None)
    if mod == "django" and toks[1:2] == ["test"]:
        return Classified("django", "django")
    if mod in ("tox", "nox"):
        return Classified(mod, None)
    if mod == "pip" and toks[1:2] == ["install"]:
        return Classified("install", None)
    if mod == "coverage" and toks[1:2] == ["run"]:
        return _classify_head(["coverage"] + toks[1:])
    return Classified(None, None)


def _script(toks: list[str]) -> Classified:
    if not toks:
        return Classified(None, None)
    script = toks[0].rsplit("/", 1)[-1]
    if script == "manage.py" and "test" in toks[1:2]:
        return Classified("django", "django")
    if script == "runtests.py" or script == "run_tests.py":
        return Classified("runtests", None)
    if script == "setup.py" and "test" in toks[1:] and "--help" not in toks:
        return Classified("setup.py test", None)
    if script in ("pytest", "py.test"):
        return Classified("pytest", "pytest")
    if script.endswith(".py") and "test" in script.lower() and script != "setup.py":
        return Classified("script", None)                  # `python src/tests/test.py`: a test script
    return Classified(None, None)


# The project itself with extras in an install command: `pip install .[devenv]`, `-e ".[test,docs]"`, `-e.[x]`
_PROJECT_WITH_EXTRAS = re.compile(r"""(?:^|[\s=]|-e)['"]?\.\[([\w.,\s-]+)\]""")


def project_extras(command: str) -> list[str]:
    """The extras of the project itself (`.`) that an install command installs."""
    return [e.strip() for m in _PROJECT_WITH_EXTRAS.finditer(command) for e in m.group(1).split(",") if e.strip()]


def record_command(sink: Sink, text: str, file: str, line: int | None, via: str, *, installs: bool = True,
                   state: dict | None = None) -> bool:
    """Record the test commands (and install commands) in one shell line; returns whether a test command was
    found. Each test command also yields a test_runner fact when it names a runner. A `cd DIR` before a command
    is kept in the recorded command; pass the same `state` dict for successive lines of one script so that a
    `cd` on one line applies to the next ones."""
    found = False
    state = {} if state is None else state
    cwd = state.get("cwd")
    for command in split_commands(text):
        toks = _tokens(command)
        if toks[:1] in (["cd"], ["pushd"]) and len(toks) == 2:
            cwd = toks[1] if cwd is None or toks[1].startswith("/") else f"{cwd}/{toks[1]}"
            state["cwd"] = cwd
            continue
        c = classify(command)
        literal = f"cd {cwd} && {command}" if cwd else command
        if c.tool == "install":
            if installs:
                sink.add("install_command", literal, file, line, via)
                for extra in project_extras(command):
                    sink.add("test_extra", extra, file, line, f"{via} (install)")
        elif c.tool:
            found = True
            sink.add("test_command", literal, file, line, via)
            if c.runner:
                sink.add("test_runner", c.runner, file, line, via)
            if any(t.rsplit("/", 1)[-1] == "xvfb-run" for t in toks):  # the tests open windows: an X display
                sink.add("service", {"name": "xvfb"}, file, line, f"{via} (xvfb-run)")
    return found


# ---------------------------------------------------------------------------------------------------- apt-get

_DEB_RE = re.compile(r"^[a-z0-9][a-z0-9+.\-]+$")
_APT_TOOLS = {"apt-get", "apt", "aptitude"}
_APT_ARG_OPTIONS = {"-o", "-t", "-c", "--target-release", "--option", "--config-file", "--default-release"}
_TOKEN_RE = re.compile(r"&&|\|\||[;|`()&]|#.*$|[^\s;|&`()]+")
_STOPS = {"&&", "||", ";", "|", "`", "(", ")", "&"}


def apt_packages(lines: list[tuple[int, str]]) -> list[tuple[str, int]]:
    """(package, line) for every package named by `apt-get install` / `apt install` in these physical lines;
    `\\` continuations are followed, options and shell variables skipped, and the list ends at `&&`, `;`, `|`,
    a comment or a closing backtick."""
    out: list[tuple[str, int]] = []
    tokens: list[tuple[int, str]] = []
    for number, text in lines:
        cont = text.rstrip().endswith("\\")
        body = text.rstrip()[:-1] if cont else text
        tokens.extend((number, m.group(0)) for m in _TOKEN_RE.finditer(body))
        if not cont:
            out.extend(_apt_from_tokens(tokens))
            tokens = []
    out.extend(_apt_from_tokens(tokens))
    return out


def _apt_from_tokens(tokens: list[tuple[int, str]]) -> list[tuple[str, int]]:
    out = []
    i = 0
    while i < len(tokens):
        if tokens[i][1].rsplit("/", 1)[-1] not in _APT_TOOLS:
            i += 1
            continue
        j = i + 1
        while j < len(tokens) and tokens[j][1].startswith("-"):
            j += 2 if tokens[j][1] in _APT_ARG_OPTIONS else 1
        if j >= len(tokens) or tokens[j][1] != "install":
            i += 1
            continue
        j += 1
        while j < len(tokens):
            number, tok = tokens[j]
            if tok in _STOPS or tok.startswith("#") or tok.startswith(">") or tok[:1].isdigit() and ">" in tok:
                break
            j += 1
            if tok.startswith("-"):
                if tok in _APT_ARG_OPTIONS:
                    j += 1
                continue
            if "$" in tok or "{" in tok or "*" in tok:
                continue
            name = tok.strip("\"',.:").split("=", 1)[0].split(":", 1)[0]
            if _DEB_RE.match(name):
                out.append((name, number))
        i = j
    return out


def record_apt(sink: Sink, lines: list[tuple[int, str]], file: str, via: str) -> None:
    for name, number in apt_packages(lines):
        sink.add("system_package", {"name": name}, file, number, via)


# ---------------------------------------------------------------------------------------------------- services

def record_env(sink: Sink, name: str, value: str | None, file: str, line: int | None, via: str) -> None:
    """A `service` fact when an environment variable (by name or by its value's URL scheme) names a service."""
    service = service_for_env(name, value)
    if service:
        sink.add("service", {"name": service, "env": name}, file, line, via)
        if value is not None:                               # what the tests are told: exported for them
            sink.add("service_env", {"service": service, "name": name, "value": value}, file, line, via)
