"""The completeness pass: install what the repository's code imports, beyond what its tests need.

EnvBench counts a Python setup as a success when pyright finds no missing imports anywhere in the repository
(`reportMissingImports`), docs, examples and optional back-ends included. The recipe installs what the tests
need (test-like extras and groups, root requirement files), so L2 usually still counts imports of optional
features. This pass, run once L1 (or better) is reached, L2 still counts missing imports and the tests have
been collected:

1. installs what the project declares but the recipe left out: every extra, every requirement file (docs, dev,
   lint, nested ones), every dependency group (PEP 735, Poetry, PDM, hatch/tox/nox environments);
2. maps each import still missing to a distribution (modules.py: what was learned, data/import_to_dist.toml,
   the name itself) and keeps a candidate only when, installed, it provides the module as the code uses it.

Every install in the pass is constrained to the versions already installed (a `uv pip freeze` of the
environment taken as its first step), so it can add distributions but never up- or downgrade one. The search
then scans and collects the tests again, and goes back to the snapshot taken before the pass unless fewer
imports are missing and the tests collect no worse. The tests then run with the pass's installs (and the clean
replay's run of them beside theirs). A branch that runs alone does all this before its tests, and keeps the pass
when they are verified with it (L4, pass ratio at least 0.9), or else runs them again without it; one that ran
its tests beside another branch does it after them. Either way, with two runs, the pass stays only when the
tests are no worse with it (`keeps`: same or higher level, pass ratio not lower). This module decides *what* to
install and *whether* to keep it; search.py runs it.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .evidence import Evidence
from .plan import OVERRIDES, Recipe, Step, for_another_python

# What the environment held when the pass started: every install of the pass is constrained to it.
BEFORE = "/opt/envyard/complete-constraints.txt"
FREEZE_STEP = (f"mkdir -p /opt/envyard && {{ uv pip freeze --exclude-editable | grep -E '^[A-Za-z0-9._-]+==' "
               f"|| true; }} > {BEFORE}")
MAX_MODULES = 12          # missing modules mapped per pass (most imported first)
MAX_CANDIDATES = 4        # distributions tried per module: learned, the table's, the name, py-NAME...
MAX_SPLIT = 12            # a failing group is retried requirement by requirement only when this small
BUDGET_SECONDS = 600.0    # installs of one pass (the test re-run is not counted)


@dataclass
class Unit:
    """One thing the pass tries to install, as a recipe step."""
    label: str      # "extras all, docs", "requirements docs/requirements.txt", "group docs"
    args: str       # what `uv pip install` gets (quoted)
    parts: tuple[str, ...] = ()  # single requirements to try one by one when the whole unit fails


@lru_cache(maxsize=1)
def _table() -> dict:
    return tomllib.loads(resources.files("envyard.data").joinpath("completeness.toml").read_text("utf-8"))


def not_installable(module: str) -> bool:
    """Imports the pass does not look for: Python 2's standard library, Windows- and macOS-only modules, newer
    Pythons' standard modules, and frameworks too large to install for optional code (data/completeness.toml)."""
    t = _table()
    return any(module in t[k] for k in ("python2_stdlib", "platform_only", "newer_stdlib", "too_large"))


# The project's editable install as `uv pip list --editable --format json` reports it: its distribution name.
EDITABLES = "uv pip list --editable --format json"


def editable_name(listing: str, workdir: str) -> str | None:
    """The name of the editable distribution installed from `workdir`, from EDITABLES' output (None if none)."""
    try:
        entries = json.loads(listing)
    except ValueError:
        return None
    for e in entries if isinstance(entries, list) else []:
        if isinstance(e, dict) and e.get("editable_project_location") == workdir and isinstance(e.get("name"), str):
            return e["name"]
    return None


