"""A pytest plugin (standard library and pytest only) that records which lines of the project's own modules each
test file executes. Loaded once per image by derive's baseline (`-p envyard_derive_tracer`, from a directory put
on PYTHONPATH): a code bug on a line no test executes cannot fail a test, so it is never tried, and a bug on a line
only some test files execute is screened and verified with those files only.

Module and class bodies are recorded under "<import>": every test may depend on them. Function lines run outside
any test (while collecting: a decorator building classes) are recorded under "<collect>". Output: JSON {test file or "<import>": {source file: [lines]}} at $ENVYARD_TRACE_OUT.
"""

import json
import os
import sys
import threading

import pytest

ROOT = os.environ.get("ENVYARD_TRACE_ROOT", os.getcwd()).rstrip("/") + "/"
OUT = os.environ.get("ENVYARD_TRACE_OUT", "/tmp/envyard-derive-trace.json")
try:
    with open(os.environ["ENVYARD_TRACE_SOURCES"]) as _f:
        SOURCES = set(json.load(_f))
except (KeyError, OSError, ValueError):
    SOURCES = set()
IMPORT = "<import>"
COLLECT = "<collect>"
CO_OPTIMIZED = 0x1  # set for functions; not for module and class bodies, which run when the module is imported

_current = [COLLECT]
_hits = {}
_rel = {}


def _source(filename):
    rel = _rel.get(filename, 0)
    if rel == 0:
        rel = filename[len(ROOT):] if filename.startswith(ROOT) and filename[len(ROOT):] in SOURCES else None
        _rel[filename] = rel
    return rel


def _trace(frame, event, arg):
    rel = _source(frame.f_code.co_filename)
    if rel is None:
        return None
    owner = _current[0] if frame.f_code.co_flags & CO_OPTIMIZED else IMPORT
    lines = _hits.setdefault(owner, {}).setdefault(rel, set())
    lines.add(frame.f_lineno)

    def local(frame, event, arg):
        if event == "line":
            lines.add(frame.f_lineno)
        return local
    return local


if SOURCES:
    sys.settrace(_trace)
    threading.settrace(_trace)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current[0] = item.nodeid.split("::", 1)[0]
    yield
    _current[0] = COLLECT


def pytest_sessionfinish(session, exitstatus):
    sys.settrace(None)
    with open(OUT, "w") as f:
        json.dump({owner: {rel: sorted(lines) for rel, lines in files.items()} for owner, files in _hits.items()}, f)
