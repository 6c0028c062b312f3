"""`envyard setup` end to end: evidence → ranked candidates → search → image + contract → clean replay.

Levels: L0 every install step exits 0 · L1 the project's packages import from outside the source tree ·
L2 no missing imports across the repository (reported; does not gate) · L3 the test runner collects more than
zero tests · L4 the tests run, with per-test statuses and a pass ratio. The level reached is the highest with
every gating level below it passed. Verified = L4 with a pass ratio of at least 0.9, the project's Python files
unchanged, every service the tests expect provided, and a clean replay of the recipe on a fresh setup base
reaching the same level (the same number of tests collected; at L4 the tests run again and the per-test
statuses are compared and reported). A result the replay reproduced that falls short of that (L3 only, a lower
pass ratio, a service missing) is `partial`, saved as NAME:partial; anything else that installed is
`unverified`, saved as NAME:unverified (verdict.py).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import diskspace
from ..errors import BadInput, BaseBuildError
from ..store import ImageConfig
from ..store.dedupe import dedupe
from ..yard import Yard
from . import checkout_version, interpreters, pins, pkgcache, services, subproject, verdict
from .evidence import Evidence, gather
from .interpreters import Interpreter, SetupBaseError
from .plan import ENV, VENV, Recipe, plan, ranked_or_installed
from .replay import HeadStart, HeadStarts, pinned_env, system_steps
from .replay import replay as replay_recipe
from .search import Branch, LevelResult, Search, Update, Workspace, drop_image, first_branches
from .sources_fetch import missing_submodules

WORK_ROOT = "/work"
LEVEL_NAMES = {0: "install", 1: "imports", 2: "no missing imports", 3: "tests collected", 4: "tests run"}
UNVERIFIED_TAG = "unverified"
PARTIAL_TAG = "partial"
# Seconds the best-ranked branch runs alone before the next starts (search.Search.stagger), and how much longer
# at most while, installed, it passes level after level (search.Search.hold).
STAGGER = 10.0
HOLD = 30.0


def unverified_name(name: str, tag_word: str = UNVERIFIED_TAG) -> str:
    """Where an unverified result is saved: `repo:latest` → `repo:unverified`, `repo:TAG` → `repo:TAG-unverified`,
    so the plain name only ever holds a verified environment. A partial one likewise, with `partial`."""
    repo, sep, tag = name.split("@", 1)[0].rpartition(":")
    if not sep or "/" in tag:  # no tag (or a digest), or the colon was a registry's port
        repo, tag = name.split("@", 1)[0], "latest"
    return f"{repo}:{tag_word}" if tag == "latest" else f"{repo}:{tag[:116]}-{tag_word}"


def partial_name(name: str) -> str:
    """Where a partial result (reproduced, not verified) is saved: `repo:partial`, `repo:TAG-partial`."""
    return unverified_name(name, PARTIAL_TAG)


def saved_name(name: str, status: str) -> str:
    return name if status == "verified" else partial_name(name) if status == "partial" else unverified_name(name)


@dataclass
class SetupResult:
    name: str
    image: str | None
    level: int
    levels: list[LevelResult]
    recipe: Recipe | None
    tests: dict[str, str] = field(default_factory=dict)  # test id → passed/failed/error/skipped
    pass_ratio: float | None = None
    wall_time: float = 0.0
    reason: str = ""
    integrity: LevelResult | None = None
    replay: dict = field(default_factory=dict)  # the clean replay of setup.sh on a fresh base
    branches: list[dict] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    project_bug: dict = field(default_factory=dict)  # the project's own code failed: error, file, line, traceback
    connection: dict = field(default_factory=dict)  # failing tests that could not reach a server (verdict.py)
    missing_imports: int | None = None  # L2's count in the final environment (pyright's reportMissingImports)
    missing_modules: list[str] = field(default_factory=list)  # the top-level modules still missing
    completion: dict = field(default_factory=dict)  # what the completeness pass did (complete.py), when it ran
    project_dir: str = ""  # the project's directory in the repository ("" = its root; a monorepo's subdirectory)
    project_dir_why: str = ""
    dedupe: dict = field(default_factory=dict)  # files of the saved image shared with other layers (store/dedupe.py)

    @property
    def verified(self) -> bool:
        """L4 with a pass ratio of at least 0.9, sources unchanged, a clean replay reproduced it, and every
        service the tests expect was provided (a suite that cannot reach its database is not verified, whatever
        it collects)."""
        return self.status == "verified"

    @property
    def services_missing(self) -> dict[str, str]:
        return dict(self.recipe.services_missing) if self.recipe is not None else {}

    @property
    def status(self) -> str:
        """verified (image saved as `name`) · partial (reproduced by the replay but below verified: saved as
        `partial_name(name)`) · unverified (saved as `unverified_name(name)`) · project-bug (the project's own
        code fails; any image is an unverified one) · failed (nothing installed, no image)."""
        return self.status_with(image=bool(self.image))

    def status_with(self, *, image: bool) -> str:
        return verdict.status(level=self.level, pass_ratio=self.pass_ratio, replay_ok=bool(self.replay.get("ok")),
                              integrity_ok=self.integrity.ok if self.integrity is not None else None,
                              services_missing=bool(self.services_missing), project_bug=bool(self.project_bug),
                              image=image)

    @property
    def level_name(self) -> str:
        names = {lv.level: lv.name for lv in self.levels}
        return f"L{self.level} {names.get(self.level, LEVEL_NAMES.get(self.level, ''))}".strip() \
            if self.level >= 0 else "none (L0 install failed)"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["recipe"] = self.recipe.to_dict() if self.recipe else None
        d["verified"] = self.verified
        d["status"] = self.status
        d["level_name"] = self.level_name
        d.pop("log")
        d["tests_total"] = len(self.tests)
        d["tests"] = dict(sorted(self.tests.items())[:2000])
        return d


def setup_directory(yard: Yard, src: Path, name: str, *, jobs: int = 2, step_timeout: float = 1800,
                    test_timeout: float = 1800, on_update: Update | None = None,
                    available: list[Interpreter] | None = None, complete: bool = True,
                    time_limit: float | None = None, project_dir: str | None = None,
                    cache_identity: str | None = None) -> tuple[SetupResult, Evidence]:
    """Set up the project in `src` as image `name`. Raises on bad input; returns the result otherwise.
    `project_dir`: the project's directory inside the repository (None: found by subproject.find, "." the root).
    The whole repository is copied into the sandbox either way; steps and tests run in the project's directory.
    `cache_identity`: whose package cache the sandboxes get (pkgcache.py); None: `src`'s own."""
    start = time.monotonic()
    if not src.is_dir():
        gather(src)  # raises NotARepository with the cause and the fix
    diskspace.check(yard.store.home)  # a nearly full disk fails every branch half-way: say so before starting
    sub = subproject.find(src) if project_dir is None else subproject.given(src, project_dir)
    project = src / sub.subdir if sub else src
    ev = gather(project, repository=src if sub else None)
    checkout_version.resolve(ev)  # an untagged checkout of a project versioned from git tags: the release it follows
    available = available or interpreters.available()
    cands, available = ranked_or_installed(ev, available, yard.store.home / "cache")
    repo_dir = f"{WORK_ROOT}/{re.sub(r'[^A-Za-z0-9._-]', '_', src.resolve().name) or 'project'}"
    workdir = f"{repo_dir}/{sub.subdir}" if sub else repo_dir
    search = Search(yard, ev, project, workdir, available, jobs=jobs,
                    step_timeout=step_timeout, test_timeout=test_timeout, on_update=on_update, complete=complete,
                    time_limit=time_limit, upload=(src, repo_dir),
                    cache_identity=cache_identity or pkgcache.directory_identity(src), stagger=STAGGER, hold=HOLD)
    heads = HeadStarts(yard, search)

    def head_start(_b: Branch, ws: Workspace, recipe: Recipe, when: str) -> None:
        """The replay's installs start on the free core (replay.py)."""
        head = heads.current
        if not (when == "installed" and head is not None and not head.system_only):  # refused: no freeze for it
            heads.offer(HeadStart.pinned(search, ws, recipe), when)

    if search.jobs >= 2:
        search.on_ready = head_start
        system = system_steps([plan(ev, c) for c in first_branches(cands, search.jobs)])
        # (not while its setup base is still to be built: the branches build it, and can stop that on Ctrl-C)
        if system is not None and yard.store.has_image(system.interpreter.setup_base_name):
            heads.start(system)
    try:
        return _finish(yard, search, search.run(cands), heads.current, start, src, name, ev, sub, workdir)
    finally:
        heads.close()  # unused (no replay, or an error): its sandbox goes
        search.wheels.close()


