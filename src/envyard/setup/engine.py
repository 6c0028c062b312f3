"""Run a recipe in a sandbox, climb the verification ladder, and keep the result as an image plus a contract.

Levels: L0 every install step exits 0 · L1 the project's packages import from outside the source tree ·
L2 (missing-import scan, not run yet) · L3 the test runner collects more than zero tests · L4 the tests run,
with per-test statuses and a pass ratio. The level reached is the highest with every level below it passed
(L2 is skipped, not failed, until it exists).
"""

from __future__ import annotations

import json
import re
import shlex
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import EnvyardError
from ..store import ImageConfig
from ..yard import Sandbox, Yard
from .evidence import Evidence, gather
from .plan import PIP, VENV, Recipe, Step, plan
from .repairs import distributions_for, missing_modules

WORK_ROOT = "/work"
JUNIT = "/tmp/envyard-junit.xml"


@dataclass
class LevelResult:
    level: int
    name: str
    ok: bool | None  # None: not run
    detail: str = ""
    seconds: float = 0.0


@dataclass
class SetupResult:
    name: str
    image: str | None
    level: int
    levels: list[LevelResult]
    recipe: Recipe
    tests: dict[str, str] = field(default_factory=dict)  # test id → passed/failed/error/skipped
    pass_ratio: float | None = None
    wall_time: float = 0.0
    reason: str = ""
    replay: dict = field(default_factory=dict)  # the clean replay of setup.sh on a fresh base
    log: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        """L3 or better, and a clean replay of the recipe from the base reached L3 too."""
        return self.level >= 3 and bool(self.replay.get("ok"))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["recipe"] = self.recipe.to_dict()
        d["verified"] = self.verified
        d.pop("log")
        d["tests_total"] = len(self.tests)
        d["tests"] = dict(sorted(self.tests.items())[:2000])
        return d


Progress = Callable[[str], None]


