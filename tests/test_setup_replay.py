"""The clean replay's head start (setup/replay.py): the replay's install steps start in their own sandbox when a
branch wins, and the replay goes on there only when the final recipe goes on from those steps. Real sandboxes
over the host's setup base."""

from __future__ import annotations

import contextlib
import copy
import shlex
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


def test_a_head_start_of_several_steps_has_each_steps_time_limit(search):
    """PyNaCl's recipe builds libsodium twice (the project, then the completeness pass's `-e .[docs,tests]`): a
    head start that ran both in one script under one step's limit was killed (exit 137) and the replay failed."""
    search.step_timeout = 2.5
    recipe = recipe_of(search, "sleep 1.5", "sleep 1.5")  # 3 s in all: within 2 × 2.5 s, not within 2.5 s
    head = HeadStart(search.yard, search, recipe)
    try:
        assert head.take(recipe) is not None, head.report()
    finally:
        head.close()


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
    the steps before it, so the replay has only the pins left to install; a pass rolled back takes it back to
    the state before the pass (an O(1) snapshot taken then), instead of starting over."""
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
        assert heads.current is head and head.take(recipe) is not None, head.report()  # back to before it
        assert head.sb.exec("test -e /opt/head-a && test ! -e /opt/head-b").exit_code == 0
        assert head.report()["steps"] == 1 and head.rest(recipe).count("head-a") == 0
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


SERVER = """import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(sys.argv[2].encode())
    c.close()
