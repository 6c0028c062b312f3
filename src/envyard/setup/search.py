"""The search: candidate recipes run as branches in parallel sandboxes over shared setup bases.

Each branch climbs the ladder for one candidate. Every install step is a transaction: the sandbox is
snapshotted before it, and when it fails the output is diagnosed (repairs.py) and the branch rolls back to that
snapshot, applies the fix and tries the step again, instead of starting over. Fixes that need another
starting point (an older/newer Python, a dependency cut-off) end the branch and queue a new candidate that
carries the repairs learned so far.

The coordinator runs at most `jobs` branches at once: the ranked candidates (for an old source, with and
without a dependency cut-off) speculatively, fallbacks (other interpreters) only once those have failed. The first branch that reaches L4 with a pass ratio of
at least GOOD_RATIO wins and the others are cancelled (their sandboxes closed, their snapshots deleted). Once
any branch reaches L3, no new candidates start; the best finished branch wins.
"""

from __future__ import annotations

import concurrent.futures as cf
import copy
import json
import os
import re
import shlex
import threading
import time
import traceback
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from packaging.utils import canonicalize_name
from packaging.version import Version

from .. import diskspace
from ..errors import DiskFull, EnvyardError
from ..runtime.podnet import PodNetwork
from ..store import Image
from ..tls import ca_bundle
from ..yard import Sandbox, Yard
from . import complete, hosts, importscan, pins, pkgcache, runners, services, testuser
from .verdict import GOOD_RATIO, connection_failures
from .evidence import Evidence
from .interpreters import SETUP_DISK, Interpreter, minor, setup_base
from .plan import (APT_INSTALL, ENV, INSTALL, OVERRIDES, VENV, Candidate, Recipe, Step, apt_packages, apt_step,
                   as_of_step, cutoff_of, plan, runtime_dependencies, source_date)
from . import modules
from .bugs import ProjectBug, guarded_imports, project_bug
from .repairs import Fix, _stdlib, diagnose, missing_modules
from .sources.knowledge import pytest_plugins, system_packages
from .wheelhouse import Wheelhouse

JUNIT = "/tmp/envyard-junit.xml"
SCAN_SCRIPT = "/tmp/envyard-importscan.py"
MAX_REPAIRS = 4  # fixes tried for one failing step or level
MAX_BRANCHES = 5
MAX_RETRIES = 2  # times an install step is run again after a network failure
MAX_OWN_RUNNERS = 3  # the project's runners tried when pytest's discovery ran the tests but few passed
# pytest's own words when a test reads stdin under its output capture (its advice: use `-s`)
CAPTURED_STDIN = re.compile(r"reading from stdin while output is captured")
# The modules given as arguments that cannot be imported (find_spec finds nothing), one per line.
FIND_SPECS = "import importlib.util, sys\nfor m in sys.argv[1:]:\n    if importlib.util.find_spec(m) is None: print(m)"
MISSING_FIXTURE = re.compile(r"\bfixture '(\w+)' not found")  # pytest's words for a fixture no plugin provides
MAX_WIDER = 2  # the project's runners collected beside the first that did, when their file patterns find more
UV_CACHE = "/root/.cache/uv"
INSIDE_CA = "/etc/envyard-host-ca.crt"
# Whether Debian has NAME.
DEBIAN_HAS = ("(apt-cache show --no-all-versions {name} || (apt-get update -qq && apt-cache show --no-all-versions "
              "{name})) >/dev/null 2>&1")


def first_branches(cands: list[Candidate], jobs: int) -> list[Candidate]:
    """The candidates Search.run starts at once: the first, and after it up to `jobs` in all until a fallback."""
    first = cands[:1]
    for c in cands[1:jobs]:
        if c.fallback:
            break
        first.append(c)
    return first


def host_trust() -> tuple[dict[str, str], dict[str, str]]:
    """The machine's CA bundle, bound read-only into setup sandboxes (binds, env), so installs work behind a
    TLS-intercepting proxy, on Debian bases too. Setup-time only: images do not keep it."""
    bundle = ca_bundle()
    return ({bundle: INSIDE_CA}, {"SSL_CERT_FILE": INSIDE_CA}) if bundle else ({}, {})


def setup_sandbox(yard: Yard, image: Image, cache: Path, network: "str | PodNetwork" = "host",
                  ro_binds: dict[str, str] | None = None) -> Sandbox:
    """A sandbox for setup work: network on (the host's, or a pod network with internet access), the shared uv
    download cache, the machine's CA bundle, and on the host's network the package indexes' addresses
    (hosts.py); `ro_binds` besides (the replay's wheelhouse)."""
    ro = {**host_trust()[0], **(ro_binds or {})}
    if network == "host" and (names := hosts.hosts_file(yard.store.home / "cache")) is not None:
        ro = {**ro, str(names): "/etc/hosts"}
    limit = setup_disk_limit(yard)
    limits = {"disk": limit} if limit else None
    return yard.sandbox(image, network=network, workdir="/", binds={str(cache): UV_CACHE}, ro_binds=ro, limits=limits)


def setup_disk_limit(yard: Yard) -> str | None:
    """What one setup sandbox may write, where this machine limits disks."""
    return SETUP_DISK if yard.can_limit_disk else None


def setup_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of setup's commands: the recipe's, with setup-time settings that images do not keep."""
    return {**ENV, **host_trust()[1], **hosts.res_options(), **(extra or {})}


@dataclass
class LevelResult:
    level: int
    name: str
    ok: bool | None  # None: not run
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Found:
    """What the search for a module's distribution found."""

    dist: str | None = None
    before: list[Step] = field(default_factory=list)  # Debian packages it needed, installed before it
    install_failed: bool = False  # a candidate did not install: that none provides the module is not certain


@dataclass
class Branch:
    id: int
    cand: Candidate
    rank: int
    state: str = "queued"  # queued | running | done | cancelled | error
    doing: str = ""
    recipe: Recipe | None = None
    levels: list[LevelResult] = field(default_factory=list)
    tests: dict[str, str] = field(default_factory=dict)
    repairs: list[str] = field(default_factory=list)
    spawned: list[Candidate] = field(default_factory=list)
    guessed: dict[str, str] = field(default_factory=dict)  # missing module → the distribution installed for it
    rejected: dict[str, set] = field(default_factory=dict)  # missing module → distributions that did not provide it
    image: Image | None = None  # the branch's final state, kept until the search decides
    collected: int = 0
    connection: dict = field(default_factory=dict)  # failing tests that could not reach a server (verdict.py)
    root_refusal: str = ""  # the last test run's line where a server refused to run as root (testuser.py)
    tests_timed_out: bool = False  # the last L4 run passed the test time limit
    captured_stdin: bool = False  # the last pytest run had tests fail for reading stdin under its output capture
    prepared: bool = False  # the project's preparation for its tests (test_prepare) was run
    missing_fixtures: tuple[str, ...] = ()  # fixtures the last pytest run did not find ("fixture 'mocker' not found")
    integrity: "LevelResult | None" = None  # the project's Python files unchanged by setup and tests
    started: float = 0.0
    ended: float = 0.0
    reason: str = ""
    error: Exception | None = None  # what ended the branch, when it was an error rather than a failed level
    log: list[str] = field(default_factory=list)
    ws: "Workspace | None" = None
    bug: ProjectBug | None = None  # a failure in the project's own code that no repair addresses: stops the search
    suspect: ProjectBug | None = None  # one a repair was still tried for: a bug if another branch meets it again
    sandboxes: set = field(default_factory=set)  # every sandbox the branch has open (its workspace, a base build)
    scan: dict = field(default_factory=dict)  # the last L2 scan: missing (count), modules, imports, files, entries
    completion: dict = field(default_factory=dict)  # what the completeness pass did (complete.py), when it ran
    won: bool = False  # L4 with a good pass ratio reached, before the integrity check and snapshot
    in_pass: bool = False  # in a completeness pass after its tests, which the time limit stops (not the branch)
    climbing: bool = False  # installed, and every level since passed, until its tests have run
    pass_lock: threading.Lock = field(default_factory=threading.Lock)

    def drop_images(self, yard: Yard) -> None:
        """Remove the branch's temporary image (its final state)."""
        if self.image is not None:
            drop_image(yard, self.image)
            self.image = None

    def stop_pass(self) -> bool:
        """Stop the completeness pass this branch runs after its tests (it rolls back and the branch goes on with
        what it had); False when the branch is not in one."""
        with self.pass_lock:
            if not self.in_pass or self.ws is None:
                return False
            self.ws.interrupt()
            return True

    @property
    def level(self) -> int:
        return reached(self.levels)

    @property
    def pass_ratio(self) -> float | None:
        return pass_ratio(self.tests)

    @property
    def good(self) -> bool:
        """The best reachable result: L4 with a good pass ratio, sources unchanged. It wins at once."""
        return (self.level >= 4 and (self.pass_ratio or 0) >= GOOD_RATIO
                and not (self.integrity is not None and self.integrity.ok is False))

    @property
    def seconds(self) -> float:
        return ((self.ended or time.monotonic()) - self.started) if self.started else 0.0


class Cancelled(Exception):
    """The search no longer needs this branch."""


class Stopped(Exception):
    """The optional work a branch was doing (a completeness pass after its tests) was stopped; it goes on."""


class Workspace:
    """A branch's sandbox, with transactions: `begin` snapshots, `rollback` reopens from that snapshot."""

    def __init__(self, yard: Yard, image: Image, cache: Path, cancel: threading.Event, log: list[str],
                 track: Callable[[Sandbox, bool], None], built: Callable[[str], object] | None = None,
                 ro_binds: dict[str, str] | None = None):
        self.yard, self.cache, self.cancel, self.log, self.track = yard, cache, cancel, log, track
        self.ro_binds = ro_binds  # besides setup_sandbox's own (Search.policy_binds)
        self.built = built  # told each successful command's stderr (uv's `Built NAME==VERSION`: wheelhouse.py)
        self.env = setup_env()
        self.snapshots: list[Image] = []
        self.sb: Sandbox | None = None
        self._lock = threading.Lock()
        self.interrupted = threading.Event()  # the work in progress was stopped: commands raise Stopped until rollback
        self._open(image)

    def _open(self, image: Image) -> None:
        with self._lock:
            if self.cancel.is_set():
                raise Cancelled()
            self.sb = setup_sandbox(self.yard, image, self.cache, ro_binds=self.ro_binds)
            self.track(self.sb, True)

    def sh(self, command: str, cwd: str, timeout: float):
        if self.cancel.is_set():
            raise Cancelled()
        if self.interrupted.is_set():
            raise Stopped()
        try:
            r = without_escapes(self.sb.exec(command, cwd=cwd, env=self.env, timeout=timeout, max_output=400_000))
        except EnvyardError:
            if self.cancel.is_set():
                raise Cancelled() from None
            if self.interrupted.is_set():
                raise Stopped() from None
            raise
        if self.interrupted.is_set():  # killed half-way: its result means nothing
            raise Stopped()
        self.log.append(f"$ {command}\n{r.stdout}{r.stderr}[exit {r.exit_code}{', timed out' if r.timed_out else ''}, "
                        f"{r.duration:.1f}s]\n")
        if r.exit_code != 0:  # a full disk is the machine's problem: stop the whole setup, blame nothing else
            full = diskspace.diagnose(self.yard.store.home, r.stdout + r.stderr, setup_disk_limit(self.yard))
            if full is not None:
                raise full
        elif self.built is not None:
            self.built(r.stderr)
        return r

    def begin(self) -> Image:
        """Seal the changes so far as a layer and continue in a fresh sandbox over it: each layer then holds
        one step's changes, so a snapshot copies only the last step's files, and a rollback is a restart."""
        snap = self.sb.snapshot(temporary=True)
        self.snapshots.append(snap)
        self.kill()
        self._open(snap)
        return snap

    def rollback(self, snap: Image) -> None:
        self.kill()
        self.interrupted.clear()
        self._open(snap)

    def interrupt(self) -> None:
        """Stop the command running now, from another thread, without cancelling the branch: it (and every
        command after it) raises Stopped until `rollback` reopens the sandbox from a snapshot."""
        self.interrupted.set()
        self.kill()

    def kill(self) -> None:
        """Close the sandbox; from another thread this stops whatever runs now (the branch sees Cancelled)."""
        with self._lock:
            if self.sb is not None:
                self.sb.close()
                self.track(self.sb, False)

    def close(self) -> None:
        self.kill()
        for snap in self.snapshots:
            drop_image(self.yard, snap)
        self.snapshots.clear()


