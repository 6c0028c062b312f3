"""From evidence to ranked candidate recipes of typed steps, each step with the evidence rule that produced it.

A candidate is an interpreter (from a provider, see interpreters.py) plus an optional dependency time cut-off
(`uv pip install --exclude-newer DATE`, the source's release date). `candidates` ranks them; `plan` turns one
into a recipe: apt packages, a venv, the project's lock as constraints (uv.lock, poetry.lock or pdm.lock),
requirements files, the project in editable mode with its test-like extras, test-like dependency groups, and
the test runner with the plugins its configuration needs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

from packaging.utils import canonicalize_name
from packaging.version import Version

from . import checkout_version, locks, pins, services
from .evidence import Evidence
from .interpreters import APT_INSTALL, TOOLS_BIN, Interpreter, NoPython, install_failure, install_with_uv, minor
from .runners import default_runner
from .sources.knowledge import service_for_package

VENV = "/opt/venv"
INSTALL = "uv pip install"
# uv overrides every install of a setup obeys once a repair wrote them: requirements left out (a marker that is
# never true) and URL requirements replaced by the index's release of the same name.
OVERRIDES = "/opt/envyard/requirement-overrides.txt"
# Requirements files for other jobs than the tests: docs, linters, benchmarks (tomli's benchmark/requirements.txt
# builds C++ TOML parsers that fail on a stock machine), profilers, fuzzers, type checkers.
NOT_FOR_TESTS = re.compile(r"doc|lint|bench|profil|fuzz|mypy|typing|typecheck", re.I)
TESTISH = re.compile(r"(^|[-_])(test|tests|testing|dev|develop|check)($|[-_])", re.I)
# A requirement file of the oldest supported versions, for a CI job that checks them (nibabel's
# min-requirements.txt pins numpy==1.20, which builds from source on a current Python): not for the tests' setup.
MINIMUM_VERSIONS = re.compile(r"(^|[-_.])(min|minimum|minimal|oldest|lowest)([-_.]|$)", re.I)
# A Python version in a requirement file's name: requirements-2.7.txt, requirements_py27.txt, reqs-py3.txt
_FILE_PYTHON = re.compile(r"(?:^|[-_.])(?:py(?:thon)?-?(\d)\.?(\d{1,2})?|(\d)\.(\d{1,2}))(?=[-_.]|$)", re.I)
# When each interpreter line was released: a project released long before it likely never ran on it.
PYTHON_RELEASED = {(3, 6): "2016-12-23", (3, 7): "2018-06-27", (3, 8): "2019-10-14",
                   (3, 9): "2020-10-05", (3, 10): "2021-10-04", (3, 11): "2022-10-24", (3, 12): "2023-10-02",
                   (3, 13): "2024-10-07", (3, 14): "2025-10-07"}
OLD_SOURCE_DAYS = 540  # sources older than this also get a speculative candidate with a dependency cut-off

# envyard's uv comes before the venv's: a project that depends on uv (build's test extra) puts an older one in
# the venv, which must not run the install steps (a cut-off's uv 0.4 has no --exclude-newer-package).
ENV = {"VIRTUAL_ENV": VENV,
       "PATH": f"{TOOLS_BIN}:{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "PIP_DISABLE_PIP_VERSION_CHECK": "1", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8",
       "UV_LINK_MODE": "copy", "UV_NO_PROGRESS": "1"}


@dataclass
class Step:
    kind: str  # venv | lock | requirements | version | project | packages | apt | services | repair | complete
    command: str  # a shell command, run in the project root
    why: str  # the evidence rule(s) or repair that produced it


@dataclass(frozen=True)
class Candidate:
    interpreter: Interpreter
    cutoff: str | None = None  # ISO 8601 UTC; dependencies uploaded after it are not considered
    why: str = ""
    carry: tuple[Step, ...] = ()  # repairs learned by an earlier branch (apt first, the rest after the plan)
    fallback: bool = False  # start only when nothing better is running (not speculatively)

    @property
    def label(self) -> str:
        version = ".".join(self.interpreter.version.split(".")[:2])
        return f"py{version} {self.interpreter.provider}" + (f" cut-off {self.cutoff[:10]}" if self.cutoff else "")


@dataclass
class Recipe:
    interpreter: Interpreter
    cutoff: str | None = None
    steps: list[Step] = field(default_factory=list)
    test_runner: str = "pytest"  # what runs the tests: pytest | unittest | django | script (runners.py)
    test_command: str = ""  # runs them from the project root; test.sh and the replay use it
    test_collect: str | None = None  # lists them without running them (None: L3 runs them)
    test_source: str = ""  # the project's own command it comes from ("" = pytest's default discovery)
    test_evidence: str = ""  # where that command was found (file:line and rule)
    packages: list[str] = field(default_factory=list)  # top-level importable names (for level 1)
    env: dict[str, str] = field(default_factory=dict)  # set by repairs (e.g. a locale); exported by setup.sh
    services: list[dict] = field(default_factory=list)  # services provided for the tests (services.Service)
    services_missing: dict[str, str] = field(default_factory=dict)  # kind → evidence: expected, not provided
    notes: list[str] = field(default_factory=list)
    pins: list[str] = field(default_factory=list)  # name==version of the environment that passed (pins.py)
    pins_consistent: bool = False  # `uv pip check` passed: the pins also constrain every install step
    pins_source: str = ""  # "uv pip freeze" of the final environment, or the lock file it was installed from
    lock_source: str = ""  # the lock file (uv.lock, poetry.lock, pdm.lock) whose versions constrain every install
    warnings: list[str] = field(default_factory=list)  # shown in the setup report (e.g. a lock file not used)

    def to_dict(self) -> dict:
        return asdict(self)

    def install(self, args: str) -> str:
        """The install command for `args` under this recipe's cut-off."""
        return INSTALL + cutoff_flags(self.cutoff) + f" {args}"


