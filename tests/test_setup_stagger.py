"""The search's stagger (setup/search.py, `Search.stagger`): the best-ranked branch runs alone for a few seconds,
so a small project is set up by one branch while the other core serves the replay's head start; a branch held
back by the stagger still runs whenever the first does not win. `Search.hold` keeps it back longer while the
first, installed, passes level after level. Scripted branches (no sandboxes): each branch's outcome and timing
are set by the test."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import envyard
from envyard.setup.bugs import ProjectBug
from envyard.setup.evidence import gather
from envyard.setup.interpreters import host_interpreter
from envyard.setup.plan import Candidate
from envyard.setup.search import LevelResult, Search

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "setup" / "tinycalc"
CUTOFF = "2024-01-01T23:59:59Z"


class Scripted(Search):
    """outcomes: candidate label → (seconds, what[, climbing, then]): "good" (L4, all passed), "poor" (L4, half
    passed), "fails" (L0), "bug" (a project bug at import). With `climbing`, the branch installs for `seconds`,
    then climbs (its levels pass) for `climbing` seconds, then runs `then` seconds more with a level failed."""

    outcomes: dict[str, tuple] = {}

    def _branch(self, b):
        seconds, what, climbing, then = (*self.outcomes[b.cand.why], 0.0, 0.0)[:4]
        time.sleep(seconds)
        b.climbing = True
        time.sleep(climbing)
        b.climbing = False
        time.sleep(then)
        if what == "fails":
            b.levels = [LevelResult(0, "scripted", False)]
            return
        if what == "bug":
            b.levels = [LevelResult(0, "scripted", True), LevelResult(1, "scripted", False)]
            b.bug = ProjectBug("RuntimeError: boom", "pkg/__init__.py", 3, "import", "Traceback ...")
            return
        b.levels = [LevelResult(level, "scripted", True) for level in (0, 1, 3, 4)]
        b.tests = {"t::a": "passed", "t::b": "passed" if what == "good" else "failed"}


@pytest.fixture
def yard(tmp_path):
    y = envyard.Yard(tmp_path / "home")
    yield y
    y.close()


def _search(yard, outcomes, stagger=3.0, hold=0.0):
    s = Scripted(yard, gather(FIXTURE), FIXTURE, "/work/tinycalc", [host_interpreter()], stagger=stagger, hold=hold)
    s.outcomes = outcomes
    return s


def _cands(second_cutoff=CUTOFF):
    host = host_interpreter()
    return [Candidate(host, None, "first"), Candidate(host, second_cutoff, "second")]


def test_a_first_branch_that_wins_inside_the_stagger_runs_alone(yard):
    search = _search(yard, {"first": (0.3, "good"), "second": (0.3, "good")})
    t = time.monotonic()
    best = search.run(_cands())
    assert best.cand.why == "first" and best.good
    assert [b.cand.why for b in search.branches] == ["first"]  # the second never started
    assert time.monotonic() - t < 2.5


def test_without_a_stagger_both_start_at_once(yard):
    search = _search(yard, {"first": (0.3, "good"), "second": (0.6, "good")}, stagger=0)
    search.run(_cands())
    first, second = search.branches
    assert abs(second.started - first.started) < 0.5


@pytest.mark.parametrize("outcome", ["fails", "poor"])
def test_a_first_branch_that_ends_without_winning_lets_the_held_back_one_run_at_once(yard, outcome):
    search = _search(yard, {"first": (0.3, outcome), "second": (0.3, "good")}, stagger=30)
    t = time.monotonic()
    best = search.run(_cands())
    assert [b.cand.why for b in search.branches] == ["first", "second"]
    assert best.cand.why == "second" and best.good
    assert time.monotonic() - t < 5  # not after the 30 s stagger


def test_a_slow_first_branch_gets_company_when_the_stagger_ends(yard):
    search = _search(yard, {"first": (4.0, "good"), "second": (0.2, "poor")}, stagger=1.5)
    best = search.run(_cands())
    first, second = search.branches
    assert 1.4 < second.started - first.started < 2.5
    assert best is first


def test_a_project_bug_still_lets_a_held_back_cutoff_branch_try_older_dependencies(yard):
    """The old behaviour with both branches running: a bug met with today's dependencies does not cancel the
    cut-off branch (a changed API is fixed by older ones). Held back by the stagger, it still runs."""
    search = _search(yard, {"first": (0.3, "bug"), "second": (0.3, "good")}, stagger=30)
    best = search.run(_cands())
    assert [b.cand.why for b in search.branches] == ["first", "second"] and best.cand.why == "second"
    # a second branch that is no cut-off cannot fix the project's own code: it is not started
    search = _search(yard, {"first": (0.3, "bug"), "second": (0.3, "good")}, stagger=30)
    best = search.run(_cands(second_cutoff=None))
    assert [b.cand.why for b in search.branches] == ["first"] and best.bug is not None


def test_the_hold_keeps_the_second_branch_back_while_the_first_climbs(yard):
    """Installed at 0.2 s, the first passes its levels until 3 s and wins: with a hold the second never starts
    (it would have run beside it from the end of the 0.5 s stagger)."""
    outcomes = {"first": (0.2, "good", 2.8), "second": (0.2, "poor")}
    search = _search(yard, outcomes, stagger=0.5, hold=30)
    best = search.run(_cands())
    assert [b.cand.why for b in search.branches] == ["first"] and best.good
    search = _search(yard, outcomes, stagger=0.5, hold=0)
    search.run(_cands())
    first, second = search.branches
    assert second.started - first.started < 1.0


def test_the_hold_ends_with_a_failed_level(yard):
    """A level fails at 1.5 s while the first goes on (a repair, another run of the tests): the second starts
    then, not when the 30 s hold is over."""
    search = _search(yard, {"first": (0.2, "poor", 1.3, 3.0), "second": (0.2, "good")}, stagger=0.5, hold=30)
    best = search.run(_cands())
    first, second = search.branches
    assert 1.4 < second.started - first.started < 2.5
    assert best is second


def test_the_hold_is_bounded(yard):
    search = _search(yard, {"first": (0.2, "good", 5.0), "second": (0.2, "poor")}, stagger=0.5, hold=1.5)
    search.run(_cands())
    first, second = search.branches
    assert 1.9 < second.started - first.started < 3.0


def test_a_first_branch_still_installing_gets_company_after_the_stagger_despite_the_hold(yard):
    search = _search(yard, {"first": (3.0, "good", 0.5), "second": (0.2, "poor")}, stagger=0.5, hold=30)
    search.run(_cands())
    first, second = search.branches
    assert second.started - first.started < 1.5