def declared_units(ev: Evidence, recipe: Recipe, project_name: str | None = None) -> list[Unit]:
    """What the project declares that the recipe does not install yet: all extras (when the project is
    installed as a package), the requirement files the recipe has not installed, every dependency group.

    The extras are asked for by the name of the installed project (`NAME[docs,tests]`, `project_name`: the
    editable install's), which uv finds installed and takes their requirements from: `-e .[docs,tests]` would
    build the project again (uv rebuilds a local project it is given under new constraints: PyNaCl's libsodium,
    70 s, in the branch and again in the replay). Without the name, or when an extra names a distribution by URL
    or path (which uv takes only from a direct requirement: the project itself), `-e .[...]`."""
    units: list[Unit] = []
    done = " ".join(s.command for s in recipe.steps)
    project = [s for s in recipe.steps if s.kind == "project"]
    if project:
        facts = [f.value for f in ev.of("extra") + ev.of("local_package") if isinstance(f.value, dict)
                 and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", str(f.value.get("extra", "")))]
        extras = sorted({v["extra"] for v in facts})
        if any(v.get("url") or v.get("path") for v in facts):
            project_name = None
        # by name; else the project builds as its install step did (a repair may have turned build isolation off)
        e = "--no-build-isolation -e " if "--no-build-isolation" in project[-1].command else "-e "
        e, target = ("", project_name) if project_name else (e, ".")
        if extras:
            units.append(Unit(f"extras {', '.join(extras)}", e + shlex.quote(f"{target}[{','.join(extras)}]"),
                              tuple(e + shlex.quote(f"{target}[{x}]") for x in extras) if len(extras) > 1 else ()))
    files = [f for f in ev.of("requirements_file") if isinstance(f.value, dict)
             and f.value.get("role", "requirements") == "requirements"]
    installed = {p for p in (f.value["path"] for f in files) if f"-r {shlex.quote(p)}" in done}
    grew = True
    while grew:  # a file included (-r) from an installed one came with it
        more = {f.value["path"] for f in files if f.file in installed and f.file != f.value["path"]} - installed
        installed |= more
        grew = bool(more)
    rewrites = {f.value["path"]: f.value for f in ev.of("requirements_rewrite") if isinstance(f.value, dict)}
    for path in dict.fromkeys(f.value["path"] for f in files):
        if path in installed or for_another_python(path, recipe.interpreter.version):
            continue
        rewrite = rewrites.get(path)
        if rewrite is None:
            units.append(Unit(f"requirements {path}", f"-r {shlex.quote(path)}"))
        elif rewrite.get("args"):
            args = tuple(shlex.quote(a) for a in rewrite["args"])
            units.append(Unit(f"requirements {path}", " ".join(args), args if len(args) <= MAX_SPLIT else ()))
    groups: dict[str, list[str]] = {}
    for f in ev.of("dependency_group"):
        v = f.value
        if isinstance(v, dict) and isinstance(v.get("requirement"), str) and not v.get("url"):
            groups.setdefault(str(v.get("group", "")), []).append(v["requirement"])
    for group, reqs in groups.items():
        if _superseded(group, reqs, groups):
            continue
        todo = [r for r in dict.fromkeys(reqs) if shlex.quote(r) not in done]
        if todo:
            args = tuple(shlex.quote(r) for r in todo)
            units.append(Unit(f"group {group}", " ".join(args), args if 1 < len(args) <= MAX_SPLIT else ()))
    return units


def _superseded(group: str, reqs: list[str], groups: dict[str, list[str]]) -> bool:
    """A tox/nox/hatch environment of a version matrix (hypothesis' pandas10 ... pandas15 each pin
    `pandas~=1.x`): a later environment names one of its distributions with another specifier. Only the last
    of such a matrix is installed; the others would only replace one another, often by building an old
    release from source."""
    envs = [g for g in groups if g.startswith(("tox:", "nox:", "hatch:"))]
    if group not in envs:
        return False
    mine = dict(p for p in map(_name_and_spec, reqs) if p)
    later = [p for g in envs[envs.index(group) + 1:] for p in map(_name_and_spec, groups[g]) if p]
    return any(name in mine and spec != mine[name] for name, spec in later)


def _name_and_spec(requirement: str) -> tuple[str, str] | None:
    try:
        r = Requirement(requirement)
    except InvalidRequirement:
        return None
    return canonicalize_name(r.name), str(r.specifier)


def install_command(recipe: Recipe, args: str) -> str:
    """`uv pip install` for the pass: the recipe's cut-off, the versions installed before the pass as
    constraints, and the project's installs' overrides (requirements left out, URLs replaced) still obeyed."""
    override = f" --override {OVERRIDES}" if any(f"--override {OVERRIDES}" in s.command for s in recipe.steps) else ""
    # a -c option replaces UV_CONSTRAINT (a shipped uv.lock's export) rather than adding to it: name both
    locked = "".join(f" -c {shlex.quote(f)}" for f in recipe.env.get("UV_CONSTRAINT", "").split())
    return recipe.install(f"-c {BEFORE}{locked}{override} {args}")


def modules_to_map(missing: list[dict], local: set[str]) -> list[str]:
    """Top-level modules worth looking for on PyPI, the most imported first: not the project's own packages,
    not private names, not Python 2's or another platform's standard modules."""
    counts = Counter(str(m.get("module", "")).split(".")[0] for m in missing)
    out = [m for m, _ in counts.most_common() if m and m.isidentifier() and not m.startswith("_")
           and m not in local and not not_installable(m)]
    return out[:MAX_MODULES]


def keeps(before: tuple[int, float | None, int], after: tuple[int, float | None, int]) -> tuple[bool, str]:
    """Whether the environment after the pass replaces the one before it. Each side is (level, pass ratio,
    missing imports). Kept only when fewer imports are missing and the tests are no worse."""
    (lv0, ratio0, miss0), (lv1, ratio1, miss1) = before, after
    if miss1 >= miss0:
        return False, f"missing imports {miss0} → {miss1}: nothing gained"
    if lv1 < lv0:
        return False, f"the tests got worse: L{lv0} → L{lv1}"
    if lv1 == lv0 and lv0 >= 4 and (ratio1 or 0) < (ratio0 or 0):
        return False, f"the tests got worse: pass ratio {ratio0:.3f} → {ratio1 or 0:.3f}"
    return True, f"missing imports {miss0} → {miss1}"


def step(unit_label: str, command: str) -> Step:
    return Step("complete", command, f"completeness pass: {unit_label}")
