"""The derive pipeline: facts from a verified setup image, candidates from each kind's generator (interleaved),
screening and validation in sandboxes on a few worker threads, tasks written to --out, and report.json listing
what was kept and what was dropped with its reason.

Determinism: candidates come in the order the seeded generators give them, and decisions (dedup, the first N
kept) are taken in that order whatever order the workers finish in; the same image and seed give the same tasks
(as long as the project's tests are deterministic)."""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import itertools
import json
import random
import shutil
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from ..errors import BadInput, EnvyardError
from . import facts as facts_mod
from . import testrun
from .mutation import Mutation, SourceFacts
from .validate import REASONS, Costs, Dropped, screen, validate
from .writer import difficulty, task_name, write_task

# kind → module with `candidates(facts, rng)` and optionally `probe_script()` (mutation.py)
KINDS = {"bug": "envyard.derive.bugs", "env": "envyard.derive.envbreak", "commit": "envyard.derive.commits"}
STAGING = ".staging"


def parse_kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise BadInput(f"unknown kind {', '.join(bad) or repr(text)}", fix=f"use one or more of {', '.join(KINDS)}")
    return list(dict.fromkeys(kinds))


def load_kinds(kinds: list[str]) -> tuple[dict, dict[str, str]]:
    """(kind → module, kind → why it is skipped): a kind whose module is not in this envyard is skipped."""
    mods, skipped = {}, {}
    for k in kinds:
        try:
            mods[k] = importlib.import_module(KINDS[k])
        except ModuleNotFoundError as e:
            if e.name != KINDS[k]:
                raise
            skipped[k] = f"no generator for kind {k!r} in this envyard ({KINDS[k]} is missing)"
    return mods, skipped


def check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BadInput(f"{out}: exists and is not an empty directory", fix="give a new or empty --out directory")


@dataclass
class Outcome:
    index: int
    mutation: Mutation
    status: str = "pending"  # kept | dropped | surplus
    reason: str = ""
    detail: str = ""
    name: str = ""
    failing: list[str] = field(default_factory=list)
    difficulty: str = ""
    score: int = 0
    costs: Costs = field(default_factory=Costs)
    instruction: str = ""  # with a rewrite model: "rewritten" | "deterministic"
    instruction_reason: str = ""  # why the deterministic instruction stayed (derive/rewrite.py REASONS)
    instruction_detail: str = ""

    def to_dict(self) -> dict:
        m = self.mutation
        d = {"name": self.name, "kind": m.kind, "site": m.site, "mutation": m.name, "status": self.status,
             "screen_s": round(self.costs.screen, 2), "validate_s": round(self.costs.validate, 2)}
        if self.status == "dropped":
            d.update(reason=self.reason, why=REASONS.get(self.reason, ""), detail=self.detail)
        else:
            d.update(failing_tests=len(self.failing), difficulty=self.difficulty, difficulty_score=self.score,
                     patch_lines=m.patch_lines, files_touched=len(m.files),
                     verifier_runs_s=[round(x, 2) for x in self.costs.runs])
            if self.instruction:
                d["instruction"] = self.instruction
                if self.instruction_reason:
                    d.update(instruction_rejected=self.instruction_reason,
                             instruction_rejected_detail=self.instruction_detail)
        return d


