"""From evidence to a recipe: typed install steps and a test command, each with the rule that produced it.

This first planner makes one candidate, for the interpreters this machine provides without building anything
(the host's /usr/bin/python3). Ranked alternatives, repairs and other bases come with the search engine.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import asdict, dataclass, field

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from ..errors import EnvyardError
from .evidence import Evidence

VENV = "/opt/venv"
PIP = f"{VENV}/bin/python -m pip install --disable-pip-version-check --no-input"
TESTISH = re.compile(r"(^|[-_])(test|tests|testing|dev|develop|check)($|[-_])", re.I)


class NoPython(EnvyardError):
    """No interpreter this machine can provide satisfies the project's Python constraint."""

    exit_code = 1


@dataclass(frozen=True)
class Interpreter:
    """A Python the planner can use. A seam for more providers (Debian suites, uv-managed builds)."""

    provider: str
    base: str
    path: str
    version: str


def host_interpreter() -> Interpreter:
    out = subprocess.run(["/usr/bin/python3", "-c", "import platform; print(platform.python_version())"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise NoPython("the host has no /usr/bin/python3", fix="apt-get install -y python3 python3-venv")
    return Interpreter("host", "host", "/usr/bin/python3", out.stdout.strip())


@dataclass
class Step:
    kind: str  # venv | requirements | project | packages | apt
    command: str  # a shell command, run in the project root
    why: str  # the evidence rule(s) that produced it


@dataclass
class Recipe:
    interpreter: Interpreter
    steps: list[Step] = field(default_factory=list)
    test_runner: str = "pytest"
    test_command: str = ""
    packages: list[str] = field(default_factory=list)  # top-level importable names (for level 1)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def choose_interpreter(ev: Evidence, available: list[Interpreter]) -> Interpreter:
    constraint = ev.python_constraint()
    for interp in available:
        if constraint is None or Version(interp.version) in constraint:
            return interp
    have = ", ".join(f"{i.version} ({i.provider})" for i in available)
    raise NoPython(f"the project requires Python {constraint}; this machine provides {have}",
                   fix="more interpreter providers (Debian bullseye/trixie bases) are planned; see docs/setup.md")


def _quote_reqs(reqs: list[str]) -> str:
    return " ".join(shlex.quote(r) for r in reqs)


def plan(ev: Evidence, available: list[Interpreter] | None = None) -> Recipe:
    interp = choose_interpreter(ev, available or [host_interpreter()])
    pip = PIP
    r = Recipe(interp, steps=[Step("venv", f"{interp.path} -m venv {VENV}", f"interpreter: {interp.provider} {interp.version}")])
    apt = sorted({f.value["name"] for f in ev.of("system_package")
                  if isinstance(f.value, dict) and f.value.get("when", "always") == "always"})
    if apt:
        r.steps.insert(0, Step("apt", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
                               + " ".join(apt), "system_package: " + ", ".join(apt)))
    req_files = [f for f in ev.of("requirements_file") if isinstance(f.value, dict)
                 and f.value.get("role", "requirements") == "requirements"
                 and not re.search(r"(doc|lint)", f.value.get("path", ""), re.I)]
    top = [f for f in req_files if "/" not in f.value["path"]] or req_files  # included files come along via -r
    for f in top:
        r.steps.append(Step("requirements", f"{pip} -r {shlex.quote(f.value['path'])}", f"{f.via} ({f.file})"))
    project = any(f.kind in ("build_backend",) for f in ev.facts) or any(
        (ev.root / n).is_file() for n in ("pyproject.toml", "setup.py", "setup.cfg"))
    extras = sorted({f.value["extra"] for f in ev.of("extra") if isinstance(f.value, dict) and TESTISH.search(f.value["extra"])})
    if project:
        target = "." + (f"[{','.join(extras)}]" if extras else "")
        r.steps.append(Step("project", f"{pip} -e {shlex.quote(target)}",
                            "project metadata" + (f"; extras {', '.join(extras)}" if extras else "")))
    groups = [f.value for f in ev.of("dependency_group")
              if isinstance(f.value, dict) and TESTISH.search(str(f.value.get("group", "")))]
    group_reqs = sorted({g["requirement"] for g in groups})
    if group_reqs:
        r.steps.append(Step("packages", f"{pip} {_quote_reqs(group_reqs)}",
                            "dependency groups " + ", ".join(sorted({g['group'] for g in groups}))))
    runners = [f.value for f in ev.of("test_runner")]
    r.test_runner = "pytest" if "pytest" in runners or not runners else runners[0]
    wanted = [p["name"] for p in (f.value for f in ev.of("test_plugin")) if isinstance(p, dict)]
    if r.test_runner == "unittest":
        # pytest collects and runs unittest suites too, and gives per-test statuses (JUnit) and collect-only.
        r.notes.append("unittest suite run through pytest")
        r.test_runner = "pytest"
    if r.test_runner == "pytest":
        wanted = ["pytest", *wanted]
    if wanted:
        r.steps.append(Step("packages", f"{pip} {_quote_reqs(sorted(set(wanted)))}",
                            f"test runner {r.test_runner}" + (" and the plugins its config needs" if len(wanted) > 1 else "")))
    r.test_command = {
        "pytest": f"{VENV}/bin/python -m pytest",
        "django": f"{VENV}/bin/python manage.py test",
    }.get(r.test_runner, f"{VENV}/bin/python -m unittest discover")
    names = [f.value["name"] if isinstance(f.value, dict) else f.value
             for f in (*ev.of("top_level_package"), *ev.of("top_level_module"))]
    r.packages = sorted({n for n in names if isinstance(n, str) and n.isidentifier()} - {"setup", "conftest", "manage"})
    seen: set[str] = set()
    r.steps = [s for s in r.steps if not (s.command in seen or seen.add(s.command))]
    constraint = ev.python_constraint()
    if constraint is None:
        r.notes.append("no Python constraint found; used the newest available interpreter")
    return r


def spec_or_none(text: str) -> SpecifierSet | None:
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        return None
