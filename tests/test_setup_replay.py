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
    search.on_ready = lambda b, ws, recipe, early: calls.append(b.id)
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
    """A branch offers a head start when its installs are done (early) and again when it wins: an early offer
    never replaces one already running (the other branch's, or its own), a later one only when the recipe no
    longer goes on from it; the replaced one's sandbox is closed."""
    from envyard.setup.replay import HeadStarts

    heads = HeadStarts(search.yard, search)
    first = recipe_of(search, "touch /opt/first")
    first.pins, first.pins_consistent = ["iniconfig==2.0.0"], True
    try:
        heads.offer(first, early=True)
        started = heads.current
        assert started is not None and started.recipe is first
        heads.offer(recipe_of(search, "touch /opt/other-branch"), early=True)  # another branch's installs done
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
