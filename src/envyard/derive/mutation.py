"""The one shape every task generator produces. A `Mutation` is a candidate task before validation: how to
break a healthy environment, how to undo it, and what the agent may see and change. Generators (one module per
kind) only propose; the validator decides, by running the tests in forks, which candidates become tasks.

A kind's module (derive/pipeline.py KINDS) has `candidates(facts, rng) -> Iterator[Mutation]` and may have
`probe_script() -> str`: a program run once in a sandbox over the healthy image, as root from `workdir`, whose
stdout (one JSON object) becomes `facts.extra[kind]`. It runs with the environment's interpreter (`python -I -`)
unless its first line is a shell shebang (`#!/bin/sh`, `#!/bin/bash`); `$ENVYARD_PYTHON` names that interpreter
and `$ENVYARD_PACKAGES` the project's top-level packages (space-separated)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SourceFacts:
    """What a generator may know about the healthy image, gathered once in a sandbox over it."""

    image: str  # the setup image the tasks are derived from
    workdir: str  # the project root inside it
    test_runner: str  # pytest | unittest | django | script (setup/runners.py)
    test_command: str  # runs the whole suite from `workdir`
    packages: tuple[str, ...]  # the project's top-level importable names
    python: str  # the environment's interpreter (absolute path inside the image)
    baseline: dict[str, str] = field(default_factory=dict)  # test id → passed | failed | error | skipped
    extra: dict = field(default_factory=dict)  # kind-specific probes (installed distributions, sources, ...)
    # Added by the pipeline (derive/facts.py); defaults keep older callers working:
    services: tuple[str, ...] = ()  # services the tests need (started around every test run)
    files: tuple[str, ...] = ()  # every .py file of the project tree, relative to workdir
    test_files: dict[str, str] = field(default_factory=dict)  # test file (relative) → its text
    suite_seconds: float = 0.0  # how long the baseline run of the whole suite took
    file_seconds: dict[str, float] = field(default_factory=dict)  # test file → its tests' time in the baseline


@dataclass(frozen=True)
class Mutation:
    kind: str  # "env" | "bug" | "commit"
    name: str  # short slug, unique within a source: becomes part of the task name
    site: str  # where it acts ("dist:requests", "src/pkg/mod.py:42:Compare"); with the failing set, the dedup key
    break_script: str  # sh, run as root from `workdir` in a fork of the healthy image: makes the broken environment
    fix_script: str  # sh, the oracle: run in the broken environment it restores passing tests (solution/solve.sh)
    symptom: str = ""  # what a user would see, for the instruction; "" = taken from the failing tests' output
    hidden: tuple[str, ...] = ()  # paths (relative to workdir) removed from the agent's view, restored for the verifier
    carry: tuple[str, ...] = ()  # paths the verifier takes from the agent's sandbox; () = the project tree only
    patch_lines: int = 0  # size of the fix, for the difficulty estimate
    files: tuple[str, ...] = ()  # files the fix touches
    meta: dict = field(default_factory=dict)  # provenance for task.toml [metadata]

    @property
    def network(self) -> str:
        """"host" when the break or its repair downloads (a reinstall from PyPI or Debian), else "none"."""
        return "host" if self.meta.get("network") == "host" else "none"
    # Added for code bugs (derive/bugs.py); defaults keep the other kinds unchanged:
    test_scope: tuple[str, ...] = ()  # test files that can notice it (for a slow suite); () = the whole suite