"""


def test_an_early_run_of_tests_that_need_a_service_has_a_network_of_its_own(search):
    """The branch's tests may be using the service's port on the host's network (setup sandboxes share it) while
    the replay's early run starts the same server: the trial runs in a pod network of its own (with internet
    access, for the rest of setup.sh), so its server gets the port and its tests talk to their own server."""
    import socket

    from envyard.setup import services

    import threading

    host = socket.socket()
    host.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    host.bind(("127.0.0.1", 0))  # the branch's server, as it were
    host.listen()
    port = host.getsockname()[1]

    def answer() -> None:
        with contextlib.suppress(OSError):  # (closed at the end)
            while True:
                c, _ = host.accept()
                c.sendall(b"host-server")
                c.close()

    threading.Thread(target=answer, daemon=True).start()
    write = (f"mkdir -p {services.DIR} && printf '%s' {shlex.quote(SERVER)} > /opt/server.py"
             f" && printf '#!/bin/sh\n/usr/bin/python3 /opt/server.py {port} trial-server & echo $! > /tmp/srv.pid;"
             f" sleep 0.5\n' > {services.START}"
             f" && printf '#!/bin/sh\nkill $(cat /tmp/srv.pid)\n' > {services.STOP}"
             f" && chmod +x {services.START} {services.STOP}")
    suite = (f"/usr/bin/python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', {port}));"
             f" print(s.recv(64).decode())\"")
    recipe = with_suite(search, write, suite=suite)
    recipe.services = [{"kind": "redis", "port": port}]
    head = HeadStart(search.yard, search, recipe, tests=True)
    try:
        assert head.take(recipe) is not None, head.report()
        trial = head.tried(recipe)
        assert trial is not None, head.report()
        assert trial.ran.exit_code == 0 and "trial-server" in trial.ran.stdout, trial.log
        assert trial.pod is not None and trial.pod.internet
    finally:
        head.close()
        host.close()
    search.yard.wait_closed()
    assert search.yard.sandboxes() == []
    assert trial.pod.closed  # its network went with it


def test_an_early_run_of_tests_binds_its_ports_beside_the_branchs_run(search):
    """httpx's suite starts a test server on port 8000 and waits for it forever when the port is taken. The
    branch's run holds the host's port while the replay's early run starts: the early run has a network of its
    own, so its server binds the same port and its tests pass (on the host's network the bind fails)."""
    import socket

    held = socket.socket()
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    held.bind(("127.0.0.1", 0))  # the branch's test server, as it were
    held.listen()
    port = held.getsockname()[1]
    suite = ("/usr/bin/python3 -c \"import socket; s = socket.socket();"
             " s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1);"
             f" s.bind(('127.0.0.1', {port})); s.listen(); c = socket.create_connection(('127.0.0.1', {port}));"
             " print('own port')\"")
    recipe = with_suite(search, "true", suite=suite)
    head = HeadStart(search.yard, search, recipe, tests=True)
    try:
        assert head.take(recipe) is not None, head.report()
        trial = head.tried(recipe, in_time=True)
        assert trial is not None, head.report()
        assert trial.ran.exit_code == 0 and "own port" in trial.ran.stdout, trial.log
        assert trial.pod is not None and trial.pod.internet  # no services, a network of its own all the same
    finally:
        head.close()
        held.close()
    search.yard.wait_closed()
    assert search.yard.sandboxes() == []


def test_an_early_run_that_passed_the_time_limit_is_run_again_when_the_branchs_did_not(search):
    """A suite that finished in the branch but hung in the early run (it waited on something the branch's run
    held, or starved beside it) says nothing about setup.sh: the replay runs the tests again, alone. When the
    branch's own run passed the limit too, the early run's result stands."""
    search.test_timeout = 2
    recipe = with_suite(search, "true", suite="sleep 30")
    head = HeadStart(search.yard, search, recipe, tests=True)
    try:
        assert head.take(recipe) is not None, head.report()
        assert head.tried(recipe, in_time=True) is None
        assert head.report()["tests_early"] == {
            "used": False, "why_not": "its run of the tests passed the time limit, the branch's did not"}
        trial = head.tried(recipe)  # the branch's run passed the limit too
        assert trial is not None and trial.ran.timed_out
    finally:
        head.close()
    search.yard.wait_closed()
    assert search.yard.sandboxes() == []


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


# ---- system steps: the head start begins with the search ------------------------------------------------------

def with_system(search: Search, system: str, *commands: str):
    """A recipe whose first step is a system step (kind apt) running `system`, then `commands`."""
    recipe = recipe_of(search, *commands)
    recipe.steps.insert(0, Step("apt", system, "a system package"))
    return recipe


def test_system_steps_are_the_leading_apt_steps_the_first_branches_share(search):
    from envyard.setup.replay import system_steps

    plain = with_system(search, "touch /opt/sys", "touch /opt/venv")
    cut_off = with_system(search, "touch /opt/sys", "touch /opt/venv-2020")  # another venv step, same apt step
    spec = system_steps([plain, cut_off])
    assert [(s.kind, s.command) for s in spec.steps] == [("apt", "touch /opt/sys")]
    assert [s.command for s in plain.steps] == ["touch /opt/sys", "touch /opt/venv"]  # a copy was cut
    assert system_steps([plain]) is not None
    assert system_steps([plain, with_system(search, "touch /opt/other", "touch /opt/venv")]) is None
    other_env = copy.deepcopy(cut_off)
    other_env.env["DATABASE_URL"] = "postgresql://elsewhere"
    assert system_steps([plain, other_env]) is None  # the steps would run with another environment
    assert system_steps([recipe_of(search, "touch /opt/venv")]) is None  # nothing to start with
    assert system_steps([]) is None


def test_the_system_steps_head_start_goes_on_with_the_branchs_installs(search):
    """Begun as the search starts, it runs the system steps; a branch whose installs are done (alone) has them
    run there too, pinned; the replay goes on from it. Its pins were never used, so a branch whose pins
    constrain its installs still goes on from it."""
    from envyard.setup.replay import HeadStarts, system_steps

    heads = HeadStarts(search.yard, search)
    branch = with_system(search, "touch /opt/sys", "test -e /opt/sys && touch /opt/installed")
    try:
        heads.start(system_steps([branch]))
        head = heads.current
        assert head.system_only and head.report()["began"] == "start"
        installed = copy.deepcopy(branch)
        installed.pins, installed.pins_consistent = ["iniconfig==2.0.0"], True
        heads.offer(installed, "installed")
        assert heads.current is head and not head.system_only
        sb = head.take(installed)
        assert sb is not None, head.report()
        assert sb.exec("test -e /opt/installed").exit_code == 0
        assert head.report()["used"] is True and head.report()["steps"] == 2
        heads.offer(installed, "installed")  # no longer the system steps' alone: another branch's is refused
        assert heads.current is head
    finally:
        heads.close()
    search.yard.wait_closed()
    assert search.yard.sandboxes() == []


def test_versions_changed_after_the_installs_take_the_head_start_back_to_its_system_steps(search):
    """A repair after the installs changed a version the head start had installed: its installs no longer count,
    but the system steps before them do: it goes back to them (no apt run again) and installs anew."""
    from envyard.setup.replay import HeadStarts, system_steps

    heads = HeadStarts(search.yard, search)
    branch = with_system(search, "echo run >> /opt/sys-runs", "echo install >> /opt/installs")
    try:
        heads.start(system_steps([branch]))
        head = heads.current
        installed = copy.deepcopy(branch)
        installed.pins, installed.pins_consistent = ["iniconfig==2.0.0"], True
        heads.offer(installed, "installed")
        repaired = copy.deepcopy(branch)
        repaired.pins, repaired.pins_consistent = ["iniconfig==1.1.1"], True
        heads.offer(repaired, "ready")
        assert heads.current is head, "started over instead of going back"
        sb = head.take(repaired)
        assert sb is not None, head.report()
        assert sb.exec("cat /opt/sys-runs").stdout == "run\n"  # the system step ran once
        assert sb.exec("cat /opt/installs").stdout == "install\n"  # the install ran again, from before the first
        assert head.report()["began"] == "start" and head.report()["steps"] == 2
    finally:
        heads.close()
    search.yard.wait_closed()
    assert search.yard.sandboxes() == []
    assert not [i for i in search.yard.images() if i.name.startswith("snapshot/")]  # its snapshots went too


@pytest.mark.parametrize("when", ["installed", "collected"])
def test_a_branch_whose_system_steps_changed_replaces_that_head_start(search, when):
    """A repair dropped a package from the apt step: the head start of the old one is of no use to the replay, and
    the first branch to get its installs done or its tests collected starts one of its own recipe."""
    from envyard.setup.replay import HeadStarts, system_steps

    heads = HeadStarts(search.yard, search)
    try:
        heads.start(system_steps([with_system(search, "touch /opt/sys", "true")]))
        first = heads.current
        repaired = with_system(search, "touch /opt/sys-repaired", "touch /opt/installed")
        heads.offer(repaired, when)
        assert heads.current is not first and heads.current.recipe is repaired
        assert first.take(repaired) is None  # closed when it was replaced
        sb = heads.current.take(repaired)
        assert sb is not None and sb.exec("test -e /opt/sys-repaired && test ! -e /opt/sys").exit_code == 0
    finally:
        heads.close()
    search.yard.wait_closed()
    assert search.yard.sandboxes() == []


@pytest.mark.timeout(600)
def test_a_setup_whose_recipe_begins_with_apt_begins_its_replay_with_the_search(tmp_path):
    """The project's CI installs a Debian package: the replay's head start installs it from the moment the search
    starts (beside the branch), the branch's installs follow there, and the replay goes on from it."""
    from envyard.setup.engine import setup_directory
    from envyard.setup.interpreters import setup_base

    src = tmp_path / "aptdemo"
    (src / ".github" / "workflows").mkdir(parents=True)
    (src / "setup.py").write_text('from setuptools import setup\nsetup(name="aptdemo", version="1.0", '
                                  'py_modules=["aptdemo"])\n')
    (src / "aptdemo.py").write_text("import subprocess\n\n\ndef add(a, b):\n    return int(subprocess.run(['bc'], "
                                    "input=f'{a}+{b}\\n', capture_output=True, text=True).stdout)\n")
    (src / "test_aptdemo.py").write_text("import aptdemo\n\n\ndef test_add():\n    assert aptdemo.add(2, 3) == 5\n")
    (src / ".github" / "workflows" / "ci.yml").write_text(
        "jobs:\n  t:\n    steps:\n      - run: sudo apt-get install -y bc\n      - run: pytest\n")
    yard = envyard.Yard(tmp_path / "home")
    try:
        setup_base(yard, host_interpreter())  # (a head start never builds one: the branches do)
        result, _ev = setup_directory(yard, src, "setup/aptdemo", available=[host_interpreter()])
        assert result.verified, (result.reason, result.replay)
        head = result.replay["head_start"]
        assert head["used"] is True and head["began"] == "start", head
        assert head["steps"] == len(result.recipe.steps) and result.recipe.steps[0].kind == "apt", head
        assert head["tests_early"]["used"] is True, head
    finally:
        yard.close()
        yard.gc()
        assert yard.sandboxes() == []
