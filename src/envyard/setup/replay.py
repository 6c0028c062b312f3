"""The clean replay: the recipe, as setup.sh has it, run again on a fresh setup base with a fresh copy of the
source, its tests collected (and at L4 run) again and compared with the search's (engine.py calls it once the
search has chosen). An image is verified only when its recipe reproduces it.

Its head start (HeadStart): a setup runs its branches on two cores, and the replay's installs need not wait for
the search to end. They start in their own sandbox on a fresh base, with the versions the branch has at that
moment pinned the way setup.sh pins them, once a branch's tests collect (or its installs are done while no
other branch runs); again (replacing it) when the branch that wins has other steps or versions by then; and a
completeness pass of the best-ranked running branch has each of its installs run there too as it makes them
(HeadStarts). When the search ends, the replay goes on in that sandbox if
the final recipe begins with the same steps, has the same environment, and pins that keep every version pinned
then (the completeness pass only adds distributions: its installs are constrained to what was installed); it
then runs the rest of setup.sh there (the final pins, any steps added since, the exact install of the pins).
Otherwise the head start is thrown away and the replay starts over. Either way the steps ran in order on a fresh
base, each resolving to the versions that passed: what setup.sh does.

A recipe's first steps may be system steps (apt packages, the services' servers), which the branches' other
steps do not change: when the branches that start first share them (the same base and environment), the head
start runs them from the moment the search starts (HeadStarts.start), and goes on from them as above. Before each
batch of steps it adds, a head start saves its sandbox (an O(1) snapshot): a recipe that no longer goes on from
its steps (a completeness pass rolled back, versions a repair changed) takes it back to the latest saved state
the recipe does go on from (HeadStart.rewind), rather than starting over.

Its run of the tests (Trial) begins early as well, once a branch's tests collect: in an O(1) copy of the head
start's sandbox, the rest of setup.sh and the tests run beside the branch's own run; the replay takes that run
when the final recipe runs exactly the same commands, and redoes it otherwise.
"""

from __future__ import annotations

import contextlib
import copy
import shlex
import threading
import time
from typing import Callable

from .. import diskspace
from ..runtime.podnet import PodNetwork
from ..yard import Sandbox, Yard
from . import pins, runners, services
from .interpreters import setup_base
from .plan import Recipe, Step
from .search import (JUNIT, Branch, Search, Workspace, drop_image, listed, setup_disk_limit, setup_env,
                     setup_sandbox, test_results, without_escapes)
from .wheelhouse import find_links_env


# Offers of a head start that run the steps only: the replay's run of the tests waits (HeadStarts.offer).
STEPS_ONLY = ("start", "installed", "following")
SYSTEM_STEPS = ("apt", "services")  # step kinds that install from Debian's archive: no Python version, no pins


def system_steps(recipes: list[Recipe]) -> Recipe | None:
    """The first recipe cut to its leading system steps, when every recipe begins with the same ones on the same
    base with the same environment (the branches that start first); None otherwise, or when there are none."""
    if not recipes:
        return None
    first = recipes[0]
    n = next((i for i, s in enumerate(first.steps) if s.kind not in SYSTEM_STEPS), len(first.steps))
    spec = copy.deepcopy(first)
    spec.steps = spec.steps[:n]
    if not n or not all(same_steps(spec, r, prefix=True) for r in recipes[1:]):
        return None
    return spec


def pinned_env(recipe: Recipe) -> dict[str, str]:
    """The recipe's environment variables, with the pins (pins.py) constraining every install when there are any."""
    env = dict(recipe.env)
    if recipe.pins and recipe.pins_consistent:
        env["UV_CONSTRAINT"] = pins.constraint_files(recipe.env)
    return env


def replay_script(recipe: Recipe) -> str:
    """The recipe as one script: its steps with the pinned versions, then an exact install of the pins."""
    return script(recipe, recipe.steps)


def script(recipe: Recipe, steps: list[Step], *, exact: bool = True) -> str:
    """`steps` of the recipe as one script, with its environment and pins (the exact install of the pins last)."""
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in pinned_env(recipe).items())
    return ("set -e\n" + exports + (pins.write_script(recipe.pins) if recipe.pins else "")
            + "".join(f"{s.command}\n" for s in steps) + (f"{pins.EXACT}\n" if recipe.pins and exact else ""))


def steps_limit(search: Search, steps: int) -> float:
    """The time limit of a script of `steps` steps: each step had the limit of one in the branch (a head start
    that ran PyNaCl's two builds of libsodium in one script was killed at one step's limit)."""
    return search.step_timeout * max(1, steps)


