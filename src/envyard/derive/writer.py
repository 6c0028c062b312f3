"""Writing one derived task: envyard's task layout, which is Harbor's (instruction.md, task.toml with provenance
in [metadata], environment/, tests/test.sh, solution/solve.sh).

The environment is reproducible from the task directory alone: `[environment].image` is the verified setup
image and `environment/setup.sh` applies the break and removes the hidden tests (envyard runs it once and caches
the result as `task/<name>:<digest>`); `environment/Dockerfile` does the same for Harbor and Docker (`FROM` the
image, the break as `RUN`)."""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from . import judge
from .mutation import Mutation, SourceFacts
from .testrun import JUNIT, command

# What pytest reads as it starts, besides the tests: the project's copies are protected (a change is restored),
# at any depth of the project tree; new ones are dropped by the carry filter (envs/carry.py).
PYTEST_INPUTS = ("conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "pyproject.toml",
                 "tox.ini", "setup.cfg")
HIDDEN_DIR = "hidden"  # tests/hidden/<path>: the hidden test files, copied back into the project by test.sh
DESCRIPTIONS = {  # task.toml's one-line description, per kind
    "bug": "Fix the bug that makes {n} test(s) of {image} fail.",
    "env": "Repair the broken environment of {image} so that {n} failing test(s) pass again.",
    "commit": "Make {n} new test(s) of {image} pass.",
}


@dataclass
class Screened:
    """A candidate that broke tests which passed: what the task is built from."""

    failing: list[str]  # expected-to-pass tests that did not pass with the break
    expect_pass: list[str]  # every baseline-passing test of the run the verifier repeats
    messages: dict[str, str] = field(default_factory=dict)
    scope: tuple[str, ...] = ()  # test files run; () = the whole suite
    hidden: dict[str, bytes] = field(default_factory=dict)  # test file (relative) → its bytes, hidden from the agent
    run_seconds: float = 0.0


def difficulty(m: Mutation, s: Screened) -> tuple[str, int]:
    """(label, score): fewer failing tests, a bigger fix and more files touched are harder to find."""
    score = (2 if len(s.failing) == 1 else 1 if len(s.failing) <= 3 else 0)
    score += (1 if m.patch_lines > 1 else 0) + (1 if m.patch_lines > 5 else 0) + max(0, len(m.files) - 1)
    score += 1 if m.meta.get("operator") in ("remove-statement", "swap-arguments") else 0
    return ("easy" if score <= 1 else "medium" if score <= 3 else "hard"), score


def task_name(facts: SourceFacts, m: Mutation) -> str:
    project = facts.image.split(":")[0].rsplit("/", 1)[-1]
    project = re.sub(r"[^a-z0-9-]+", "-", project.lower()).strip("-")[:30] or "project"
    name = re.sub(r"[^a-z0-9-]+", "-", f"{project}-{m.kind}-{m.name}".lower())
    return name[:64].strip("-")


def display_id(test_id: str, files: set[str]) -> str:
    """`tests.test_calc.TestX::test_y` → `tests/test_calc.py::TestX::test_y` (pytest's node id) when known."""
    from .testrun import test_file

    path = test_file(test_id, files)
    if not path:
        return test_id
    classname, name = test_id.split("::", 1)
    module = path[:-3].removeprefix("src/").replace("/", ".")
    rest = classname[len(module):].strip(".") if classname.startswith(module) else ""
    return "::".join(x for x in (path, rest.replace(".", "::"), name) if x)


def _message(text: str, m: Mutation) -> str:
    lines = [l.rstrip() for l in text.splitlines() if l.strip() and not any(f in l for f in m.files)]
    out = "\n".join(lines[:3])
    return out[:300] + ("…" if len(out) > 300 else "")


def instruction(facts: SourceFacts, m: Mutation, s: Screened) -> str:
    if m.symptom:
        return m.symptom
    shown = command(facts, s.scope).replace(facts.python, "python")
    shown = re.sub(r" --junitxml=\S+| -p no:cacheprovider| -q\b", "", shown)
    files = set(facts.files)
    what = "is broken" if m.kind == "env" else "has a bug" if m.kind == "bug" else "fails its tests"
    lines = [f"# Failing tests in `{facts.workdir}`", "",
             f"The project in `{facts.workdir}` {what}. Its test suite (`{shown}`, run from `{facts.workdir}`) "
             f"reports {len(s.failing)} failing test{'s' if len(s.failing) != 1 else ''}:", ""]
    hidden_note = ("These tests are kept by the maintainers and are not in your copy of the project. " if s.hidden
                   else "")
    for t in s.failing[:15]:
        msg = _message(s.messages.get(t, ""), m)
        lines.append(f"- `{display_id(t, files)}`")
        if msg:
            lines += ["  ```", *("  " + l for l in msg.splitlines()), "  ```"]
    if len(s.failing) > 15:
        lines.append(f"- … and {len(s.failing) - 15} more")
    fix = {"bug": "Fix the project's code", "commit": "Change the project's code"}.get(m.kind, "Repair the environment")
    lines += ["", f"{hidden_note}{fix} so that they pass; every other test must keep passing. Do not edit the "
                  "tests.", ""]
    return "\n".join(lines)


def setup_script(facts: SourceFacts, m: Mutation, s: Screened) -> str:
    """The break, then the hidden tests (and their cached bytecode) removed, and any VCS history that would
    show the change."""
    parts = ["#!/bin/bash", "# envyard derive: makes the broken environment from the healthy image", "set -e",
             m.break_script.rstrip("\n"), f"cd {shlex.quote(facts.workdir)}"]
    for path in sorted(s.hidden):
        d, stem = (path.rsplit("/", 1) if "/" in path else (".", path))
        parts.append(f"rm -f {shlex.quote(path)} {shlex.quote(d)}/__pycache__/{shlex.quote(stem[:-3])}.*.pyc")
    parts.append("rm -rf .git .hg")
    return "\n".join(parts) + "\n"