# Build backends stay current under a cut-off: their old releases cannot build editable installs (PEP 660
# came in setuptools 64, flit-core 3.4, ...), and what an old project needs from them is a repair's job.
CUTOFF_EXEMPT = ("setuptools", "wheel", "pip", "flit-core", "hatchling", "poetry-core", "pdm-backend")


def cutoff_flags(cutoff: str | None) -> str:
    if not cutoff:
        return ""
    return f" --exclude-newer {cutoff}" + "".join(f" --exclude-newer-package {p}=2100-01-01T00:00:00Z"
                                                   for p in CUTOFF_EXEMPT)


def apt_step(packages, why: str, *, recommends: bool = False) -> Step:
    """Install Debian packages. The project's own apt lines keep apt's recommends, as its CI would; repairs
    install just the package."""
    return Step("apt", APT_INSTALL + ("" if recommends else " --no-install-recommends") + " " + " ".join(packages),
                why)


def apt_packages(step: Step) -> list[str]:
    """The packages an apt_step installs."""
    return [w for w in step.command[len(APT_INSTALL):].split() if not w.startswith("-")]


def candidates(ev: Evidence, available: list[Interpreter], *, now: datetime | None = None) -> list[Candidate]:
    """Ranked candidates: interpreters that satisfy the hard constraint (or were forced with --python), the ones
    the project names (classifiers, CI) and that existed when it was released first, then newest first; one per
    minor version, by PROVIDER_PREFERENCE; plus, for an old source, the same interpreter with a dependency
    cut-off at the source's date."""
    constraint = ev.python_constraint()
    fits = [i for i in available if constraint is None or Version(i.version) in constraint or i.forced]
    if not fits:
        have = ", ".join(i.label for i in sorted(available, key=lambda i: Version(i.version), reverse=True))
        raise NoPython(f"the project requires Python {constraint}; this machine provides {have}",
                       fix="set up an older or newer release of the project, or add an interpreter provider")
    hints = {h for h in (_minor_or_none(f.value) for f in ev.of("python_hint")) if h}
    date = source_date(ev)
    seen: set[tuple] = set()
    unique = []
    for i in sorted(fits, key=provider_preference):  # one interpreter per minor version, the preferred provider's
        if minor(i.version) not in seen:
            seen.add(minor(i.version))
            unique.append(i)

    # The Python of the project's time: the newest it names, else the newest released by its date. Among the
    # rest, the closer to it the better: an old project (docopt, 2014, naming 2.5-3.3) tries 3.6, 3.7, ...
    # before the newest, which its old test tools no longer run on.
    era = max(hints) if hints else max((m for m, day in PYTHON_RELEASED.items() if date is None or day <= date[:10]),
                                       default=None)

    def rank(i: Interpreter):
        released = PYTHON_RELEASED.get(minor(i.version), "2000-01-01")
        existed = date is None or released <= date[:10]
        fitting = minor(i.version) in hints or not hints
        # the host (no base to build) goes first only among interpreters of the project's time
        host_first = i.provider != "host" if fitting or existed else False
        closeness = abs(minor(i.version)[1] - era[1]) if era and era[0] == 3 else -minor(i.version)[1]
        return (not fitting, not existed, host_first, closeness, -minor(i.version)[1])

    ranked = sorted(unique, key=rank)
    why_first = "named by the project" if hints and minor(ranked[0].version) in hints else "satisfies the constraint"
    if ranked[0].forced:
        fits_too = constraint is None or Version(ranked[0].version) in constraint
        why_first = "chosen with --python" + ("" if fits_too else f" (the project requires Python {constraint})")
    out = [Candidate(ranked[0], None, why_first)]
    old = date is not None and (now or datetime.now(timezone.utc)) - _parse(date) > timedelta(days=OLD_SOURCE_DAYS)
    if old:
        out.append(Candidate(ranked[0], cutoff_of(date), f"the source is from {date[:10]}: dependencies as of then"))
    for i in ranked[1:]:
        out.append(Candidate(i, cutoff_of(date) if old else None, "another interpreter that satisfies the constraint",
                             fallback=True))
    return out


