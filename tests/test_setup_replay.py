"""The clean replay's head start (setup/replay.py): the replay's install steps start in their own sandbox when a
branch wins, and the replay goes on there only when the final recipe goes on from those steps. Real sandboxes
over the host's setup base."""

from __future__ import annotations

import copy
import subprocess
import time
from pathlib import Path

import pytest

import envyard
from envyard.setup.evidence import gather
from envyard.setup.interpreters import host_interpreter
from envyard.setup.plan import Candidate, Step, plan
from envyard.setup.replay import HeadStart
from envyard.setup.search import Search

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "setup" / "tinycalc"


@pytest.fixture()
def search(tmp_path):
    yard = envyard.Yard(tmp_path / "home")
    try:
        yield Search(yard, gather(FIXTURE), FIXTURE, "/work/tinycalc", [host_interpreter()], jobs=2)
    finally:
        yard.close()
        yard.gc()
        assert yard.sandboxes() == []


def recipe_of(search: Search, *commands: str):
    recipe = plan(search.ev, Candidate(host_interpreter()))
    recipe.steps = [Step("test", c, "a test step") for c in commands]
    return recipe


def test_the_replay_goes_on_from_the_head_start_when_the_recipe_only_added_steps(search):
    recipe = recipe_of(search, "touch /opt/head-a")
    recipe.pins, recipe.pins_consistent = ["iniconfig==2.0.0"], True
    head = HeadStart(search.yard, search, recipe)
    final = copy.deepcopy(recipe)
    final.steps.append(Step("complete", "touch /opt/head-b", "added after the win"))
    final.pins = ["iniconfig==2.0.0", "tomli-w==1.0.0"]  # the pass adds distributions, changes none
    sb = head.take(final)
    try:
        assert sb is not None, head.report()
        assert sb.exec("test -e /opt/head-a && test -e /work/tinycalc/pyproject.toml").exit_code == 0
        assert sb.exec("test -e /opt/head-b").exit_code != 0  # not run yet: it is the rest of setup.sh
        rest = head.rest(final)
        assert "touch /opt/head-b" in rest and "touch /opt/head-a" not in rest
        assert "tomli-w==1.0.0" in rest and rest.rstrip().endswith("-r /opt/envyard/requirements.lock")
        assert head.report()["used"] is True and head.report()["steps"] == 1
    finally:
        head.close()
    search.yard.wait_closed()  # a sandbox's teardown finishes in the background
    assert search.yard.sandboxes() == []


@pytest.mark.parametrize("change, why", [
    (lambda r: setattr(r, "steps", [Step("test", "touch /opt/other", "another first step")]),
     "the recipe changed after it started"),
    (lambda r: r.env.update(LC_ALL="C.UTF-8"), "the recipe changed after it started"),
    (lambda r: setattr(r, "pins", ["iniconfig==1.1.1"]), "the pinned versions changed after it started"),
    (lambda r: setattr(r, "pins_consistent", False), "the pinned versions changed after it started"),
], ids=["steps", "env", "pins", "pins-no-longer-constrain"])
def test_a_head_start_the_final_recipe_does_not_go_on_from_is_thrown_away(search, change, why):
    """Its sandbox ran other installs than setup.sh's: the replay must start over, not verify the wrong thing."""
    recipe = recipe_of(search, "touch /opt/head-a")
    recipe.pins, recipe.pins_consistent = ["iniconfig==2.0.0"], True
    head = HeadStart(search.yard, search, recipe)
    final = copy.deepcopy(recipe)
    change(final)
    assert head.take(final) is None
    assert head.report() == {"used": False, "steps": 1, "seconds": head.report()["seconds"], "why_not": why}
    search.yard.wait_closed()
    assert search.yard.sandboxes() == []


def test_a_head_start_whose_steps_failed_is_not_used(search):
    head = HeadStart(search.yard, search, recipe_of(search, "exit 3"))
    assert head.take(recipe_of(search, "exit 3")) is None
    assert head.report()["why_not"] == "its steps exited 3"


