"""What runs a project's tests at L3 and L4: pytest's own discovery first, then the project's own test
commands, found as evidence (tox, nox, Makefile, CI, manage.py, unittest imports) with their file and line.

A command from the project is never run as it is written. It is parsed into a runner this module knows —
pytest, `python -m unittest`, Django's `manage.py test` (or `python -m django test`), nose (run by pytest), or a test script run with the
environment's interpreter — and the command is rebuilt from the parts that were checked: paths inside the
repository, simple option values, dotted test labels. Anything else (`make`, `tox`, shell scripts, `setup.py
test`, arbitrary programs) is not a runner; `make test` or `tox` are read through the commands they contain,
which the evidence records on their own lines.

Each project command gives one or two `Runner`s, tried in order: through pytest when pytest can collect it
(a script's file, a unittest pattern), then natively. A runner with a collect-only form (pytest, the unittest
loader) is checked at L3 without running the tests; one without it (Django, a script) runs the tests at L3,
and L4 uses that run.
"""

from __future__ import annotations

import configparser
import fnmatch
import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Iterable

from .evidence import Evidence

PY = "/opt/venv/bin/python"
MAX_RUNNERS = 8  # runners tried at L3 (each may run the tests)
# pytest's cache plugin stays off (no .pytest_cache, no state between runs), unless the project's addopts use its
# options (`--cache-clear`, `--lf`...: with it off they are unrecognized arguments, async-lru's); then its cache
# lives outside the source tree.
NO_CACHE = "-p no:cacheprovider"
KEEP_CACHE = "-o cache_dir=/tmp/envyard-pytest-cache"
COLLECT_FLAGS = f"--collect-only -q {NO_CACHE}"


def _collect(command: str) -> str:
    return f"{command} --collect-only -q" if KEEP_CACHE in command else f"{command} {COLLECT_FLAGS}"

_SAFE = re.compile(r"^[\w.,:=/*+@%-]+$")
_LABEL = re.compile(r"^[A-Za-z_][\w.]*$")
_PYTHON = re.compile(r"^(?:python(?:[23](?:\.\d+)?)?|py|pypy3?|python\.exe)$", re.I)
_TESTISH_SCRIPT = re.compile(r"test", re.I)
_WRAPPERS = {"sudo", "time", "exec", "nice", "command", "stdbuf", "env", "xvfb-run"}
DJANGO_MODULE = "-m django"  # in place of manage.py's path: Django's test command run as a module
_RUN_PREFIXES = {"poetry", "pdm", "uv", "pipenv", "rye", "hatch", "pixi"}


@dataclass(frozen=True)
class Runner:
    kind: str              # "pytest" | "unittest" | "django" | "script"
    command: str           # runs the tests from the project root (test.sh appends "$@")
    collect: str | None    # lists the tests without running them; None: L3 runs them
    source: str = ""       # the project's command line it comes from ("" = pytest's default discovery)
    evidence: str = ""     # where that command was found: "tox.ini:5 (tox.commands)"
    wider: bool = False    # its file pattern finds test files pytest's default (test_*.py, *_test.py) does not

    @property
    def label(self) -> str:
        if not self.source:
            return "pytest (its default discovery)"
        how = "" if self.kind != "pytest" or self.source.split()[0] in ("pytest", "py.test") else ", run through pytest"
        return f"`{self.source}` ({self.evidence}{how})"

    def run(self, junit: str) -> str:
        """The command that runs the tests and reports each one."""
        if self.kind == "pytest":
            return f"{self.command} -q{'' if KEEP_CACHE in self.command else ' ' + NO_CACHE} --junitxml={junit}"
        return self.command


INTERRUPTED_EXIT = 124  # coreutils `timeout`: the command was still running when it was interrupted