def drop_image(yard: Yard, image: Image) -> None:
    try:
        yard.store.remove_image(image.name)
    except EnvyardError:
        pass


Update = Callable[[list[Branch]], None]


class Search:
    def __init__(self, yard: Yard, ev: Evidence, src: Path, workdir: str, available: list[Interpreter], *,
                 jobs: int = 2, step_timeout: float = 1800, test_timeout: float = 1800, on_update: Update | None = None,
                 complete: bool = True, time_limit: float | None = None, upload: tuple[Path, str] | None = None,
                 cache_identity: str | None = None, stagger: float = 0.0, hold: float = 0.0):
        self.yard, self.ev, self.src, self.workdir, self.available = yard, ev, src, workdir, available
        # What is copied into each sandbox, and where: the whole repository when the project is a subdirectory
        # of it (a monorepo), else the project itself at workdir.
        self.upload = upload or (src, workdir)
        self.time_limit = time_limit  # the search's own budget (s): at it, running branches stop, finished ones count
        # Seconds the first branch runs alone before the next starts (unless it ends sooner): a small project is
        # done in that time, and alone it leaves the other core to the replay's head start instead of a second
        # branch doing the same work. 0: all `jobs` branches start at once.
        self.stagger = stagger
        # Up to `hold` seconds more while the first branch, installed, climbs (imports, tests collected, their
        # run): it usually wins then, and a second branch beside it only slowed it, and had its completeness pass
        # come after its tests (one more run of them). A level that fails starts the held-back branches at once.
        self.hold = hold
        self.complete = complete  # run the completeness pass (complete.py) when L2 counts missing imports
        self.jobs, self.step_timeout, self.test_timeout = max(1, jobs), step_timeout, test_timeout
        self.on_update = on_update or (lambda _b: None)
        self.branches: list[Branch] = []
        self.cancel_all = threading.Event()
        # The source's own package cache (pkgcache.py): no other project's build has written into it.
        self.cache = pkgcache.scope_dir(yard.store.home, cache_identity or pkgcache.directory_identity(src))
        self.wheels = Wheelhouse(self.cache, yard.store.home / "cache" / "setup-wheels")  # closed by engine.py
        # PyPI's cache policy for uv in every setup sandbox, unless the project names indexes of its own.
        own = [url for url in ev.values("package_index") if not pkgcache.is_pypi(url)]
        policy = pkgcache.index_policy(yard.store.home, [ev.root, src], bool(own))
        self.policy_binds = {str(policy): pkgcache.INDEX_POLICY_INSIDE} if policy else {}
        self.manifest = source_manifest(src)
        self._cancels: dict[int, threading.Event] = {}
        self._live: set[Sandbox] = set()  # every sandbox the search has open, for Ctrl-C
        self._live_lock = threading.Lock()
        # Sandboxes share the host's network: servers of two branches would meet on one port. Test runs that
        # start services take turns (each stops its servers when it ends).
        self._services_lock = threading.Lock()
        self._won_lock = threading.Lock()
        # Called in a branch's thread when the replay's installs can start (engine.py, replay.HeadStarts), with
        # `when`: "installed" (its installs are done and no other branch runs: a core is free), "collected" (its
        # tests collect while another branch runs), "ready" (its tests collect and no other branch runs, or it
        # has won and the others are cancelled), "following" (the completeness pass of the best-ranked running
        # branch starts or installed something: the steps only; the replay's run of the tests waits for the pass).
        self.on_ready: Callable[[Branch, Workspace, Recipe, str], None] | None = None

    def track(self, sb: Sandbox, alive: bool = True) -> None:
        with self._live_lock:
            (self._live.add if alive else self._live.discard)(sb)

    # ---- coordinator ---------------------------------------------------------------------------------------

    def run(self, cands: list[Candidate]) -> Branch:
        queue = [Branch(i, c, i) for i, c in enumerate(cands)]
        # The branches that start together without a stagger: one held back by it still runs unless a branch won.
        first = {id(b) for b in [b for b in queue if not b.cand.fallback][:self.jobs]}
        seen = {(c.interpreter.provider, c.cutoff) for c in cands}
        running: dict[cf.Future, Branch] = {}
        settled = False
        winner: Branch | None = None
        stopper: Branch | None = None  # the branch that found a project bug
        signatures: set[tuple] = set()  # project-code failures seen so far
        pool = cf.ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="envyard-branch")
        deadline = time.monotonic() + self.time_limit if self.time_limit else None
        out_of_time = False
        try:
            while True:
                if deadline is not None and not out_of_time and time.monotonic() > deadline:
                    out_of_time = settled = True
                    queue.clear()
                    for other in running.values():
                        if other.stop_pass() or other.won:
                            continue  # its pass after the tests stops (it keeps what it had); a winner finishes
                        self._cancel(other, f"the search's time limit ({self.time_limit:.0f}s) passed")
                early = next((b for b in running.values() if b.won and b.state == "running"), None)
                if winner is None and early is not None:  # a good L4 reached: it has won
                    settled = True
                    queue.clear()
                    for other in running.values():
                        if other is not early and other.state == "running":
                            self._cancel(other, f"branch {early.id} won (L4, pass ratio {early.pass_ratio:.2f})")
                while queue and len(running) < self.jobs and len(self.branches) < MAX_BRANCHES:
                    if running and self._held_back():
                        break  # the first branch still runs alone
                    # once settled, only a branch the stagger held back (were it not for the stagger, it would
                    # be running) still starts, and not after a winner or the time limit
                    i = next((i for i, q in enumerate(queue) if not settled
                              or (id(q) in first and winner is None and not out_of_time)), None)
                    if i is None or (queue[i].cand.fallback and running):
                        break  # fallbacks wait until the better-ranked branches have failed
                    b = queue.pop(i)
                    b.id = len(self.branches)
                    self.branches.append(b)
                    self._cancels[b.id] = threading.Event()
                    b.state, b.started = "running", time.monotonic()
                    running[pool.submit(self._branch, b)] = b
                self.on_update(self.branches)
                if not running:
                    break
                done, _ = cf.wait(running, timeout=0.5, return_when=cf.FIRST_COMPLETED)
                for fut in done:
                    b = running.pop(fut)
                    b.ended = time.monotonic()
                    if isinstance(b.error, DiskFull):
                        raise b.error  # every other branch writes to the same disk: stop them all (below)
                    if b.state == "running":
                        b.state = "done"
                    for c in b.spawned:
                        key = (c.interpreter.provider, c.cutoff)
                        if key not in seen:
                            seen.add(key)
                            queue.insert(0, Branch(-1, c, b.rank))
                    if b.level >= 3:
                        settled = True
                    # never one the winner cancelled, nor one that got there after a winner still in its pass
                    if (b.good and winner is None and b.state == "done"
                            and (b.won or not any(o.won for o in running.values()))):
                        winner = b
                        for other in running.values():
                            self._cancel(other, f"branch {b.id} won (L4, pass ratio {b.pass_ratio:.2f})")
                    found = b.bug or b.suspect
                    if found is not None and b.state == "done":
                        if b.bug is None and found.signature in signatures:
                            b.bug = found  # the same failure in the project's code from another starting point
                        signatures.add(found.signature)
                    if b.bug is not None and b.state == "done" and stopper is None and winner is None:
                        stopper, settled = b, True
                        # no fallbacks: no other interpreter fixes the project's own code; older dependencies
                        # may (a changed API), so a cut-off branch held back by the stagger still runs
                        queue[:] = [q for q in queue if id(q) in first and q.cand.cutoff and not b.cand.cutoff]
                        for other in running.values():
                            if other.cand.cutoff and not b.cand.cutoff:
                                continue  # older dependencies may still fix it (a changed API): let it finish
                            self._cancel(other, f"branch {b.id} found a project bug: {b.bug.error[:120]}")
            finished = [b for b in self.branches if b.state == "done"]
            best = winner or max(finished or self.branches, key=lambda b: (b.level, b.pass_ratio or 0, -b.rank))
            if not finished and out_of_time:
                best = self._out_of_time(best)
            if winner is None and stopper is not None and best.level <= stopper.level:
                best = stopper
            for b in self.branches:
                if b is not best:
                    b.drop_images(self.yard)
            self.on_update(self.branches)
            return best
        except BaseException:
            self.cancel_all.set()
            for b in running.values():
                self._cancel(b)
            with self._live_lock:
                live = list(self._live)
            for sb in live:  # e.g. a setup base being built: stop it now rather than wait for it
                sb.close()
            pool.shutdown(wait=True, cancel_futures=True)
            for b in self.branches:
                b.drop_images(self.yard)
            raise
        finally:
            pool.shutdown(wait=True)

    def _held_back(self) -> bool:
        """Whether the branches after the first wait still (see `stagger` and `hold`)."""
        first, now = self.branches[0], time.monotonic()
        if now < first.started + self.stagger:
            return True
        return first.state == "running" and first.climbing and now < first.started + self.stagger + self.hold

    def _out_of_time(self, furthest: Branch) -> Branch:
        """No branch finished within the time limit: a failed result that says how far the furthest got (its
        levels are dropped: a stopped branch has no image to verify or replay)."""
        got = f"; the furthest ({furthest.cand.label}) had reached L{furthest.level}" if furthest.level >= 0 else ""
        furthest.reason = f"the search's time limit ({self.time_limit:.0f}s) passed before any branch finished{got}"
        furthest.levels, furthest.tests = [], {}
        return furthest

    def _cancel(self, b: Branch, why: str = "") -> None:
        """Stop a branch now: whatever it runs (an install, the test suite, a setup base's build) is killed
        with its sandbox, so the search does not wait for it."""
        b.state = "cancelled"
        b.reason = b.reason or (f"cancelled: {why}" if why else "cancelled")
        self._cancels[b.id].set()
        if b.ws is not None:
            b.ws.kill()
        with self._live_lock:
            live = list(b.sandboxes)
        for sb in live:
            sb.close()

    def _tracker(self, b: Branch) -> Callable[[Sandbox, bool], None]:
        def track(sb: Sandbox, alive: bool = True) -> None:
            with self._live_lock:
                (b.sandboxes.add if alive else b.sandboxes.discard)(sb)
            self.track(sb, alive)
            if alive and self._cancels[b.id].is_set():
                sb.close()  # cancelled while this sandbox was being opened
        return track

    # ---- one branch ----------------------------------------------------------------------------------------

    def _branch(self, b: Branch) -> None:
        cancel = self._cancels[b.id]
        try:
            self._climb(b, cancel)
        except Cancelled:
            b.state = "cancelled"
        except Exception as e:  # noqa: BLE001 - a branch's failure must reach the result, never vanish in its thread
            if cancel.is_set() or self.cancel_all.is_set():
                b.state = "cancelled"
            else:
                b.state, b.reason, b.error = "error", f"{type(e).__name__}: {e}", e
                if not isinstance(e, EnvyardError):
                    b.log.append(traceback.format_exc())
        finally:
            if b.ws is not None:
                b.ws.close()
                b.ws = None
            if b.state != "done" and b.state != "running":
                b.drop_images(self.yard)

    def _say(self, b: Branch, what: str) -> None:
        b.doing = what
        self.on_update(self.branches)

    def _climb(self, b: Branch, cancel: threading.Event) -> None:
        self._say(b, "preparing the setup base")

        def progress(message: str) -> None:
            # A Debian base being built (debootstrap, 30-120 s) stops at its next progress line: raising here
            # kills debootstrap and removes the partial build, so Ctrl-C/SIGTERM does not wait for it.
            if cancel.is_set():
                raise Cancelled()
            self._say(b, message)

        base = setup_base(self.yard, b.cand.interpreter, on_progress=progress, track=self._tracker(b))
        if cancel.is_set():
            raise Cancelled()
        b.recipe = recipe = plan(self.ev, b.cand)
        b.ws = ws = Workspace(self.yard, base, self.cache, cancel, b.log, self._tracker(b),
                              built=lambda out: self.wheels.record(b.cand.interpreter, out), ro_binds=self.policy_binds)
        ws.env.update(recipe.env)  # what the project's CI gives its tests (service URLs...)
        self._say(b, "copying the source")
        ws.sb.upload(*self.upload)
        b.levels.append(self._install(b, ws, recipe))
        b.climbing = bool(b.levels[-1].ok)
        if b.levels[-1].ok:
            if self._alone(b):  # a core is free (beside another branch's installs they slowed both: measured)
                self._ready(b, ws, recipe, "installed")
            b.levels.append(self._fixing_level(b, ws, recipe, 1, "imports", "import", self._imports))
            b.climbing = b.level >= 1 or b.levels[-1].ok is None
            if b.level >= 1 or b.levels[-1].ok is None:
                b.levels.append(self._scan(b, ws, recipe))
                b.levels.append(self._fixing_level(b, ws, recipe, 3, "tests collected", "collect", self._collect))
                b.climbing = self._collected(b)
                # Alone, the completeness pass runs before the tests: they then run once, with its installs, and
                # the replay's run of them begins beside theirs. Beside another branch it waits until the tests
                # have run and this branch has won (or failed): two passes at once only delayed the winner.
                first = self._pass_expected(b) and self._alone(b)
                pending = self._complete(b, ws, recipe) if first else None
                later = self._pass_expected(b) and not first
                if self._collected(b):  # the replay may start beside the run
                    if self._alone(b):
                        self._ready(b, ws, recipe, "ready")
                    elif not later:  # (beside both branches' tests it slowed the winner's: corner, nose2)
                        self._ready(b, ws, recipe, "collected")
                    b.levels.append(self._run_tests(b, ws, recipe))
                    if pending is not None:
                        self._settle_pass(b, ws, recipe, *pending)
                won = self._claim_win(b)
                b.climbing = False  # it has won (the held-back branches never start) or they may start now
                if won and not later:  # (a pass's first install has the replay follow it)
                    self._ready(b, ws, recipe)
                if later:
                    self._pass_after_tests(b, ws, recipe)
                b.integrity = self._integrity(b, ws)
        if b.levels[0].ok:
            self.pin(recipe, lambda command, timeout: ws.sh(command, "/", timeout))
            self._say(b, "snapshot")
            b.image = ws.sb.snapshot(temporary=True)  # saved under its final name by engine.py
        b.reason = b.reason or first_failure(b.levels)
        b.doing = f"L{b.level}" if b.level >= 0 else "failed"

    def _pass_expected(self, b: Branch) -> bool:
        """Whether the branch runs the completeness pass (L2 counts missing imports)."""
        return bool(self.complete and b.scan.get("missing") and not b.bug)

    @staticmethod
    def _collected(b: Branch) -> bool:
        return b.levels[-1].level == 3 and b.levels[-1].ok is True

    def _leads(self, b: Branch) -> bool:
        """Whether `b` is the best-ranked of the running branches (the replay's head start follows its pass)."""
        return not any(o.state == "running" and (o.rank, o.id) < (b.rank, b.id) for o in self.branches
                       if o is not b)

    def _alone(self, b: Branch) -> bool:
        return not any(o.state == "running" for o in self.branches if o is not b)

    def _claim_win(self, b: Branch) -> bool:
        """A branch at L4 with a good pass ratio has won, unless another got there first: the search keeps the
        first (the others are cancelled), whose head start the replay then uses."""
        with self._won_lock:
            b.won = b.good and not any(o.won and not self._cancels[o.id].is_set()
                                       for o in self.branches if o is not b)
        return b.won

    def _ready(self, b: Branch, ws: Workspace, recipe: Recipe, when: str = "ready") -> None:
        """Tell `on_ready` the replay of this branch's recipe may start (`when`: see on_ready)."""
        if self.on_ready is None or self._cancels[b.id].is_set():
            return
        if any(o.won and not self._cancels[o.id].is_set() for o in self.branches if o is not b):
            return  # another branch won (a moment before this one): the replay will be of its recipe
        try:
            self.on_ready(b, ws, recipe, when)
        except (Cancelled, Stopped):
            raise
        except Exception as e:  # noqa: BLE001 - what starts early only saves time; the branch goes on
            b.log.append(f"(the replay's head start did not start: {type(e).__name__}: {e})\n")

    def _follow(self, b: Branch, ws: Workspace, recipe: Recipe) -> None:
        """The completeness pass of the branch expected to win (_leads) starts, or installed something: the
        replay's head start installs it too, now, beside the pass (its run of the tests waits for the pass)."""
        if self._leads(b):
            self._ready(b, ws, recipe, "following")

    def pin(self, recipe: Recipe, sh: Callable[[str, float], object]) -> None:
        """Record in the recipe the exact versions its environment has (pins.py), with `sh(command, timeout)`
        running commands in that environment."""
        r = sh(pins.FREEZE, 300)
        freeze, own = (r.stdout, self.ev.values("project_name")) if r.exit_code == 0 else ("", [])
        recipe.pins = pins.parse_freeze(freeze, own)
        for release in pins.replaced_project(freeze, own):
            recipe.warnings.append(f"a step installed the release {release} over the project's source (a "
                                   "dependency pins it, and the checkout's own version differs, e.g. no git "
                                   "tags); the tests may have imported either")
        # pins constrain every step only when they agree with each other (installs one by one can leave an
        # environment whose requirements conflict; then resolving a step against all pins would fail)
        recipe.pins_consistent = bool(recipe.pins) and sh(pins.CHECK, 300).exit_code == 0
        # the lock constrained the installs only when its constraints file is not empty (a lock step that
        # could not export or install its pins empties it and says so)
        used = bool(recipe.lock_source) and sh(
            f"test -s {shlex.quote(recipe.env.get('UV_CONSTRAINT', ''))}", 60).exit_code == 0
        recipe.pins_source, warning = pins.source(recipe.lock_source, used)
        recipe.warnings += [warning] if warning else []

    def _install(self, b: Branch, ws: Workspace, recipe: Recipe) -> LevelResult:
        t = time.monotonic()
        i = 0
        while i < len(recipe.steps):
            step = recipe.steps[i]
            self._say(b, f"L0 {i + 1}/{len(recipe.steps)} {step.kind}")
            snap = ws.begin()
            r = ws.sh(step.command, self.workdir, self.step_timeout)
            advance = 1
            if r.exit_code != 0 and not r.timed_out:
                r, advance = self._repair_step(b, ws, recipe, i, snap, r)
            if r.exit_code != 0:
                why = "timed out" if r.timed_out else f"exited {r.exit_code}"
                return LevelResult(0, "install", False, f"step {i + 1} ({recipe.steps[i].kind}) {why}: "
                                   f"{telling_line(r.stderr or r.stdout)[:300]}", time.monotonic() - t)
            i += advance
        return LevelResult(0, "install", True, f"{len(recipe.steps)} steps", time.monotonic() - t)

    def _repair_step(self, b: Branch, ws: Workspace, recipe: Recipe, i: int, snap: Image, r):
        """Diagnose a failed install step; roll back to the snapshot before it, apply a fix, try again.
        Returns the last result and how many recipe steps the (possibly repaired) step now spans."""
        tried: set[tuple] = set()
        retries = 0
        base, carried = recipe.steps[i], []  # requirements left out stay left out while the next fix is tried
        for _ in range(MAX_REPAIRS):
            fixes = [f for f in [*self._lock_conflict(ws, recipe, r.stdout + r.stderr),
                                 *diagnose(r.stdout + r.stderr, stage="install", local=frozenset(recipe.packages),
                                           retried=retries >= MAX_RETRIES)]
                     if (f.kind, f.args) not in tried]
            self._note_bug(b, r.stdout + r.stderr, "install", final=not fixes)
            if not fixes:
                return r, 1
            fix = fixes[0]
            tried.add((fix.kind, fix.args))
            if fix.kind in ("python", "cutoff"):
                self._spawn(b, fix)
                return r, 1
            if fix.kind == "retry":
                retries += 1
                tried.discard((fix.kind, fix.args))
            self._say(b, f"repair: {fix.rule}")
            ws.rollback(snap)
            before, step = self._fix_steps(fix, recipe, base, ws)
            before = carried + before
            ok = True
            for extra in before:
                pre = ws.sh(extra.command, self.workdir, self.step_timeout)
                if pre.exit_code != 0:
                    ok, r = False, pre
                    break
            if not ok:
                ws.rollback(snap)
                continue
            r = ws.sh(step.command, self.workdir, self.step_timeout)
            if fix.kind != "retry":
                b.repairs.append(fix.why)
            if r.exit_code == 0:
                recipe.steps[i:i + 1] = [*before, step]
                return r, len(before) + 1
            if fix.kind == "drop":
                base, carried = step, before
        return r, 1

    def _lock_conflict(self, ws: Workspace, recipe: Recipe, output: str) -> list[Fix]:
        """A resolution that fails on a pin of the project's lock (a stale lock, whose versions the project's
        requirements now exclude): the fix is to stop using the lock, as when it cannot be exported."""
        path = recipe.env.get("UV_CONSTRAINT", "") if recipe.lock_source else ""
        if not path or "No solution found" not in output:
            return []
        pin = pins.lock_conflict(output, ws.sh(f"cat {shlex.quote(path)}", "/", 60).stdout)
        return [Fix("lock_drop", (path,), "lock-conflict", f"{recipe.lock_source} pins {pin}, which the "
                    "requirements exclude: the lock is not used")] if pin else []

    def _fix_steps(self, fix: Fix, recipe: Recipe, failed: Step, ws: Workspace) -> tuple[list[Step], Step]:
        """A fix as recipe steps: what to run first, and the failed step as it should run again."""
        why = f"repair ({fix.rule}): {fix.why}"
        if fix.kind == "lock_drop":  # an empty constraints file: every later install resolves freely
            return [Step("repair", f": > {shlex.quote(fix.args[0])}", why)], failed
        if fix.kind == "apt":
            return [apt_step(fix.args, why)], failed
        if fix.kind == "apt_drop" and failed.command.startswith(APT_INSTALL):
            keep = [p for p in apt_packages(failed) if p not in fix.args]
            if not keep:
                return [], Step("apt", "true", f"{failed.why}; {why}")
            return [], apt_step(keep, f"{failed.why}; {why}", recommends="--no-install-recommends" not in failed.command)
        if fix.kind == "drop":  # not on PyPI: install what Debian has under that name; leave it out of the step
            names = [n for n in fix.args if re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", n.lower())]
            debian = [n.lower() for n in names if ws.sh(DEBIAN_HAS.format(name=shlex.quote(n.lower())), "/",
                                                         300).exit_code == 0]
            before = [_override_step((f'{n}; sys_platform == "never"' for n in fix.args), why)]
            if debian:
                before.insert(0, apt_step(debian, f"{why}; Debian has {', '.join(debian)}"))
            recipe.notes.append(f"left out of the Python requirements (not on PyPI): {', '.join(fix.args)}"
                                + (f"; installed from Debian: {', '.join(debian)}" if debian else ""))
            return before, _with_overrides(failed, why)
        if fix.kind == "from_index":  # a URL that cannot be fetched: the index's release of that name instead
            recipe.notes.append(f"installed from the package index instead of their URL (not reachable): "
                                f"{', '.join(fix.args)}")
            return [_override_step(fix.args, why)], _with_overrides(failed, why)
        if fix.kind == "pip":
            return [Step("repair", recipe.install(quote(fix.args)), why)], failed
        if fix.kind in ("build_deps", "legacy_setuptools"):
            deps = [*fix.args, *(["setuptools", "wheel"] if fix.kind == "build_deps" else ["wheel"])]
            again = failed
            if failed.command.startswith(INSTALL) and "--no-build-isolation" not in failed.command:
                again = Step(failed.kind, failed.command.replace(INSTALL, INSTALL + " --no-build-isolation", 1), failed.why)
            return [Step("repair", recipe.install(quote(dict.fromkeys(deps))), why)], again
        if fix.kind == "legacy_editable" and " -e " in failed.command:
            wheel = Step(failed.kind, failed.command.replace(" -e ", " ", 1), f"{failed.why}; {why}")
            return [wheel], Step("repair", f"{VENV}/bin/python -m pip install -q --no-deps --no-build-isolation -e .", why)
        if fix.kind == "env":
            for pair in fix.args:
                k, _, v = pair.partition("=")
                ws.env[k] = v
                recipe.env[k] = v
            return [], failed
        return [], failed  # retry

    def _spawn(self, b: Branch, fix: Fix) -> None:
        """A fix that needs another starting point becomes a new candidate, carrying this branch's repairs."""
        interp, cutoff = b.cand.interpreter, b.cand.cutoff
        constraint = self.ev.python_constraint()
        fits = [i for i in self.available if constraint is None or _in(i.version, constraint)]
        if fix.kind == "cutoff":
            date = source_date(self.ev)
            if cutoff or not date:
                return
            cutoff = cutoff_of(date)
        else:
            want = fix.args[0] if fix.args else "older"
            here = minor(interp.version)
            others = [i for i in fits if (minor(i.version) < here if want == "older" else minor(i.version) > here)]
            if not others:
                return
            interp = max(others, key=lambda i: minor(i.version)) if want == "older" else min(others, key=lambda i: minor(i.version))
        carry = tuple(s for s in (b.recipe.steps if b.recipe else []) if s.kind in ("apt", "repair"))
        b.spawned.append(Candidate(interp, cutoff, f"branch {b.id}: {fix.why}", carry))
        b.reason = f"needs {'a dependency cut-off' if fix.kind == 'cutoff' else 'another Python'}: {fix.why}"

    def _note_bug(self, b: Branch, output: str, stage: str, *, final: bool) -> None:
        """Whether a failure is in the project's own code (bugs.py). With no repair left (`final`) that ends the
        search; when a repair is still tried, it only does if another branch meets the same failure."""
        found = project_bug(output, self.workdir, stage)
        if found is None:
            b.suspect = None if final else b.suspect
            return
        if final:
            b.bug, b.reason = found, f"project bug: {found.headline}"
            self._say(b, f"project bug: {found.error[:60]}")
        else:
            b.suspect = found

    def _fixing_level(self, b: Branch, ws: Workspace, recipe: Recipe, level: int, name: str, stage: str, check):
        """Run a check; on failure, try fixes from the diagnosis (no rollback: checks change nothing)."""
        t = time.monotonic()
        tried: set[tuple] = set()
        for _ in range(MAX_REPAIRS + 1):
            ok, detail, output = check(b, ws, recipe)
            if ok is not False:
                return LevelResult(level, name, ok, detail, time.monotonic() - t)
            fixes = [f for f in diagnose(output, stage=stage, local=frozenset(recipe.packages))
                     if (f.kind, f.args) not in tried and f.kind != "retry"]
            bug = None if fixes else project_bug(output, self.workdir, stage)  # read once for both checks below
            fixes = fixes or [f for f in self._guarded_import(ws, recipe, bug) if (f.kind, f.args) not in tried]
            prepared = None if fixes else self._prepare_for_tests(b, ws, recipe, bug)
            if prepared is True:
                continue
            self._note_bug(b, output, stage, final=not fixes)
            if b.bug and prepared:
                b.bug = replace(b.bug, note=prepared)
                b.reason = f"project bug: {b.bug.headline}"
            if not fixes:
                break
            fix = fixes[0]
            wrong = guessed_module(output, b.guessed) if fix.kind == "cutoff" else None
            if wrong:  # not a dependency newer than the project: a distribution guessed for a module was wrong
                fix = Fix("pip", (wrong,), "guess-was-wrong", f"{b.guessed[wrong]} does not provide what the project "
                          f"imports from {wrong}: another distribution")
            tried.add((fix.kind, fix.args))
            if fix.kind in ("python", "cutoff"):
                self._spawn(b, fix)
                break
            self._say(b, f"repair: {fix.rule}")
            if fix.rule in ("runtime-missing-module", "guess-was-wrong", "guarded-import"):
                before = self._probe_modules(b, ws, recipe, fix, output)
                if not before:
                    break
                recipe.steps.extend(before)
                b.repairs.append(before[-1].why.split(": ", 1)[-1])
                continue
            before, _ = self._fix_steps(fix, recipe, Step("check", "true", ""), ws)
            if any(ws.sh(s.command, self.workdir, self.step_timeout).exit_code != 0 for s in before):
                break
            recipe.steps.extend(before)
            b.repairs.append(fix.why)
        return LevelResult(level, name, False, detail, time.monotonic() - t)

    def _guarded_import(self, ws: Workspace, recipe: Recipe, bug: ProjectBug | None) -> list[Fix]:
        """A NameError in the project's code (`bug`) for a name an import guarded by `except ImportError` should
        have bound (bugs.guarded_imports): the guarded modules that do not import here are missing, not a bug."""
        guarded = [m for m in (guarded_imports(bug, self.ev.root) if bug else [])
                   if m not in recipe.packages and not _stdlib(m)]
        if not guarded:
            return []
        r = ws.sh(f"{VENV}/bin/python -c {shlex.quote(FIND_SPECS)} {quote(guarded)}", "/", 60)
        missing = r.stdout.split() if r.exit_code == 0 else []
        if not missing:
            return []
        return [Fix("pip", tuple(missing), "guarded-import",
                    f"{bug.error} ({bug.file}, line {bug.line}): that name comes from an import guarded by "
                    f"`except ImportError`, and {', '.join(missing)} is not installed → {' '.join(missing)}")]

    def _prepare_for_tests(self, b: Branch, ws: Workspace, recipe: Recipe,
                           bug: ProjectBug | None) -> bool | str | None:
        """A failure inside the project's own code, in a project whose test target first runs scripts of its own
        (`test_prepare`: babel's `make test` runs `import-cldr`, which builds the locale data a checkout lacks):
        run them once, as recipe steps, and try again (True). A preparation that fails says why, for the
        reason (a str); None when there is nothing to prepare."""
        prepare = [f for f in self.ev.of("test_prepare") if isinstance(f.value, dict)]
        if b.prepared or not prepare or bug is None:
            return None
        b.prepared = True
        steps = []
        for f in prepare:
            where = f"`make {f.value['target']}` ({f.file}:{f.line})"
            step = Step("prepare", f.value["command"], f"the tests' preparation: {where} runs it before the tests")
            self._say(b, f"preparing for the tests: {step.command[:60]}")
            r = ws.sh(step.command, self.workdir, self.step_timeout)
            if r.exit_code != 0:
                return (f"the tests' preparation `{step.command}` ({where}) failed here: "
                        f"{telling_line(r.stdout + r.stderr)[:200]}")
            steps.append(step)
        recipe.steps.extend(steps)
        b.repairs.append(f"{bug.stage} failed inside the project; its test target prepares first: ran "
                         + ", ".join(f"`{s.command}`" for s in steps))
        return True

    def _probe_modules(self, b: Branch, ws: Workspace, recipe: Recipe, fix: Fix, output: str) -> list[Step]:
        """For each missing module, candidate distributions one by one (modules.py): keep the first that, installed,
        provides the module and the names the project imports from it; uninstall a wrong one. Steps for the kept."""
        learned = modules.Learned(pkgcache.learned_path(self.cache))
        local = set(recipe.packages)
        if fix.rule in ("guess-was-wrong", "guarded-import"):
            wanted = list(fix.args)
        else:
            wanted = [m for m in missing_modules(output) if m not in local and not m.startswith("_")
                      and not _stdlib(m)]
        steps = []
        for module in wanted[:3]:
            known, dist = learned.get(module)
            if known and dist is None:
                continue
            rejected = b.rejected.setdefault(module, set())
            if module in b.guessed:  # the last guess turned out wrong: take it out, never offer it again
                wrong = b.guessed.pop(module)
                rejected.add(wrong)
                ws.sh(f"uv pip uninstall {shlex.quote(wrong)}", "/", 120)
                recipe.steps[:] = [s for s in recipe.steps if s.command != recipe.install(shlex.quote(wrong))]
                if learned.get(module) == (True, wrong):
                    learned.put(module, None)
            found = self._find_distribution(b, ws, module, modules.candidates(module, dist), rejected,
                                            lambda cand: recipe.install(shlex.quote(cand)), "repair")
            kept = found.dist
            if kept is None:
                if fix.rule == "runtime-missing-module" and not found.install_failed:
                    learned.put(module, None)
                continue
            learned.put(module, kept)
            b.guessed[module] = kept
            steps.extend(found.before)
            steps.append(Step("repair", recipe.install(shlex.quote(kept)),
                              f"repair (missing-module): {module} is provided by {kept}"
                              + (f" (tried and rejected: {', '.join(sorted(rejected))})" if rejected else "")))
        return steps

    def _complete(self, b: Branch, ws: Workspace, recipe: Recipe) -> tuple | None:
        """The completeness pass (complete.py), as one transaction: install what the project declares and what
        its code imports, then scan and collect the tests again. Kept for now when fewer imports are missing and
        the tests collect no worse; otherwise rolled back to the snapshot before it. Returns (what the branch had
        before it, that snapshot) when kept: a run of the tests with it settles it (_settle_pass)."""
        t = time.monotonic()
        before = (min(b.level, 3), None, b.scan["missing"])  # judged here on collection; the tests come after
        saved = self.state(b, recipe)
        self._follow(b, ws, recipe)  # the replay's installs need not wait for the pass's
        self._say(b, "completeness pass")
        snap = ws.begin()
        kept = self._complete_pass(b, ws, recipe, t, before, saved, snap)
        if not kept and b.won:  # a head start that followed the pass goes back to the recipe before it
            self._ready(b, ws, recipe)
        return (saved, snap) if kept else None

    def _complete_pass(self, b: Branch, ws: Workspace, recipe: Recipe, t: float, before: tuple, saved: tuple,
                       snap: Image) -> bool:
        done: list[str] = []
        failed: list[str] = []
        r = ws.sh(complete.FREEZE_STEP, self.workdir, 300)
        if r.exit_code != 0:
            b.completion = {"ran": False, "detail": f"could not record the installed versions (exit {r.exit_code})"}
            return False
        recipe.steps.append(complete.step("the versions installed so far constrain it", complete.FREEZE_STEP))

        def budget_left() -> bool:
            return time.monotonic() - t < complete.BUDGET_SECONDS

        listed = ws.sh(complete.EDITABLES, self.workdir, 60)
        name = complete.editable_name(listed.stdout, self.workdir) if listed.exit_code == 0 else None
        units = complete.declared_units(self.ev, recipe, name)
        if len(units) > 1:  # all at once first: one resolution instead of one per unit (most install together)
            self._say(b, f"completeness pass: {len(units)} declared units at once")
            args = " ".join(u.args for u in units)
            if ws.sh(complete.install_command(recipe, args), self.workdir, self.step_timeout).exit_code == 0:
                label = "; ".join(u.label for u in units)
                recipe.steps.append(complete.step(label, complete.install_command(recipe, args)))
                done += [u.label for u in units]
                units = []
                self._follow(b, ws, recipe)
        for unit in units:  # one by one: what installs is kept, what cannot is named
            if not budget_left():
                failed.append(f"{unit.label} (time budget spent)")
                continue
            self._say(b, f"completeness pass: {unit.label}")
            if ws.sh(complete.install_command(recipe, unit.args), self.workdir, self.step_timeout).exit_code == 0:
                parts, label = [unit.args], unit.label
            else:  # one extra, file line or group member that cannot install must not keep out the rest
                parts = [p for p in unit.parts if budget_left() and ws.sh(
                    complete.install_command(recipe, p), self.workdir, self.step_timeout).exit_code == 0]
                label = f"{unit.label} ({len(parts)} of {len(unit.parts)} parts)"
                failed.append(label if unit.parts else unit.label)
            for p in parts:
                recipe.steps.append(complete.step(label, complete.install_command(recipe, p)))
            if parts:
                done.append(label)
                self._follow(b, ws, recipe)
        scan = self._scan(b, ws, recipe) if done else None
        learned = modules.Learned(pkgcache.learned_path(self.cache))
        mapped: dict[str, str] = {}
        for module in complete.modules_to_map(b.scan.get("entries", []), set(recipe.packages)):
            if not budget_left():
                failed.append(f"module {module} (time budget spent)")
                continue
            known, dist = learned.get(module)
            if known and dist is None:
                continue
            found = self._find_distribution(b, ws, module,
                                            modules.candidates(module, dist)[:complete.MAX_CANDIDATES], set(),
                                            lambda c: complete.install_command(recipe, shlex.quote(c)),
                                            "completeness pass")
            kept = found.dist
            if kept is None:
                failed.append(f"module {module}")
                continue
            learned.put(module, kept)
            mapped[module] = kept
            recipe.steps.extend(found.before)
            recipe.steps.append(complete.step(f"{module} is imported; {kept} provides it",
                                              complete.install_command(recipe, shlex.quote(kept))))
            self._follow(b, ws, recipe)
        if mapped:
            scan = self._scan(b, ws, recipe)
        info = {"ran": True, "installed": done, "mapped": mapped, "not_installed": failed,
                "missing_before": before[2]}
        if scan is None:
            self.restore(b, recipe, saved)
            ws.rollback(snap)
            b.completion = {**info, "kept": False, "missing_after": before[2], "detail": "nothing more installed",
                            "seconds": round(time.monotonic() - t, 1)}
            return False
        if not scan.ok and b.scan["missing"] >= before[2]:
            after = (before[0], None, b.scan["missing"])  # nothing gained: no need to collect the tests again
        else:
            collected_before = any(lv.level == 3 for lv in b.levels)
            b.levels = [lv for lv in b.levels if lv.level < 2] + [scan]
            if collected_before:
                b.levels.append(self._fixing_level(b, ws, recipe, 3, "tests collected", "collect", self._collect))
            after = (b.level, None, b.scan["missing"])
        keep, why = complete.keeps(before, after)
        info.update(kept=keep, missing_after=after[2] if keep else before[2], detail=why, tested=f"L{after[0]}")
        if not keep:
            self._say(b, "completeness pass: rolling back")
            self.restore(b, recipe, saved)
            ws.rollback(snap)
        b.completion = {**info, "seconds": round(time.monotonic() - t, 1)}
        return keep

    def _pass_after_tests(self, b: Branch, ws: Workspace, recipe: Recipe) -> None:
        """The completeness pass of a branch whose tests ran without it (another branch ran beside them): its
        installs, then the tests again with them, judged against the run without (_settle_pass); the replay's
        run of them begins beside the branch's. A run without it that passed the time limit is not repeated.
        The search's time limit stops it (Branch.stop_pass): back to what the branch had before it."""
        saved, t = self.state(b, recipe), time.monotonic()
        snap = ws.begin()
        with b.pass_lock:
            b.in_pass = True
        try:
            self._pass_and_tests(b, ws, recipe)
        except Exception:  # noqa: BLE001 - once interrupted, whatever failed did so because its sandbox was killed
            if not ws.interrupted.is_set():
                raise
        finally:
            with b.pass_lock:  # from here on, the time limit cancels the branch instead of stopping the pass
                b.in_pass = False
        if ws.interrupted.is_set():
            self.restore(b, recipe, saved)
            ws.rollback(snap)
            b.completion = {"ran": True, "kept": False, "installed": [], "mapped": {}, "not_installed": [],
                            "missing_before": saved[7].get("missing", 0), "missing_after": saved[7].get("missing", 0),
                            "detail": "stopped: the search's time limit passed",
                            "seconds": round(time.monotonic() - t, 1)}
            if b.won:
                self._ready(b, ws, recipe)

    def _pass_and_tests(self, b: Branch, ws: Workspace, recipe: Recipe) -> None:
        pending = self._complete(b, ws, recipe)
        if pending is None or not self._collected(b):
            return
        saved = pending[0]
        if saved[8]:  # the run before the pass passed the time limit: it would again (dask: 600 s for nothing)
            b.levels += [lv for lv in saved[1] if lv.level == 4]
            b.completion["tests"] = "not run again: their run passed the time limit before the pass"
            return
        self._ready(b, ws, recipe, "ready" if self._alone(b) else "collected")
        b.levels.append(self._run_tests(b, ws, recipe))
        self._settle_pass(b, ws, recipe, *pending)
        if not b.won and self._claim_win(b):  # the tests first collected with the pass's installs (testtools)
            self._ready(b, ws, recipe)

    def _settle_pass(self, b: Branch, ws: Workspace, recipe: Recipe, saved: tuple, snap: Image) -> None:
        """The tests ran with the completeness pass's installs. When they ran without it before the pass
        (_pass_after_tests), the pass stays only when they are no worse with it (complete.keeps). When the pass
        came first, it stays when they are verified with it (L4, pass ratio >= GOOD_RATIO), when their run passed
        the time limit (again without it would only pass it again), or when they did not collect without it;
        otherwise they run again without it, and the same comparison decides. Not kept, the branch goes back to
        the state without it, with that run's results."""
        with_pass = (b.level, b.pass_ratio, b.scan["missing"])
        tested = _tested(*with_pass[:2])
        b.completion["tested"] = tested
        t = time.monotonic()
        if any(lv.level == 4 for lv in saved[1]):  # the run without it came first
            without = (reached(saved[1]), pass_ratio(saved[2]), saved[7].get("missing", 0))
            keep, why = complete.keeps(without, with_pass)
            if not keep:
                self.restore(b, recipe, saved)
                ws.rollback(snap)
        elif b.good or b.tests_timed_out or reached(saved[1]) < 3:
            if b.tests_timed_out:
                b.completion["tests"] = "not run again without the pass: their run passed the time limit"
            return
        else:
            self._say(b, "completeness pass: the tests again, without it")
            kept_state = self.state(b, recipe)
            snap_with = ws.begin()
            self.restore(b, recipe, saved)
            ws.rollback(snap)
            b.levels.append(self._run_tests(b, ws, recipe))
            without = (b.level, b.pass_ratio, b.scan["missing"])
            keep, why = complete.keeps(without, with_pass)
            if keep:
                self.restore(b, recipe, kept_state)
                ws.rollback(snap_with)
        b.completion.update(kept=keep, missing_after=with_pass[2] if keep else without[2], detail=why,
                            tested=f"{tested}; without it {_tested(*without[:2])}",
                            seconds=round(b.completion.get("seconds", 0) + time.monotonic() - t, 1))
        if not keep:
            self._say(b, "completeness pass: rolled back")
            if b.won:
                self._ready(b, ws, recipe)

    @staticmethod
    def state(b: Branch, recipe: Recipe) -> tuple:
        """What `restore` puts back: the recipe and the branch's results."""
        return (copy.deepcopy(recipe), list(b.levels), dict(b.tests), b.collected, dict(b.connection),
                list(b.repairs), dict(b.guessed), dict(b.scan), b.tests_timed_out, b.root_refusal)

    @staticmethod
    def restore(b: Branch, recipe: Recipe, saved: tuple) -> None:
        """Put back what the branch had when `saved` was taken (Search.state)."""
        (old, b.levels, b.tests, b.collected, b.connection, b.repairs, b.guessed, b.scan, b.tests_timed_out,
         b.root_refusal) = saved
        recipe.__dict__.update(old.__dict__)

    def _find_distribution(self, b: Branch, ws: Workspace, module: str, cands: list[str], rejected: set,
                           install: Callable[[str], str], doing: str) -> Found:
        """Install candidate distributions for `module` one by one; keep the first that provides the module and the
        names the project imports from it (modules.CHECK), uninstalling each wrong one. A candidate that always
        builds against Debian libraries (system_packages.toml: MySQLdb's mysqlclient) gets them first, as
        steps that go before its install."""
        names = modules.imported_names(self.src, module)
        found = Found()
        for cand in cands:
            if cand in rejected:
                continue
            self._say(b, f"{doing}: which distribution provides {module}? trying {cand}")
            entry = system_packages().get(canonicalize_name(cand))
            before = [apt_step(entry["debian"], f"repair (missing-module): {cand} builds against them")] \
                if entry and entry["when"] == "always" else []
            ok = all(ws.sh(s.command, self.workdir, self.step_timeout).exit_code == 0 for s in before)
            if not ok or ws.sh(install(cand), self.workdir, min(self.step_timeout, 600)).exit_code != 0:
                rejected.add(cand)
                found.install_failed = True
                continue
            c = ws.sh(f"{VENV}/bin/python -c {shlex.quote(modules.CHECK)} {quote([module, *names])}", "/", 120)
            if c.exit_code == 0:
                found.dist, found.before = cand, before
                return found
            rejected.add(cand)
            b.log.append(f"{cand} does not provide {module} as the project uses it: {c.stdout.strip()[:200]}\n")
            ws.sh(f"uv pip uninstall {shlex.quote(cand)}", "/", 120)
        return found

    # ---- the levels ----------------------------------------------------------------------------------------

    def _tests_sh(self, b: Branch, ws: Workspace, recipe: Recipe, command: str):
        """Run a command that collects or runs the tests: with the recipe's services started before it in the same
        sandbox (and stopped after it), one branch at a time."""
        if not recipe.services:
            return ws.sh(command, self.workdir, self.test_timeout)
        doing = b.doing.removesuffix(" with services")  # a second call in a row: say it once
        if not self._services_lock.acquire(blocking=False):
            self._say(b, f"{doing} (waiting: another branch's tests hold the service ports)")
            self._services_lock.acquire()
        try:
            self._say(b, f"{doing} with services")
            return services.run_with(lambda c, t: ws.sh(c, self.workdir, t), command, self.test_timeout)
        finally:
            self._services_lock.release()

    def _run_suite(self, b: Branch, ws: Workspace, recipe: Recipe, runner: runners.Runner):
        """(result, passed the time limit) of a run of the tests that reports each one; the run is interrupted
        shortly before the limit (runners.interrupting), so a suite too slow for it, or one that hangs, still
        says how far it got."""
        command, interrupt_at = runners.interrupting(runner.run(JUNIT), self.test_timeout)
        r = self._tests_sh(b, ws, recipe, f"rm -f {JUNIT}; {command}")
        interrupted = r.exit_code in (runners.INTERRUPTED_EXIT, 137) and r.duration >= interrupt_at - 1
        return r, r.timed_out or interrupted

    def _limit_detail(self, runner: runners.Runner, r, sb: Sandbox) -> str:
        """What a run that passed the time limit did: how many tests ran, and where it was interrupted."""
        detail = f"the test run passed the {self.test_timeout:.0f}s limit"
        ran = test_results(runner, r, sb)
        if ran:
            detail += f"; {len(ran)} tests ran before it ({runners.summary(ran)})"
        where = re.findall(r"^(\S+:\d+): KeyboardInterrupt\s*$", r.stdout + r.stderr + _spilled_tail(r), re.M)
        if where:
            detail += f"; interrupted at {where[-1].removeprefix(self.workdir.rstrip('/') + '/')}"
        return detail

    def _imports(self, b: Branch, ws: Workspace, recipe: Recipe):
        if not recipe.packages:
            return None, "no importable top-level package found", ""
        self._say(b, "L1 import " + ", ".join(recipe.packages))
        if not any(s.kind == "project" for s in recipe.steps):
            return self._imports_from_source(ws, recipe)
        # From /, not the source tree. Names the install did not put on sys.path at all (a stray script or a
        # docs package at the root) are skipped; an installed one that fails to import fails the level.
        r = ws.sh(f"{VENV}/bin/python -c {shlex.quote(IMPORT_CHECK)} {quote(recipe.packages)}", "/", 300)
        last = (r.stderr.strip().splitlines() or [""])[-1][:300]
        if r.exit_code != 0:
            return False, last, r.stdout + r.stderr
        imported, skipped, scripts = (r.stdout.split("\n") + ["", "", ""])[:3]
        if not imported.split():
            return False, "none of the project's packages is installed: " + ", ".join(recipe.packages), ""
        return True, imported.strip().replace(" ", ", ") + (f" (not installed, skipped: {skipped.strip()})"
                                                             if skipped.strip() else "") + \
            (f" (run as scripts when imported, skipped: {scripts.strip()})" if scripts.strip() else ""), ""

    def _imports_from_source(self, ws: Workspace, recipe: Recipe):
        """L1 for a project that is not packaged (scripts and requirements only): nothing installs its modules,
        so they are imported from the source tree, the root (and src/) on sys.path, as its tests import them. Each
        runs in its own process: a module that fails with ImportError fails the level (its traceback is the
        diagnosis); one that exits, times out or fails otherwise is a script that runs when imported, skipped."""
        r = ws.sh(f"{VENV}/bin/python -c {shlex.quote(IMPORT_FROM_SOURCE)} {quote(recipe.packages)}", self.workdir, 600)
        lines = (r.stdout.split("\n") + ["", ""])[:2]
        imported, skipped = lines[0].split(), lines[1].strip()
        if r.exit_code != 0:
            last = (r.stderr.strip().splitlines() or [f"exit {r.exit_code}"])[-1][:300]
            return False, last, r.stdout + r.stderr
        note = f" (run as scripts when imported, skipped: {skipped})" if skipped else ""
        if not imported:
            return None, "no module imports without running as a script" + note, ""
        return True, ", ".join(imported) + " from the source tree (not packaged)" + note, ""

    def _scan(self, b: Branch, ws: Workspace, recipe: Recipe) -> LevelResult:
        """L2: import statements across the repository that the environment cannot resolve (pyright-like)."""
        t = time.monotonic()
        self._say(b, "L2 missing-import scan")
        ws.sb.write_file(SCAN_SCRIPT, importscan.script_source())
        r = ws.sh(importscan.scan_command(f"{VENV}/bin/python", self.workdir, SCAN_SCRIPT), "/", 600)
        try:
            found = importscan.parse_scan(r.stdout)
        except ValueError:
            return LevelResult(2, "no missing imports", None, f"the scan gave no result (exit {r.exit_code})",
                               time.monotonic() - t)
        missing = found["missing"]
        b.scan = {"missing": len(missing), "imports": found["imports"], "files": found["files"],
                  "modules": sorted({m["module"].split(".")[0] for m in missing}), "entries": missing[:2000]}
        mods = sorted({m["module"] for m in missing})
        detail = (f"{len(missing)} missing imports ({', '.join(mods[:6])}{'…' if len(mods) > 6 else ''})"
                  if missing else f"all {found['imports']} imports resolve") + f" in {found['files']} files"
        return LevelResult(2, "no missing imports", not missing, detail, time.monotonic() - t)

    def _collect(self, b: Branch, ws: Workspace, recipe: Recipe):
        """L3: pytest's own discovery, then the project's own test commands (runners.py), until one finds tests;
        the recipe keeps the one that did. The output returned for diagnosis is the first runner's failure."""
        tried: list[tuple[runners.Runner, str]] = []
        output = ""
        candidates = runners.runners(self.ev, self.src)
        for i, runner in enumerate(candidates):
            ok, why, out, timed_out = self._try_runner(b, ws, recipe, runner)
            if ok:
                runner, why = self._widest(b, ws, recipe, runner, why, candidates[i + 1:])
                runners.use(recipe, runner)
                before = f" (tried first: {runners.describe(tried)})"[:400] if tried else ""
                shown = "" if not runner.source or runner.label in why else f" · {runner.label}"
                return True, why + shown + before, ""
            tried.append((runner, why))
            output = output or out
            if timed_out:
                break
        detail = tried[0][1] if len(tried) == 1 else runners.describe(tried)
        return False, detail[:1000], output

    def _widest(self, b: Branch, ws: Workspace, recipe: Recipe, found: runners.Runner, why: str,
                later: list[runners.Runner]) -> tuple[runners.Runner, str]:
        """A later runner of the project's whose file pattern finds test files the one that collected does not
        (nose2's `test-file-pattern = *test*.py`: pika's `channel_tests.py`) is collected too, and the one that
        collects the most tests is kept: L3/L4 mean the project's whole suite, not the part pytest's default
        names happen to find."""
        best, best_why, best_count = found, why, b.collected
        for runner in [r for r in later if r.wider and r.collect][:MAX_WIDER]:
            ok, detail, _out, timed_out = self._try_runner(b, ws, recipe, runner)
            if ok and b.collected > best_count:
                best, best_count = runner, b.collected
                best_why = f"{detail} · {runner.label}, more than {found.label} collects ({why})"
            if timed_out:
                break
        b.collected = best_count
        return best, best_why

    def _try_runner(self, b: Branch, ws: Workspace, recipe: Recipe,
                    runner: runners.Runner) -> tuple[bool, str, str, bool]:
        """(found tests, detail, output to diagnose, timed out) for one runner: its collect-only form, or — for
        a runner without one (Django, a script) — a run of the tests, whose results L4 then uses."""
        if runner.collect:
            self._say(b, "L3 collecting tests" + (f" with {runner.source}" if runner.source else ""))
            r = self._tests_sh(b, ws, recipe, runner.collect)
            count = listed(runner, r.stdout)
            down = services.start_failure(r.stderr) if r.exit_code == services.FAILED_EXIT else None
            if down:  # stop here: no other runner gets the service either
                return False, f"a service the tests expect did not start: {down}", "", True
            if r.timed_out:
                return False, f"collection passed the {self.test_timeout:.0f}s limit", "", True
            if r.exit_code in (0, 5) and count > 0 and not (runner.kind != "pytest" and r.exit_code):
                b.collected = count
                return True, f"{count} tests", "", False
            if count == 0 and r.exit_code in (0, 5):
                return False, "no tests collected", "", False
            output = r.stdout + r.stderr
            errors = [l.strip() for l in output.splitlines() if re.search(r"\w+Error\b|^ERROR ", l)]
            return False, (f"collection failed (exit {r.exit_code})" + (f": {errors[0][:200]}" if errors else "")), \
                output, False
        self._say(b, f"L3 running {runner.source}")
        r, passed_limit = self._run_suite(b, ws, recipe, runner)
        down = services.start_failure(r.stderr) if r.exit_code == services.FAILED_EXIT else None
        if down:
            return False, f"a service the tests expect did not start: {down}", "", True
        if passed_limit:
            return False, self._limit_detail(runner, r, ws.sb), "", True
        tests = test_results(runner, r, ws.sb)
        output = r.stdout + r.stderr
        if not tests or (runner.kind == "script" and r.exit_code != 0 and not runners.parse_verbose(output)):
            last = (output.strip().splitlines() or [""])[-1][:200]
            return False, f"no per-test results (exit {r.exit_code}): {last}", output, False
        b.tests, b.collected = tests, len(tests)
        b.connection = connection_failures(output=output)
        b.root_refusal = testuser.refusal(output) or ""
        return True, f"{len(tests)} tests (run at L3: {runner.kind} has no collect-only step)", "", False

    def _run_tests(self, b: Branch, ws: Workspace, recipe: Recipe) -> LevelResult:
        level = self._test_run(b, ws, recipe)
        if self._provide_services_found(b, ws, recipe):
            again = self._test_run(b, ws, recipe, rerun=True)
            again.seconds += level.seconds
            level = again
        level = self._own_runner_if_pytest_disagrees(b, ws, recipe, level)
        level = self._without_capture_if_pytest_asks(b, ws, recipe, level)
        level = self._plugins_for_missing_fixtures(b, ws, recipe, level)
        level = self._as_test_user(b, ws, recipe, level)
        return self._dependencies_as_of_source(b, ws, recipe, level)

    def _dependencies_as_of_source(self, b: Branch, ws: Workspace, recipe: Recipe,
                                   level: LevelResult) -> LevelResult:
        """The tests ran but too many failed, with the newest releases of what the project needs at run time: an
        API those dependencies changed after the project's source date is a common cause (testing.postgresql
        1.3 on testing.common.database 2.x). Those dependencies go back to their releases as of that date, the
        rest of the environment stays as it is (a whole-environment cut-off is a branch of its own), in a
        transaction kept, as a repair the contract keeps, only when the tests do better."""
        ratio, date = b.pass_ratio, source_date(self.ev)
        if (not level.ok or ratio is None or ratio >= GOOD_RATIO or b.connection or recipe.cutoff or not date
                or recipe.lock_source):
            return level
        before = pins.parse_freeze(ws.sh(pins.FREEZE, "/", 300).stdout)
        wanted = runtime_dependencies(self.ev, before)
        if not wanted:
            return level
        cutoff = cutoff_of(date)
        step = Step("repair", as_of_step(wanted, cutoff),
                    f"repair (dependencies-as-of-source): {', '.join(wanted)} as of {cutoff[:10]}")
        saved = (dict(b.tests), dict(b.connection))
        self._say(b, f"L4 pass ratio {ratio:.2f}: trying {', '.join(wanted)} as of {cutoff[:10]}")
        snap = ws.begin()
        r = ws.sh(step.command, self.workdir, self.step_timeout)
        after = pins.versions(pins.parse_freeze(ws.sh(pins.FREEZE, "/", 300).stdout)) if r.exit_code == 0 else {}
        changed = [f"{n} {v} → {after.get(n, '-')}" for n, v in pins.versions(before).items()
                   if after and after.get(n) != v]
        kept = changed and self._kept_if_better(
            b, ws, recipe, level, step, ratio,
            lambda: f"pass ratio {ratio:.2f} with the newest releases of the project's dependencies: "
                    f"{', '.join(changed)} (as of the source date {cutoff[:10]}), and the tests again")
        if kept:
            return kept
        b.log.append(f"dependencies as of {cutoff[:10]} did not help (exit {r.exit_code}, "
                     f"{len(changed)} changed): rolled back\n")
        b.tests, b.connection = saved
        ws.rollback(snap)
        return level

    def _kept_if_better(self, b: Branch, ws: Workspace, recipe: Recipe, level: LevelResult, step: Step,
                        ratio: float, why: Callable[[], str]) -> LevelResult | None:
        """The tests again after `step` (run in a transaction the caller began): kept — the step joins the recipe
        as a repair, `why()` says so — when more pass; None otherwise (the caller rolls back)."""
        again = self._test_run(b, ws, recipe, rerun=True)
        if not again.ok or (b.pass_ratio or 0.0) <= ratio:
            return None
        recipe.steps.append(step)
        b.repairs.append(why())
        again.seconds += level.seconds
        return again

    def _as_test_user(self, b: Branch, ws: Workspace, recipe: Recipe, level: LevelResult) -> LevelResult:
        """The tests started a server that refuses to run as root (testing.postgresql's initdb): they run again
        as an ordinary user (testuser.py), in a transaction kept, as a repair the contract keeps, only when
        they do better than before."""
        if not b.root_refusal or testuser.WRAPPER in recipe.test_command:
            return level
        why = b.root_refusal
        before = (level.ok, b.pass_ratio or 0.0)
        saved = (copy.deepcopy(recipe), dict(b.tests), dict(b.connection))
        self._say(b, "the tests start a server that refuses root: running them as an ordinary user")
        snap = ws.begin()
        s = testuser.step(os.path.relpath(self.upload[1], self.workdir))
        r = ws.sh(s.command, self.workdir, self.step_timeout)
        if r.exit_code == 0:
            ws.sh(f"rm -f {JUNIT}", "/", 30)  # root's report from the run before: the test user cannot replace it
            recipe.steps.append(s)
            recipe.test_command = testuser.wrap(recipe.test_command)
            recipe.test_collect = testuser.wrap(recipe.test_collect)
            again = self._test_run(b, ws, recipe, rerun=True)
            if again.ok and (not before[0] or (b.pass_ratio or 0.0) > before[1]):
                b.repairs.append(f"a server the tests start refused to run as root ({why!r}): the tests run as "
                                 f"{testuser.USER}, and again")
                again.seconds += level.seconds
                return again
        b.log.append(f"running the tests as {testuser.USER} did not help (set-up exit {r.exit_code}): rolled back\n")
        recipe.__dict__.update(saved[0].__dict__)
        b.tests, b.connection, b.root_refusal = saved[1], saved[2], ""
        ws.rollback(snap)
        return level

    def _own_runner_if_pytest_disagrees(self, b: Branch, ws: Workspace, recipe: Recipe,
                                        level: LevelResult) -> LevelResult:
        """pytest's default discovery ran the tests but most did not pass, and the project names its own runner
        (testscenarios' `python -m testtools.run testscenarios.test_suite` multiplies tests by scenarios, which
        pytest does not): run the project's runners too, and keep the first that does better on at least half as
        many tests. L3/L4 mean the project's tests as the project runs them."""
        ratio, count = b.pass_ratio, len(b.tests)
        if recipe.test_source or not level.ok or ratio is None or ratio >= GOOD_RATIO or b.connection:
            return level
        saved = (runners.of_recipe(recipe), dict(b.tests), dict(b.connection))
        for runner in [r for r in runners.runners(self.ev, self.src) if r.source][:MAX_OWN_RUNNERS]:
            self._say(b, f"L4 pass ratio {ratio:.2f} with pytest's discovery: trying {runner.source}")
            runners.use(recipe, runner)
            tried = self._test_run(b, ws, recipe, rerun=True)
            mine = b.pass_ratio
            if tried.ok and mine is not None and mine > ratio and len(b.tests) * 2 >= count:
                tried.detail += f" · {runner.label} (pytest's discovery: pass ratio {ratio:.2f} over {count} tests)"
                if runner.collect:  # what the replay compares its own collection with
                    c = self._tests_sh(b, ws, recipe, runner.collect)
                    b.collected = listed(runner, c.stdout)
                else:
                    b.collected = len(b.tests)
                tried.seconds += level.seconds
                return tried
        runners.use(recipe, saved[0])
        b.tests, b.connection = saved[1], saved[2]
        return level

    def _without_capture_if_pytest_asks(self, b: Branch, ws: Workspace, recipe: Recipe,
                                        level: LevelResult) -> LevelResult:
        """Tests that read stdin, or drive a subprocess's terminal IO, fail under pytest's output capture, and pytest
        says so ("reading from stdin while output is captured! Consider using `-s`"; invoke: 112 of 968 failed,
        and its own test task runs pytest with capture off). Run them again with `-s` and keep that when more
        pass: the contract's test command keeps the flag."""
        ratio = b.pass_ratio
        runner = runners.of_recipe(recipe)
        if (not b.captured_stdin or not level.ok or ratio is None or ratio >= GOOD_RATIO or runner.kind != "pytest"
                or " -s" in f"{runner.command} "):
            return level
        saved = (dict(b.tests), dict(b.connection))
        self._say(b, f"L4 pass ratio {ratio:.2f}, tests read stdin under pytest's capture: trying -s")
        runners.use(recipe, replace(runner, command=f"{runner.command} -s"))
        tried = self._test_run(b, ws, recipe, rerun=True)
        if tried.ok and b.pass_ratio is not None and b.pass_ratio > ratio:
            tried.detail += f" · with -s (under pytest's output capture: pass ratio {ratio:.2f})"
            tried.seconds += level.seconds
            b.repairs.append(f"tests failed reading stdin under pytest's output capture (pass ratio {ratio:.2f}): "
                             f"run with -s ({b.pass_ratio:.2f})")
            return tried
        runners.use(recipe, runner)
        b.tests, b.connection = saved
        return level

    def _plugins_for_missing_fixtures(self, b: Branch, ws: Workspace, recipe: Recipe,
                                      level: LevelResult) -> LevelResult:
        """Tests that use a plugin's fixture the project names nowhere envyard reads fail with "fixture 'mocker'
        not found". The plugins that provide those fixtures (data/pytest_plugins.toml [fixtures]) are installed
        and the tests run again, in a transaction kept, as a repair the contract keeps, only when more pass."""
        ratio = b.pass_ratio
        table = pytest_plugins()["fixtures"]
        wanted = list(dict.fromkeys(table[f] for f in b.missing_fixtures if f in table))
        if not level.ok or ratio is None or ratio >= GOOD_RATIO or not wanted:
            return level
        fixtures = [f for f in b.missing_fixtures if f in table]
        step = Step("repair", recipe.install(quote(wanted)),
                    f"repair (fixture-plugin): the tests use {', '.join(fixtures)}, which {', '.join(wanted)} "
                    "provides")
        saved = (dict(b.tests), dict(b.connection))
        self._say(b, f"L4 pass ratio {ratio:.2f}, fixtures not found ({', '.join(fixtures)}): "
                     f"installing {', '.join(wanted)}")
        snap = ws.begin()
        r = ws.sh(step.command, self.workdir, self.step_timeout)
        kept = r.exit_code == 0 and self._kept_if_better(
            b, ws, recipe, level, step, ratio,
            lambda: f"tests failed for want of the fixtures {', '.join(fixtures)} (pass ratio {ratio:.2f}): "
                    f"installed {', '.join(wanted)} ({b.pass_ratio:.2f})")
        if kept:
            return kept
        b.log.append(f"installing {', '.join(wanted)} for the missing fixtures did not help (exit {r.exit_code}): "
                     "rolled back\n")
        b.tests, b.connection = saved
        ws.rollback(snap)
        return level

    def _provide_services_found(self, b: Branch, ws: Workspace, recipe: Recipe) -> bool:
        """Failing tests that could not connect to a server envyard can provide, though no evidence named it
        (django-redis's settings say `redis://127.0.0.1:6379` in code): provide it with its defaults, as a repair
        the contract keeps. True when it was, and the tests should run again (once: it is then provided)."""
        have = {s["kind"] for s in recipe.services}
        kinds = [k for k in b.connection.get("services", []) if k in services.KINDS and k not in have]
        if not kinds:
            return False
        why = (f"{b.connection['tests']} failing tests could not connect to {', '.join(kinds)} "
               f"({b.connection['sample'][:120]!r})")
        wanted = [*map(services.from_dict, recipe.services), *(services.default(k, "the test run") for k in kinds)]
        steps = services.steps(wanted)
        self._say(b, f"providing {', '.join(kinds)}: the tests could not connect to it")
        for step in steps:
            r = ws.sh(step.command, self.workdir, self.step_timeout)
            if r.exit_code != 0:
                b.log.append(f"could not provide {', '.join(kinds)} found at run time: exit {r.exit_code}")
                return False
        recipe.steps.extend(steps)
        recipe.services = [s.to_dict() for s in wanted]
        for svc in wanted:  # DISPLAY, for an X display: the contract keeps it, the tests get it now
            for name, value in services.exports(svc).items():
                recipe.env.setdefault(name, value)
                ws.env.setdefault(name, value)
        b.repairs.append(f"{why}: provided, and the tests run again")
        return True

    def _test_run(self, b: Branch, ws: Workspace, recipe: Recipe, rerun: bool = False) -> LevelResult:
        t = time.monotonic()
        runner = runners.of_recipe(recipe)
        if runner.collect is None and b.tests and not rerun:  # L3 ran them already
            return self._missing_services(recipe, LevelResult(4, "tests run", True, runners.summary(b.tests)
                                                              + " (the L3 run)", 0.0))
        self._say(b, "L4 running the tests")
        r, passed_limit = self._run_suite(b, ws, recipe, runner)
        down = services.start_failure(r.stderr) if r.exit_code == services.FAILED_EXIT else None
        if down:
            return LevelResult(4, "tests run", False, f"a service the tests expect did not start: {down}",
                               time.monotonic() - t)
        b.root_refusal = testuser.refusal(r.stdout + r.stderr + _junit_text(runner, ws.sb)) or ""
        b.connection = run_connection_failures(runner, r, ws.sb)  # an interrupted run's too: a server may be why
        b.tests_timed_out = passed_limit
        b.captured_stdin = runner.kind == "pytest" and bool(CAPTURED_STDIN.search(r.stdout[-400_000:]))
        b.missing_fixtures = tuple(dict.fromkeys(MISSING_FIXTURE.findall(r.stdout[-400_000:]))) \
            if runner.kind == "pytest" else ()
        if passed_limit:  # what ran is told, not scored: a pass ratio over part of the suite is not the suite's
            b.tests = {}
            return LevelResult(4, "tests run", False, self._limit_detail(runner, r, ws.sb), time.monotonic() - t)
        b.tests = test_results(runner, r, ws.sb)
        if not b.tests:
            return LevelResult(4, "tests run", False, f"no per-test results (exit {r.exit_code})", time.monotonic() - t)
        return self._missing_services(recipe, LevelResult(4, "tests run", True, runners.summary(b.tests),
                                                          time.monotonic() - t))

    @staticmethod
    def _missing_services(recipe: Recipe, level: LevelResult) -> LevelResult:
        """L4 does not pass when the tests expect a service envyard cannot provide: whatever the pass ratio, some
        of the suite could not run as the project runs it."""
        if not recipe.services_missing:
            return level
        named = ", ".join(f"{k} ({where})" for k, where in recipe.services_missing.items())
        level.ok = False
        level.detail = f"the tests expect services envyard cannot provide: {named}; {level.detail}"
        return level

    def _integrity(self, b: Branch, ws: Workspace) -> LevelResult:
        """The project's Python sources and tests are byte-identical after setup and the test run."""
        t = time.monotonic()
        ws.sb.write_file("/tmp/envyard-manifest.json", json.dumps(self.manifest))
        r = ws.sh(f"{VENV}/bin/python -c {shlex.quote(CHECK_MANIFEST)} /tmp/envyard-manifest.json", self.workdir, 300)
        changed = r.stdout.split()
        if r.exit_code != 0 and not changed:
            return LevelResult(-1, "sources unchanged", None, f"check failed (exit {r.exit_code})", time.monotonic() - t)
        if changed:
            return LevelResult(-1, "sources unchanged", False, f"{len(changed)} files changed: {', '.join(changed[:5])}",
                               time.monotonic() - t)
        return LevelResult(-1, "sources unchanged", True, f"{len(self.manifest)} Python files checked", time.monotonic() - t)


# Imports each installed name given; prints the imported names, then the names not found at all, then the
# single-file modules that ran as scripts when imported and failed (flit's bootstrap_dev.py installs on import
# and refuses to run as root): skipped as long as some name imports. A package must import, and so must every
# module when nothing else does; an ImportError always counts.
IMPORT_CHECK = """import importlib, importlib.util, sys
names, sys.argv = sys.argv[1:], sys.argv[:1]  # a top-level script must not take these names for its arguments
specs = {n: importlib.util.find_spec(n) for n in names}
found = [n for n in names if specs[n] is not None]
imported, scripts = [], []
for n in found:
    try:
        importlib.import_module(n)
    except (SystemExit, Exception) as e:  # a top-level script that exits when imported has imported all the same
        if specs[n].submodule_search_locations is not None or isinstance(e, ImportError):
            raise
        if not isinstance(e, SystemExit):
            scripts.append((n, e))
            continue
    imported.append(n)
if scripts and not imported:
    raise scripts[0][1]
print(" ".join(imported))
print(" ".join(n for n in names if n not in found))
print(" ".join(n + "(" + type(e).__name__ + ")" for n, e in scripts))
"""

# Imports each name from the source tree (the working directory), each in its own process with a time limit.
# Prints the imported names, then the skipped ones with why; tracebacks of ImportErrors go to stderr (exit 1).
IMPORT_FROM_SOURCE = """import os, subprocess, sys
root = os.getcwd()
path = os.pathsep.join([root] + [os.path.join(root, "src")] * os.path.isdir("src"))
env = dict(os.environ, PYTHONPATH=path, PYTHONDONTWRITEBYTECODE="1")
imported, skipped, failed = [], [], []
for name in sys.argv[1:]:
    try:
        r = subprocess.run([sys.executable, "-c", "import " + name], cwd=root, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        skipped.append(name + "(timed out)")
        continue
    last = (r.stderr.strip().splitlines() or [""])[-1]
    if r.returncode == 0:
        imported.append(name)
    elif last.startswith(("ModuleNotFoundError", "ImportError")):
        failed.append(name)
        sys.stderr.write(r.stderr)
    else:
        kind = last.split(":")[0]
        skipped.append(name + "(" + (kind if kind.isidentifier() else "exit %d" % r.returncode) + ")")
print(" ".join(imported))
print(" ".join(skipped))
sys.exit(1 if failed else 0)
"""

# Prints each manifest path whose content differs (or is gone); runs with the environment's interpreter.
CHECK_MANIFEST = """import hashlib, json, os, sys
for path, digest in sorted(json.load(open(sys.argv[1])).items()):
    try:
        ok = hashlib.sha256(open(path, 'rb').read()).hexdigest() == digest
    except OSError:
        ok = False
    if not ok:
        print(path)
"""


# What a file a build writes says at its top: setuptools-scm, hatch-vcs, protobuf ("generated by"), numpy-style
# setup.py version files ("THIS FILE IS GENERATED FROM PYWAVELETS SETUP.PY")
GENERATED = re.compile(rb"generated (by|from)|setuptools[-_]scm|hatch[-_]vcs|track in version control|autogenerated",
                       re.I)


def source_manifest(src: Path) -> dict[str, str]:
    """sha256 of the project's Python files (sources and tests), relative to its root. Build metadata and files
    a build writes (e.g. setuptools-scm's `_version.py`, which says so in its first lines) are left out."""
    import hashlib

    out = {}
    for p in sorted(src.rglob("*.py*")):
        rel = p.relative_to(src)
        if p.suffix not in (".py", ".pyi") or not p.is_file() or p.is_symlink():
            continue
        if any(part.endswith(".egg-info") or part in (".git", ".tox", ".nox", "build", "__pycache__")
               for part in rel.parts):
            continue
        data = p.read_bytes()
        if GENERATED.search(data[:600]):
            continue
        out[str(rel)] = hashlib.sha256(data).hexdigest()
    return out


_NOT_THERE = re.compile(r"cannot import name '\w+' from '([\w.]+)'|module '([\w.]+)' has no attribute '\w+'")


def guessed_module(output: str, guessed: dict[str, str]) -> str | None:
    """The module whose distribution was guessed (not declared) and that lacks a name the code uses, if any."""
    for m in _NOT_THERE.finditer(output):
        top = (m.group(1) or m.group(2)).split(".")[0]
        if top in guessed:
            return top
    return None


def _override_step(lines, why: str) -> Step:
    """A recipe step adding lines to the overrides file every later install passes to uv."""
    return Step("repair", f"mkdir -p {os.path.dirname(OVERRIDES)} && printf '%s\\n' {quote(lines)} >> {OVERRIDES}", why)


def _with_overrides(step: Step, why: str) -> Step:
    """The failed install step again, obeying the overrides file."""
    if f"--override {OVERRIDES}" in step.command:
        return step
    return Step(step.kind, f"{step.command} --override {OVERRIDES}", f"{step.why}; {why}")


# A host that could not be reached, in the words of git, curl, cargo, pip and uv: the line that says why.
UNREACHABLE = re.compile(r"Could not resolve host|Temporary failure in name resolution|failed to lookup address|"
                         r"unable to access|Network is unreachable|dns error|Connection refused")


def telling_line(output: str) -> str:
    """The line of a failed step's output that says why: the last one naming an unreachable host, else the last
    one that is not uv's closing advice (`hint: Build failures usually indicate...`)."""
    lines = [line.strip() for line in output.strip().splitlines() if line.strip(" \t^~")]  # not uv's carets
    said = [line for line in lines if UNREACHABLE.search(line)] or \
        [line for line in lines if not line.startswith(("hint:", "help:"))] or lines or [""]
    return said[-1]


def quote(args) -> str:
    return " ".join(shlex.quote(a) for a in args)


def _in(version: str, constraint) -> bool:
    return Version(version) in constraint


def collected_count(stdout: str) -> int:
    """Tests pytest's --collect-only listed: its summary, else one count per file (`tests/test_a.py: 5`, what
    it prints at -qq: a project's addopts `-q` besides envyard's), else the test ids."""
    m = re.search(r"(\d+) tests? collected", stdout) or re.search(r"^(\d+) tests?", stdout, re.M)
    if m:
        return int(m.group(1))
    per_file = re.findall(r"^\S+\.py: (\d+)$", stdout, re.M)
    return sum(map(int, per_file)) if per_file else len([l for l in stdout.splitlines() if "::" in l])


def listed(runner: runners.Runner, stdout: str) -> int:
    """How many tests a runner's collect-only step listed (pytest's summary, or the unittest lister's lines)."""
    return collected_count(stdout) if runner.kind == "pytest" else runners.listed_count(stdout)


def test_results(runner: runners.Runner, r, sb: Sandbox) -> dict[str, str]:
    """Per-test statuses of a run of `runner.run(JUNIT)` (result `r`) in sandbox `sb`: pytest's JUnit XML, or
    the runner's own output (runners.native_results)."""
    if runner.kind != "pytest":
        return runners.native_results(runner, r.stdout + r.stderr, r.exit_code)
    try:
        return parse_junit(sb.read_file(JUNIT))
    except (FileNotFoundError, EnvyardError, ET.ParseError):
        return {}


def _spilled_tail(r, size: int = 8192) -> str:
    """The end of what a command printed beyond what its result holds in memory (pytest's summary comes last)."""
    try:
        with open(r.stdout_file, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - size))
            return _ESCAPES.sub(b"", f.read()).decode("utf-8", "replace")
    except (TypeError, OSError):
        return ""