def test_closing_a_head_start_stops_its_steps_and_leaves_nothing(search):
    """Ctrl-C, or a setup that ends without a replay: the install running in the head start is killed with its
    sandbox, at once."""
    head = HeadStart(search.yard, search, recipe_of(search, "sleep 913"))
    deadline = time.monotonic() + 120
    while subprocess.run(["pgrep", "-fx", "sleep 913"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "the head start's step never started"
        time.sleep(0.2)
    t = time.monotonic()
    head.close()
    assert time.monotonic() - t < 30
    search.yard.wait_closed()
    assert subprocess.run(["pgrep", "-fx", "sleep 913"], capture_output=True).returncode == 1
    assert search.yard.sandboxes() == []
    assert head.take(recipe_of(search, "sleep 913")) is None  # closed: never handed to a replay


def test_only_the_branch_that_won_first_starts_the_replay(search):
    """Two branches reach a good L4 a moment apart: the second must not replace the first's head start with
    one of its own recipe (the search keeps the first; the replay would then start over)."""
    import threading

    from envyard.setup.search import Branch

    calls = []
    search.on_ready = lambda b, ws, recipe, when: calls.append(b.id)
    first, second = (Branch(i, Candidate(host_interpreter()), i, state="running") for i in (0, 1))
    search.branches += [first, second]
    search._cancels.update({0: threading.Event(), 1: threading.Event()})
    search._ready(first, None, None)  # alone, its tests collected
    first.won = True
    search._ready(first, None, None)
    second.won = True
    search._ready(second, None, None)  # won too, after the first
    search._cancels[1].set()  # the search keeps the first; the second stays `won`, but cancelled
    search._ready(second, None, None)
    search._ready(first, None, None)  # the first's completeness pass installed something: not blocked by it
    assert calls == [0, 0, 0]


def test_head_starts_keep_the_first_until_the_winners_recipe_moves_on(search):
    """A branch offers a head start when its installs are done, when its tests collect and when it wins: the
    first never replaces one already running (the other branch's, or its own), nor does the second while another
    branch runs (until one wins, the first stays); a winner's replaces it only when its recipe no longer goes
    on from it; the replaced one's sandbox is closed."""
    from envyard.setup.replay import HeadStarts

    heads = HeadStarts(search.yard, search)
    first = recipe_of(search, "touch /opt/first")
    first.pins, first.pins_consistent = ["iniconfig==2.0.0"], True
    try:
        heads.offer(first, "installed")
        started = heads.current
        assert started is not None and started.recipe is first
        other = recipe_of(search, "touch /opt/other-branch")
        heads.offer(other, "installed")  # another branch's installs are done
        assert heads.current is started
        heads.offer(other, "collected")  # its tests collect, while the first branch still runs
        assert heads.current is started
        won = copy.deepcopy(first)
        won.pins = ["iniconfig==2.0.0", "tomli-w==1.0.0"]  # the same steps and versions, one more distribution
        heads.offer(won)
        assert heads.current is started
        moved = copy.deepcopy(first)
        moved.pins = ["iniconfig==1.1.1"]  # a repair changed a version after the head start began
        heads.offer(moved)
        assert heads.current is not started and heads.current.recipe is moved
        assert started.take(moved) is None  # closed when it was replaced
        assert heads.current.take(moved) is not None, heads.current.report()
    finally:
        heads.close()
    search.yard.wait_closed()
    assert search.yard.sandboxes() == []


def test_a_head_start_follows_the_steps_the_winner_adds(search):
    """The completeness pass installs one unit after another: each is run in the head start as it is made, after
    the steps before it, so the replay has only the pins left to install; a pass rolled back replaces it."""
    from envyard.setup.replay import HeadStarts

    heads = HeadStarts(search.yard, search)
    recipe = recipe_of(search, "touch /opt/head-a")
    recipe.pins, recipe.pins_consistent = ["iniconfig==2.0.0"], True
    try:
        heads.offer(recipe)
        head = heads.current
        later = copy.deepcopy(recipe)
        later.steps.append(Step("complete", "test -e /opt/head-a && touch /opt/head-b", "a unit of the pass"))
        later.pins = ["iniconfig==2.0.0", "tomli-w==1.0.0"]
        heads.offer(later)
        assert heads.current is head
        final = copy.deepcopy(later)
        sb = head.take(final)
        assert sb is not None, head.report()
        assert sb.exec("test -e /opt/head-b").exit_code == 0  # ran after head-a, in the head start
        rest = head.rest(final)
        assert "head-a" not in rest and "head-b" not in rest and "tomli-w==1.0.0" in rest
        assert head.report()["steps"] == 2
        heads.offer(recipe)  # the pass was rolled back: its install must not be in the replay
        assert heads.current is not head and heads.current.take(recipe) is not None
        assert heads.current.sb.exec("test -e /opt/head-b").exit_code != 0
    finally:
        heads.close()
    search.yard.wait_closed()
    assert search.yard.sandboxes() == []


def test_steps_added_after_a_failed_step_do_not_run(search):
    head = HeadStart(search.yard, search, recipe_of(search, "exit 3"))
    later = recipe_of(search, "exit 3", "touch /opt/after")
    head.extend(later)
    try:
        assert head.take(later) is None
        assert head.report()["why_not"] == "its steps exited 3"
        assert [entry.count("touch /opt/after") for entry in head.log] == [0]  # the first steps ran, once
    finally:
        head.close()


def test_of_two_branches_at_a_good_l4_the_first_wins(search):
    """Both reach L4 with a good pass ratio a moment apart: only the first claims the win (the search keeps it
    and its head start), whichever branch the search happens to look at first."""
    import threading

    from envyard.setup.search import Branch, LevelResult

    first, second = (Branch(i, Candidate(host_interpreter()), i, state="running") for i in (1, 0))
    for b in (first, second):
        b.levels = [LevelResult(n, "level", True) for n in range(5)]
        b.tests = {"t::a": "passed"}
    search.branches += [second, first]  # the one that gets there first is the later-ranked one
    search._cancels.update({0: threading.Event(), 1: threading.Event()})
    assert search._claim_win(first) is True
    assert search._claim_win(second) is False and second.won is False
    search._cancels[1].set()  # the first cancelled (a time limit, Ctrl-C): the second may win now
    assert search._claim_win(second) is True


def with_suite(search: Search, *commands: str, suite: str):
    """A recipe whose tests are the shell command `suite` (the project's own runner: a script)."""
    recipe = recipe_of(search, *commands)
    recipe.test_runner, recipe.test_command, recipe.test_collect = "script", suite, None
    return recipe


def pgrep(pattern: str) -> bool:
    return subprocess.run(["pgrep", "-fx", pattern], capture_output=True).returncode == 0


def test_the_replays_run_of_the_tests_begins_in_a_copy_of_the_head_start(search):
    """Once its steps are done (and a branch's tests collect), the head start copies its sandbox and runs the rest
    of setup.sh and the tests there: the replay takes that run when the final recipe is the same; the head
    start's own sandbox stays as the steps left it."""
    from envyard.setup.replay import HeadStarts

    heads = HeadStarts(search.yard, search)
    recipe = with_suite(search, "touch /opt/head-a", suite="test -e /opt/head-a && touch /opt/tests-ran && echo ran")
    try:
        heads.offer(recipe, "collected")  # its tests collect while another branch runs: none ran yet, so it starts
        head = heads.current
        sb = head.take(recipe)
        assert sb is not None, head.report()
        trial = head.tried(copy.deepcopy(recipe))
        assert trial is not None, head.report()
        assert trial.setup.exit_code == 0 and trial.ran.exit_code == 0 and "ran" in trial.ran.stdout
        assert trial.freeze is None  # no pins, no freeze (as in the replay)
        assert trial.sb.exec("test -e /opt/tests-ran").exit_code == 0
        assert sb.exec("test -e /opt/tests-ran").exit_code != 0  # the copy ran them, not the head start
        report = head.report()["tests_early"]
        assert report["used"] is True and report["seconds"] >= 0, report
        assert any("touch /opt/tests-ran" in entry for entry in trial.log)
    finally:
        heads.close()
    search.yard.wait_closed()
    assert search.yard.sandboxes() == []
    assert not [i for i in search.yard.images() if i.name.startswith("snapshot/")]  # the copy's image went too


@pytest.mark.parametrize("change, why", [
    (lambda r: setattr(r, "test_command", "echo other"), "the recipe changed after it started"),
    (lambda r: setattr(r, "pins", ["iniconfig==2.0.0"]), "the recipe changed after it started"),
], ids=["runner", "pins"])
def test_a_run_of_the_tests_for_another_recipe_is_not_used(search, change, why):
    """The replay must run what setup.sh and test.sh say: a trial of another test command or other pins is
    thrown away (the replay then runs the tests itself, in the head start's sandbox)."""
    recipe = with_suite(search, "touch /opt/head-a", suite="echo ran")
    head = HeadStart(search.yard, search, recipe, tests=True)
    final = copy.deepcopy(recipe)
    change(final)
    try:
        assert head.take(final) is not None, head.report()  # (more pins, the same steps: it goes on from them)
        assert head.tried(final) is None
        assert head.report()["tests_early"] == {"used": False, "why_not": why}
    finally:
        head.close()
    search.yard.wait_closed()
    assert search.yard.sandboxes() == []


def test_no_early_run_of_tests_that_need_a_service(search):
    """Setup sandboxes share the host's network: a second server on the same port would fail one of the runs."""
    recipe = with_suite(search, "true", suite="echo ran")
    recipe.services = [{"kind": "redis", "port": 6379}]
    head = HeadStart(search.yard, search, recipe, tests=True)
    try:
        assert head.take(recipe) is not None
        assert head.tried(recipe) is None and head.report()["tests_early"]["why_not"] == "none ran"
    finally:
        head.close()


def test_steps_added_kill_the_run_of_the_tests_and_a_new_one_follows_them(search):
    """The completeness pass installs something while the trial runs the tests without it: that run is killed
    at once (its results would not be setup.sh's), and the tests run again after the added steps."""
    from envyard.setup.replay import HeadStarts

    heads = HeadStarts(search.yard, search)
    recipe = with_suite(search, "touch /opt/head-a",
                    suite="if test -e /opt/head-b; then echo with-b; else exec sleep 919; fi")
    try:
        heads.offer(recipe)
        head = heads.current
        deadline = time.monotonic() + 120
        while not pgrep("sleep 919"):
            assert time.monotonic() < deadline, f"the trial never started: {head.report()}"
            time.sleep(0.2)
        later = copy.deepcopy(recipe)
        later.steps.append(Step("complete", "touch /opt/head-b", "a unit of the pass"))
        heads.offer(later)
        assert heads.current is head
        deadline = time.monotonic() + 30
        while pgrep("sleep 919"):
            assert time.monotonic() < deadline, "the trial without the added step still runs"
            time.sleep(0.2)
        assert head.take(later) is not None, head.report()
        assert head.tried(recipe) is None  # the recipe before the pass: not what the last trial ran
        trial = head.tried(later)
        assert trial is not None and "with-b" in trial.ran.stdout, head.report()
    finally:
        heads.close()
    search.yard.wait_closed()
    assert search.yard.sandboxes() == []
    assert not pgrep("sleep 919")
