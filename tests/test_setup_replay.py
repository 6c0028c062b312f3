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
    search.on_ready = lambda b, ws, recipe: calls.append(b.id)
    first, second = (Branch(i, Candidate(host_interpreter()), i, state="running") for i in (0, 1))
    search.branches += [first, second]
    search._cancels.update({0: threading.Event(), 1: threading.Event()})
    search._ready(first, None, None)  # alone, its tests collected
    first.won = True
    search._ready(first, None, None)
    second.won = True
    search._ready(second, None, None)  # won too, after the first
    search._cancels[1].set()
    second.won = False
    search._ready(second, None, None)  # cancelled
    assert calls == [0, 0]
