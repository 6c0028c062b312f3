"""What derivation starts from: a verified setup image, what it holds (the project's files, its interpreter,
kind-specific probes) and the baseline — every test's status in a fresh run of the suite, in a sandbox."""

from __future__ import annotations

import json
import os
import shlex

from ..errors import EnvyardError, NotASetupImage
from ..setup import runners
from ..store import Image
from . import testrun
from .mutation import SourceFacts

LIST_FILES = r"""
import json, os, sys
skip = {".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "node_modules", "__pycache__", "build", "dist",
        ".eggs", ".mypy_cache", ".pytest_cache", "site-packages"}
out = []
for root, dirs, files in os.walk("."):
    dirs[:] = sorted(d for d in dirs if d not in skip and not d.endswith(".egg-info"))
    for f in sorted(files):
        if f.endswith(".py"):
            out.append(os.path.join(root, f)[2:])
print(json.dumps({"files": out, "python": sys.executable}))
"""
MAX_TEST_TEXT = 512 << 10  # a test file larger than this is not read (it still runs)
BASELINE_TIMEOUT = 1800.0


def setup_image(yard, ref: str) -> Image:
    """The image named `ref`, which must be a verified image saved by `envyard setup` with the test command it
    verified (setup since b50b6a2 records it)."""
    image = yard.image(ref)  # ImageNotFound (exit 3) when there is none
    prov = image.config.provenance or {}
    if prov.get("provider") != "setup":
        raise NotASetupImage(f"{image.name} was not made by `envyard setup` (provider: {prov.get('provider') or 'none'})",
                             fix="derive from an image `envyard setup` saved, or give the project's directory")
    if prov.get("snapshot_of"):  # a snapshot (a task's image, a sandbox's state) inherits its parent's provenance
        raise NotASetupImage(f"{image.name} is a snapshot of {prov.get('parent_image') or 'a setup image'}: its files "
                             "changed after setup verified them",
                             fix=f"derive from the setup image itself ({prov.get('parent_image') or 'see envyard images'})")
    if not prov.get("verified"):
        raise NotASetupImage(f"{image.name} is a {prov.get('status', 'unverified')} setup image, not a verified one",
                             fix="derive only from verified images: their tests run and mostly pass")
    if not prov.get("test_command") or not prov.get("test_runner"):
        raise NotASetupImage(f"{image.name} does not record its test command (set up by an older envyard)",
                             fix="run `envyard setup` again for this project")
    return image


def probe_command(script: str, python: str) -> str:
    first = script.lstrip().split("\n", 1)[0]
    if first.startswith("#!") and "python" not in first:
        return f"sh -c {shlex.quote(script)}"
    return f"{shlex.quote(python)} -I -c {shlex.quote(script)}"


def gather(yard, image: Image, probes: dict[str, str] | None = None, *, sources: bool = True, guided: bool = True,
           timeout: float = BASELINE_TIMEOUT) -> SourceFacts:
    """Facts about the healthy image: its files, interpreter, probes (kind → script), the baseline run, and
    (`sources`) the text of the project's own modules, for code bugs (facts.extra["bug"]["sources"]) with (`guided`)
    the lines each test file executes (["coverage"])."""
    prov = image.config.provenance
    workdir = image.config.workdir
    packages = tuple(prov.get("packages") or ())
    facts = SourceFacts(image=image.name, workdir=workdir, test_runner=prov["test_runner"],
                        test_command=prov["test_command"], packages=packages, python=runners.PY,
                        services=tuple(prov.get("services") or ()))
    with yard.sandbox(image, workdir=workdir) as sb:
        r = sb.exec([runners.PY, "-I", "-c", LIST_FILES], cwd=workdir, timeout=120, max_output=32 << 20)
        if r.exit_code != 0:
            raise EnvyardError(f"{image.name}: could not list the project's files in {workdir}: "
                               f"{(r.stderr.strip().splitlines() or ['exit %d' % r.exit_code])[-1][:300]}")
        listing = json.loads(r.stdout)
        files = tuple(listing["files"])
        env = {"ENVYARD_PYTHON": runners.PY, "ENVYARD_PACKAGES": " ".join(packages)}
        extra = {}
        for kind, script in (probes or {}).items():
            p = sb.exec(probe_command(script, runners.PY), cwd=workdir, env=env, timeout=300, max_output=64 << 20)
            try:
                extra[kind] = json.loads(p.stdout)
            except ValueError:
                extra[kind] = {"error": f"probe exit {p.exit_code}: {(p.stderr.strip().splitlines() or [''])[-1][:300]}"}
        base = testrun.run(sb, facts, timeout=timeout)
        if base.timed_out:
            raise EnvyardError(f"{image.name}: the baseline test run passed the {timeout:.0f}s limit")
        if not base.statuses:
            raise EnvyardError(f"{image.name}: the baseline test run reported no tests (exit {base.exit_code})")
        fileset = set(files)
        test_files = {}
        for tid in base.statuses:
            path = testrun.test_file(tid, fileset)
            if path and path not in test_files:
                try:
                    test_files[path] = sb.read_file(os.path.join(workdir, path),
                                                    max_bytes=MAX_TEST_TEXT).decode("utf-8", "replace")
                except EnvyardError:
                    test_files[path] = ""
        file_seconds: dict[str, float] = {}
        for tid, secs in base.times.items():
            path = testrun.test_file(tid, fileset)
            if path:
                file_seconds[path] = file_seconds.get(path, 0.0) + secs
        if sources:
            code = read_sources(sb, workdir, files, packages, set(test_files))
            bug = extra.setdefault("bug", {})
            bug["sources"] = code
            if guided and testrun.can_select(facts) and code:
                bug["coverage"] = trace(sb, facts, sorted(code), timeout=min(5 * base.seconds + 120, timeout))
    return SourceFacts(image=facts.image, workdir=workdir, test_runner=facts.test_runner,
                       test_command=facts.test_command, packages=packages, python=runners.PY,
                       baseline=dict(base.statuses), extra=extra, services=facts.services, files=files,
                       test_files=test_files, suite_seconds=base.seconds, file_seconds=file_seconds)