@dataclass
class Report:
    image: str
    seed: int
    kinds: list[str]
    n: int
    out: str
    skipped_kinds: dict[str, str] = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list)
    facts_s: float = 0.0
    wall_s: float = 0.0
    baseline_tests: int = 0
    suite_s: float = 0.0
    interrupted: bool = False
    rewrite: dict | None = None  # with a rewrite model: the model, endpoint and seconds spent

    @property
    def kept(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "kept"]

    @property
    def dropped(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "dropped"]

    def breakdown(self) -> dict:
        """Where the sandbox time went: the baseline, the kept tasks' phases, and what each drop reason cost
        (worker seconds: two workers overlap, so the parts can sum past the wall time)."""
        kept, dropped = self.kept, self.dropped
        spent: Counter = Counter()
        for o in dropped:
            spent[o.reason] += o.costs.screen + o.costs.validate
        total = self.facts_s + sum(o.costs.screen + o.costs.validate for o in kept + dropped)
        return {
            "baseline_s": round(self.facts_s, 1),
            "kept_screen_break_s": round(sum(o.costs.screen_break for o in kept), 1),
            "kept_screen_tests_s": round(sum(o.costs.screen_tests for o in kept), 1),
            "kept_screen_other_s": round(sum(o.costs.screen - o.costs.screen_break - o.costs.screen_tests
                                             for o in kept), 1),  # sandbox start, reading hidden tests
            "kept_setup_snapshot_s": round(sum(o.costs.setup for o in kept), 1),
            "kept_forks_s": round(sum(o.costs.forks for o in kept), 1),
            "dropped_s": round(sum(spent.values()), 1),
            "dropped_s_by_reason": {k: round(v, 1) for k, v in spent.most_common()},
            "dropped_screen_tests_s": round(sum(o.costs.screen_tests for o in dropped), 1),
            "total_s_per_kept_task": round(total / len(kept), 1) if kept else None,
        }

    def to_dict(self) -> dict:
        kept = self.kept
        per_task = [o.costs.screen + o.costs.validate for o in kept]
        considered = [o for o in self.outcomes if o.status in ("kept", "dropped")]
        return {
            "image": self.image, "seed": self.seed, "kinds": self.kinds, "n": self.n, "out": self.out,
            "skipped_kinds": self.skipped_kinds, "baseline_tests": self.baseline_tests,
            "suite_s": round(self.suite_s, 2), "facts_s": round(self.facts_s, 2), "wall_s": round(self.wall_s, 2),
            "candidates": len(considered), "kept": len(kept), "dropped": len(self.dropped),
            "dropped_by_reason": dict(Counter(o.reason for o in self.dropped).most_common()),
            "kept_by_kind": dict(Counter(o.mutation.kind for o in kept)),
            "kept_by_difficulty": dict(Counter(o.difficulty for o in kept)),
            "tasks_per_hour": round(len(kept) / self.wall_s * 3600, 1) if self.wall_s else 0.0,
            "validation_s_per_task_median": round(statistics.median(per_task), 2) if per_task else None,
            "candidate_cost_s_total": round(sum(o.costs.screen + o.costs.validate for o in considered), 1),
            "cost_breakdown": self.breakdown(),
            "interrupted": self.interrupted,
            **({"rewrite": self._rewrite_summary(kept)} if self.rewrite is not None else {}),
            "tasks": [o.to_dict() for o in kept],
            "dropped_candidates": [o.to_dict() for o in self.dropped],
        }

    def _rewrite_summary(self, kept: list[Outcome]) -> dict:
        fallbacks = [o.instruction_reason for o in kept if o.instruction_reason]
        return {**self.rewrite, "rewritten": sum(o.instruction == "rewritten" for o in kept),
                "deterministic": len(kept) - sum(o.instruction == "rewritten" for o in kept),
                "deterministic_by_reason": dict(Counter(fallbacks).most_common())}


@dataclass
class Resume:
    """What one derive run on an image leaves for the next run on it (the benchmark's --total-budget rounds):
    the facts (no second baseline), the candidates already decided (never tried again), the dedup keys and the
    task names taken. Pass the same seed and kinds each time."""
    facts: SourceFacts | None = None
    tried: set = field(default_factory=set)  # (kind, site, mutation name)
    seen: set = field(default_factory=set)  # (site, failing tests): the dedup keys
    names: set = field(default_factory=set)


def _key(m: Mutation) -> tuple[str, str, str]:
    return (m.kind, m.site, m.name)


WINDOW = 16  # candidates reordered together by cheapness


def cheapest_first(candidates: Iterator[Mutation], facts: SourceFacts, window: int = WINDOW) -> Iterator[Mutation]:
    """The candidates in groups of `window`, each group in order of the size of the test run its screening needs
    (a code bug that only a small test file executes before one that runs the whole suite); ties keep the seeded
    order. The size is the number of baseline tests in scope, not their time: the order, and so the tasks, stay
    the same from run to run. Every candidate still comes, only sooner or later within its group."""
    files = set(facts.files)
    per_file = Counter(testrun.test_file(t, files) for t in facts.baseline)
    total = len(facts.baseline)

    def size(m: Mutation) -> int:
        return sum(per_file.get(f, 0) for f in m.test_scope) if m.test_scope else total

    while True:
        group = list(itertools.islice(candidates, window))
        if not group:
            return
        yield from sorted(group, key=size)


def interleave(gens: list[Iterator[Mutation]]) -> Iterator[Mutation]:
    """Round-robin over the kinds' generators until all are exhausted."""
    live = list(gens)
    while live:
        for g in list(live):
            try:
                yield next(g)
            except StopIteration:
                live.remove(g)