def interrupting(command: str, limit: float) -> tuple[str, float]:
    """(`command` with its Python sent SIGINT, as Ctrl-C, shortly before `limit` and killed a little later, when
    that is), for a run that may pass the limit. Interrupted, pytest still writes its JUnit XML and a summary
    for the tests that ran, and unittest's output keeps its per-test lines; killed at the limit, pytest leaves
    nothing to say how far it got or where it hung. `timeout` signals only its own process group: the shell
    around the command (services started and stopped around it) carries on.

    `timeout` sends the signal twice, to the command it runs and to its whole group; a Python that has already
    turned the first into KeyboardInterrupt gets a second one in the middle of its clean-up (2 runs in 30 on a
    loaded machine), and pytest then loses its summary or its report. So the command it runs is a shell that
    takes its copy with a no-op trap: Python and its children get the group's copy alone."""
    grace = min(60.0, limit / 10)  # a big suite's teardown after the interrupt (dask's clusters) takes a while
    at = max(1.0, limit - grace)
    head, sep, rest = command.partition(f"{PY} ")
    if not sep:
        return command, limit
    inner = shlex.quote(f"trap : INT; {PY} {rest}")
    return f"{head}timeout -s INT -k {max(1.0, grace * 0.8):.0f} {at:.0f} sh -c {inner}", at


def default_runner(keep_cache: bool = False) -> Runner:
    command = f"{PY} -m pytest" + (f" {KEEP_CACHE}" if keep_cache else "")
    return Runner("pytest", command, _collect(command))


def runners(ev: Evidence, root: Path | None = None) -> list[Runner]:
    """Runners to try, in order: pytest's default discovery, then each test command the evidence names (a
    Django project's `manage.py test` first when nothing names pytest)."""
    root = root or ev.root
    own: list[Runner] = []
    for fact in ev.of("test_command"):
        if isinstance(fact.value, str):
            where = f"{fact.file}:{fact.line}" if fact.line else fact.file
            own.extend(from_command(fact.value, root, f"{where}, {fact.via}"))
    named = ev.values("test_runner")
    keep_cache = bool(ev.of("pytest_cache_option"))
    if keep_cache:
        own = [replace(r, command=_keeping_cache(r.command), collect=_collect(_keeping_cache(r.command)))
               if r.kind == "pytest" else r for r in own]
    out = [default_runner(keep_cache), *own]
    if "django" in named and "pytest" not in named:
        out = [r for r in own if r.kind == "django"] + [r for r in out if r.kind != "django"]
    seen: set[str] = set()
    unique = [r for r in out if not (r.command in seen or seen.add(r.command))]
    return unique[:MAX_RUNNERS]


# ---------------------------------------------------------------------------------------------------- parsing

def _tokens(text: str) -> list[str] | None:
    text = re.sub(r"\{posargs:([^{}]*)\}", r"\1", text)
    text = text.replace("{toxinidir}/", "").replace("{toxinidir}", ".").replace("{envpython}", "python")
    text = re.sub(r"\$\(PYTHON\)|\$\{PYTHON\}|\$PYTHON\b", "python", text)  # a Makefile's interpreter variable
    text = re.sub(r"\{posargs\}|\$\{?@\}?", "", text)
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return None


def _inside(root: Path, cwd: str, rel: str, *, dir_ok: bool = True, file_ok: bool = True) -> str | None:
    """`rel` (relative to `cwd` in the repository) when it names a file or directory inside it."""
    if not rel or rel.startswith("/") or not _SAFE.match(rel):
        return None
    path = PurePosixPath(cwd) / rel.split("::", 1)[0]
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part not in (".", ""):
            parts.append(part)
    target = root.joinpath(*parts)
    try:
        target.resolve().relative_to(root.resolve())
    except ValueError:
        return None
    if (file_ok and target.is_file()) or (dir_ok and target.is_dir()):
        return rel
    return None


def _keeping_cache(command: str) -> str:
    """A pytest command with the cache plugin kept (KEEP_CACHE) right after `-m pytest`."""
    return command if KEEP_CACHE in command else command.replace(" -m pytest", f" -m pytest {KEEP_CACHE}", 1)


