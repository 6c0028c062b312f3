"""Commit inversion: a commit of the project's history that changed its tests and its code becomes the task
"make these tests pass" on the code as it was before the commit, with the environment the image already has.

Break script: the commit's diff of non-test files, applied in reverse to the image's tree (so for HEAD, the
parent's version of those files; for an older commit, the tree without that commit's code change — when later
commits make it not apply, the break fails and the validator drops the candidate). The commit's tests stay.
The history goes: `.git` is replaced by a one-commit repository of the broken tree, so neither `git log` nor
the object store hands the agent the answer. Oracle: the same diff applied forward (`git apply`).
The verifier carries the project tree only (the default).
"""

from __future__ import annotations

import base64
import random
import re
import shlex
from pathlib import Path
from typing import Iterator

from .mutation import Mutation, SourceFacts

PROBE = Path(__file__).with_name("commitprobe.py")
KIND = "commit"
PATCH = "/tmp/.envyard-commit.patch"
# A fresh repository of the broken tree: `git diff` / `git status` work for the agent, the history does not.
SNAPSHOT = ("rm -rf .git\n"
            "git init -q && git add -A && "
            "git -c user.name=envyard -c user.email=envyard@localhost commit -q --no-verify -m snapshot\n")


def probe_script() -> str:
    """sh (its shebang says so), run from the workdir: prints the probe's JSON (commitprobe.py, run by
    `$ENVYARD_PYTHON` when the caller names it, else `python3` on PATH)."""
    return (f"#!/bin/sh\nexec \"${{ENVYARD_PYTHON:-python3}}\" - <<'ENVYARD_PROBE_EOF'\n{PROBE.read_text()}\n"
            "ENVYARD_PROBE_EOF\n")


def candidates(facts: SourceFacts, rng: random.Random) -> Iterator[Mutation]:
    """One mutation per eligible commit, in an order fixed by `rng`."""
    probe = facts.extra.get("commit") or {}
    commits = list(probe.get("commits") or [])
    rng.shuffle(commits)
    for c in commits:
        yield _inversion(c)


def _patch_file(diff: str) -> str:
    """sh that writes the diff to PATCH byte for byte (base64 in a quoted here-document)."""
    data = base64.b64encode(diff.encode()).decode()
    lines = "\n".join(data[i:i + 76] for i in range(0, len(data), 76))
    return f"base64 -d > {PATCH} <<'ENVYARD_EOF'\n{lines}\nENVYARD_EOF\n"


def _inversion(c: dict) -> Mutation:
    short = c["sha"][:12]
    apply = "git apply --whitespace=nowarn"
    break_script = (f"set -e\n{_patch_file(c['diff'])}{apply} -R {PATCH}\nrm -f {PATCH}\n{SNAPSHOT}")
    fix_script = f"set -e\n{_patch_file(c['diff'])}{apply} {PATCH}\nrm -f {PATCH}\n"
    return Mutation(
        kind=KIND, name=f"commit-{short}", site=f"commit:{c['sha']}", break_script=break_script,
        fix_script=fix_script, patch_lines=int(c.get("added", 0)) + int(c.get("removed", 0)),
        files=tuple(c["files"]),
        meta={"commit": c["sha"], "parent": c["parent"], "subject": _one_line(c.get("subject", "")),
              "date": c.get("date", ""), "tests_changed": ", ".join(shlex.quote(t) for t in c["tests"]),
              "reverse_patch": c["diff"]})  # the writer saves it as solution/fix.diff (not in [metadata])


def _one_line(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()[:200]