def _finish(yard: Yard, search: Search, best: Branch, head: HeadStart | None, start: float, src: Path, name: str,
            ev: Evidence, sub: subproject.Choice | None, workdir: str) -> tuple[SetupResult, Evidence]:
    """The chosen branch replayed, judged, and saved under the name its status gives."""
    base_errors = [b.error for b in search.branches if isinstance(b.error, (SetupBaseError, BaseBuildError))]
    if best.level < 0 and base_errors and len(base_errors) == len(search.branches):
        raise base_errors[0]  # no candidate could even start: the machine's fault (exit 6), not the project's
    # The winner's snapshot keeps its temporary name until the replay has decided what it is: only a verified
    # environment is saved under `name`; anything else goes to `unverified_name(name)`.
    # The image's files shared with earlier images (store/dedupe.py) while the replay runs: its layers are
    # sealed, and the replay leaves a core free while it runs the tests.
    background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="envyard-dedupe")
    shared: Future | None = background.submit(dedupe, yard.store, best.image.layers) if best.image else None
    try:
        replay = (replay_recipe(yard, search, best, head) if best.level >= 3 and not best.bug else {})
    except BaseException:  # Ctrl-C (or a crash) during the replay: no half-verified image is left behind
        background.shutdown(wait=True)
        best.drop_images(yard)
        raise
    background.shutdown(wait=False)
    result = SetupResult(name=name, image=None, level=best.level, levels=best.levels, recipe=best.recipe,
                         tests=best.tests, pass_ratio=best.pass_ratio, reason=best.reason, integrity=best.integrity,
                         replay=replay, branches=[_summary(b) for b in search.branches], repairs=best.repairs,
                         log=_log(search.branches, best, replay), project_bug=best.bug.to_dict() if best.bug else {},
                         connection=best.connection, missing_imports=best.scan.get("missing"),
                         missing_modules=best.scan.get("modules", []), completion=best.completion,
                         project_dir=sub.subdir if sub else "", project_dir_why=sub.why if sub else "")
    if best.bug:
        result.reason = f"project bug: {best.bug.headline}"
    elif best.level >= 3 and not replay.get("ok"):
        result.reason = f"replay: {replay.get('detail', 'failed')}"
    elif best.integrity is not None and best.integrity.ok is False:
        result.reason = f"integrity: {best.integrity.detail}"
    elif best.level >= 3:  # reproduced: verified, or what keeps it partial
        l4 = [lv for lv in best.levels if lv.level == 4]
        result.reason = verdict.shortfall(
            level=best.level, pass_ratio=best.pass_ratio, tests=best.tests,
            l4_detail=l4[0].detail if l4 and l4[0].ok is False else "", services_missing=result.services_missing,
            conn=best.connection, provided=[s["kind"] for s in (best.recipe.services if best.recipe else [])]) \
            or result.reason
    missing = missing_submodules(src)
    if missing and not result.verified:  # a likelier cause than any the search could name
        result.reason = (f"{result.reason}; " if result.reason else "") + \
            f"the repository's git submodules are not checked out ({', '.join(missing)}): " \
            "run `git submodule update --init --recursive` in it, or give its git URL"
    if best.image is not None:
        recipe = best.recipe
        status = result.status_with(image=True)
        final = saved_name(name, status)
        config = ImageConfig(env={**ENV, **recipe.env}, workdir=workdir,
                             labels={"envyard.setup.level": str(best.level),
                                     "envyard.setup.verified": "true" if result.verified else "false",
                                     "envyard.setup.status": status},
                             provenance={"provider": "setup", "source": str(src.resolve()),
                                         "project_dir": result.project_dir, "level": best.level,
                                         "verified": result.verified, "status": status,
                                         "pass_ratio": best.pass_ratio, "interpreter": recipe.interpreter.label,
                                         "cutoff": recipe.cutoff or "",
                                         # what `envyard derive` needs to run the tests again from the image alone
                                         "test_runner": recipe.test_runner, "test_command": recipe.test_command,
                                         "packages": recipe.packages,
                                         "services": [s["kind"] for s in recipe.services]})
        result.image = yard.store.put_image(final, best.image.layers, config).name
        drop_image(yard, best.image)  # only the temporary name goes; the layers stay with the saved image
        # Earlier tries of this name that this one supersedes: a verified run replaces both, a partial one the
        # unverified one. A plain-named (verified) image is never removed by a lesser result.
        stale = {"verified": [unverified_name(name), partial_name(name)], "partial": [unverified_name(name)]}
        for old in stale.get(status, []):
            if yard.store.has_image(old, exact=True):
                yard.store.remove_image(old)
        # the packages this environment shares with earlier ones (pytest, numpy, torch...) stored once
        result.dedupe = shared.result() if shared is not None else dedupe(yard.store, best.image.layers)
    result.wall_time = time.monotonic() - start
    return result, ev