def replay(yard: Yard, search: Search, best: Branch, head: "HeadStart | None" = None) -> dict:
    """Run the recorded recipe, as setup.sh has it, on a fresh setup base with a fresh copy of the source,
    and check the tests collect as they did: an image is verified only when its recipe reproduces it. With a
    head start whose steps are the recipe's first ones, the rest of setup.sh runs in its sandbox."""
    recipe = best.recipe
    if search.on_update:
        best.doing = "replaying setup.sh on a fresh base"
        search.on_update(search.branches)
    t = time.monotonic()
    log: list[str] = []
    runner = runners.of_recipe(recipe)
    tests = best.level >= 4 or not runner.collect  # the run counts the tests: no separate collection
    with contextlib.ExitStack() as stack:
        sb = head.take(recipe) if head is not None else None
        tried = None
        if sb is not None:
            stack.callback(head.close)
            log += head.log
            todo, steps = head.rest(recipe), head.rest_steps(recipe)
            tried = head.tried(recipe, in_time=not best.tests_timed_out) if tests else None
            if tried is None:
                head.stop_trial()  # not what the replay runs: it must not share the cores with it
            sb = tried.sb if tried is not None else sb
            log += tried.log if tried is not None else []
        else:
            sb = stack.enter_context(replay_sandbox(search, setup_base(yard, recipe.interpreter), recipe))
            sb.upload(*search.upload)
            todo, steps = replay_script(recipe), len(recipe.steps) + 1
        sh = with_services(logged(yard, sb, search.workdir, recipe.env, log), recipe)
        r, f, ran = (tried.setup, tried.freeze, tried.ran) if tried is not None else reproduce(
            sh, todo, recipe, runner, search, tests=tests, steps=steps)
        out = {"log": log, **({"head_start": head.report()} if head is not None else {})}
        if r.exit_code != 0:
            return {**out, "ok": False, "detail": f"setup.sh exited {r.exit_code} on a fresh base",
                    "seconds": time.monotonic() - t}
        if f is not None:  # the replay installed exactly the versions that passed
            differ = (pins.differences(recipe.pins, pins.parse_freeze(f.stdout, search.ev.values("project_name")))
                      if f.exit_code == 0 else ["(no freeze)"])
            out.update(pins_match=not differ, pins_differ=differ[:50], pins=len(recipe.pins))
        statuses = count = None
        c = ran
        if ran is not None:
            statuses = test_results(runner, ran, sb)
            count = len(statuses)
        if runner.collect and count != best.collected:  # at L3, or a run that reported another number
            c = sh(runner.collect, search.test_timeout, tests=True)
            count = listed(runner, c.stdout)
        ok = (c.exit_code == 0 or statuses is not None) and count == best.collected
        detail = (f"a clean replay collects the same {count} tests" if ok else
                  f"after a clean replay the tests collect {count}, not {best.collected} (exit {c.exit_code})")
        down = services.start_failure(c.stderr) if c.exit_code == services.FAILED_EXIT else None
        if down:
            ok, detail = False, f"after a clean replay a service did not start: {down}"
        result = {**out, "ok": ok, "detail": detail, "collected": count}
        if ok and best.level >= 4:  # the same level: the tests ran again, and their statuses are compared
            same = sum(1 for tid, st in statuses.items() if best.tests.get(tid) == st)
            differ = sorted(tid for tid, st in best.tests.items() if statuses.get(tid) != st)
            result.update(ok=bool(statuses), statuses_same=same, statuses_differ=differ[:50],
                          detail=(f"a clean replay runs the tests again: {same} of {len(best.tests)} per-test "
                                  "statuses match" if statuses else "after a clean replay the tests give no results"))
        return {**result, "seconds": time.monotonic() - t}


def with_services(run: Callable, recipe: Recipe) -> Callable:
    """`sh(command, timeout, tests=False)` over `run(command, timeout)`: with `tests`, the recipe's services
    start in the same sandbox right before the command and stop after it."""
    def sh(cmd: str, timeout: float, *, tests: bool = False):
        if tests and recipe.services:
            return services.run_with(run, cmd, timeout)
        return run(cmd, timeout)
    return sh


