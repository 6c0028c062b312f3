"""Run inside a sandbox over a healthy image (not imported by envyard): prints, as JSON, the commits of the
project's git history that could become "make these tests pass" tasks: non-merge commits that change both
tests and non-test files, each with its diff of the non-test files. Kept compatible with Python 3.8."""

import json
import os
import re
import shutil
import subprocess
import sys

MAX_COMMITS = 200  # walked back from HEAD
MAX_DIFF = 64 * 1024  # bytes of non-test diff; bigger commits make poor tasks and big scripts
MAX_FILES = 12  # non-test files touched
DOC_LIKE = re.compile(r"(^|/)(docs?|doc_src)/|\.(md|rst|txt|adoc)$|(^|/)(CHANGE|HISTORY|NEWS|AUTHORS|LICENSE)",
                      re.I)


def is_test_path(rel):
    parts = rel.split("/")
    name = parts[-1]
    return (any(p in ("test", "tests", "testing") for p in parts[:-1]) or name.startswith("test_")
            or name.endswith("_test.py") or name == "conftest.py")


def git(*args):
    return subprocess.run(["git", "-c", "core.quotepath=off", *args], capture_output=True, text=True,
                          errors="replace", timeout=60)


def main():
    out = {"git": bool(shutil.which("git")), "commits": [], "head": None}
    if not out["git"] or not os.path.exists(".git"):
        print(json.dumps(out))
        return
    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        print(json.dumps(out))
        return
    out["head"] = head.stdout.strip()
    log = git("log", "--no-merges", "-n", str(MAX_COMMITS), "--format=%H %P%x1f%s%x1f%cI", "HEAD")
    for line in log.stdout.splitlines():
        ids, subject, date = (line.split("\x1f") + ["", ""])[:3]
        shas = ids.split()
        if len(shas) != 2:  # the root commit has no parent to invert to
            continue
        sha, parent = shas
        status = git("diff", "--name-status", "--no-renames", parent, sha)
        tests, files = [], []
        for entry in status.stdout.splitlines():
            parts = entry.split("\t")
            if len(parts) < 2:
                continue
            path = parts[-1]
            if is_test_path(path):
                tests.append(path)
            elif not DOC_LIKE.search(path):
                files.append(path)
        if not tests or not files or len(files) > MAX_FILES:
            continue
        diff = git("diff", "--binary", "--no-renames", "--full-index", parent, sha, "--", *files)
        if diff.returncode != 0 or len(diff.stdout) > MAX_DIFF:
            continue
        added = sum(1 for l in diff.stdout.splitlines() if l.startswith("+") and not l.startswith("+++"))
        removed = sum(1 for l in diff.stdout.splitlines() if l.startswith("-") and not l.startswith("---"))
        out["commits"].append({"sha": sha, "parent": parent, "subject": subject, "date": date, "tests": tests,
                               "files": files, "diff": diff.stdout, "added": added, "removed": removed})
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