def _summary(b: Branch) -> dict:
    return {"id": b.id, "candidate": b.cand.label, "why": b.cand.why, "state": b.state, "level": b.level,
            "pass_ratio": b.pass_ratio, "seconds": round(b.seconds, 1), "repairs": b.repairs, "reason": b.reason}


def _log(branches: list[Branch], best: Branch, replay: dict) -> list[str]:
    out = []
    for b in branches:
        out.append(f"\n===== branch {b.id}: {b.cand.label} ({b.state}{', chosen' if b is best else ''}) =====\n")
        out += b.log
    if replay:
        out.append("\n===== clean replay =====\n")
        out += replay.pop("log", [])
    return out


CONTRACT_FILES = ("envyard.toml", "setup.sh", "test.sh", "Dockerfile", "requirements.lock", "log.txt")
CONTRACT_HEADER = "# written by `envyard setup`"


def check_contract_dir(out: Path) -> None:
    """Refuse, before any work, a contract directory that setup could not (or should not) write: a file, an
    existing directory with other content (only an earlier contract, which setup overwrites, is fine), or a
    place this process cannot write. Raises BadInput with a one-line message."""
    import tempfile

    shown = str(out)
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise BadInput(f"--out {shown}: exists and is not a directory")
        entries = {p.name for p in out.iterdir()}
        if entries and not _is_contract(out):
            raise BadInput(f"--out {shown}: a non-empty directory that is not an envyard contract; "
                           "give a new or empty directory")
        probe_in = out
    else:
        probe_in = out.absolute().parent
        while not probe_in.exists() and probe_in != probe_in.parent:
            probe_in = probe_in.parent
        if not probe_in.is_dir():
            raise BadInput(f"--out {shown}: {probe_in} is not a directory")
    try:  # a real write, not os.access: root passes access checks on read-only mounts
        fd, probe = tempfile.mkstemp(prefix=".envyard-probe-", dir=probe_in)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise BadInput(f"--out {shown}: cannot write in {probe_in} ({e.strerror or e})") from None


