"""Repairs as data: an error signature in a failed step's output → a typed fix.

The rules live in data/repair_rules.toml (signature regex → fix kind and arguments, tried in order) and the
names they look up in data/debian_packages.toml (C headers, libraries, programs, pkg-config names, shared
objects → Debian packages), data/import_to_dist.toml and data/pytest_plugins.toml. This module only loads the
tables, matches, and builds deduplicated `Fix` values; each rule has a captured output in tests/test_repairs.py.

Also here: the older missing-module helpers (`missing_modules`, `distributions_for`) that engine.py uses.
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

MISSING_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([A-Za-z_][\w.]*)'")
STAGES = ("install", "import", "collect")
KINDS = ("apt", "apt_drop", "drop", "from_index", "pip", "build_deps", "legacy_setuptools", "legacy_editable", "cutoff", "python", "retry", "env", "none")
MERGED = ("apt", "apt_drop", "drop", "from_index", "pip", "build_deps", "legacy_setuptools", "env")  # several matches of a rule → one fix
SPECIAL_TABLES = ("dist", "pytest_option", "pytest_ini", "abi_tags")
PYTHONS = [Version("2.7")] + [Version(f"3.{m}") for m in range(0, 21)]


@dataclass(frozen=True)
class Fix:
    kind: str  # apt | apt_drop | drop | from_index | pip | build_deps | legacy_setuptools | legacy_editable | cutoff | python
    #            | retry | env
    #            | lock_drop (search.py: a stale lock stops constraining the installs)
    args: tuple[str, ...]  # Debian packages, requirements, NAME=VALUE, or ("older"|"newer", constraint)
    rule: str  # id of the table rule that matched
    why: str  # one line for humans, quoting the matched signature


@dataclass(frozen=True)
class Rule:
    id: str
    stages: tuple[str, ...]
    pattern: re.Pattern
    kind: str
    args: tuple[str, ...]
    why: str
    lookup: str | None = None
    split: bool = False
    module: int | None = None
    third_party: bool = False
    current: str | None = None
    final: bool = False


def _data(name: str) -> dict:
    return tomllib.loads(resources.files("envyard.data").joinpath(name).read_text("utf-8"))


@lru_cache(maxsize=1)
def import_to_dist() -> dict[str, str]:
    return _data("import_to_dist.toml")


@lru_cache(maxsize=1)
def tables() -> dict[str, dict]:
    """Lookup tables by name: debian_packages.toml's sections and repair_rules.toml's [table.*]."""
    debian = _data("debian_packages.toml")
    own = _data("repair_rules.toml").get("table", {})
    clash = set(debian) & set(own) | (set(debian) | set(own)) & set(SPECIAL_TABLES)
    if clash:
        raise ValueError(f"repair tables defined twice: {sorted(clash)}")
    return {**debian, **own}


@lru_cache(maxsize=1)
def rules() -> tuple[Rule, ...]:
    """The rules of repair_rules.toml, validated."""
    out, seen = [], set()
    for raw in _data("repair_rules.toml")["rule"]:
        rid = raw["id"]
        stages = tuple(raw["stages"])
        lookup = raw.get("lookup")
        if (rid in seen or raw["kind"] not in KINDS or not stages or set(stages) - set(STAGES)
                or (lookup and lookup not in tables() and lookup not in SPECIAL_TABLES)):
            raise ValueError(f"repair_rules.toml: bad rule {rid!r}")
        seen.add(rid)
        out.append(Rule(rid, stages, re.compile(raw["pattern"], re.M), raw["kind"], tuple(raw.get("args", ())),
                        raw["why"], lookup, raw.get("split", False), raw.get("module"),
                        raw.get("third_party", False), raw.get("current"), raw.get("final", False)))
    return tuple(out)


def diagnose(output: str, *, stage: str, local: frozenset[str] = frozenset(), retried: bool = False) -> list[Fix]:
    """Fixes for a failed step's output, in order of preference, without duplicates; [] when nothing matches.
    stage: 'install' (an install step failed), 'import' (L1 import of the project failed), 'collect' (pytest
    --collect-only failed). local: the project's own top-level packages (never fetched, never "too new").
    retried: the step was already retried as often as a network failure earns; the retry rules (which hide
    every other rule when they match) are passed over, so a fix for what stays unreachable can show."""
    fixes: list[Fix] = []
    for _, found in _matches(output, stage, local, retried):
        for fix in found:
            if all((f.kind, f.args) != (fix.kind, fix.args) for f in fixes):
                fixes.append(fix)
    return fixes


def matching_rules(output: str, *, stage: str, local: frozenset[str] = frozenset()) -> list[str]:
    """Ids of the rules that recognize the output (including those that give no fix)."""
    return [rule.id for rule, _ in _matches(output, stage, local)]


def _matches(output: str, stage: str, local: frozenset[str], retried: bool = False):
    """(rule, its fixes) for each rule that recognizes the output, in table order."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}")
    for rule in rules():
        if stage not in rule.stages or (retried and rule.kind == "retry"):
            continue
        found = [fix for fix in (_fix(rule, m, local) for m in rule.pattern.finditer(output)) if fix]
        if not found:
            continue
        if rule.kind in MERGED:  # one fix per rule: the first match's reason, every match's arguments
            first = found[0]
            args = tuple(dict.fromkeys(a for f in found for a in f.args))
            found = [Fix(first.kind, args, rule.id, first.why.rsplit(" → ", 1)[0] + " → " + " ".join(args))]
        yield rule, [f for i, f in enumerate(found) if f.kind != "none" and f not in found[:i]]
        if rule.final:
            return


