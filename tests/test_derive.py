"""`envyard derive`: code-bug tasks derived from a verified setup image of a tiny library
(tests/fixtures/derive/minilib), validated in forks, checked with `envyard task check` and `envyard rollout`."""

from __future__ import annotations

import ast
import json
import random
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import envyard as envyard_api

from envyard.derive import bugs
from envyard.derive.mutation import Mutation, SourceFacts

from bareenv import BARE, cli_cwd, sigint_default

SRC = str(Path(__file__).resolve().parents[1] / "src")
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "derive" / "minilib"
IMAGE = "setup/minilib"


def envyard(home, *args, timeout=600):
    return subprocess.run([sys.executable, "-m", "envyard.cli.main", *map(str, args)], capture_output=True, text=True,
                          env={"ENVYARD_HOME": str(home), **BARE, "PYTHONPATH": SRC},
                          timeout=timeout, cwd=cli_cwd())


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A store holding the fixture's verified setup image (one `envyard setup` per module)."""
    h = tmp_path_factory.mktemp("derive-home")
    r = envyard(h, "setup", FIXTURE, "--name", IMAGE, "--out", h / "contract", "--json", timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    yield h
    envyard(h, "gc")


@pytest.fixture(scope="module")
def derived(home, tmp_path_factory):
    out = tmp_path_factory.mktemp("derived") / "tasks"
    r = envyard(home, "derive", IMAGE, "--kind", "bug", "--n", "3", "--seed", "1", "--out", out, "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    return out, json.loads(r.stdout)


# ---------------------------------------------------------------------------------------------- the mutations

def test_each_operator_rewrites_only_its_site_and_the_result_parses():
    code = ("def f(a, b, items):\n"
            "    # a comment that stays\n"
            "    if a < b and b != 0:\n"
            "        total = a + b * 2\n"
            "        log(a, b)\n"
            "        return total\n"
            "    return items[1]\n")
    found = bugs.sites("m.py", code)
    ops = {e.op for e in found}
    assert {"flip-comparison", "off-by-one-comparison", "wrong-operator", "wrong-boolean-operator",
            "negate-condition", "remove-statement", "swap-arguments", "off-by-one-constant"} <= ops
    src = bugs.Source(code)
    for e in found:
        new = src.apply(e)
        ast.parse(new)
        assert "# a comment that stays" in new
    by_op = {e.op: src.apply(e) for e in found if e.line in (3, 5)}
    assert "if a >= b and b != 0:" in by_op["flip-comparison"] or "if a < b and b == 0:" in by_op["flip-comparison"]
    assert "log(b, a)" in by_op["swap-arguments"]
    assert "a < b or b != 0" in by_op["wrong-boolean-operator"]


def test_tests_annotations_and_main_guards_are_not_mutated():
    code = ("import sys\n"
            "def f(x: Tuple[int, 5] = 3) -> Tuple[int, 7]:\n"
            "    return x\n"
            "if __name__ == '__main__':\n"
            "    f(1 + 2)\n")
    assert all(e.line not in (4, 5) for e in bugs.sites("m.py", code))
    on_def = [e for e in bugs.sites("m.py", code) if e.line == 2]
    assert on_def and all(e.col == 25 for e in on_def)  # the default 3, not the 5 and 7 of the annotations


def test_sources_are_parsed_one_thread_at_a_time(monkeypatch):
    """CPython 3.11's AST constructor shares a recursion counter between threads (python/cpython#106905): two
    derive runs in one process crashed the derive benchmark with a spurious SystemError. Parses are serialized."""
    import threading
    import time

    real, guard = ast.parse, threading.Lock()
    inside = most = 0

    def slow_parse(text, *args, **kwargs):
        nonlocal inside, most
        with guard:
            inside += 1
            most = max(most, inside)
        time.sleep(0.01)
        with guard:
            inside -= 1
        return real(text, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", slow_parse)
    threads = [threading.Thread(target=bugs.sites, args=("m.py", "def f(a, b):\n    return a < b\n"))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == 1


def test_the_same_seed_gives_the_same_candidates_and_the_patches_invert():
    text = (FIXTURE / "src/minilib/numbers.py").read_text()
    facts = SourceFacts(image="x", workdir="/w", test_runner="pytest", test_command="python -m pytest", packages=("minilib",),
                        python="/opt/venv/bin/python", extra={"bug": {"sources": {"src/minilib/numbers.py": text}}})
    one = [m.site + m.name for m in bugs.candidates(facts, random.Random("1:bug"))]
    two = [m.site + m.name for m in bugs.candidates(facts, random.Random("1:bug"))]
    other = [m.site + m.name for m in bugs.candidates(facts, random.Random("2:bug"))]
    assert one == two and sorted(one) == sorted(other) and one != other
    m = next(iter(bugs.candidates(facts, random.Random("1:bug"))))
    assert m.kind == "bug" and m.files == ("src/minilib/numbers.py",) and "ENVYARD_PATCH" in m.fix_script


# ------------------------------------------------------------------------------------- derived tasks, end to end

def test_derived_tasks_are_valid_and_score_oracle_1_noop_0(home, derived):
    out, report = derived
    assert report["kept"] == 3 and len(report["tasks"]) == 3
    tasks = sorted(p for p in out.iterdir() if p.is_dir())
    assert [p.name for p in tasks] == sorted(t["name"] for t in report["tasks"])
    assert (out / "report.json").is_file() and not (out / ".staging").exists()
    r = envyard(home, "task", "check", out, "--json")
    assert r.returncode == 0, r.stdout
    for policy, reward in (("oracle", 1.0), ("noop", 0.0)):
        r = envyard(home, "rollout", out, "--policy", policy, "--json")
        assert r.returncode == 0, r.stderr[-1000:]
        episodes = json.loads(r.stdout)["episodes"]
        assert len(episodes) == 3
        assert all(e["reward"] == reward and e["infra_error"] is None for e in episodes), episodes


def test_a_task_records_provenance_and_hides_the_tests_that_reveal_the_bug(home, derived):
    out, report = derived
    task = out / report["tasks"][0]["name"]
    meta = tomllib.loads((task / "task.toml").read_text())
    md = meta["metadata"]
    assert md["kind"] == "bug" and md["seed"] == 1 and md["source_image"].startswith(IMAGE)
    assert md["failing_tests"] and md["hidden_tests"] and md["difficulty"] in ("easy", "medium", "hard")
    assert meta["environment"]["image"].startswith(IMAGE) and "carry" not in meta["verifier"]  # the project tree only
    instruction = (task / "instruction.md").read_text()
    site_file = md["site"].split(":")[0]
    assert site_file not in instruction and "line" not in instruction.lower().split("tests")[0]
    for hidden in md["hidden_tests"]:
        assert (task / "tests" / "hidden" / hidden).is_file()
    # what the agent sees: the task's environment, built as rollout builds it
    images = envyard(home, "images", "--json")
    names = [i["name"] for i in json.loads(images.stdout)]
    built = [n for n in names if n.startswith(f"task/{task.name}:")]
    assert built, "rollout built the task's image"
    assert not [n for n in names if n.startswith("snapshot/")]  # validation's broken environments are removed
    hidden = md["hidden_tests"][0]
    stem = Path(hidden).stem
    r = envyard(home, "run", built[0], "--", "sh", "-c",
                f"ls {hidden} 2>&1; ls {Path(hidden).parent}/__pycache__ 2>/dev/null | grep -c '^{stem}\\.' ; ls -a")
    assert "No such file" in r.stdout and "\n0\n" in r.stdout and ".git" not in r.stdout


def test_the_same_seed_gives_the_same_tasks(home, derived, tmp_path):
    out, report = derived
    again = tmp_path / "again"
    r = envyard(home, "derive", IMAGE, "--n", "3", "--seed", "1", "--out", again, "--json")
    assert r.returncode == 0, r.stderr[-1000:]
    assert [t["name"] for t in json.loads(r.stdout)["tasks"]] == [t["name"] for t in report["tasks"]]
    for t in report["tasks"]:
        for f in ("instruction.md", "environment/setup.sh", "solution/solve.sh", "tests/expect.json"):
            assert (again / t["name"] / f).read_text() == (out / t["name"] / f).read_text()


def test_a_hang_in_a_few_test_files_is_bounded_by_their_own_time():
    from envyard.derive import testrun

    junit = (b'<testsuites><testsuite><testcase classname="tests.test_a" name="t1" time="1.5"/>'
             b'<testcase classname="tests.test_b" name="t2" time="40"><failure message="x"/></testcase>'
             b'</testsuite></testsuites>')
    assert testrun.junit_times(junit) == {"tests.test_a::t1": 1.5, "tests.test_b::t2": 40.0}
    facts = SourceFacts(image="i", workdir="/w", test_runner="pytest", test_command="python -m pytest",
                        packages=("p",), python="python", suite_seconds=50.0,
                        file_seconds={"tests/test_a.py": 1.5, "tests/test_b.py": 40.0})
    assert testrun.time_limit(facts) == 160.0  # the whole suite: 3 × 50 s + 10 s
    assert testrun.time_limit(facts, ("tests/test_a.py",)) == 3 * (8.5 + 1.5) + 10  # start-up 8.5 s + its tests
    assert testrun.time_limit(facts, ("tests/test_b.py",)) == 3 * (8.5 + 40) + 10
    assert testrun.time_limit(SourceFacts(**{**facts.__dict__, "suite_seconds": 2.0}), ("tests/test_a.py",)) == 20.0
    # no per-file times (another runner): the whole suite's bound
    assert testrun.time_limit(SourceFacts(**{**facts.__dict__, "file_seconds": {}}), ("tests/test_a.py",)) == 160.0


def test_candidates_whose_screening_runs_fewer_tests_come_first_within_a_window():
    from envyard.derive.pipeline import cheapest_first

    facts = SourceFacts(image="i", workdir="/w", test_runner="pytest", test_command="python -m pytest",
                        packages=("p",), python="python", files=("tests/test_fast.py", "tests/test_slow.py"),
                        baseline={"tests.test_fast::t1": "passed", **{f"tests.test_slow::t{i}": "passed"
                                                                      for i in range(5)}})
    scopes = [(), ("tests/test_slow.py",), ("tests/test_fast.py",), (), ("tests/test_fast.py",)]
    cands = [Mutation(kind="bug", name=f"m{i}", site=f"s{i}", break_script="", fix_script="", test_scope=sc)
             for i, sc in enumerate(scopes)]
    got = [m.name for m in cheapest_first(iter(cands), facts, window=4)]
    assert got == ["m2", "m1", "m0", "m3", "m4"]  # within the first 4: 1, 5, 6, 6 tests (seeded order on ties)
    assert sorted(got) == [m.name for m in cands]


def test_the_report_says_where_the_time_went(derived):
    _out, report = derived
    cb = report["cost_breakdown"]
    assert cb["baseline_s"] > 0 and cb["kept_screen_tests_s"] > 0 and cb["kept_forks_s"] > 0
    assert cb["kept_setup_snapshot_s"] > 0 and cb["kept_screen_break_s"] >= 0
    assert sum(cb["dropped_s_by_reason"].values()) == pytest.approx(cb["dropped_s"], abs=0.2)
    assert set(cb["dropped_s_by_reason"]) == set(report["dropped_by_reason"])
    assert cb["total_s_per_kept_task"] >= (cb["kept_forks_s"] + cb["kept_screen_tests_s"]) / report["kept"]


def test_a_resumed_derive_reuses_the_baseline_and_never_repeats_a_candidate(home, tmp_path):
    from envyard.derive.pipeline import Resume, derive

    resume = Resume()
    with envyard_api.Yard(home) as yard:
        first = derive(yard, IMAGE, kinds=["bug"], n=1, seed=1, out=tmp_path / "r1", resume=resume)
        facts = resume.facts
        second = derive(yard, IMAGE, kinds=["bug"], n=1, seed=1, out=tmp_path / "r2", resume=resume)
    assert resume.facts is facts and second.facts_s < first.facts_s / 3  # no second baseline run
    tried = [(o.mutation.kind, o.mutation.site, o.mutation.name) for o in first.outcomes + second.outcomes
             if o.status != "pending"]
    assert len(tried) == len(set(tried)) and set(tried) == resume.tried
    assert len(first.kept) == len(second.kept) == 1 and first.kept[0].name != second.kept[0].name
    assert (tmp_path / "r2" / second.kept[0].name / "task.toml").is_file()


def test_the_total_budget_plan_favours_cheap_images_and_retires_spent_ones():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_derive", Path(SRC).parent / "benchmarks" / "derive.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    stats = {"fast": {"kept": 6, "spent": 30.0, "done": False}, "mid": {"kept": 2, "spent": 50.0, "done": False},
             "slow": {"kept": 1, "spent": 200.0, "done": False}, "none": {"kept": 0, "spent": 90.0, "done": False},
             "used-up": {"kept": 4, "spent": 10.0, "done": True}}
    plan = bench.plan_round(stats, left=1000)
    # cheapest first; nothing kept, nothing left, or 40 × the cheapest's cost per task: no more rounds
    assert [p[0] for p in plan] == ["fast", "mid"]
    (_, n_fast, b_fast), (_, n_mid, b_mid) = plan
    assert b_fast == bench.SLICE and b_mid == bench.MIN_SLICE and n_fast > n_mid >= 1
    assert bench.plan_round(stats, left=0) == []


def test_a_mutation_that_breaks_no_test_is_dropped_with_its_reason(home):
    from envyard.derive import facts as facts_mod
    from envyard.derive.validate import Costs, Dropped, screen
    from envyard.yard import Yard

    with Yard(home) as yard:
        facts = facts_mod.gather(yard, facts_mod.setup_image(yard, IMAGE), sources=False)
        assert facts.baseline["tests.test_numbers::test_mean"] == "passed"
        harmless = Mutation(kind="bug", name="comment", site="src/minilib/numbers.py:1:0:Comment",
                            break_script=f"echo '# nothing' >> {facts.workdir}/src/minilib/numbers.py",
                            fix_script="true")
        with pytest.raises(Dropped) as e:
            screen(yard, facts, harmless, Costs())
        assert e.value.reason == "no-test-fails"
        breaking = Mutation(kind="bug", name="mean", site="src/minilib/numbers.py:12:4:Return",
                            break_script=f"sed -i 's|sum(values) / len(values)|0|' {facts.workdir}/src/minilib/numbers.py",
                            fix_script="true")
        s = screen(yard, facts, breaking, Costs())
        assert s.failing == ["tests.test_numbers::test_mean"] and list(s.hidden) == ["tests/test_numbers.py"]


def test_bad_input_is_refused_with_distinct_exit_codes(home, tmp_path):
    def derive(*args):
        return envyard(home, "derive", *args, timeout=120)

    r = derive("setup/no-such-image", "--out", tmp_path / "a")
    assert r.returncode == 3 and "no-such-image" in r.stderr
    r = derive("host", "--out", tmp_path / "b")
    assert r.returncode == 24 and "not made by `envyard setup`" in r.stderr
    with envyard_api.Yard(home) as y, y.sandbox(IMAGE) as sb:
        sb.write_file("/tmp/changed", "x")
        child = sb.snapshot("snap/minilib:1")  # inherits the setup image's provenance, but is not what it verified
    r = derive(child.name, "--out", tmp_path / "e")
    assert r.returncode == 24 and "is a snapshot of setup/minilib" in r.stderr
    r = derive(IMAGE, "--kind", "nonsense", "--out", tmp_path / "c")
    assert r.returncode == 2 and "unknown kind" in r.stderr
    r = derive(IMAGE, "--n", "0", "--out", tmp_path / "d")
    assert r.returncode == 2
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("")
    r = derive(IMAGE, "--out", full)
    assert r.returncode == 2 and "not an empty directory" in r.stderr
    for name in ("a", "b", "c", "d", "e"):
        assert not (tmp_path / name).exists()  # refused before anything was written
    sandboxes = envyard(home, "ps", "--json")
    assert json.loads(sandboxes.stdout or "[]") == []


def test_a_kind_without_its_generator_is_skipped_with_a_message():
    from envyard.derive.pipeline import KINDS, load_kinds

    mods, skipped = load_kinds(list(KINDS))
    assert "bug" in mods
    for kind, why in skipped.items():
        assert kind in ("env", "commit") and "missing" in why


def test_ctrl_c_leaves_no_sandbox_nor_snapshot(home, tmp_path):
    import signal
    import time

    out = tmp_path / "interrupted"
    p = subprocess.Popen([sys.executable, "-m", "envyard.cli.main", "derive", IMAGE, "--n", "50", "--seed", "4",
                          "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={"ENVYARD_HOME": str(home), **BARE, "PYTHONPATH": SRC}, cwd=cli_cwd(),
                         preexec_fn=sigint_default)
    deadline = time.monotonic() + 120
    while not (out / ".staging").exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.2)
    time.sleep(2)  # candidates are being screened and validated
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err[-1000:]
    assert json.loads((out / "report.json").read_text())["interrupted"] is True
    assert not (out / ".staging").exists()
    assert json.loads(envyard(home, "ps", "--json").stdout) == []
    assert not [i for i in json.loads(envyard(home, "images", "--json").stdout) if i["name"].startswith("snapshot/")]