def _is_contract(out: Path) -> bool:
    try:
        with open(out / "envyard.toml", encoding="utf-8", errors="replace") as f:
            return f.readline().startswith(CONTRACT_HEADER)
    except OSError:
        return False


def write_contract(out: Path, result: SetupResult, ev: Evidence) -> Path:
    """envyard.toml (evidence with provenance, recipe, verify results, baseline statuses), setup.sh, test.sh,
    Dockerfile, log. Without a recipe (no candidate could start) only envyard.toml and the log are written."""
    out.mkdir(parents=True, exist_ok=True)
    r = result.recipe
    if r is not None:
        prelude = "".join(f"{c}\n" for c in r.interpreter.base_commands())
        (out / "setup.sh").write_text(
            "#!/bin/sh\n# Replays envyard's recipe from the project root, as root, on "
            f"{_debian_of(r.interpreter)} (Python {r.interpreter.version} at {r.interpreter.path}).\n"
            + (f"# The project root is {result.project_dir}/ in the repository: run this (and test.sh) there.\n"
               if result.project_dir else "") + "set -eu\n"
            f"# the setup base: interpreter, toolchain, uv\n{prelude}"
            f"export {_exports(r)}\n"
            + (f"# the exact versions that passed (from {r.pins_source}){_pins_use(r)}\n"
               + pins.write_script(r.pins) if r.pins else "")
            + "".join(f"# {s.why}\n{s.command}\n" for s in r.steps)
            + (f"# the pinned versions, exactly (a no-op when every pin already holds)\n{pins.EXACT}\n"
               if r.pins else "")
            + (f"# the services the tests expect start (test.sh starts them before the tests)\n"
               f"{services.START} && {services.STOP}\n" if r.services else ""))
        start = (f"# the services the tests expect ({', '.join(s['kind'] for s in r.services)}), started here: they "
                 f"do not outlive a container's build step\n{services.START}\n") if r.services else ""
        (out / "test.sh").write_text(f"#!/bin/sh\nset -eu\n# {_runner_comment(r)}\nexport {_exports(r)}\n"
                                     f"{start}{r.test_command} \"$@\"\n")
        for f in ("setup.sh", "test.sh"):
            (out / f).chmod(0o755)
        (out / "Dockerfile").write_text(dockerfile(result))
        if r.pins:
            (out / "requirements.lock").write_text(f"# written by `envyard setup`: the exact versions that passed "
                                                   f"({r.pins_source})\n" + "".join(f"{p}\n" for p in r.pins))
    (out / "log.txt").write_text("".join(result.log))
    (out / "envyard.toml").write_text(_toml(result, ev))
    return out