def from_command(text: str, root: Path, evidence: str) -> list[Runner]:
    """The runners for one of the project's test command lines (none when it is not a known test runner)."""
    cwd = "."
    m = re.match(r"^cd\s+(\S+)\s*&&\s*(.+)$", text)
    if m:
        cwd, text = m.group(1), m.group(2)
        if _inside(root, ".", cwd, file_ok=False) is None:
            return []
    toks = _tokens(text)
    if not toks:
        return []
    head = _head(toks)
    if head is None:
        return []
    kind, args = head
    prefix = "" if cwd in (".", "./") else f"cd {shlex.quote(cwd)} && "
    out = []
    for r in _build(kind, args, root, cwd):
        collect = f"{prefix}{r.collect}" if r.collect else None
        out.append(Runner(r.kind, prefix + r.command, collect, text.strip(), evidence, r.wider))
    return out


def _head(toks: list[str]) -> tuple[str, list[str]] | None:
    """(what runs, its arguments): "pytest", "unittest", "nose", "django", "script:PATH", or None."""
    i = 0
    while i < len(toks):
        t = toks[i].rsplit("/", 1)[-1]
        if re.match(r"^[A-Za-z_]\w*=", toks[i]) or t in _WRAPPERS:
            i += 1
        elif t == "timeout":
            i += 2
        elif t in _RUN_PREFIXES and i + 1 < len(toks) and toks[i + 1] == "run":
            i += 2
            while i < len(toks) and toks[i].startswith("-") and toks[i] != "--":
                i += 1
            if i < len(toks) and toks[i] == "--":
                i += 1
        else:
            break
    toks = toks[i:]
    if not toks:
        return None
    head, rest = toks[0].rsplit("/", 1)[-1], toks[1:]
    if head in ("pytest", "py.test"):
        return "pytest", rest
    if head in ("nosetests", "nose2"):
        return "nose", rest
    if head == "django-admin" and rest[:1] == ["test"]:
        return "django", [DJANGO_MODULE, *rest[1:]]
    if head == "coverage" and rest[:1] == ["run"]:
        rest = rest[1:]
        while rest and rest[0].startswith("-") and rest[0] != "-m":
            rest = rest[1:]
        return _python(rest)
    if _PYTHON.match(head) or re.match(r"^python3\.\d+$", head):
        return _python(rest)
    if head.endswith(".py"):
        return _python(toks)
    return None


def _python(rest: list[str]) -> tuple[str, list[str]] | None:
    while rest and rest[0].startswith("-") and rest[0] != "-m":
        rest = rest[2:] if rest[0] in ("-W", "-X") else rest[1:]
    if not rest:
        return None
    if rest[0] == "-m" and len(rest) > 1:
        mod, args = rest[1], rest[2:]
        if mod in ("pytest", "py.test"):
            return "pytest", args
        if mod in ("unittest", "testtools.run", "subunit.run"):  # run by unittest itself, for its verbose lines
            return "unittest", args
        if mod in ("nose", "nose2"):
            return "nose", args
        if mod == "coverage" and args[:1] == ["run"]:
            return _head(["coverage", *args])
        if mod == "django" and args[:1] == ["test"]:  # tox: `python -m django test --settings=tests.settings`
            return "django", [DJANGO_MODULE, *args[1:]]
        return None
    script, args = rest[0], rest[1:]
    name = script.rsplit("/", 1)[-1]
    if name == "manage.py":
        return ("django", [script, *args[1:]]) if args[:1] == ["test"] else None
    if name == "setup.py" or not name.endswith(".py") or not _TESTISH_SCRIPT.search(name):
        return None
    return "script", [script, *args]


@dataclass(frozen=True)
class _Built:
    kind: str
    command: str
    collect: str | None
    wider: bool = False