# Of several interpreters of one minor version: the host's python3 (no base to build), a Debian suite's (a
# distribution build with a plain `FROM debian:<suite>` equivalent), another /usr/bin/python3.X, then pyenv's
# and uv's builds (copied into their setup base).
PROVIDER_PREFERENCE = ("host", "debian:", "system:", "pyenv:", "uv:")


def provider_preference(i: Interpreter) -> int:
    return next((n for n, p in enumerate(PROVIDER_PREFERENCE) if i.provider == p or
                 (p.endswith(":") and i.provider.startswith(p))), len(PROVIDER_PREFERENCE))


KNOWN_MINORS = tuple((3, m) for m in range(6, 15))  # what `uv python install X.Y` is asked for, newest first below


def ranked_or_installed(ev: Evidence, available: list[Interpreter], cache_dir: Path, *,
                        install: Callable[[str, Path], Interpreter | None] = install_with_uv,
                        now: datetime | None = None) -> tuple[list[Candidate], list[Interpreter]]:
    """`candidates`, with `uv python install X.Y` as the last resort when nothing available satisfies the
    constraint: the newest known X.Y that does. Returns the candidates and the interpreters now available."""
    try:
        return candidates(ev, available, now=now), available
    except NoPython as e:
        constraint = ev.python_constraint()
        wanted = [f"{a}.{b}" for a, b in reversed(KNOWN_MINORS) if constraint is not None
                  and any(Version(f"{a}.{b}.{micro}") in constraint for micro in (0, 20))]
        if not wanted:
            raise
        got = install(wanted[0], cache_dir)
        if got is None:
            why = install_failure(wanted[0], cache_dir)
            raise NoPython(f"{e.message}; `uv python install {wanted[0]}` failed" + (f": {why}" if why else ""),
                           fix=e.fix) from None
        available = [*available, got]
        return candidates(ev, available, now=now), available