def _runner_comment(r: Recipe) -> str:
    """Which runner test.sh uses and why, on one line."""
    if not r.test_source:
        return "the tests, as pytest's default discovery finds them"
    return f"the project's own test command `{r.test_source}` ({r.test_evidence}), run as {r.test_runner}"


def _pins_use(r: Recipe) -> str:
    return (": every install below is constrained to them" if r.pins_consistent else
            ": installed exactly at the end (`uv pip check` found conflicts, so they do not constrain each step)")


def _exports(r: Recipe) -> str:
    env = {k: v for k, v in ENV.items() if k != "PATH"} | pinned_env(r)
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + f" PATH=/opt/envyard/bin:{VENV}/bin:$PATH"


def _debian_of(interp: Interpreter) -> str:
    if interp.host_installed:
        return f"this host, or one with the same interpreter ({interp.origin})"
    return interp.provider.replace("debian:", "debian ") if interp.provider.startswith("debian:") else \
        "Debian 12 (bookworm) or this host"


def dockerfile(result: SetupResult) -> str:
    """A portable equivalent for Docker users (not built here: no registry is reachable). The host provider
    maps to debian:bookworm, whose python3 is the same 3.11; an interpreter installed on the host (pyenv, uv) to
    the python image of the same release, linked where the recipe expects it. Build from the repository's root
    (the project's, unless the project is a subdirectory of it): `docker build -f <contract>/Dockerfile .`"""
    r = result.recipe
    interp = r.interpreter
    origin = (f"# the environment was built with Python {interp.version} {interp.origin}; here the python image's"
              f" build of the same release stands in for it\n") if interp.host_installed else ""
    runs = "".join(f"RUN {c}\n" for c in interp.docker_commands())
    if r.pins:
        runs += f"# the exact versions that passed (from {r.pins_source}){_pins_use(r)}\n"
        runs += pins.docker_run(r.pins)
    runs += "".join(f"# {s.why}\nRUN {s.command}\n" for s in r.steps)
    runs += f"RUN {pins.EXACT}\n" if r.pins else ""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in ({**ENV, **pinned_env(r)}).items() if k != "PATH")
    start = f"{services.START} && " if r.services else ""  # services do not outlive a RUN: started with the tests
    into = (f"# the Python project is a subdirectory of the repository\n"
            f"WORKDIR {WORK_ROOT}/project/{result.project_dir}\n" if result.project_dir else "")
    return ("# written by `envyard setup`; build from the repository's root: docker build -f PATH/TO/Dockerfile .\n"
            f"{origin}FROM {interp.docker_base()}\n"
            "RUN apt-get update && apt-get install -y --no-install-recommends "
            + " ".join(interpreters.DEBIAN_PACKAGES) + " && rm -rf /var/lib/apt/lists/*\n"
            "RUN python3 -m venv /opt/envyard/uv && /opt/envyard/uv/bin/pip install uv"
            " && mkdir -p /opt/envyard/bin && ln -s /opt/envyard/uv/bin/uv /opt/envyard/bin/uv\n"
            f"ENV {env} PATH=/opt/envyard/bin:{VENV}/bin:$PATH\n"
            f"WORKDIR {WORK_ROOT}/project\nCOPY . .\n{into}{runs}"
            f'CMD ["sh", "-c", {json.dumps(start + r.test_command + (" -q" if r.test_runner == "pytest" else ""))}]\n')