def _pytest(paths: list[str], options: list[str] = (), wider: bool = False) -> _Built:
    command = " ".join([PY, "-m", "pytest", *map(shlex.quote, [*paths, *options])])
    return _Built("pytest", command, _collect(command), wider)


def _finds_more(root: Path, start: str, pattern: str) -> bool:
    """Whether `pattern` (a unittest/nose2 file pattern) matches a Python file under `start` that pytest's
    default `python_files` (test_*.py, *_test.py) does not: pika's `*test*.py` finds `channel_tests.py`."""
    base = root / start
    for seen, path in enumerate(base.rglob("*.py") if base.is_dir() else ()):
        if seen >= 20000:  # a huge tree: stop looking rather than stall the search
            break
        if any(part.startswith(".") or part in ("node_modules", "site-packages")
               for part in path.relative_to(base).parts[:-1]):
            continue
        name = path.name
        if fnmatch.fnmatchcase(name, pattern) and not (fnmatch.fnmatchcase(name, "test_*.py")
                                                       or fnmatch.fnmatchcase(name, "*_test.py")):
            return True
    return False


def _nose2_config(root: Path, cwd: str) -> tuple[str, str] | None:
    """(start dir, file pattern) of nose2's own config (`[unittest]` in nose2.cfg or unittest.cfg, which it
    reads from where it runs), when that config sets a file pattern."""
    parser = configparser.ConfigParser(interpolation=None)
    for name in ("unittest.cfg", "nose2.cfg"):
        try:
            parser.read(root / cwd / name, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError, OSError):
            return None
    if not parser.has_option("unittest", "test-file-pattern"):
        return None
    pattern = parser.get("unittest", "test-file-pattern").strip()
    start = parser.get("unittest", "start-dir", fallback=".").strip() or "."
    if not _SAFE.match(pattern) or _inside(root, cwd, start, file_ok=False) is None:
        return None
    return start, pattern


def _build(kind: str, args: list[str], root: Path, cwd: str) -> list[_Built]:
    if kind in ("pytest", "nose"):
        paths, options = [], []
        for a in args:
            if a == "--doctest-modules" and kind == "pytest":
                options.append(a)
            elif not a.startswith("-") and _inside(root, cwd, a):
                paths.append(a)
        config = _nose2_config(root, cwd) if kind == "nose" and not paths else None
        if config:  # nose2 run as its config says: pytest over the same start dir and file pattern
            start, pattern = config
            return [_pytest([] if start in (".", "./") else [start], ["-o", f"python_files={pattern}"],
                            _finds_more(root / cwd, start, pattern))]
        return [_pytest(paths, options)]
    if kind == "django":
        script, labels = args[0], []
        settings = []
        for a in args[1:]:
            if a.startswith("--settings=") and _LABEL.match(a.split("=", 1)[1]):
                settings.append(a)
            elif not a.startswith("-") and _LABEL.match(a):
                labels.append(a)
        if script == DJANGO_MODULE:
            how = ["-m", "django"]
        elif _inside(root, cwd, script, dir_ok=False) is not None:
            how = [shlex.quote(script)]
        else:
            return []
        command = " ".join([PY, *how, "test", "--noinput", "-v", "2", *settings, *labels])
        return [_Built("django", command, None)]
    if kind == "script":
        script = _inside(root, cwd, args[0], dir_ok=False)
        if script is None:
            return []
        if _django_test_script(root / cwd / script):  # its arguments go to Django's test command
            labels, skip = [], False
            for a in args[1:]:
                if skip:  # the value of an option (`--testrunner xmlrunner...`)
                    skip = False
                elif a.startswith("-"):
                    skip = "=" not in a
                elif _LABEL.match(a):
                    labels.append(a)
            command = " ".join([PY, shlex.quote(script), "--noinput", "-v", "2", *labels])
            return [_Built("django", command, None)]
        extra = [a for a in args[1:] if _SAFE.match(a)]
        if _calls_unittest_main(root / cwd / script) and not {"-v", "--verbose"} & set(extra):
            extra.append("-v")  # unittest.main() reads it from argv: one line per test, so per-test statuses
        native = " ".join([PY, shlex.quote(script), *map(shlex.quote, extra)])
        return [_pytest([script]), _Built("script", native, None)]
    if kind == "unittest":
        return _unittest(args, root, cwd)
    return []