def derive(yard, image_ref: str, *, kinds: list[str], n: int, seed: int, out: Path, workers: int = 2,
           max_candidates: int | None = None, on_event: Callable[[str, object], None] | None = None,
           cancel: threading.Event | None = None, guided: bool = True, budget_s: float | None = None,
           baseline_timeout: float = facts_mod.BASELINE_TIMEOUT, resume: Resume | None = None,
           rewrite_model: str | None = None, base_url: str | None = None, api_key: str | None = None,
           rewrite_concurrency: int = 4) -> Report:
    """Derive up to `n` validated tasks from a verified setup image into `out`. Raises EnvyardError on bad input
    (NotASetupImage, ImageNotFound, BadInput); KeyboardInterrupt leaves nothing behind but finished tasks.
    `guided=False` skips the traced baseline run (every site is tried, with the whole suite): for comparison.
    `budget_s`: no new candidate starts that many seconds after the baseline (the benchmark's bound per image).
    `resume`: carried from an earlier run on the same image: its facts are reused and its candidates skipped.
    `rewrite_model`: an OpenAI-compatible endpoint (`base_url`, else $OPENAI_BASE_URL; `api_key`, else
    $OPENAI_API_KEY) rewrites each kept task's instruction, `rewrite_concurrency` at once (derive/rewrite.py)."""
    if n < 1:
        raise BadInput(f"--n must be at least 1, got {n}")
    check_out(out)
    rewriter = None
    if rewrite_model is not None:  # a bad configuration fails now, before any sandbox runs
        from .rewrite import Rewriter

        rewriter = Rewriter(rewrite_model, base_url=base_url, api_key=api_key, concurrency=rewrite_concurrency)
    image = facts_mod.setup_image(yard, image_ref)
    mods, skipped = load_kinds(kinds)
    report = Report(image=image.name, seed=seed, kinds=kinds, n=n, out=str(out), skipped_kinds=skipped)
    emit = on_event or (lambda kind, data: None)
    for k, why in skipped.items():
        emit("skipped-kind", why)
    if not mods:
        raise BadInput("no kind to derive: " + "; ".join(skipped.values()))
    start = time.monotonic()
    emit("phase", f"baseline: running the tests of {image.name}")
    resume = resume if resume is not None else Resume()
    if resume.facts is None:
        probes = {k: m.probe_script() for k, m in mods.items() if hasattr(m, "probe_script")}
        resume.facts = facts_mod.gather(yard, image, probes, sources="bug" in mods, guided=guided,
                                        timeout=baseline_timeout)
    facts = resume.facts
    report.facts_s = time.monotonic() - start
    report.baseline_tests, report.suite_s = len(facts.baseline), facts.suite_seconds
    emit("phase", f"baseline: {len(facts.baseline)} tests in {facts.suite_seconds:.1f}s")
    gens = [iter(mods[k].candidates(facts, random.Random(f"{seed}:{k}"))) for k in mods]
    candidates = cheapest_first((m for m in interleave(gens) if _key(m) not in resume.tried), facts)
    if max_candidates is None:
        max_candidates = max(30, 25 * n)
    out.mkdir(parents=True, exist_ok=True)
    staging = out / STAGING
    staging.mkdir()
    cancel = cancel or threading.Event()
    snapshots: set[str] = set()
    try:
        _run(yard, facts, candidates, report, out, staging, n=n, seed=seed, workers=workers,
             max_candidates=max_candidates, emit=emit, cancel=cancel, snapshots=snapshots,
             deadline=time.monotonic() + budget_s if budget_s else None, seen=resume.seen, names=resume.names)
        if rewriter is not None:
            _rewrite(rewriter, report, out, emit, cancel)
    except BaseException:
        cancel.set()
        report.interrupted = True
        raise
    finally:
        resume.tried.update(_key(o.mutation) for o in report.outcomes if o.status != "pending")
        shutil.rmtree(staging, ignore_errors=True)
        for name in list(snapshots):
            try:
                yard.remove_image(name)
            except EnvyardError:
                pass
        report.wall_s = time.monotonic() - start
        (out / "report.json").write_text(json.dumps(report.to_dict(), indent=1) + "\n")
    return report