def _toml(result: SetupResult, ev: Evidence) -> str:
    q = _toml_str
    lines = [CONTRACT_HEADER, "[result]", f"name = {q(result.name)}",
             f"image = {q(result.image or '')}", f"project_dir = {q(result.project_dir or '.')}",
             f"level = {result.level}",
             f"pass_ratio = {result.pass_ratio if result.pass_ratio is not None else -1}",
             f"reason = {q(result.reason)}", f"wall_time_s = {result.wall_time:.1f}",
             f"integrity = {q(result.integrity.detail if result.integrity else 'not checked')}",
             f"verified = {'true' if result.verified else 'false'}", f"status = {q(result.status)}",
             f"replay = {q(result.replay.get('detail', 'not run (below L3)'))}",
             f"missing_imports = {result.missing_imports if result.missing_imports is not None else -1}",
             f"missing_modules = {json.dumps(result.missing_modules[:200])}",
             f"warnings = {json.dumps(result.recipe.warnings if result.recipe is not None else [])}", ""]
    c = result.completion
    if c:
        lines += ["[completeness]  # the completeness pass: what the code imports, installed (a transaction)",
                  f"kept = {'true' if c.get('kept') else 'false'}", f"detail = {q(str(c.get('detail', '')))}",
                  f"missing_before = {c.get('missing_before', -1)}", f"missing_after = {c.get('missing_after', -1)}",
                  f"installed = {json.dumps(c.get('installed', []))}", f"mapped = {json.dumps([f'{m}={d}' for m, d in c.get('mapped', {}).items()])}",
                  f"not_installed = {json.dumps(c.get('not_installed', []))}", f"seconds = {c.get('seconds', 0)}", ""]
    for lv in result.levels:
        lines += ["[[level]]", f"level = {lv.level}", f"name = {q(lv.name)}",
                  f"ok = {'true' if lv.ok else 'false' if lv.ok is False else q('not run')}",
                  f"detail = {q(lv.detail)}", ""]
    r = result.recipe
    if r is not None:
        lines += ["[recipe]", f"interpreter = {q(r.interpreter.provider + ' ' + r.interpreter.version)}",
                  f"interpreter_path = {q(r.interpreter.path)}",
                  f"interpreter_origin = {q(r.interpreter.origin or r.interpreter.provider)}",
                  f"cutoff = {q(r.cutoff or '')}", f"test_runner = {q(r.test_runner)}",
                  f"test_command = {q(r.test_command)}", f"test_collect = {q(r.test_collect or '')}",
                  f"test_source = {q(r.test_source)}", f"test_evidence = {q(r.test_evidence)}"]
        lines += [f"env.{k} = {q(v)}" for k, v in r.env.items()] + [""]
        if r.pins:
            lines += ["[pins]  # the exact versions that passed; setup.sh and the Dockerfile install them",
                      f"source = {q(r.pins_source)}", f"file = {q('requirements.lock')}",
                      f"constrain_steps = {'true' if r.pins_consistent else 'false'}",
                      f"versions = {json.dumps(r.pins)}", ""]
        for s in r.steps:
            lines += ["[[recipe.step]]", f"kind = {q(s.kind)}", f"command = {q(s.command)}", f"why = {q(s.why)}", ""]
        for svc in r.services:  # started by /opt/envyard/services/start.sh before the tests
            where = ([f"display = {q(':' + str(svc['port']))}"] if svc["kind"] == "xvfb"
                     else [f"host = {q('127.0.0.1')}", f"port = {svc['port']}"])
            lines += ["[[service]]", f"kind = {q(svc['kind'])}", *where,
                      f"packages = {json.dumps(svc['packages'])}",
                      f"users = {json.dumps([u for u, _ in svc['users']])}",
                      f"databases = {json.dumps([d for d, _ in svc['databases']])}",
                      f"init_sql = {json.dumps(svc.get('init_sql', []))}",
                      *([f"tls_port = {svc['tls_port']}", f"tls_files = {json.dumps(svc.get('tls_files', []))}"]
                        if svc.get("tls_port") else []),
                      f"start = {q(services.START)}", f"evidence = {json.dumps(svc['evidence'])}", ""]
        if r.services_missing:
            lines += ["[services_missing]  # the tests expect them; envyard cannot provide them"]
            lines += [f"{q(k)} = {q(v)}" for k, v in r.services_missing.items()] + [""]
    for b in result.branches:
        lines += ["[[branch]]", f"candidate = {q(b['candidate'])}", f"why = {q(b['why'])}", f"state = {q(b['state'])}",
                  f"level = {b['level']}", f"seconds = {b['seconds']}", f"reason = {q(b['reason'])}",
                  f"repairs = {json.dumps(b['repairs'])}", ""]
    for f in ev.facts:
        lines += ["[[evidence]]", f"kind = {q(f.kind)}", f"value = {q(str(f.value))}", f"file = {q(f.file)}",
                  f"line = {f.line or 0}", f"via = {q(f.via)}", ""]
    lines.append("[baseline]")
    lines += [f"{q(tid)} = {q(status)}" for tid, status in sorted(result.tests.items())]
    return "\n".join(lines) + "\n"


def _toml_str(s: str) -> str:
    return json.dumps(s)  # JSON's string escapes are all valid in a TOML basic string