def reproduce(sh: Callable, todo: str, recipe: Recipe, runner: runners.Runner, search: Search, *, tests: bool,
              steps: int):
    """What the replay runs in its sandbox (`sh(command, timeout, tests=)`): the rest of setup.sh (`steps`
    steps), the freeze when there are pins, and with `tests` the tests. (setup.sh's result, the freeze's or None,
    the run's or None)."""
    r = sh(todo, steps_limit(search, steps))
    if r.exit_code != 0:
        return r, None, None
    f = sh(pins.FREEZE, 300) if recipe.pins else None
    return r, f, sh(runner.run(JUNIT), search.test_timeout, tests=True) if tests else None


def replay_sandbox(search: Search, image, recipe: Recipe, network: "str | PodNetwork" = "host") -> Sandbox:
    """A setup sandbox for the replay, which also sees the wheels the branches built on its interpreter
    (wheelhouse.py: the replay's installs take them instead of building the same sdists again)."""
    return setup_sandbox(search.yard, image, search.cache, network=network,
                         ro_binds={**search.policy_binds, **search.wheels.binds(recipe.interpreter)})


def logged(yard: Yard, sb: Sandbox, cwd: str, env: dict[str, str], log: list[str]) -> Callable:
    """`run(command, timeout)` in the replay's sandbox, each command and its output appended to `log`; a
    command failing for a full disk raises DiskFull (the machine's problem, not the recipe's). uv finds the
    branches' built wheels (replay_sandbox) through UV_FIND_LINKS."""
    def run(cmd: str, timeout: float):
        r = without_escapes(sb.exec(cmd, cwd=cwd, env=setup_env({**env, **find_links_env(env)}), timeout=timeout,
                                    max_output=400_000))
        log.append(f"$ {cmd}\n{r.stdout}{r.stderr}[exit {r.exit_code}, {r.duration:.1f}s]\n")
        full = (diskspace.diagnose(yard.store.home, r.stdout + r.stderr, setup_disk_limit(yard))
                if r.exit_code != 0 else None)
        if full is not None:
            raise full  # not "the replay failed": the machine's disk did
        return r
    return run


def own_network(recipe: Recipe) -> PodNetwork | None:
    """A network namespace of the trial's own, with internet access: the branch's tests run on the host's
    network at the same time, and two suites that bind the same port (a test server on 8000, a service's 5432)
    must not meet (httpx's fixture waits forever for a server that could not bind). Without one (no
    slirp4netns), the host's network, unless the recipe has services: their servers need a loopback of their own."""
    try:
        return PodNetwork(internet=True)
    except Exception:  # noqa: BLE001 - only the isolation of ports is lost
        if recipe.services:
            raise
        return None