def source_date(ev: Evidence) -> str | None:
    dates = [f.value for f in ev.of("source_date") if isinstance(f.value, str)]
    return dates[0] if dates else None


def cutoff_of(date: str) -> str:
    """The cut-off for a source date: the end of that day (UTC), so same-day releases still count."""
    return date[:10] + "T23:59:59Z"


# Where a project states what it needs at run time (not its test, docs or CI requirement files).
_RUNTIME_VIAS = ("pep621.dependencies", "setup.cfg:install_requires", "setup.py:install_requires",
                 "poetry.dependencies", "flit.metadata.requires")


def runtime_dependencies(ev: Evidence, installed: list[str]) -> dict[str, str]:
    """name → requirement: what the project's own metadata declares for run time, unconditional and by name,
    and is installed (`installed`: a freeze's name==version lines); build back-ends left out."""
    have = pins.versions(installed)
    exempt = {canonicalize_name(p) for p in CUTOFF_EXEMPT}
    out: dict[str, str] = {}
    for fact in ev.of("dependency"):
        v = fact.value
        if fact.via not in _RUNTIME_VIAS or not isinstance(v, dict) or v.get("marker") or v.get("url") \
                or v.get("extra") or not v.get("name"):
            continue
        key = canonicalize_name(v["name"])
        if key in have and key not in exempt:
            out.setdefault(v["name"], v["requirement"])
    return out


def as_of_step(requirements: dict[str, str], cutoff: str) -> str:
    """Reinstall these requirements (name → requirement) at their releases as of `cutoff`, each on its own
    (uv's per-package --exclude-newer), the rest of the environment as it is."""
    flags = "".join(f" --reinstall-package {n} --exclude-newer-package {n}={cutoff}" for n in requirements)
    return INSTALL + flags + " " + " ".join(shlex.quote(r) for r in requirements.values())


def _parse(date: str) -> datetime:
    d = datetime.fromisoformat(date.replace("Z", "+00:00"))
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


def _minor_or_none(value) -> tuple[int, int] | None:
    m = re.match(r"^(\d+)\.(\d+)", str(value))
    return (int(m.group(1)), int(m.group(2))) if m else None


def test_extras(ev: Evidence) -> list[str]:
    """The project's extras to install for its tests: those with a test-like name and those tox's base
    `[testenv]` installs; when that finds none, those its CI or Makefile install (`test_extra`: tzlocal's CI
    runs `pip install .[devenv]`, and devenv holds pytest-mock) — a CI's other jobs are often variants (sparse's
    `.[finch]`). Never documentation, lint or benchmark ones."""
    declared = {canonicalize_name(f.value["extra"]): f.value["extra"] for f in ev.of("extra")
                if isinstance(f.value, dict) and isinstance(f.value.get("extra"), str)}

    def named(facts) -> set[str]:
        names = {declared.get(canonicalize_name(str(f.value))) for f in facts}
        return {n for n in names if n and not NOT_FOR_TESTS.search(n)}

    facts = ev.of("test_extra")
    chosen = {name for name in declared.values() if TESTISH.search(name)}
    chosen |= named(f for f in facts if f.via == "tox.extras")
    return sorted(chosen or named(f for f in facts if f.via != "tox.extras"))


def _quote_reqs(reqs: list[str]) -> str:
    return " ".join(shlex.quote(r) for r in reqs)