def setup_directory(yard: Yard, src: Path, name: str, *, step_timeout: float = 1800, test_timeout: float = 1800,
                    on_progress: Progress | None = None) -> tuple[SetupResult, Evidence]:
    """Set up the project in `src` as image `name`. Raises on bad input; returns the result otherwise."""
    say = on_progress or (lambda _msg: None)
    start = time.monotonic()
    say("reading the repository")
    ev = gather(src)
    recipe = plan(ev)
    workdir = f"{WORK_ROOT}/{re.sub(r'[^A-Za-z0-9._-]', '_', src.resolve().name) or 'project'}"
    env = {"VIRTUAL_ENV": VENV, "PATH": f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    levels: list[LevelResult] = []
    tests: dict[str, str] = {}
    image_name = None
    log: list[str] = []
    with yard.sandbox(recipe.interpreter.base, network="host", workdir="/") as sb:
        say(f"copying {src} to {workdir}")
        sb.upload(src, workdir)
        levels.append(_install(sb, recipe, workdir, env, step_timeout, log, say))
        if levels[-1].ok:
            levels.append(_imports(sb, recipe, env, log, say))
            levels.append(LevelResult(2, "no missing imports", None, "not run: the static import scan is not built yet"))
            collected = _collect(sb, recipe, workdir, env, test_timeout, log, say)
            levels.append(collected)
            if collected.ok:
                ran, tests = _run_tests(sb, recipe, workdir, env, test_timeout, log, say)
                levels.append(ran)
        level = _reached(levels)
        if levels[0].ok:
            say("saving the environment as an image")
            snap = sb.snapshot()
            config = ImageConfig(env=env, workdir=workdir, labels={"envyard.setup.level": str(level)},
                                 provenance={"provider": "setup", "source": str(src.resolve()), "level": level,
                                             "interpreter": recipe.interpreter.version})
            image_name = yard.store.put_image(name, snap.layers, config).name
            yard.store.remove_image(snap.name)  # only the temporary name goes; the layers stay with `name`
    replay = _replay(yard, src, recipe, workdir, env, step_timeout, log, say) if level >= 3 else {}
    passed = sum(1 for s in tests.values() if s == "passed")
    counted = sum(1 for s in tests.values() if s in ("passed", "failed", "error"))
    result = SetupResult(name=name, image=image_name, level=level, levels=levels, recipe=recipe, tests=tests,
                         pass_ratio=(passed / counted) if counted else None, wall_time=time.monotonic() - start,
                         reason=_reason(levels), replay=replay, log=log)
    if level >= 3 and not replay.get("ok"):
        result.reason = f"replay: {replay.get('detail', 'failed')}"
    return result, ev


def replay_script(recipe: Recipe) -> str:
    return "set -e\n" + "".join(f"{s.command}\n" for s in recipe.steps)


def _replay(yard: Yard, src: Path, recipe: Recipe, workdir, env, timeout, log, say) -> dict:
    """Run the recorded recipe, as setup.sh has it, on a fresh base and check the tests still collect: an image
    is called verified only when its recipe reproduces it."""
    say("replaying setup.sh on a fresh base")
    t = time.monotonic()
    with yard.sandbox(recipe.interpreter.base, network="host", workdir="/") as sb:
        sb.upload(src, workdir)
        r = _sh(sb, replay_script(recipe), workdir, env, timeout, log)
        if r.exit_code != 0:
            return {"ok": False, "detail": f"setup.sh exited {r.exit_code} on a fresh base", "seconds": time.monotonic() - t}
        c = _sh(sb, f"{recipe.test_command} --collect-only -q -p no:cacheprovider", workdir, env, timeout, log)
        ok = c.exit_code == 0
        return {"ok": ok, "detail": "tests collect after a clean replay" if ok else
                f"tests do not collect after a clean replay (exit {c.exit_code})", "seconds": time.monotonic() - t}


def _sh(sb: Sandbox, command: str, cwd: str, env: dict, timeout: float, log: list[str]):
    r = sb.exec(command, cwd=cwd, env=env, timeout=timeout, max_output=200_000)
    log.append(f"$ {command}\n{r.stdout}{r.stderr}[exit {r.exit_code}{', timed out' if r.timed_out else ''}, "
               f"{r.duration:.1f}s]\n")
    return r


def _install(sb, recipe: Recipe, workdir, env, timeout, log, say) -> LevelResult:
    t = time.monotonic()
    for i, step in enumerate(recipe.steps, 1):
        say(f"L0 install {i}/{len(recipe.steps)}: {step.kind}")
        r = _sh(sb, step.command, workdir, env, timeout, log)
        if r.exit_code != 0:
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
            return LevelResult(0, "install", False, f"step {i} ({step.kind}) exited {r.exit_code}: {tail[0][:300]}",
                               time.monotonic() - t)
    return LevelResult(0, "install", True, f"{len(recipe.steps)} steps", time.monotonic() - t)


def _imports(sb, recipe: Recipe, env, log, say) -> LevelResult:
    t = time.monotonic()
    if not recipe.packages:
        return LevelResult(1, "imports", None, "no importable top-level package found")
    say("L1 importing " + ", ".join(recipe.packages))
    code = "; ".join(f"import {p}" for p in recipe.packages)
    r = _sh(sb, f"{VENV}/bin/python -c {shlex.quote(code)}", "/", env, 300, log)  # from /, not the source tree
    if r.exit_code != 0:
        last = (r.stderr.strip().splitlines() or [""])[-1]
        return LevelResult(1, "imports", False, last[:300], time.monotonic() - t)
    return LevelResult(1, "imports", True, ", ".join(recipe.packages), time.monotonic() - t)


MAX_REPAIRS = 3


def _collect(sb, recipe: Recipe, workdir, env, timeout, log, say) -> LevelResult:
    """L3, with repairs: a test module that imports something nothing installed gets it installed (the repair
    becomes a recipe step, so setup.sh replays it) and collection is tried again."""
    t = time.monotonic()
    if recipe.test_runner != "pytest":
        return LevelResult(3, "tests collected", None, f"collection is only checked for pytest (runner: {recipe.test_runner})")
    tried: set[str] = set()
    for attempt in range(MAX_REPAIRS + 1):
        say("L3 collecting tests" + (f" (after repair {attempt})" if attempt else ""))
        r = _sh(sb, f"{recipe.test_command} --collect-only -q -p no:cacheprovider", workdir, env, timeout, log)
        m = re.search(r"(\d+) tests? collected", r.stdout) or re.search(r"^(\d+) tests?", r.stdout, re.M)
        count = int(m.group(1)) if m else len([l for l in r.stdout.splitlines() if "::" in l])
        if r.exit_code in (0, 5) and count > 0:
            return LevelResult(3, "tests collected", True, f"{count} tests", time.monotonic() - t)
        output = r.stdout + r.stderr
        dists = [d for d in distributions_for(missing_modules(output), set(recipe.packages)) if d not in tried]
        if r.exit_code in (0, 5) or not dists or attempt == MAX_REPAIRS:
            break
        tried.update(dists)
        step = Step("repair", f"{PIP} {' '.join(shlex.quote(d) for d in dists)}",
                    f"repair: tests import {', '.join(dists)}, which nothing installed (ModuleNotFoundError)")
        say(f"repair: installing {', '.join(dists)}")
        if _sh(sb, step.command, workdir, env, timeout, log).exit_code != 0:
            break
        recipe.steps.append(step)
    if count == 0 and r.exit_code in (0, 5):
        why = "no tests collected"
    else:
        errors = [l.strip() for l in output.splitlines() if re.search(r"\w+Error\b|^ERROR ", l)]
        why = f"collection failed (exit {r.exit_code})" + (f": {errors[0][:200]}" if errors else "")
    return LevelResult(3, "tests collected", False, why, time.monotonic() - t)


def _run_tests(sb, recipe: Recipe, workdir, env, timeout, log, say) -> tuple[LevelResult, dict[str, str]]:
    t = time.monotonic()
    say("L4 running the tests")
    r = _sh(sb, f"{recipe.test_command} -q -p no:cacheprovider --junitxml={JUNIT}", workdir, env, timeout, log)
    statuses: dict[str, str] = {}
    try:
        statuses = parse_junit(sb.read_file(JUNIT))
    except (FileNotFoundError, EnvyardError, ET.ParseError):
        pass
    if r.timed_out:
        return LevelResult(4, "tests run", False, f"the test run passed the {timeout:.0f}s limit", time.monotonic() - t), statuses
    if not statuses:
        return LevelResult(4, "tests run", False, f"no per-test results (exit {r.exit_code})", time.monotonic() - t), statuses
    counts = {s: list(statuses.values()).count(s) for s in ("passed", "failed", "error", "skipped")}
    return LevelResult(4, "tests run", True, ", ".join(f"{n} {s}" for s, n in counts.items() if n),
                       time.monotonic() - t), statuses


def parse_junit(data: bytes) -> dict[str, str]:
    """JUnit XML → {test id: passed|failed|error|skipped}."""
    statuses = {}
    for case in ET.fromstring(data).iter("testcase"):
        tid = f"{case.get('classname', '')}::{case.get('name', '')}"
        kinds = {child.tag for child in case}
        statuses[tid] = ("failed" if "failure" in kinds else "error" if "error" in kinds
                         else "skipped" if "skipped" in kinds else "passed")
    return statuses


def _reached(levels: list[LevelResult]) -> int:
    reached = -1
    for lv in sorted(levels, key=lambda x: x.level):
        if lv.ok is False:
            break
        if lv.ok is True:
            reached = lv.level
    return reached


def _reason(levels: list[LevelResult]) -> str:
    failed = [lv for lv in levels if lv.ok is False]
    return f"L{failed[0].level} {failed[0].name}: {failed[0].detail}" if failed else ""


def write_contract(out: Path, result: SetupResult, ev: Evidence) -> Path:
    """envyard.toml (evidence with provenance, recipe, verify results, baseline statuses), setup.sh, test.sh, log."""
    out.mkdir(parents=True, exist_ok=True)
    r = result.recipe
    (out / "setup.sh").write_text(
        "#!/bin/sh\n# Replays envyard's recipe from the project root on a Debian machine with "
        f"Python {r.interpreter.version} at {r.interpreter.path}.\nset -eu\n"
        + "".join(f"# {s.why}\n{s.command}\n" for s in r.steps))
    (out / "test.sh").write_text(f"#!/bin/sh\nset -eu\nexport VIRTUAL_ENV={VENV} PATH={VENV}/bin:$PATH\n{r.test_command} \"$@\"\n")
    for f in ("setup.sh", "test.sh"):
        (out / f).chmod(0o755)
    (out / "Dockerfile").write_text(dockerfile(result))
    (out / "log.txt").write_text("".join(result.log))
    (out / "envyard.toml").write_text(_toml(result, ev))
    return out


def dockerfile(result: SetupResult) -> str:
    """A portable equivalent for Docker users: Debian 12's python3 is the same 3.11 as the host's. Build it from
    the project root: `docker build -f <contract>/Dockerfile .`"""
    r = result.recipe
    workdir = f"{WORK_ROOT}/project"
    runs = "".join(f"# {s.why}\nRUN {s.command}\n" for s in r.steps)
    return ("# written by `envyard setup`; build from the project root: docker build -f PATH/TO/Dockerfile .\n"
            "FROM debian:bookworm\n"
            "RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates"
            " && rm -rf /var/lib/apt/lists/*\n"
            f"WORKDIR {workdir}\nCOPY . .\n{runs}"
            f"ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:$PATH\n"
            f'CMD ["sh", "-c", "{r.test_command} -q"]\n')


def _toml(result: SetupResult, ev: Evidence) -> str:
    q = _toml_str
    lines = ["# written by `envyard setup`", "[result]", f"name = {q(result.name)}",
             f"image = {q(result.image or '')}", f"level = {result.level}",
             f"pass_ratio = {result.pass_ratio if result.pass_ratio is not None else -1}",
             f"reason = {q(result.reason)}", f"wall_time_s = {result.wall_time:.1f}",
             f"verified = {'true' if result.verified else 'false'}",
             f"replay = {q(result.replay.get('detail', 'not run (below L3)'))}", ""]
    for lv in result.levels:
        lines += ["[[level]]", f"level = {lv.level}", f"name = {q(lv.name)}",
                  f"ok = {'true' if lv.ok else 'false' if lv.ok is False else q('not run')}",
                  f"detail = {q(lv.detail)}", ""]
    r = result.recipe
    lines += ["[recipe]", f"interpreter = {q(r.interpreter.provider + ' ' + r.interpreter.version)}",
              f"test_command = {q(r.test_command)}", ""]
    for s in r.steps:
        lines += ["[[recipe.step]]", f"kind = {q(s.kind)}", f"command = {q(s.command)}", f"why = {q(s.why)}", ""]
    for f in ev.facts:
        lines += ["[[evidence]]", f"kind = {q(f.kind)}", f"value = {q(str(f.value))}", f"file = {q(f.file)}",
                  f"line = {f.line or 0}", f"via = {q(f.via)}", ""]
    lines.append("[baseline]")
    lines += [f"{q(tid)} = {q(status)}" for tid, status in sorted(result.tests.items())]
    return "\n".join(lines) + "\n"


def _toml_str(s: str) -> str:
    return json.dumps(s)  # JSON's string escapes are all valid in a TOML basic string