class Trial:
    """The replay's run of the tests, begun early: in a copy (an O(1) snapshot) of the head start's sandbox, the
    rest of setup.sh and the tests, while the search finishes. The replay takes its results only when its
    recipe is the final one in every respect that changes what runs (HeadStart.tried); it is killed as soon as
    the head start runs more steps. It runs in a network namespace of its own, with internet access
    (own_network): its ports and its servers' are its own, while the branch's tests hold the host's."""

    def __init__(self, head: "HeadStart", recipe: Recipe, snap, sb: Sandbox, pod: PodNetwork | None = None):
        self.head, self.recipe, self.snap, self.sb, self.pod = head, recipe, snap, sb, pod
        self.log: list[str] = []
        self.setup = self.freeze = self.ran = None
        self.error = ""
        self.seconds = 0.0
        self._thread = threading.Thread(target=self._run, name="envyard-replay-trial", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        t = time.monotonic()
        search, recipe = self.head.search, self.recipe
        sh = with_services(logged(self.head.yard, self.sb, search.workdir, recipe.env, self.log), recipe)
        try:
            self.setup, self.freeze, self.ran = reproduce(sh, self.head.rest(recipe), recipe,
                                                          runners.of_recipe(recipe), search, tests=True,
                                                          steps=self.head.rest_steps(recipe))
        except Exception as e:  # noqa: BLE001 - killed (the head start moved on), or a full disk: the replay redoes it
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.seconds = time.monotonic() - t

    def wait(self) -> None:
        self._thread.join()

    def close(self) -> None:
        self.sb.close()
        self.head.search.track(self.sb, False)
        self._thread.join(timeout=60)
        if self.pod is not None:
            self.pod.close()
        drop_image(self.head.yard, self.snap)


class HeadStart:
    """The replay's install steps, started in a thread while the search finishes (see the module's docstring).
    With `tests`, once its steps are done it also begins the replay's run of the tests (Trial)."""

    def __init__(self, yard: Yard, search: Search, recipe: Recipe, *, tests: bool = False, when: str = ""):
        self.yard, self.search, self.recipe = yard, search, recipe
        self.when = when  # the offer that began it (HeadStarts.offer)
        self.log: list[str] = []
        self.sb: Sandbox | None = None
        self.exit_code: int | None = None
        self.error = ""
        self.why = ""  # why it was not used
        self.seconds = 0.0
        self.trial: Trial | None = None
        self.trial_report: dict = {}
        self._marks: list[Mark] = []  # states of its sandbox it can go back to (rewind)
        self._images: list = []  # the marks' snapshots, dropped when it closes
        self._closed = False
        self._wanted = 0  # bumped whenever the steps or the recipe to try change: an older trial must not start
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        # the exact install waits for the final pins; the script is made now: extend() replaces self.recipe
        first, steps = script(recipe, recipe.steps, exact=False), len(recipe.steps)
        self._then(lambda: self._run(first, steps))
        if tests:
            self.try_tests(recipe)

    @staticmethod
    def pinned(search: Search, ws: Workspace, recipe: Recipe) -> Recipe:
        """A copy of the recipe of the branch whose workspace is `ws`, with its versions now pinned (search.pin,
        run in the branch's thread): what a head start begun now replays."""
        spec = copy.deepcopy(recipe)
        search.pin(spec, lambda command, timeout: ws.sh(command, "/", timeout))
        return spec

    def _then(self, work: Callable[[], None]) -> None:
        """Run `work` in a thread after what was asked before it (steps run in order)."""
        before = self._thread

        def body() -> None:
            if before is not None:
                before.join()
            work()

        self._thread = threading.Thread(target=body, name="envyard-replay-head-start", daemon=True)
        self._thread.start()

    def _run(self, first: str, steps: int) -> None:
        t = time.monotonic()
        try:
            sb = replay_sandbox(self.search, setup_base(self.yard, self.recipe.interpreter), self.recipe)
            with self._lock:
                if self._closed:
                    sb.close()
                    return
                self.sb = sb
                self.search.track(sb)
            sb.upload(*self.search.upload)
            self._steps(first, steps)
        except Exception as e:  # noqa: BLE001 - it only saves time: the replay starts over without it
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.seconds += time.monotonic() - t

    def _steps(self, todo: str, steps: int) -> None:
        sb = self.sb
        if sb is None:
            raise RuntimeError("closed")
        run = logged(self.yard, sb, self.search.workdir, self.recipe.env, self.log)
        self.exit_code = run(todo, steps_limit(self.search, steps)).exit_code

    def extend(self, later: Recipe) -> None:
        """The branch added steps (the completeness pass installs one unit after another): they run here too,
        after the steps before them, pinned to the branch's versions now. Only for a recipe that goes on from
        this one's (see mismatch). A trial of the tests without them is killed (HeadStarts.offer then asks for one
        with them)."""
        todo = script(later, later.steps[len(self.recipe.steps):], exact=False)
        steps = len(later.steps) - len(self.recipe.steps)
        self.stop_trial()
        mark = Mark(self.recipe)
        self._marks.append(mark)
        self.recipe = later

        def more() -> None:
            if self.error or self.exit_code != 0:
                return  # the steps before failed: these would not be setup.sh's
            t = time.monotonic()
            try:
                mark.image = self._snapshot()
                self._steps(todo, steps)
            except Exception as e:  # noqa: BLE001 - as in _run
                self.error = f"{type(e).__name__}: {e}"
            finally:
                self.seconds += time.monotonic() - t

        self._then(more)

    def _snapshot(self):
        """An O(1) snapshot of its sandbox as the steps so far left it (dropped when it closes)."""
        sb = self.sb
        if sb is None:
            raise RuntimeError("closed")
        image = sb.snapshot(temporary=True)
        with self._lock:
            self._images.append(image)
        return image

    def rewind(self, later: Recipe) -> bool:
        """Go back to the latest state before an extend that `later` goes on from (a completeness pass rolled
        back, or versions changed after the installs: the system steps before them still count), instead of
        starting over; False when there is none. The steps after it are forgotten (extend runs them again)."""
        mark = next((m for m in reversed(self._marks) if not goes_on(m.recipe, later)), None)
        if mark is None:
            return False
        del self._marks[self._marks.index(mark):]
        self.stop_trial()
        self.recipe = mark.recipe

        def back() -> None:
            if mark.image is None:  # its steps had failed, or it was closed
                self.error = self.error or "the state to go back to was not saved"
                return
            try:
                sb = replay_sandbox(self.search, mark.image, mark.recipe)
            except Exception as e:  # noqa: BLE001 - as in _run
                self.error = f"{type(e).__name__}: {e}"
                return
            with self._lock:
                old, self.sb = (self.sb, sb) if not self._closed else (sb, None)
            if self.sb is sb:
                self.search.track(sb)
                self.exit_code, self.error = 0, ""
            if old is not None:
                old.close()
                self.search.track(old, False)

        self._then(back)
        return True

    def try_tests(self, spec: Recipe) -> None:
        """Begin the replay's run of the tests for `spec` (this head start's steps, its pins, its runner) once the
        steps are done, in place of a trial of another recipe; nothing when one of the same recipe runs."""
        if self.trial is not None and same_run(self.trial.recipe, spec):
            return
        self.stop_trial()
        wanted = self._wanted

        def start() -> None:
            if self.error or self.exit_code != 0:
                return
            with self._lock:
                if self._closed or wanted != self._wanted or self.sb is None:
                    return
                head_sb = self.sb
            snap = sb = pod = None
            try:
                snap = head_sb.snapshot(temporary=True)
                pod = own_network(spec)
                sb = replay_sandbox(self.search, snap, spec, network=pod or "host")
                self.search.track(sb)
            except Exception as e:  # noqa: BLE001 - it only saves time
                self.trial_report = {"used": False, "why_not": f"it did not start: {type(e).__name__}: {e}"}
                if sb is not None:
                    sb.close()
                    self.search.track(sb, False)
                if pod is not None:
                    pod.close()
                if snap is not None:
                    drop_image(self.yard, snap)
                return
            trial = Trial(self, spec, snap, sb, pod)
            with self._lock:
                if not (self._closed or wanted != self._wanted):
                    self.trial, trial = trial, None
            if trial is not None:  # closed, or moved on, meanwhile
                trial.close()

        self._then(start)

    def stop_trial(self) -> None:
        """Kill the trial (if any) and keep any asked for from starting."""
        with self._lock:
            self._wanted += 1
            trial, self.trial = self.trial, None
        if trial is not None:
            trial.close()

    def take(self, final: Recipe) -> Sandbox | None:
        """Wait for the steps; their sandbox when the final recipe goes on from them, else None (it is closed)."""
        self._thread.join()
        self.why = self._unusable(final)
        if self.why:
            self.close()
            return None
        return self.sb

    def tried(self, final: Recipe, *, in_time: bool = False) -> Trial | None:
        """After take(): the trial, once it has run, when it ran what the replay of `final` would (else None).
        `in_time`: the branch's own run of the tests ended within the time limit, so a trial whose run did not
        (a suite that waited on something the search's run held, or starved beside it) is run again alone."""
        trial = self.trial
        if trial is None:
            why = "none ran"
        elif not same_run(trial.recipe, final):
            why = "the recipe changed after it started"
        else:
            trial.wait()
            why = f"it failed: {trial.error}" if trial.error else ""
            if not why and in_time and trial.ran is not None and trial.ran.timed_out:
                why = "its run of the tests passed the time limit, the branch's did not"
        self.trial_report = {"used": not why, **({"why_not": why} if why else {"seconds": round(trial.seconds, 1)})}
        return None if why else trial

    def _unusable(self, final: Recipe) -> str:
        if self.error or self.sb is None:
            return f"it failed: {self.error or 'no sandbox'}"
        if self.exit_code != 0:
            return f"its steps exited {self.exit_code}"
        return self.mismatch(final)

    @property
    def system_only(self) -> bool:
        return system_only(self.recipe)

    def mismatch(self, later: Recipe) -> str:
        """Why a later (pinned) recipe of the branch does not go on from this head start's steps ("" if it does)."""
        return goes_on(self.recipe, later)

    def rest(self, final: Recipe) -> str:
        """What setup.sh does after the head start's steps: the final pins and environment, the steps added
        since (the completeness pass's), the exact install of the pins."""
        return script(final, final.steps[len(self.recipe.steps):])

    def rest_steps(self, final: Recipe) -> int:
        """How many steps `rest` runs (the exact install counts as one)."""
        return len(final.steps) - len(self.recipe.steps) + 1

    def report(self) -> dict:
        return {"used": not self.why, "steps": len(self.recipe.steps), "seconds": round(self.seconds, 1),
                **({"began": self.when} if self.when else {}),
                **({"why_not": self.why} if self.why else {}),
                **({"tests_early": self.trial_report} if self.trial_report else {})}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sb, self.sb = self.sb, None
        self.stop_trial()
        if sb is not None:
            sb.close()
            self.search.track(sb, False)
        if self._thread is not None:
            self._thread.join(timeout=60)
        with self._lock:
            images, self._images = self._images, []
        for image in images:
            drop_image(self.yard, image)


class Mark:
    """A state of a head start's sandbox: after the steps of `recipe`, saved as `image` before more ran."""

    def __init__(self, recipe: Recipe):
        self.recipe = recipe
        self.image = None


def system_only(recipe: Recipe) -> bool:
    """Whether its steps are all system steps (a head start begun as the search started): no pins applied to them."""
    return all(s.kind in SYSTEM_STEPS for s in recipe.steps)


def goes_on(earlier: Recipe, later: Recipe) -> str:
    """Why `later` (a branch's pinned recipe) does not go on from the steps of `earlier` ("" if it does): other
    first steps, interpreter or environment, or versions pinned then that it changed."""
    if not same_steps(earlier, later, prefix=True):
        return "the recipe changed after it started"
    constrained = later.pins_consistent != earlier.pins_consistent and not system_only(earlier)
    if constrained or not set(earlier.pins) <= set(later.pins):
        return "the pinned versions changed after it started"
    return ""


def same_steps(spec: Recipe, recipe: Recipe, *, prefix: bool = False) -> bool:
    """Whether `recipe` has `spec`'s interpreter, environment and steps (or, with `prefix`, begins with its
    steps)."""
    steps = recipe.steps[:len(spec.steps)] if prefix else recipe.steps
    return ((recipe.interpreter.path, recipe.interpreter.provider) == (spec.interpreter.path,
                                                                        spec.interpreter.provider)
            and recipe.env == spec.env and [s.command for s in steps] == [s.command for s in spec.steps])


def same_run(a: Recipe, b: Recipe) -> bool:
    """Whether the replays of `a` and `b` run the same commands: steps, environment, pins, test runner."""
    return (same_steps(a, b) and sorted(a.pins) == sorted(b.pins) and a.pins_consistent == b.pins_consistent
            and (a.test_runner, a.test_command, a.test_collect) == (b.test_runner, b.test_command, b.test_collect)
            and a.services == b.services)


class HeadStarts:
    """The head starts of one setup: the latest is the one the replay may use. The first may begin with the
    search, its system steps only (start); a branch offers one (`when`, see Search.on_ready) when its installs
    are done and none runs yet or only the system steps' does ("installed": steps only), as the completeness
    pass of the best-ranked running branch starts and after each of its installs ("following": steps only),
    when its tests collect and when it has won: a head start its recipe goes on from runs the steps added since
    (the pass's installs, as the branch makes them) and, but for the steps-only offers, the replay's run of the
    tests after them; one it no longer goes on from (other steps, changed versions) goes back to a state it
    saved that the recipe does go on from (HeadStart.rewind), or else is replaced, except by a branch whose
    tests collect while another branch runs ("collected": until one wins, the first stays)."""

    def __init__(self, yard: Yard, search: Search):
        self.yard, self.search = yard, search
        self.started: list[HeadStart] = []
        self._lock = threading.Lock()  # two branches may offer at the same moment

    @property
    def current(self) -> HeadStart | None:
        return self.started[-1] if self.started else None

    def start(self, spec: Recipe) -> None:
        """Begin with the system steps the first branches share (system_steps), as the search starts."""
        self.offer(spec, "start")

    def offer(self, spec: Recipe, when: str = "ready") -> None:
        """`spec`: the branch's recipe with its versions now pinned (HeadStart.pinned)."""
        with self._lock:
            head = self.current
            if head is not None:
                if when == "installed" and not head.system_only:
                    return
                keep_first = when == "collected" and not head.system_only  # see above: nor is it rewound
                if not head.mismatch(spec) or (not keep_first and head.rewind(spec)):
                    if len(spec.steps) > len(head.recipe.steps):
                        head.extend(spec)
                    # its tests collect, or it has won: the replay's run of them may begin, after the steps
                    # (also when begun at "installed", which asked for none); not while a pass installs more
                    if when not in STEPS_ONLY:
                        head.try_tests(spec)
                    return
                if keep_first:
                    return
            self.close()
            self.started.append(HeadStart(self.yard, self.search, spec, tests=when not in STEPS_ONLY, when=when))

    def close(self) -> None:
        for head in self.started:
            head.close()