def _calls_unittest_main(path: Path) -> bool:
    """A script that hands its command line to `unittest.main()` (and parses no options of its own)."""
    try:
        text = path.read_text("utf-8", errors="replace")[:262144]
    except OSError:
        return False
    return bool(re.search(r"^\s*unittest\.main\(\s*\)", text, re.M)) and "argparse" not in text \
        and "optparse" not in text and "getopt" not in text


def _django_test_script(path: Path) -> bool:
    """A `runtests.py` that hands its command line to Django's `test` command (django-filter's:
    `execute_from_command_line(sys.argv[:1] + ["test"] + sys.argv[1:])`), so Django's options and verbose
    per-test lines apply to it."""
    try:
        text = path.read_text("utf-8", errors="replace")[:65536]
    except OSError:
        return False
    return "execute_from_command_line" in text and bool(re.search(r"""["']test["']""", text))


def _unittest(args: list[str], root: Path, cwd: str) -> list[_Built]:
    args = [a for a in args if a not in ("-v", "--verbose", "-q", "--quiet", "-b", "--buffer", "-f", "--failfast",
                                         "-c", "--catch", "--locals")]
    if not args or args[0] == "discover":
        start, pattern, top = ".", "test*.py", None
        positional = []
        rest = args[1:]
        i = 0
        while i < len(rest):
            a = rest[i]
            value = rest[i + 1] if i + 1 < len(rest) else None
            if a in ("-s", "--start-directory") and value:
                start, i = value, i + 2
            elif a in ("-p", "--pattern") and value:
                pattern, i = value, i + 2
            elif a in ("-t", "--top-level-directory") and value:
                top, i = value, i + 2
            elif a.startswith("-"):
                i += 1
            else:
                positional.append(a)
                i += 1
        for n, value in enumerate(positional[:3]):
            start, pattern, top = (value, pattern, top) if n == 0 else (start, value, top) if n == 1 else \
                (start, pattern, value)
        if _inside(root, cwd, start, file_ok=False) is None or not _SAFE.match(pattern) or \
                (top is not None and _inside(root, cwd, top, file_ok=False) is None):
            return []
        spec = ["discover", "-s", start, "-p", pattern] + (["-t", top] if top else [])
        native = " ".join([PY, "-m", "unittest", *map(shlex.quote, spec), "-v"])
        collect = " ".join([PY, "-c", shlex.quote(UNITTEST_LIST), "discover", *map(shlex.quote, [start, pattern,
                                                                                                 top or ""])])
        through = (_pytest([start], ["-o", f"python_files={pattern}"], _finds_more(root / cwd, start, pattern))
                   if top is None else None)
        return [b for b in (through, _Built("unittest", native, collect)) if b]
    names = [a for a in args if not a.startswith("-")]
    if not names or not all(_LABEL.match(n) or _inside(root, cwd, n, dir_ok=False) for n in names):
        return []
    native = " ".join([PY, "-m", "unittest", "-v", *map(shlex.quote, names)])
    collect = " ".join([PY, "-c", shlex.quote(UNITTEST_LIST), "names", *map(shlex.quote, names)])
    return [_Built("unittest", native, collect)]