def _run(yard, facts: SourceFacts, candidates: Iterator[Mutation], report: Report, out: Path, staging: Path, *,
         n: int, seed: int, workers: int, max_candidates: int, emit, cancel: threading.Event,
         snapshots: set[str], deadline: float | None = None, seen: set | None = None,
         names: set | None = None) -> None:
    seen = set() if seen is None else seen
    names = set() if names is None else names
    window = max(2, workers * 2)

    def do_screen(o: Outcome):
        if cancel.is_set():
            raise Dropped("infra", "cancelled")
        try:
            return screen(yard, facts, o.mutation, o.costs)
        except EnvyardError as e:
            raise Dropped("infra", e.message[:200]) from e

    def do_validate(o: Outcome, s):
        if cancel.is_set():
            raise Dropped("infra", "cancelled")
        dest = staging / o.name
        write_task(dest, facts, o.mutation, s, seed=seed, name=o.name)
        validate(yard, facts, dest, s, o.costs, snapshots=snapshots, network=o.mutation.network)
        return dest

    def drop(o: Outcome, d: Dropped):
        o.status, o.reason, o.detail = "dropped", d.reason, d.detail
        emit("dropped", o)

    counter = itertools.count()
    pending: list[tuple[Outcome, cf.Future]] = []  # screening, in candidate order
    validating: dict[int, tuple[Outcome, cf.Future]] = {}
    exhausted = False
    with cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="derive") as pool:
        try:
            while True:
                kept_or_coming = len([o for o in report.outcomes if o.status == "kept"]) + len(validating)
                # keep the pool fed with screenings while more tasks may be needed
                while (not exhausted and len(pending) < window and kept_or_coming < n
                       and len(report.outcomes) < max_candidates and not cancel.is_set()
                       and (deadline is None or time.monotonic() < deadline)):
                    try:
                        m = next(candidates)
                    except StopIteration:
                        exhausted = True
                        break
                    o = Outcome(next(counter), m)
                    report.outcomes.append(o)
                    pending.append((o, pool.submit(do_screen, o)))
                    emit("candidate", o)
                if not pending and not validating:
                    break
                # decide screenings in candidate order; collect finished validations
                if pending and pending[0][1].done():
                    o, fut = pending.pop(0)
                    try:
                        s = fut.result()
                    except Dropped as d:
                        drop(o, d)
                        continue
                    key = (o.mutation.site, tuple(sorted(s.failing)))
                    if key in seen:
                        drop(o, Dropped("duplicate", o.mutation.site))
                        continue
                    seen.add(key)
                    o.name = _unique(task_name(facts, o.mutation), names)
                    o.failing = s.failing
                    o.difficulty, o.score = difficulty(o.mutation, s)
                    validating[o.index] = (o, pool.submit(do_validate, o, s))
                    continue
                for idx, (o, fut) in list(validating.items()):
                    if not fut.done():
                        continue
                    del validating[idx]
                    try:
                        dest = fut.result()
                    except Dropped as d:
                        drop(o, d)
                        shutil.rmtree(staging / o.name, ignore_errors=True)
                        continue
                    o.status = "kept"
                    dest.rename(out / o.name)
                    emit("kept", o)
                if not (pending and pending[0][1].done()):
                    waiting = [f for _, f in pending[:1]] + [f for _, f in validating.values()]
                    if waiting:
                        cf.wait(waiting, timeout=0.5, return_when=cf.FIRST_COMPLETED)
        except BaseException:
            cancel.set()
            for _, f in pending + list(validating.values()):
                f.cancel()
            yard.close()  # kills the sandboxes running tests now, so the workers stop at once
            raise
    # validations finish in any order: keep the first n in candidate order, the rest is surplus
    kept = sorted(report.kept, key=lambda o: o.index)
    for o in kept[n:]:
        o.status = "surplus"
        shutil.rmtree(out / o.name, ignore_errors=True)


def _rewrite(rewriter, report: Report, out: Path, emit, cancel: threading.Event) -> None:
    from .rewrite import rewrite_tasks

    kept = sorted(report.kept, key=lambda o: o.index)
    emit("phase", f"rewriting {len(kept)} instructions with {rewriter.model}")
    start = time.monotonic()
    results = rewrite_tasks([out / o.name for o in kept], rewriter, cancel=cancel,
                            on_done=lambda r: emit("rewritten", r))
    for o, r in zip(kept, results):
        o.instruction, o.instruction_reason, o.instruction_detail = r.instruction, r.reason, r.detail
    report.rewrite = {"model": rewriter.model, "base_url": rewriter.base_url,
                      "seconds": round(time.monotonic() - start, 2)}


def _unique(name: str, names: set[str]) -> str:
    base, i = name, 2
    while name in names:
        name = f"{base[:60]}-{i}"
        i += 1
    names.add(name)
    return name