VENDORED = {"_vendor", "vendor", "vendored", "_vendored", "extern", "externals", "_externals", "third_party",
            "thirdparty", "_thirdparty", "_compat_vendor"}
NOT_SOURCE = {"docs", "doc", "examples", "example", "benchmarks", "benchmark", "bench", "scripts", "tools", "ci",
              "migrations"}
MAX_SOURCE = 256 << 10  # bytes: bigger modules (generated tables, mostly) are not mutated


def is_test_path(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    return (any(p in ("test", "tests", "testing", "_tests", "unittests") for p in parts[:-1])
            or name.startswith("test_") or name.endswith("_test.py") or name in ("conftest.py", "tests.py"))


def own_source(files, packages, test_files: set[str]) -> list[str]:
    """The project's own modules: under its top-level packages (at the root or under src/), not tests, not
    vendored code; when no file lies under a package, every non-test module outside docs and examples."""
    def ok(f):
        parts = f.split("/")
        return (not is_test_path(f) and f not in test_files and not VENDORED & set(parts[:-1])
                and parts[-1] not in ("setup.py", "noxfile.py", "fabfile.py", "conf.py", "__main__.py")
                and not parts[-1].startswith("_version"))
    pk = set(packages)
    own = [f for f in files if ok(f) and ((f.split("/")[0] in pk or f[:-3] in pk)
                                          or (f.startswith("src/") and (f.split("/")[1] in pk or f[4:-3] in pk)))]
    if own:
        return own
    return [f for f in files if ok(f) and not NOT_SOURCE & set(f.split("/")[:-1])]


def read_sources(sb, workdir: str, files, packages, test_files: set[str]) -> dict[str, str]:
    out = {}
    for f in own_source(files, packages, test_files):
        try:
            out[f] = sb.read_file(os.path.join(workdir, f), max_bytes=MAX_SOURCE).decode("utf-8")
        except (EnvyardError, UnicodeDecodeError):
            continue
    return out


TRACE_DIR = "/tmp/envyard-derive-trace"


def trace(sb, facts: SourceFacts, sources: list[str], *, timeout: float) -> dict | None:
    """Which test files execute which lines of `sources`: {source: {line: {test file | "<import>"}}}, from one
    run of the suite under derive/tracer.py; None when that run fails to report."""
    from . import tracer

    sb.write_file(f"{TRACE_DIR}/envyard_derive_tracer.py", open(tracer.__file__).read())
    sb.write_file(f"{TRACE_DIR}/sources.json", json.dumps(sources))
    cmd = testrun.command(facts, extra="-p envyard_derive_tracer")
    r = sb.exec(f"export PYTHONPATH={TRACE_DIR}${{PYTHONPATH:+:$PYTHONPATH}} ENVYARD_TRACE_ROOT={shlex.quote(facts.workdir)} "
                f"ENVYARD_TRACE_SOURCES={TRACE_DIR}/sources.json ENVYARD_TRACE_OUT={TRACE_DIR}/out.json; {cmd}",
                cwd=facts.workdir, timeout=timeout, max_output=1 << 20)
    try:
        hits = json.loads(sb.read_file(f"{TRACE_DIR}/out.json"))
    except (EnvyardError, FileNotFoundError, ValueError):  # the traced run timed out or crashed: no coverage
        return None
    if r.timed_out:
        return None
    coverage: dict[str, dict[int, set[str]]] = {}
    for owner, files in hits.items():
        for rel, lines in files.items():
            per = coverage.setdefault(rel, {})
            for line in lines:
                per.setdefault(line, set()).add(owner)
    return coverage