def _lock_step(ev: Evidence, r: Recipe) -> None:
    """Constrain every install to the versions the project locked: uv.lock is exported by uv in the sandbox;
    poetry.lock or pdm.lock (when there is no uv.lock) is read here and written there (locks.py). A lock that
    cannot be read is not used, with a warning."""
    tools = ev.values("lock_file")
    if "uv" in tools and (ev.root / "uv.lock").is_file():
        r.steps.append(Step("lock", pins.UV_LOCK_EXPORT, "lock_file: uv.lock (every install is constrained to it)"))
        r.env["UV_CONSTRAINT"], r.lock_source = pins.LOCK_EXPORT, "uv.lock"
        return
    tool = next((t for t in ("poetry", "pdm") if t in tools and (ev.root / f"{t}.lock").is_file()), None)
    if tool is None:
        return
    try:
        locked = locks.parse(tool, (ev.root / f"{tool}.lock").read_text(encoding="utf-8", errors="replace"))
    except (locks.LockError, OSError) as e:
        r.warnings.append(f"{tool}.lock not used: {e}")
        return
    if locked.skipped:
        r.notes.append(f"{tool}.lock: not pinned: " + "; ".join(locked.skipped[:20])
                       + (f" (and {len(locked.skipped) - 20} more)" if len(locked.skipped) > 20 else ""))
    if not locked.pins:
        r.warnings.append(f"{tool}.lock not used: it pins no registry distribution")
        return
    r.steps.append(Step("lock", locks.step_command(locked, cutoff_flags(r.cutoff)),
                        f"lock_file: {tool}.lock, {len(locked.pins)} pins (every install is constrained to it)"))
    r.env["UV_CONSTRAINT"], r.lock_source = locks.LOCKED, f"{tool}.lock"


def for_another_python(path: str, version: str) -> bool:
    """Whether a requirement file's name says it is for another Python than `version` (ecdsa's
    build-requirements-2.7.txt, beside the build-requirements.txt that every other Python uses)."""
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    m = _FILE_PYTHON.search(stem)
    if not m:
        return False
    major, minor = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    have = version.split(".")
    return major != have[0] or (minor is not None and minor != have[1])