def test_script(facts: SourceFacts, s: Screened) -> str:
    wd = shlex.quote(facts.workdir)
    return "\n".join([
        "#!/bin/bash",
        "# envyard derive: the verifier. The hidden tests are put back, the tests run, and the judge scores 1",
        "# when every test expected to pass (expect.json: those that passed before the break) passed.",
        f"cd {wd} || exit 1",
        # whatever the agent put in a hidden test's place (a directory, a symlink) goes first
        *([f"rm -rf -- {' '.join(shlex.quote(p) for p in sorted(s.hidden))}"] if s.hidden else []),
        f"if [ -d /tests/{HIDDEN_DIR} ]; then cp -a /tests/{HIDDEN_DIR}/. {wd}/; fi",
        f"rm -f {JUNIT}",
        "mkdir -p /logs/verifier",
        f"( {command(facts, s.scope)}\n) > /logs/verifier/test-output.txt 2>&1",
        "rc=$?",
        f"exec {shlex.quote(facts.python)} -I /tests/judge.py /tests/expect.json {JUNIT} "
        "/logs/verifier/test-output.txt $rc",
    ]) + "\n"


def protected_configs(workdir: str, m: Mutation) -> list[str]:
    """Patterns for the pytest inputs of the project tree, except those the fix itself must change (a commit's)."""
    changed = {f.rsplit("/", 1)[-1] for f in m.files}
    return [p for n in PYTEST_INPUTS if n not in changed for p in (f"{workdir}/{n}", f"{workdir}/*/{n}")]


def verifier_timeout(s: Screened) -> int:
    return int(math.ceil(max(60.0, 4 * s.run_seconds + 30)))


def _toml(value) -> str:
    return json.dumps(value)  # strings, numbers, booleans and lists of them are the same in JSON and TOML


def write_task(dest: Path, facts: SourceFacts, m: Mutation, s: Screened, *, seed: int, name: str) -> None:
    dest.mkdir(parents=True)
    label, score = difficulty(m, s)
    files = set(facts.files)
    visible = sorted({p for t in s.expect_pass for p in [_file_of(t, files)] if p and p not in s.hidden})
    meta = {
        "derived_by": "envyard derive", "source_image": facts.image, "kind": m.kind, "site": m.site, "seed": seed,
        "mutation": m.name, "failing_tests": [display_id(t, files) for t in s.failing],
        "hidden_tests": sorted(s.hidden), "tests_expected_to_pass": len(s.expect_pass),
        "difficulty": label, "difficulty_score": score, "patch_lines": m.patch_lines, "files_touched": len(m.files),
        "test_scope": list(s.scope) or "whole suite",
        **{k: v for k, v in m.meta.items() if isinstance(v, (str, int, float, bool)) and k != "reverse_patch"},
    }
    toml = [f"name = {_toml(name)}",
            f"description = {_toml(DESCRIPTIONS[m.kind].format(n=len(s.failing), image=facts.image))}",
            "", "[metadata]", *(f"{k} = {_toml(v)}" for k, v in meta.items()),
            "", "[environment]", f"image = {_toml(facts.image)}", f"workdir = {_toml(facts.workdir)}",
            f"network = {_toml(m.network)}",
            "", "[agent]", "timeout_sec = 1800", "max_steps = 100",
            "", "[verifier]", f"timeout_sec = {verifier_timeout(s)}"]
    if m.carry:
        toml.append(f"carry = {_toml(list(m.carry))}")
    protected = [*protected_configs(facts.workdir, m), *(f"{facts.workdir}/{p}" for p in visible)][:500]
    if protected:
        toml.append(f"protected = {_toml(protected)}")
    (dest / "task.toml").write_text("\n".join(toml) + "\n")
    (dest / "instruction.md").write_text(instruction(facts, m, s))
    env = dest / "environment"
    env.mkdir()
    (env / "setup.sh").write_text(setup_script(facts, m, s))
    (env / "Dockerfile").write_text(
        f"# For Harbor and Docker: the verified setup image ({facts.image}, exported with `envyard save`) "
        "with the break applied\n"
        f"FROM {facts.image}\nCOPY setup.sh /tmp/envyard-break.sh\n"
        "RUN bash /tmp/envyard-break.sh && rm /tmp/envyard-break.sh\n"
        f"WORKDIR {facts.workdir}\n")
    tests = dest / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text(test_script(facts, s))
    (tests / "test.sh").chmod(0o755)
    (tests / "judge.py").write_text(Path(judge.__file__).read_text())
    (tests / "expect.json").write_text(json.dumps({"runner": facts.test_runner, "expect_pass": s.expect_pass,
                                                   "failing": s.failing}, indent=1) + "\n")
    for path, text in s.hidden.items():
        p = tests / HIDDEN_DIR / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text)
    sol = dest / "solution"
    sol.mkdir()
    (sol / "solve.sh").write_text("#!/bin/bash\n# envyard derive: the oracle (the reverse patch, solution/fix.diff)\n"
                                  + m.fix_script)
    (sol / "solve.sh").chmod(0o755)
    if m.meta.get("reverse_patch"):
        (sol / "fix.diff").write_text(m.meta["reverse_patch"])


def _file_of(test_id: str, files: set[str]) -> str | None:
    from .testrun import test_file

    return test_file(test_id, files)