_ESCAPES = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")  # terminal colour and cursor codes (CSI sequences)


def without_escapes(r):
    """`r` with terminal colour codes taken out of its output: a project that forces colour (dask's pytest
    addopts say `--color=yes`) must not hide its errors, counts and summaries from line-anchored parsers."""
    if b"\x1b[" not in r.stdout_bytes and b"\x1b[" not in r.stderr_bytes:
        return r
    return r.replace(stdout_bytes=_ESCAPES.sub(b"", r.stdout_bytes), stderr_bytes=_ESCAPES.sub(b"", r.stderr_bytes))


def _junit_text(runner: runners.Runner, sb: Sandbox) -> str:
    if runner.kind != "pytest":
        return ""
    try:
        return sb.read_file(JUNIT).decode("utf-8", "replace")
    except (FileNotFoundError, EnvyardError):
        return ""


def run_connection_failures(runner: runners.Runner, r, sb: Sandbox) -> dict:
    """Failing tests of a run that could not reach a server (verdict.connection_failures)."""
    if runner.kind == "pytest":
        try:
            return connection_failures(junit=sb.read_file(JUNIT))
        except (FileNotFoundError, EnvyardError):
            pass
    return connection_failures(output=r.stdout + r.stderr)


def parse_junit(data: bytes) -> dict[str, str]:
    """JUnit XML → {test id: passed|failed|error|skipped}."""
    statuses = {}
    for case in ET.fromstring(data).iter("testcase"):
        if not case.get("name"):  # the test an interrupt stopped: pytest writes it with no name and no outcome
            continue
        tid = f"{case.get('classname', '')}::{case.get('name', '')}"
        kinds = {child.tag for child in case}
        statuses[tid] = ("failed" if "failure" in kinds else "error" if "error" in kinds
                         else "skipped" if "skipped" in kinds else "passed")
    return statuses


def pass_ratio(tests: dict[str, str]) -> float | None:
    passed = sum(1 for s in tests.values() if s == "passed")
    counted = sum(1 for s in tests.values() if s in ("passed", "failed", "error"))
    return passed / counted if counted else None


def _tested(level: int, ratio: float | None) -> str:
    return f"L{level}" + (f", pass ratio {ratio:.3f}" if ratio is not None else "")


def reached(levels: list[LevelResult]) -> int:
    """The highest ladder level with every level below it passed or not run. L2 is reported but does not gate:
    optional imports (`try: import x`) that nothing needs count as missing there."""
    best = -1
    for lv in sorted(levels, key=lambda x: x.level):
        if lv.level == 2:
            continue
        if lv.ok is False:
            break
        if lv.ok is True:
            best = lv.level
    return best


def first_failure(levels: list[LevelResult]) -> str:
    failed = [lv for lv in levels if lv.ok is False and lv.level != 2]  # L2 is reported, not a failure
    return f"L{failed[0].level} {failed[0].name}: {failed[0].detail}" if failed else ""
