"""Validation by forks: a candidate becomes a task only when the sandboxes prove it fair and solvable.

1. screen: in a sandbox over the healthy image, apply the break and run the tests that matter (the whole suite
   when it is fast, else the test files that name the changed module). Kept only if at least one test that
   passed in the baseline does not pass now, and (for code bugs) the break does not take down most of the run.
2. the task is written (writer.py); its environment/setup.sh is run once over the healthy image and the
   result snapshotted: the broken environment.
3. in forks of that snapshot, the task's own verifier (tests/test.sh) runs: with no change (noop) it must score
   0 with the same tests failing as in the screening run — REPRODUCE times out of REPRODUCE, counting that run;
   after solution/solve.sh (oracle) it must score 1. Each verifier run must finish within the task's verifier
   timeout.

Every drop has a reason (REASONS) that the report lists.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EnvyardError
from . import testrun
from .mutation import Mutation, SourceFacts
from .writer import Screened, verifier_timeout

REPRODUCE = 3  # the break's failures seen this many times: the screening run, then REPRODUCE - 1 noop verifiers
BREAK_TIMEOUT = 300.0
REASONS = {
    "break-failed": "the break script failed",
    "no-test-fails": "no test that passed fails with the break (the mutation survived)",
    "breaks-too-much": "the break makes most of the tests fail (a crash on import, not a bug to find)",
    "timeout": "the tests ran past the limit with the break (a hang)",
    "no-results": "the test run with the break reported no per-test results",
    "test-unlocatable": "a failing test's file could not be found, so it cannot be hidden",
    "test-in-source": "a failing test lives in a changed file",
    "duplicate": "same failing tests at the same site as a kept candidate",
    "setup-failed": "the task's environment/setup.sh failed",
    "noop-passes": "the verifier scored the unchanged broken environment above 0",
    "not-reproducible": "the same tests did not fail in every noop run",
    "oracle-fails": "the verifier did not score the oracle's fix 1",
    "verifier-slow": "a verifier run took longer than the task's verifier timeout",
    "infra": "a sandbox failed while validating",
}


class Dropped(Exception):
    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason, self.detail = reason, detail


@dataclass
class Costs:
    screen: float = 0.0
    validate: float = 0.0
    runs: list[float] = field(default_factory=list)  # seconds of each verifier run
    # where the time went (the report's cost breakdown): the break script and the test run of the screening,
    # the task's setup.sh and snapshot, and the noop/oracle forks (wall time: they run at once)
    screen_break: float = 0.0
    screen_tests: float = 0.0
    setup: float = 0.0
    forks: float = 0.0


def screen(yard, facts: SourceFacts, m: Mutation, costs: Costs) -> Screened:
    start = time.monotonic()
    try:
        with yard.sandbox(facts.image, workdir=facts.workdir, network=m.network) as sb:
            t = time.monotonic()
            r = sb.exec(m.break_script, cwd=facts.workdir, timeout=BREAK_TIMEOUT)
            costs.screen_break += time.monotonic() - t
            if r.exit_code != 0:
                raise Dropped("break-failed", (r.stderr.strip().splitlines() or [f"exit {r.exit_code}"])[-1][:200])
            limit = testrun.time_limit(facts, m.test_scope)  # a hang costs this much
            run = testrun.run(sb, facts, m.test_scope, timeout=limit)
            costs.screen_tests += run.seconds
            if run.timed_out:
                raise Dropped("timeout", f"past {limit:.0f}s")
            if not run.statuses:
                raise Dropped("no-results", f"exit {run.exit_code}")
            files = set(facts.files)
            expect = sorted(t for t, st in facts.baseline.items() if st == "passed"
                            and (not m.test_scope or testrun.test_file(t, files) in m.test_scope))
            failing = [t for t in expect if run.statuses.get(t) != "passed"]
            if not failing:
                raise Dropped("no-test-fails")
            if m.kind == "bug" and len(failing) > max(3, len(expect) // 2):
                raise Dropped("breaks-too-much", f"{len(failing)} of {len(expect)} tests")
            hidden: dict[str, bytes] = {}
            if m.kind == "bug":
                for t in failing:
                    path = testrun.test_file(t, files)
                    if path is None:
                        raise Dropped("test-unlocatable", t)
                    if path in m.files:
                        raise Dropped("test-in-source", path)
                    if path not in hidden:  # the break changed no test file: these are the healthy ones
                        hidden[path] = sb.read_file(os.path.join(facts.workdir, path))
            else:
                for path in m.hidden:
                    hidden[path] = sb.read_file(os.path.join(facts.workdir, path))
            return Screened(failing=failing, expect_pass=expect, messages=run.messages, scope=m.test_scope,
                            hidden=hidden, run_seconds=run.seconds)
    finally:
        costs.screen += time.monotonic() - start


def _verify(sb, task: Path, timeout: float, costs: Costs) -> dict:
    sb.upload(task / "tests", "/tests")
    sb.exec("rm -rf /logs/verifier && mkdir -p /logs/verifier")
    start = time.monotonic()
    r = sb.exec(["bash", "/tests/test.sh"], cwd="/tests", timeout=timeout + 5, env={"TEST_DIR": "/tests"})
    took = time.monotonic() - start
    costs.runs.append(took)
    if r.timed_out or took > timeout:
        raise Dropped("verifier-slow", f"{took:.1f}s > {timeout}s")
    try:
        reward = json.loads(sb.read_file("/logs/verifier/judge.json"))
    except (EnvyardError, ValueError) as e:
        raise Dropped("infra", f"no reward from the verifier (exit {r.exit_code}): "
                               f"{(r.stdout + r.stderr).strip()[-200:] or e}")
    return reward


def validate(yard, facts: SourceFacts, task: Path, s: Screened, costs: Costs, *, reproduce: int = REPRODUCE,
             snapshots: set | None = None, network: str = "none") -> None:
    """Raises Dropped unless the written task at `task` validates (noop 0 reproducibly, oracle 1, in time).
    `network`: the task's ("host" when its break or repair downloads)."""
    start = time.monotonic()
    broken = None
    timeout = verifier_timeout(s)
    try:
        with yard.sandbox(facts.image, workdir=facts.workdir, network=network) as sb:
            sb.upload(task / "environment" / "setup.sh", "/tmp/envyard-setup.sh")
            r = sb.exec(["bash", "/tmp/envyard-setup.sh"], cwd=facts.workdir, timeout=BREAK_TIMEOUT)
            if r.exit_code != 0:
                raise Dropped("setup-failed", (r.stderr.strip().splitlines() or [f"exit {r.exit_code}"])[-1][:200])
            sb.exec(["rm", "-f", "/tmp/envyard-setup.sh"])
            broken = sb.snapshot(temporary=True)
            if snapshots is not None:
                snapshots.add(broken.name)
        costs.setup += time.monotonic() - start
        forks_start = time.monotonic()
        noops = reproduce - 1  # the screening run was the first reproduction
        forks = yard.fork(broken, noops + 1, workdir=facts.workdir, network=network)

        def noop(sb):
            got = _verify(sb, task, timeout, costs)
            if got.get("reward") != 0:
                raise Dropped("noop-passes", f"reward {got.get('reward')}")
            if sorted(got.get("failing", [])) != sorted(s.failing)[:50]:
                raise Dropped("not-reproducible", f"failing {len(got.get('failing', []))} vs {len(s.failing)}")

        def oracle(sb):
            sb.upload(task / "solution", "/solution")
            r = sb.exec(["bash", "/solution/solve.sh"], cwd=facts.workdir, timeout=BREAK_TIMEOUT)
            if r.exit_code != 0:
                raise Dropped("oracle-fails", f"solve.sh exit {r.exit_code}: {r.stderr.strip()[-200:]}")
            got = _verify(sb, task, timeout, costs)
            if got.get("reward") != 1:
                raise Dropped("oracle-fails", f"reward {got.get('reward')}; not passed: {got.get('failing', [])[:3]}")

        # the forks are independent: they run at once, and the first failure in this order is the reason
        try:
            with cf.ThreadPoolExecutor(max_workers=len(forks)) as pool:
                futures = [pool.submit(noop, sb) for sb in forks[:noops]] + [pool.submit(oracle, forks[noops])]
            for f in futures:
                f.result()
        finally:
            for sb in forks:
                sb.close()
            costs.forks += time.monotonic() - forks_start
    except EnvyardError as e:
        raise Dropped("infra", e.message[:200]) from e
    finally:
        if broken is not None:
            try:
                yard.remove_image(broken.name)
                if snapshots is not None:
                    snapshots.discard(broken.name)
            except EnvyardError:
                pass
        costs.validate += time.monotonic() - start