def _fix(rule: Rule, m: re.Match, local: frozenset[str]) -> Fix | None:
    """The fix for one match, or None when the match does not apply (a local module, a lookup miss)."""
    if rule.module is not None:
        top = (m.group(rule.module) or "").split(".")[0]
        if not top or top in local or (rule.third_party and _stdlib(top)):
            return None
    current = _fill(rule.current, m) if rule.current else None
    args: list[str] = []
    for template in rule.args:
        value = _fill(template, m)
        for item in (value.split() if rule.split else [value]):
            if not rule.lookup:
                args.append(item)
                continue
            found = _lookup(rule.lookup, item, current)
            if not found:
                continue
            args.extend(found)
    if rule.args and not args:
        return None
    args = list(dict.fromkeys(args))
    if rule.kind == "python":
        args = _python_args(args[0], current)
        if not args:
            return None
    return Fix(rule.kind, tuple(args), rule.id, _why(rule, m, rule.kind, tuple(args)))


def _fill(template: str, m: re.Match) -> str:
    return re.sub(r"\{(\d+)\}", lambda g: m.group(int(g.group(1))) or "", template)


def _why(rule: Rule, m: re.Match, kind: str, args: tuple[str, ...]) -> str:
    said = " ".join(m.group(0).split())
    said = said if len(said) <= 160 else said[:157] + "..."
    if kind == "python":
        then = f"{args[0]} Python" + (f" ({args[1]})" if len(args) > 1 else "")
    else:
        then = {"cutoff": "dependencies as of the source's release date", "retry": "try again",
                "none": "no fix"}.get(kind) or " ".join(args)
    return f"{_fill(rule.why, m)} ({said}) → {then}"


@lru_cache(maxsize=1)
def _stdlib_names() -> frozenset[str]:
    removed = {name.split(".")[0] for name in tables()["stdlib_module"]}
    return frozenset(sys.stdlib_module_names) | removed


def _stdlib(top: str) -> bool:
    return top in _stdlib_names()


def _lookup(table: str, key: str, current: str | None) -> list[str]:
    """Values for key in a table (see debian_packages.toml for how keys are matched)."""
    if table == "dist":
        top = key.split(".")[0]
        return [] if top.startswith("_") else [import_to_dist().get(top, top)]
    if table == "abi_tags":
        constraint = _abi_constraint(key, current)
        return [constraint] if constraint else []
    if table in ("pytest_option", "pytest_ini"):
        from .sources.knowledge import pytest_plugins
        plugins = pytest_plugins()
        if table == "pytest_ini":
            dist = plugins["ini"].get(key.lower())
        else:
            from .sources.testing import _plugin_for_option
            dist = _plugin_for_option(key, plugins["options"])
        return [dist] if dist else []
    entries = tables()[table]
    for k in _candidates(key):
        if k in entries:
            value = entries[k]
            return [value] if isinstance(value, str) else list(value)
    for k, value in entries.items():  # directory keys: "openssl/" matches "openssl/ssl.h"
        if k.endswith("/") and key.startswith(k):
            return [value] if isinstance(value, str) else list(value)
    return []


def _candidates(key: str) -> list[str]:
    out = [key, key.lower()]
    bare = re.sub(r"^(?:x86_64|aarch64|arm|i686|powerpc64le|s390x|riscv64)[\w]*-linux-gnu\w*-", "", key)
    out += [bare, re.sub(r"-\d+(?:\.\d+)*$", "", bare)]               # x86_64-linux-gnu-gcc-12 → gcc
    parts = key.split(".")
    out += [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]  # a.b.c → a.b → a
    return list(dict.fromkeys(out))


def _python_args(constraint: str, current: str | None) -> list[str]:
    """("older"|"newer", constraint) for a Python constraint, or ("older"|"newer",) when only that is known."""
    if constraint in ("older", "newer"):
        return [constraint]
    constraint = re.sub(r"\s+", "", constraint).rstrip(".")
    try:
        spec = SpecifierSet(constraint)
    except InvalidSpecifier:
        return []
    try:
        here = Version(current) if current else None
    except InvalidVersion:
        here = None
    if here is not None and not spec.contains(here):
        here = Version(f"{here.major}.{here.minor}")
        older = any(spec.contains(v) for v in PYTHONS if v < here)
        newer = any(spec.contains(v) for v in PYTHONS if v > here)
        if older != newer:
            return ["older" if older else "newer", constraint]
    upper = any(s.operator in ("<", "<=") for s in spec)
    return ["older" if upper else "newer", constraint]


def _abi_constraint(tags: str, current: str | None) -> str | None:
    """uv's list of wheel tags (`cp36m`, `cp37m`, `cp38`) → the Python constraint those wheels cover."""
    versions = sorted({Version(f"{a}.{b}") for a, b in re.findall(r"\bcp(\d)(\d+)", tags)})
    if not versions:
        return "<3" if re.search(r"\bpy2\b", tags) else None
    lo, hi = versions[0], versions[-1]
    try:
        here = Version(current) if current else None
    except InvalidVersion:
        here = None
    if here is not None and hi < here:
        return f"<={hi}"
    if here is not None and lo > here:
        return f">={lo}"
    return f">={lo},<={hi}"


def missing_modules(output: str) -> list[str]:
    """Top-level module names from ModuleNotFoundError lines, in order of appearance, without repeats."""
    seen: list[str] = []
    for m in MISSING_MODULE.finditer(output):
        top = m.group(1).split(".")[0]
        if top not in seen:
            seen.append(top)
    return seen


def distributions_for(modules: list[str], local: set[str]) -> list[str]:
    """Distributions to install for missing modules; the project's own packages are not fetched from PyPI."""
    table = import_to_dist()
    return [table.get(m, m) for m in modules if m not in local and not m.startswith("_")]
