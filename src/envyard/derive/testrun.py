"""Running a derived task's tests: the whole suite, or only the test files that matter, with the runner the
setup image recorded; per-test statuses and failure messages; mapping a test id back to its file.

Ids are `classname::name`, as `envyard setup` records its baseline (JUnit for pytest, unittest's verbose lines
for the other runners: setup/search.py, setup/runners.py)."""

from __future__ import annotations

import re
import shlex
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from ..errors import EnvyardError
from ..setup import runners, services
from ..setup.search import parse_junit
from .mutation import SourceFacts

JUNIT = "/tmp/envyard-derive-junit.xml"
FAST_SUITE = 10.0  # seconds: a suite this fast is run whole for every candidate and by every verifier
KEEP_GOING = "--continue-on-collection-errors"
SIMPLE_PYTEST = re.compile(r"^(\S+/python\S*) -m pytest((?: \S+)*)$")


@dataclass
class Run:
    statuses: dict[str, str]
    messages: dict[str, str] = field(default_factory=dict)  # failing test id → its error message (pytest only)
    output: str = ""
    exit_code: int = 0
    seconds: float = 0.0
    timed_out: bool = False
    times: dict[str, float] = field(default_factory=dict)  # test id → seconds (pytest's JUnit report only)


def runner_of(facts: SourceFacts) -> runners.Runner:
    return runners.Runner(facts.test_runner, facts.test_command, None)


def command(facts: SourceFacts, files: tuple[str, ...] = (), junit: str = JUNIT, *, extra: str = "") -> str:
    """The shell command that runs the suite, or only `files` (pytest with a plain command line only), reporting
    each test; services (databases the tests need) are started around it. `extra`: more pytest options."""
    if facts.test_runner == "pytest":
        # a broken environment often makes one test module fail to import: the other modules must still report
        extra = f"{KEEP_GOING} {extra}".strip()
    base = runner_of(facts).run(junit) + (f" {extra}" if extra else "")
    if files:
        m = SIMPLE_PYTEST.match(facts.test_command)
        if facts.test_runner != "pytest" or not m:
            raise ValueError("only a plain pytest command runs a selection of files")
        options = [t for t in m.group(2).split() if t.startswith("-") or "=" in t]
        base = " ".join([m.group(1), "-m", "pytest", *options, *map(shlex.quote, files),
                         "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"]) + (f" {extra}" if extra else "")
    return services.wrap(base) if facts.services else base


def can_select(facts: SourceFacts) -> bool:
    return facts.test_runner == "pytest" and bool(SIMPLE_PYTEST.match(facts.test_command))


def run(sb, facts: SourceFacts, files: tuple[str, ...] = (), *, timeout: float) -> Run:
    start = time.monotonic()
    sb.exec(f"rm -f {JUNIT}")
    r = sb.exec(command(facts, files), cwd=facts.workdir, timeout=timeout, max_output=4 << 20)
    seconds = time.monotonic() - start
    output = r.stdout + r.stderr
    messages: dict[str, str] = {}
    if facts.test_runner == "pytest":
        try:
            data = sb.read_file(JUNIT)
            statuses, messages, times = parse_junit(data), junit_messages(data), junit_times(data)
        except (FileNotFoundError, EnvyardError, ET.ParseError):
            statuses, times = {}, {}
    else:
        statuses, times = runners.native_results(runner_of(facts), output, r.exit_code), {}
    return Run(statuses, messages, output, r.exit_code, seconds, r.timed_out, times)


def junit_times(data: bytes) -> dict[str, float]:
    """Test id → its `time` in the JUnit report (setup, call and teardown: pytest's default)."""
    out = {}
    for case in ET.fromstring(data).iter("testcase"):
        try:
            out[f"{case.get('classname', '')}::{case.get('name', '')}"] = float(case.get("time") or 0)
        except ValueError:
            pass
    return out


def time_limit(facts: SourceFacts, files: tuple[str, ...] = ()) -> float:
    """How long a run of `files` (() = the whole suite) may take before it counts as a hang: 3 × what the
    baseline says it takes, + 10 s, at least 20 s. For a selection: pytest's start-up (the suite's time not spent
    in tests) plus those files' tests, so a hang in a small file is not waited on for 3 × the whole suite."""
    full = max(20.0, 3 * facts.suite_seconds + 10)
    return min(full, max(20.0, 3 * expected_seconds(facts, files) + 10))


def expected_seconds(facts: SourceFacts, files: tuple[str, ...] = ()) -> float:
    """What a run of `files` (() = the whole suite) should take, from the baseline: the suite's time, or for a
    selection pytest's start-up (the suite's time not spent in tests) plus those files' tests."""
    if not files or not facts.file_seconds:
        return facts.suite_seconds
    startup = max(0.0, facts.suite_seconds - sum(facts.file_seconds.values()))
    return min(facts.suite_seconds, startup + sum(facts.file_seconds.get(f, 0.0) for f in files))


def junit_messages(data: bytes) -> dict[str, str]:
    """Failing test id → the message of its failure or error (the assertion or exception, not the traceback)."""
    out = {}
    for case in ET.fromstring(data).iter("testcase"):
        for child in case:
            if child.tag in ("failure", "error"):
                out[f"{case.get('classname', '')}::{case.get('name', '')}"] = (child.get("message") or "").strip()
    return out


def test_file(test_id: str, files: set[str] | frozenset[str]) -> str | None:
    """The file (relative to the workdir) defining a test id: `tests.test_calc.TestX::test_y` →
    `tests/test_calc.py` when that file exists."""
    classname = test_id.split("::", 1)[0]
    parts = classname.split(".")
    for i in range(len(parts), 0, -1):
        for prefix in ("", "src/"):
            path = prefix + "/".join(parts[:i]) + ".py"
            if path in files:
                return path
    return None


def module_names(path: str) -> set[str]:
    """Names a test would use to import the module at `path`: `src/pkg/sub/mod.py` → {pkg.sub.mod, mod}."""
    parts = path[:-3].split("/")
    if parts[0] == "src":
        parts = parts[1:]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return {".".join(parts), parts[-1]} if parts else set()


def related_test_files(path: str, test_texts: dict[str, str]) -> tuple[str, ...]:
    """Test files whose text names the module at `path` (for a slow suite: the tests that can notice a change
    there); () when none does (then the whole suite runs)."""
    names = module_names(path)
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(n) for n in sorted(names)) + r")\b") if names else None
    return tuple(sorted(f for f, text in test_texts.items() if pattern and pattern.search(text)))