def plan(ev: Evidence, cand: Candidate) -> Recipe:
    interp = cand.interpreter
    r = Recipe(interp, cand.cutoff)
    # --seed: pip, and setuptools/wheel below 3.12, as `python -m venv` would have (tests sometimes use them)
    r.steps.append(Step("venv", f"uv venv --seed --python {interp.path}{cutoff_flags(cand.cutoff)} {VENV}",
                        f"interpreter: {interp.label}"))
    if cand.cutoff:
        r.notes.append(f"dependencies as of {cand.cutoff} (uv --exclude-newer)")
    for fact in ev.of("checkout_version"):  # before anything installs the project (a requirement file's `-e .`)
        if fact.value.get("tag"):
            r.steps.append(Step("version", checkout_version.tag_command(fact.value["tag"]), fact.value["why"]))
        elif fact.value.get("env"):
            r.env.update(fact.value["env"])
            r.notes.append(fact.value["why"])
        else:
            r.warnings.append(fact.value["why"])
    _lock_step(ev, r)
    needs = services.needed(ev)
    provided = {svc.kind for svc in needs.provided}
    apt = sorted({f.value["name"] for f in ev.of("system_package")  # a provided server comes with its own step
                  if isinstance(f.value, dict) and f.value.get("when", "always") == "always"
                  and service_for_package(f.value["name"]) not in provided})
    if apt:
        r.steps.insert(0, apt_step(apt, "system_package: " + ", ".join(apt), recommends=True))
    for when, why in (("unused", "the CI or docs install them, but no test or build file runs their programs"),
                      ("project", "the docs install the project itself from Debian; it comes from its source")):
        left = sorted({f.value["name"] for f in ev.of("system_package")
                       if isinstance(f.value, dict) and f.value.get("when") == when} - set(apt))
        if left:
            r.notes.append(f"not installed: {', '.join(left)} ({why})")
    req_files = [f for f in ev.of("requirements_file") if isinstance(f.value, dict)
                 and f.value.get("role", "requirements") == "requirements"
                 and not NOT_FOR_TESTS.search(f.value.get("path", ""))
                 and not for_another_python(f.value.get("path", ""), interp.version)
                 and not MINIMUM_VERSIONS.search(f.value.get("path", "").rsplit("/", 1)[-1])]
    top = [f for f in req_files if "/" not in f.value["path"]] or req_files  # included files come along via -r
    rewrites = {f.value["path"]: f.value for f in ev.of("requirements_rewrite") if isinstance(f.value, dict)}
    for f in top:
        rewrite = rewrites.get(f.value["path"])
        if rewrite is None:
            r.steps.append(Step("requirements", r.install(f"-r {shlex.quote(f.value['path'])}"), f"{f.via} ({f.file})"))
        elif rewrite["args"]:  # a line uv's parser refuses (`-e.`, `-rfile`, ...): the file's lines as arguments
            r.steps.append(Step("requirements", r.install(_quote_reqs(rewrite["args"])),
                                f"{f.via} ({f.file}), as arguments: uv refuses some of its lines"))
            r.notes += [f"{f.value['path']} rewritten for uv: {n}" for n in rewrite["notes"][:20]]
    project = any(f.kind in ("build_backend",) for f in ev.facts) or any(
        (ev.root / n).is_file() for n in ("pyproject.toml", "setup.py", "setup.cfg"))
    extras = test_extras(ev)
    if project:
        target = "." + (f"[{','.join(extras)}]" if extras else "")
        r.steps.append(Step("project", r.install(f"-e {shlex.quote(target)}"),
                            "project metadata" + (f"; extras {', '.join(extras)}" if extras else "")))
        pth = list(dict.fromkeys(str(p) for p in ev.values("site_pth")))
        if pth:
            r.steps.append(Step("project", f"cp {' '.join(map(shlex.quote, pth))} \"$({VENV}/bin/python -c "
                                "'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')\"/",
                                f"setup.py installs {', '.join(pth)} into site-packages; an editable install "
                                "does not"))
    groups = [f.value for f in ev.of("dependency_group")
              if isinstance(f.value, dict) and TESTISH.search(str(f.value.get("group", "")))]
    group_reqs = sorted({g["requirement"] for g in groups})
    if group_reqs:
        r.steps.append(Step("packages", r.install(_quote_reqs(group_reqs)),
                            "dependency groups " + ", ".join(sorted({g['group'] for g in groups}))))
    runners = [f.value for f in ev.of("test_runner")]
    wanted = [p["name"] for p in (f.value for f in ev.of("test_plugin")) if isinstance(p, dict)]
    # pytest first, whatever the project names: it collects unittest suites too and gives per-test statuses
    # (JUnit) and a collect-only step; when it finds nothing, L3 tries the project's own runners (runners.py).
    if runners and "pytest" not in runners:
        r.notes.append(f"the project names {', '.join(dict.fromkeys(map(str, runners)))}: L3 tries pytest's "
                       "discovery and the project's own test commands (runners.py)")
    wanted = ["pytest", *wanted]
    r.steps.append(Step("packages", r.install(_quote_reqs(sorted(set(wanted)))),
                        "test runner pytest" + (" and the plugins its config needs" if len(wanted) > 1 else "")))
    first = default_runner(keep_cache=bool(ev.of("pytest_cache_option")))
    r.test_runner, r.test_command, r.test_collect = first.kind, first.command, first.collect
    names = [f.value["name"] if isinstance(f.value, dict) else f.value
             for f in (*ev.of("top_level_package"), *ev.of("top_level_module"))]
    r.packages = sorted({n for n in names if isinstance(n, str) and n.isidentifier()} - {"setup", "conftest", "manage"})
    if needs.provided:  # the servers and their scripts first: like system packages, nothing else depends on them
        r.steps[0:0] = services.steps(needs.provided)
        r.services = [s.to_dict() for s in needs.provided]
    r.services_missing = dict(needs.missing)
    r.env.update(needs.env)
    for fact in ev.of("test_env"):
        r.env.setdefault(fact.value["name"], fact.value["value"])
    r.notes += needs.notes
    apt_carried = [s for s in cand.carry if s.kind == "apt"]
    r.steps = apt_carried + r.steps + [s for s in cand.carry if s.kind != "apt"]
    seen: set[str] = set()
    r.steps = [s for s in r.steps if not (s.command in seen or seen.add(s.command))]
    if ev.python_constraint() is None:
        r.notes.append("no Python constraint found")
    return r
