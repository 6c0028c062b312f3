"""Environment breakage (CLI-Gym's idea, done with forks): typed mutations of a healthy image's environment,
each with an exact inverse a user could run. The project's code is never touched: the agent must repair the
environment, and the verifier carries only the environment paths the repair writes (`Mutation.carry`).

Kinds (the `site` prefix in brackets):
- uninstall [dist:]: a distribution the project needs, removed; inverse: reinstall its exact version;
- downgrade / conflict [dist:]: an older release of it (the previous major line, or one below the project's own
  lower bound: a version conflict); inverse: reinstall the exact version;
- rmmodule / rmext [file:]: one of its importable modules (or a compiled extension module) deleted; inverse:
  reinstall the exact version over it;
- rmlib [lib:]: a shared library an extension the project loads links against, deleted; inverse: reinstall its
  Debian package (or its distribution when the wheel bundles it);
- script [script:]: a console script the tests run, deleted or with a dead interpreter line; inverse: its text;
- pth [pth:]: a path `.pth` file (an editable install's) emptied; inverse: its text;
- interp [link:]: the venv's interpreter links removed; inverse: the links;
- venvcfg [config:]: the venv's `pyvenv.cfg` deleted (the interpreter then runs outside the venv: no project
  dependencies, no test runner); inverse: its text.

Reinstalls come from PyPI or the Debian archive, so those mutations set `network = "host"`. Environment
variables are not a kind: the tests see the image's configured environment, which neither a break script
nor an agent can change. `.pth` files that run code are not broken: the verifier's filter refuses a rewritten
one (it would run code in the verifier), so no repair could reach it.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import shlex
from pathlib import Path
from typing import Iterator

from .mutation import Mutation, SourceFacts

PROBE = Path(__file__).with_name("envprobe.py")
KIND = "env"


def probe_script() -> str:
    """sh (its shebang says so), run from the workdir with the image's env: prints the probe's JSON (envprobe.py,
    run by the environment's interpreter: `$ENVYARD_PYTHON` when the caller names it, else `python3` on PATH)."""
    return (f"#!/bin/sh\nexec \"${{ENVYARD_PYTHON:-python3}}\" - <<'ENVYARD_PROBE_EOF'\n{PROBE.read_text()}\n"
            "ENVYARD_PROBE_EOF\n")


def candidates(facts: SourceFacts, rng: random.Random) -> Iterator[Mutation]:
    """Every mutation the probe's facts allow, in an order fixed by `rng` (same seed, same order)."""
    env = facts.extra.get("env") or {}
    if not env:
        return
    found: list[Mutation] = []
    for make in (_dist_mutations, _file_mutations, _lib_mutations, _script_mutations, _pth_mutations,
                 _link_mutations, _config_mutations):
        found.extend(make(facts, env, rng))
    seen = set()
    unique = [m for m in found if not (m.name in seen or seen.add(m.name))]
    rng.shuffle(unique)
    # breaks the tests cannot notice are not proposed: in the benchmark of 2026-12-01 they were 150 of the 250
    # environment candidates and 3 of them became tasks, for about 2,500 sandbox-seconds of screening
    yield from (m for m in unique if noticeable(m, facts, env))


# --- which breaks the tests can notice -------------------------------------------------------------------------

# Test runners and installers (the probe's RUNNERS): the tests import pytest, but an older pytest still runs
# them, and a missing one reports nothing (`no-results`).
TOOL_DISTS = {"pytest", "pip", "setuptools", "wheel", "uv", "nose", "nose2", "unittest2", "coverage", "pytest-cov",
              "pytest-xdist", "execnet", "tox", "nox"}
# stdlib extension → the module a program imports to use it. The stdlib imports most of these inside
# `try: … except ImportError` (shutil, tarfile and zipfile for bz2/lzma, http.client for ssl, hashlib's fallbacks),
# so a library only they load is missed unless the project or its tests import the module themselves.
STDLIB_USERS = {"_bz2": "bz2", "_lzma": "lzma", "_ssl": "ssl", "_hashlib": "hashlib", "_uuid": "uuid",
                "_sqlite3": "sqlite3", "_ctypes": "ctypes", "_decimal": "decimal", "_curses": "curses",
                "readline": "readline", "_dbm": "dbm", "_gdbm": "dbm", "pyexpat": "xml", "_elementtree": "xml",
                "_tkinter": "tkinter", "zlib": "zlib"}
IMPORT_LINE = re.compile(r"^[ \t]*(?:import|from)[ \t].*$", re.M)


def noticeable(m: Mutation, facts: SourceFacts, env: dict) -> bool:
    """Whether the tests can plausibly notice this break, from what the probe and the baseline saw (no sandbox):
    False for a test runner's or installer's own distribution, a console script the test files only import
    (`import pytest` is not a use of the `pytest` command), and a shared library that only the standard library
    loads for modules neither the project nor its tests import."""
    if m.meta.get("distribution") in TOOL_DISTS and m.meta.get("mutation") in ("uninstall", "downgrade", "conflict"):
        return False
    if m.site.startswith("script:"):
        return script_used(m.site.split(":", 1)[1], facts)
    if m.site.startswith("lib:"):
        users = next((lib.get("users", []) for lib in env.get("libs", []) if f"lib:{lib['soname']}" == m.site), [])
        stdlib = {e["top"] for e in env.get("extensions", []) if e.get("stdlib")}
        if users and all(u in stdlib for u in users):
            imports = env.get("imports") or {}
            direct = {i.split(".")[0] for i in [*imports.get("src", []), *imports.get("tests", [])]}
            return any(STDLIB_USERS.get(u) in direct for u in users)
    return True


def script_used(name: str, facts: SourceFacts) -> bool:
    """The test command or a test file names the command `name` outside its import lines."""
    pattern = re.compile(r"""(?:^|["'\s\[])%s(?:["'\s,\]]|$)""" % re.escape(name), re.M)
    first = facts.test_command.split()[:1]
    if first and os.path.basename(first[0]) == name:  # `pytest -q`, not `python -m pytest`
        return True
    if not facts.test_files:
        return True  # nothing to judge by
    return any(pattern.search(IMPORT_LINE.sub("", text)) for text in facts.test_files.values())


# --- helpers -------------------------------------------------------------------------------------------------

def _q(s: str) -> str:
    return shlex.quote(s)


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")[:40] or "x"


def _installer(facts: SourceFacts, env: dict) -> str:
    """`pip` as the environment offers it: uv when present (what setup used), else the venv's pip."""
    python = facts.python or env.get("python", "python3")
    uv = (env.get("tools") or {}).get("uv")
    # --native-tls: uv trusts the system's CA store, as pip-era tools do (a machine behind a TLS-inspecting proxy)
    return f"{_q(uv)} pip --quiet --native-tls" if uv else f"{_q(python)} -m pip --quiet --disable-pip-version-check"


def _install(facts: SourceFacts, env: dict, spec: str, reinstall: bool = False) -> str:
    uv = (env.get("tools") or {}).get("uv")
    python = facts.python or env.get("python", "python3")
    if uv:
        flags = " --reinstall" if reinstall else ""
        return f"{_installer(facts, env)} install --python {_q(python)} --no-deps{flags} {_q(spec)}"
    flags = " --force-reinstall" if reinstall else ""
    return f"{_installer(facts, env)} install --no-deps{flags} {_q(spec)}"


def _uninstall(facts: SourceFacts, env: dict, name: str) -> str:
    uv = (env.get("tools") or {}).get("uv")
    python = facts.python or env.get("python", "python3")
    if uv:
        return f"{_installer(facts, env)} uninstall --python {_q(python)} {_q(name)}"
    return f"{_installer(facts, env)} uninstall -y {_q(name)}"


def _env_carry(env: dict) -> tuple[str, ...]:
    """What a distribution repair writes: the venv's site-packages and its commands."""
    return tuple(sorted({*env.get("site", []), env.get("bindir", "")} - {""}))


def _write_file(path: str, content: str, mode: int | None = None) -> str:
    """sh that writes `content` to `path` exactly (base64: any bytes, no quoting to get wrong)."""
    data = base64.b64encode(content.encode()).decode()
    lines = "\n".join(data[i:i + 76] for i in range(0, len(data), 76))
    chmod = f"\nchmod {mode:o} {_q(path)}" if mode is not None else ""
    return f"base64 -d > {_q(path)} <<'ENVYARD_EOF'\n{lines}\nENVYARD_EOF{chmod}\n"


def _breakable(env: dict) -> list[dict]:
    """Distributions the project needs that are neither the project nor the test runner's own."""
    return [d for d in env.get("dists", []) if d.get("required") and not d.get("project") and not d.get("runner")]


def _lower_bound(facts: SourceFacts, env: dict, name: str) -> str | None:
    """The lowest version the project's own requirements allow for `name` (`>=X` / `>X` / `~=X`)."""
    for d in env.get("dists", []):
        if not d.get("project"):
            continue
        for req in d.get("requires", []):
            m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*\(?([^;]*)", req)
            if not m or re.sub(r"[-_.]+", "-", m.group(1)).lower() != name or "extra ==" in req:
                continue
            bound = re.search(r"(>=|~=|>)\s*([0-9][0-9A-Za-z.]*)", m.group(3))
            if bound:
                return bound.group(2)
    return None


# --- kinds ---------------------------------------------------------------------------------------------------

def _dist_mutations(facts: SourceFacts, env: dict, rng: random.Random) -> Iterator[Mutation]:
    for d in _breakable(env):
        name, version = d["name"], d["version"]
        restore = _install(facts, env, f"{name}=={version}")
        common = dict(kind=KIND, site=f"dist:{name}", fix_script=f"set -e\n{restore}\n", carry=_env_carry(env),
                      patch_lines=1, files=(f"dist:{name}",))
        meta = {"mutation": "", "distribution": name, "version": version, "network": "host"}
        yield Mutation(name=f"uninstall-{_slug(name)}", break_script=f"set -e\n{_uninstall(facts, env, name)}\n",
                       meta={**meta, "mutation": "uninstall"}, **common)
        major = version.split(".")[0]
        if major.isdigit() and int(major) > 0:
            older = _install(facts, env, f"{name}<{major}") + " --only-binary :all:"
            yield Mutation(name=f"downgrade-{_slug(name)}", break_script=f"set -e\n{older}\n",
                           meta={**meta, "mutation": "downgrade", "below": major}, **common)
        bound = _lower_bound(facts, env, name)
        if bound and bound != major:
            conflict = _install(facts, env, f"{name}<{bound}") + " --only-binary :all:"
            yield Mutation(name=f"conflict-{_slug(name)}", break_script=f"set -e\n{conflict}\n",
                           meta={**meta, "mutation": "conflict", "below": bound}, **common)


def _file_mutations(facts: SourceFacts, env: dict, rng: random.Random) -> Iterator[Mutation]:
    """One imported module (or extension) file of a needed distribution, deleted: the distribution still looks
    installed, its code is not there."""
    for d in _breakable(env):
        if not d.get("imported"):
            continue
        # the files the project's imports load; else any module file of an imported package
        modules = sorted(f for f in d.get("loaded") or d.get("files", [])
                         if f.split("/")[0].split(".")[0] in d["imported"]
                         and (f.endswith(".py") or ".so" in f) and "__pycache__" not in f)
        location = d.get("location") or env.get("site", [""])[0]
        compiled = [f for f in modules if f in d.get("compiled", [])]
        # a package's __init__.py gone leaves a namespace package that still imports its submodules
        pure = [f for f in modules if f not in compiled and not f.endswith("/__init__.py")]
        for pool, kind in ((pure, "rmmodule"), (compiled, "rmext")):
            if not pool:
                continue
            pick = rng.choice(pool)
            path = os.path.join(location, pick)
            yield Mutation(kind=KIND, name=f"{kind}-{_slug(d['name'])}-{_slug(Path(pick).stem)}",
                           site=f"file:{path}", break_script=f"set -e\nrm -f {_q(path)}\n",
                           fix_script=f"set -e\n{_install(facts, env, d['name'] + '==' + d['version'], True)}\n",
                           carry=_env_carry(env), patch_lines=1, files=(path,),
                           meta={"mutation": kind, "distribution": d["name"], "version": d["version"],
                                 "file": path, "network": "host"})


def _lib_mutations(facts: SourceFacts, env: dict, rng: random.Random) -> Iterator[Mutation]:
    """A shared library that an extension module the project loads links against, deleted (its soname link
    and the file it points at)."""
    dists = {d["name"]: d for d in env.get("dists", [])}
    apt = (env.get("tools") or {}).get("apt-get")
    for lib in env.get("libs", []):
        owner = lib.get("owner") or {}
        link, real = lib["path"], lib["real"]
        # where the files live once /lib → /usr/lib is resolved: the upper dir (and so the carry) records them there
        targets = sorted({os.path.join(os.path.realpath(os.path.dirname(link)), os.path.basename(link)), real})
        if owner.get("deb") and apt:
            pkg = owner["deb"]
            install = f"apt-get install -y -q --reinstall {_q(pkg)}"
            fix = f"set -e\n{install} || {{ apt-get update -q && {install}; }}\n"
            meta = {"mutation": "rmlib", "library": lib["soname"], "package": pkg, "network": "host"}
        elif owner.get("dist") in dists:
            d = dists[owner["dist"]]
            fix = f"set -e\n{_install(facts, env, d['name'] + '==' + d['version'], True)}\n"
            meta = {"mutation": "rmlib", "library": lib["soname"], "distribution": d["name"], "network": "host"}
        else:
            continue
        carry = tuple(sorted({os.path.dirname(t) for t in targets} | set(_env_carry(env) if owner.get("dist") else ())))
        yield Mutation(kind=KIND, name=f"rmlib-{_slug(lib['soname'])}", site=f"lib:{lib['soname']}",
                       break_script="set -e\nrm -f " + " ".join(_q(t) for t in targets) + "\n", fix_script=fix,
                       carry=carry, patch_lines=1, files=tuple(targets), meta=meta)


def _script_mutations(facts: SourceFacts, env: dict, rng: random.Random) -> Iterator[Mutation]:
    """A console script the tests run: deleted, or pointing at an interpreter that does not exist."""
    for s in env.get("scripts", []):
        if not s.get("used_by_tests"):
            continue
        path, content, mode = s["path"], s["content"], s["mode"]
        fix = "set -e\n" + _write_file(path, content, mode)
        common = dict(kind=KIND, site=f"script:{s['name']}", fix_script=fix, carry=(os.path.dirname(path),),
                      patch_lines=content.count("\n") + 1, files=(path,))
        yield Mutation(name=f"script-gone-{_slug(s['name'])}", break_script=f"set -e\nrm -f {_q(path)}\n",
                       meta={"mutation": "script-deleted", "script": path}, **common)
        first, _, rest = content.partition("\n")
        if first.startswith("#!") and "python" in first:
            dead = re.sub(r"python[0-9.]*", "python2.7", first, count=1)
            if dead != first:
                yield Mutation(name=f"script-shebang-{_slug(s['name'])}",
                               break_script="set -e\n" + _write_file(path, dead + "\n" + rest, mode),
                               meta={"mutation": "script-interpreter", "script": path}, **common)


def _pth_mutations(facts: SourceFacts, env: dict, rng: random.Random) -> Iterator[Mutation]:
    """A `.pth` that puts a directory on sys.path (an editable install's), emptied."""
    for p in env.get("pth", []):
        if p.get("runs_code") or not p["content"].strip():
            continue
        yield Mutation(kind=KIND, name=f"pth-{_slug(Path(p['path']).stem)}", site=f"pth:{p['path']}",
                       break_script=f"set -e\n: > {_q(p['path'])}\n",
                       fix_script="set -e\n" + _write_file(p["path"], p["content"]),
                       carry=(os.path.dirname(p["path"]),), patch_lines=p["content"].count("\n") or 1,
                       files=(p["path"],), meta={"mutation": "pth-emptied", "file": p["path"]})


def _link_mutations(facts: SourceFacts, env: dict, rng: random.Random) -> Iterator[Mutation]:
    """The venv's `python` links (what the test command and every console script start) removed."""
    links = [l for l in env.get("links", []) if re.fullmatch(r"python[0-9.]*", os.path.basename(l["path"]))]
    if not links:
        return
    paths = " ".join(_q(l["path"]) for l in links)
    fix = "set -e\n" + "".join(f"ln -sfn {_q(l['target'])} {_q(l['path'])}\n" for l in links)
    yield Mutation(kind=KIND, name="interp-links", site=f"link:{env.get('bindir', '')}",
                   break_script=f"set -e\nrm -f {paths}\n", fix_script=fix, carry=(env.get("bindir", ""),),
                   patch_lines=len(links), files=tuple(l["path"] for l in links),
                   meta={"mutation": "interpreter-links", "links": json.dumps(links)})


def _config_mutations(facts: SourceFacts, env: dict, rng: random.Random) -> Iterator[Mutation]:
    """The venv's configuration file, deleted."""
    cfg = env.get("venv_cfg")
    if not cfg:
        return
    yield Mutation(kind=KIND, name="venvcfg-gone", site=f"config:{cfg['path']}",
                   break_script=f"set -e\nrm -f {_q(cfg['path'])}\n",
                   fix_script="set -e\n" + _write_file(cfg["path"], cfg["content"], 0o644),
                   carry=(cfg["path"],), patch_lines=cfg["content"].count("\n") or 1, files=(cfg["path"],),
                   meta={"mutation": "venv-config-deleted", "file": cfg["path"]})
