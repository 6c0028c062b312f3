"""What a setup result may be called, and why a test run fell short.

`status(...)` decides the result's status from its level, pass ratio, replay, integrity and services:

    verified     L4 with a pass ratio of at least GOOD_RATIO, sources unchanged, every service the tests expect
                 provided, and a clean replay that reached the same level; saved under the plain image name
    partial      a clean replay reproduced it (L3 or better, sources unchanged), but it is not verified: the tests
                 did not run (L3), their pass ratio is below GOOD_RATIO, or a service they expect was not provided;
                 saved as NAME:partial (a tag T becomes T-partial)
    project-bug  the project's own code fails
    unverified   anything else that installed (below L3, a failed replay or integrity check); NAME:unverified
    failed       nothing installed, no image

`connection_failures(...)` reads a test run's failures (JUnit XML, or a runner's output) for errors that say a
server was not there — `connection refused` to 5432/3306/6379, `could not connect to server`, a psycopg2
`OperationalError` on connect — so a low pass ratio can be reported as "a service the tests need was not
provided" rather than as a mystery.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

GOOD_RATIO = 0.9

# A failure text that says there is no X display to open a window on (tkinter, Qt, GTK, python-xlib, pyglet).
_NO_DISPLAY = (r"no display name|\$DISPLAY|could(?:n'?t| not) connect to display|can'?t connect to display|"
               r"can(?:not|'?t) open display|DisplayNameError|NoSuchDisplayException|"
               r"no Qt platform plugin could be initialized")
# A failure text that says a server was not reachable.
CONNECTION = re.compile(
    r"connection refused|could not connect to (?:the )?server|is the server running|"
    r"connection to server (?:at|on socket) .{0,120}? failed|ECONNREFUSED|\[Errno 111\]|\[WinError 10061\]|"
    r"can'?t connect to (?:local )?MySQL server|Error \d+ connecting to [\w.:-]+|"
    r"ServerSelectionTimeoutError|ConnectionRefusedError|Failed to establish a new connection|"
    # a suite's own check of its server (pylibmc: `test memcached 127.0.0.1:11211 not alive`)
    r"\b(?:127\.0\.0\.1|localhost):\d{2,5}\b[^\n]{0,40}?\b(?:not alive|not reachable|unreachable|not responding)\b|"
    + _NO_DISPLAY, re.I)
# What a connection error names, to tell which service it wanted.
_KIND_HINTS = (
    ("postgres", re.compile(r"\b5432\b|\.s\.PGSQL|postgres|psycopg|asyncpg|libpq", re.I)),
    ("mysql", re.compile(r"\b3306\b|mysql|mariadb|mysqld\.sock", re.I)),
    ("redis", re.compile(r"\b6379\b|redis", re.I)),
    ("mongo", re.compile(r"\b27017\b|mongo", re.I)),
    ("elasticsearch", re.compile(r"\b9200\b|elasticsearch", re.I)),
    ("rabbitmq", re.compile(r"\b5672\b|amqp|rabbitmq", re.I)),
    ("memcached", re.compile(r"\b11211\b|memcache", re.I)),
    ("xvfb", re.compile(_NO_DISPLAY, re.I)),
)
PORTS = {"postgres": 5432, "mysql": 3306, "redis": 6379, "mongo": 27017, "elasticsearch": 9200, "rabbitmq": 5672,
         "memcached": 11211}


def _named(kind: str) -> str:
    return "an X display (xvfb)" if kind == "xvfb" else f"{kind} (port {PORTS[kind]})"


def _kinds(text: str) -> list[str]:
    return [kind for kind, rx in _KIND_HINTS if rx.search(text)]


def connection_failures(junit: bytes | None = None, output: str = "") -> dict:
    """{"tests": failing tests whose failure text is a connection error, "failing": failing tests in all,
    "services": kinds named, "sample": one such line} — {} when none. JUnit XML gives per-test texts; without it
    (a runner of its own) the output's lines are counted instead."""
    hits, failing, kinds, sample = 0, 0, [], ""
    cases: list[str] = []
    if junit:
        try:
            root = ET.fromstring(junit)
        except ET.ParseError:
            root = None
        for case in (root.iter("testcase") if root is not None else ()):
            bad = [c for c in case if c.tag in ("failure", "error")]
            if bad:
                failing += 1
                cases.append("\n".join((c.get("message") or "") + "\n" + (c.text or "") for c in bad))
    else:
        cases = [line for line in output.splitlines() if CONNECTION.search(line)]
    for text in cases:
        m = CONNECTION.search(text)
        if not m:
            continue
        hits += 1
        around = text[max(0, m.start() - 300):m.end() + 300]
        for k in _kinds(around):
            if k not in kinds:
                kinds.append(k)
        if not sample:
            line_start = text.rfind("\n", 0, m.start()) + 1
            line_end = text.find("\n", m.end())
            sample = text[line_start:line_end if line_end >= 0 else None].strip()[:200]
    if not hits:
        return {}
    return {"tests": hits, "failing": failing if junit else None, "services": kinds, "sample": sample}


def describe_connection(conn: dict, provided: list[str]) -> str:
    """One sentence for a result's reason."""
    if not conn:
        return ""
    what = ", ".join(map(_named, conn["services"])) or "a server"
    count = (f"{conn['tests']} of the {conn['failing']} failing tests" if conn.get("failing")
             else f"{conn['tests']} lines of the output")
    given = [k for k in conn["services"] if k in provided]
    tail = (f"envyard provided {', '.join(given)}, but the tests did not reach it (they may expect other settings)"
            if given and len(given) == len(conn["services"])
            else "a service the tests need was not provided")
    return f"{count} could not connect to {what} ({conn['sample']!r}): {tail}"


def status(*, level: int, pass_ratio: float | None, replay_ok: bool, integrity_ok: bool | None,
           services_missing: bool, project_bug: bool, image: bool) -> str:
    reproduced = level >= 3 and replay_ok and integrity_ok is not False
    if reproduced and level >= 4 and (pass_ratio or 0) >= GOOD_RATIO and not services_missing:
        return "verified"
    if project_bug:
        return "project-bug"
    if reproduced and image:
        return "partial"
    return "unverified" if image else "failed"


def shortfall(*, level: int, pass_ratio: float | None, tests: dict[str, str], l4_detail: str,
              services_missing: dict[str, str], conn: dict, provided: list[str]) -> str:
    """Why a reproduced result is not verified, naming what failed."""
    parts = []
    if services_missing:
        parts.append("the tests expect services envyard cannot provide: "
                     + ", ".join(f"{k} ({where})" for k, where in services_missing.items()))
    if level < 4:
        parts.append(f"L4 tests run failed: {l4_detail}" if l4_detail else "the tests were collected, not run")
    elif pass_ratio is None:
        parts.append("no test passed or failed (all skipped): pass ratio unknown, below the "
                     f"{GOOD_RATIO} needed")
    elif pass_ratio < GOOD_RATIO:
        passed = sum(1 for s in tests.values() if s == "passed")
        counted = sum(1 for s in tests.values() if s in ("passed", "failed", "error"))
        parts.append(f"pass ratio {pass_ratio:.2f} < {GOOD_RATIO} ({passed} of {counted} tests passed)")
    if conn:
        parts.append(describe_connection(conn, provided))
    return "; ".join(parts)