# Lists the tests unittest would run (one id a line), then the import errors; exit 1 when there are any.
UNITTEST_LIST = """import sys, unittest
loader = unittest.TestLoader()
if sys.argv[1] == "discover":
    suite = loader.discover(sys.argv[2], sys.argv[3], sys.argv[4] or None)
else:
    names = [n[:-3].replace("/", ".") if n.endswith(".py") else n for n in sys.argv[2:]]
    suite = loader.loadTestsFromNames(names)
def walk(s):
    for t in s:
        if isinstance(t, unittest.TestSuite):
            yield from walk(t)
        else:
            yield t
failed = 0
for t in walk(suite):
    if type(t).__name__ in ("_FailedTest", "ModuleImportFailure"):
        failed += 1
        err = getattr(t, "_exception", None)
        print("ERROR " + t.id() + ": " + repr(err), file=sys.stderr)
    else:
        print(t.id())
for e in loader.errors:
    print(e, file=sys.stderr)
sys.exit(1 if failed or loader.errors else 0)
"""


# ---------------------------------------------------------------------------------------------------- results

def listed_count(stdout: str) -> int:
    """Tests listed by UNITTEST_LIST."""
    return sum(1 for line in stdout.splitlines() if re.match(r"^[\w.]+$", line.strip()))


_HEADER_RE = re.compile(r"^(\w+) \(([\w.]+)\)(.*)$")
_STATUS = (("ok", "passed"), ("FAIL", "failed"), ("ERROR", "error"), ("skipped", "skipped"),
           ("expected failure", "skipped"), ("unexpected success", "failed"))


def _status(text: str) -> str | None:
    text = text.strip()
    for word, status in _STATUS:
        if text == word or (word == "skipped" and text.startswith("skipped ")):
            return status
    return None


def parse_verbose(output: str) -> dict[str, str]:
    """unittest's verbose lines (`python -m unittest -v`, `manage.py test -v 2`) → {test id: status}:
    `test_x (pkg.mod.Case.test_x) ... ok` (3.11+) or `test_x (pkg.mod.Case) ... ok`, also with a docstring line
    in between and with the test's own output before its status. Ids are `pkg.mod.Case::test_x`."""
    out: dict[str, str] = {}
    pending: str | None = None  # a test whose status has not been printed yet
    for line in output.splitlines():
        m = _HEADER_RE.match(line)
        if m:
            name, where, rest = m.groups()
            case = where[: -len(name) - 1] if where.endswith("." + name) else where
            pending = f"{case}::{name}"
        elif pending is None:
            continue
        else:
            rest = line
        if " ... " in rest or rest.endswith(" ..."):
            status = _status(rest.split(" ... ", 1)[1] if " ... " in rest else "")
        else:
            status = None if m else _status(rest)
        if status:
            out[pending] = status
            pending = None
    return out


def ran_count(output: str) -> int | None:
    m = re.search(r"^Ran (\d+) tests? in ", output, re.M)
    return int(m.group(1)) if m else None


def native_results(runner: Runner, output: str, exit_code: int) -> dict[str, str]:
    """Per-test statuses from a run without JUnit: unittest-style verbose lines; a script that prints none
    counts as one test, passed when it exits 0."""
    found = parse_verbose(output)
    if found or runner.kind != "script":
        return found
    script = next(t for t in shlex.split(runner.command.split(" && ")[-1]) if t.endswith(".py"))
    return {f"{script}::main": "passed" if exit_code == 0 else "failed"}


def summary(tests: dict[str, str]) -> str:
    counts = {s: list(tests.values()).count(s) for s in ("passed", "failed", "error", "skipped")}
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n)


def describe(runners_tried: Iterable[tuple[Runner, str]]) -> str:
    return "; ".join(f"{r.label}: {why}" for r, why in runners_tried)


def of_recipe(recipe) -> Runner:
    """The runner a recipe uses (plan.Recipe keeps it as plain fields)."""
    return Runner(recipe.test_runner, recipe.test_command, recipe.test_collect, recipe.test_source,
                  recipe.test_evidence)


def use(recipe, runner: Runner) -> None:
    recipe.test_runner, recipe.test_command, recipe.test_collect = runner.kind, runner.command, runner.collect
    recipe.test_source, recipe.test_evidence = runner.source, runner.evidence
