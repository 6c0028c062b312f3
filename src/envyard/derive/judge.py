"""The verifier's judge, run inside the verifier's sandbox as `python -I judge.py` (standard library only: it
is copied into every derived task as tests/judge.py). It reads one test run's per-test statuses — pytest's JUnit
XML, or unittest's verbose lines for the other runners — and scores 1 when every test the task expects to pass
passed (and, for pytest, its exit status agrees with its report), else 0. The host reads the same report
during validation, so what validated is what the task runs.

    judge.py EXPECT.json JUNIT OUTPUT EXIT_CODE → writes /logs/verifier/reward.json (numbers only) and
    judge.json (the tests not passed, every status), prints a summary

EXPECT.json: {"runner": "pytest"|"unittest"|"django"|"script", "expect_pass": [test ids], "script_id": "..."}.
Ids are `classname::name` as envyard's setup records them (setup/search.py parse_junit, setup/runners.py).
"""

import json
import os
import re
import sys
import xml.etree.ElementTree as ET

_HEADER_RE = re.compile(r"^(\w+) \(([\w.]+)\)(.*)$")
_STATUS = (("ok", "passed"), ("FAIL", "failed"), ("ERROR", "error"), ("skipped", "skipped"),
           ("expected failure", "skipped"), ("unexpected success", "failed"))


def from_junit(path):
    statuses = {}
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return statuses
    for case in root.iter("testcase"):
        tid = "%s::%s" % (case.get("classname", ""), case.get("name", ""))
        kinds = {child.tag for child in case}
        statuses[tid] = ("failed" if "failure" in kinds else "error" if "error" in kinds
                         else "skipped" if "skipped" in kinds else "passed")
    return statuses


def _status(text):
    text = text.strip()
    for word, status in _STATUS:
        if text == word or (word == "skipped" and text.startswith("skipped ")):
            return status
    return None


def from_verbose(output):
    """unittest's `-v` lines → {`pkg.mod.Case::test_x`: status} (as envyard.setup.runners.parse_verbose)."""
    out, pending = {}, None
    for line in output.splitlines():
        m = _HEADER_RE.match(line)
        if m:
            name, where, rest = m.groups()
            case = where[: -len(name) - 1] if where.endswith("." + name) else where
            pending = "%s::%s" % (case, name)
        elif pending is None:
            continue
        else:
            rest = line
        if " ... " in rest or rest.endswith(" ..."):
            status = _status(rest.split(" ... ", 1)[1] if " ... " in rest else "")
        else:
            status = None if m else _status(rest)
        if status:
            out[pending] = status
            pending = None
    return out


def statuses(spec, junit, output_path, exit_code):
    if spec["runner"] == "pytest":
        return from_junit(junit)
    try:
        with open(output_path, errors="replace") as f:
            output = f.read()
    except OSError:
        output = ""
    found = from_verbose(output)
    if not found and spec["runner"] == "script":
        found = {spec.get("script_id", "script::main"): "passed" if exit_code == 0 else "failed"}
    return found


def disagreement(spec, got, exit_code):
    """Why pytest's exit status contradicts its report, or None. pytest exits 0 when every test passed and 1 when
    one failed or errored (both reported); anything else (2 interrupted, 3 internal error, 4 usage error, 5 no
    tests) means the run did not finish as a test run. A report that a test's code rewrote as the run ended
    while the status stayed 1 is caught here; a pytest patched in-process is not (docs/derive.md, Limits)."""
    if spec["runner"] != "pytest":
        return None
    if exit_code not in (0, 1):
        return "pytest exited %d (not a finished test run)" % exit_code
    failed = any(v in ("failed", "error") for v in got.values())
    if failed != (exit_code == 1):
        return "pytest exited %d but its report has %s" % (exit_code, "failures" if failed else "no failure")
    return None


def main(argv):
    spec_path, junit, output_path, exit_code = argv[1], argv[2], argv[3], int(argv[4])
    with open(spec_path) as f:
        spec = json.load(f)
    got = statuses(spec, junit, output_path, exit_code)
    bad = {t: got.get(t, "missing") for t in spec["expect_pass"] if got.get(t) != "passed"}
    contradiction = disagreement(spec, got, exit_code)
    reward = 0.0 if bad or contradiction else 1.0
    report = {"reward": reward, "expected": len(spec["expect_pass"]), "not_passed": len(bad),
              "failing": sorted(bad)[:50], "statuses": got}
    if contradiction:
        report["contradiction"] = contradiction
    logs = os.environ.get("ENVYARD_JUDGE_LOGS", "/logs/verifier")
    os.makedirs(logs, exist_ok=True)
    with open(os.path.join(logs, "reward.json"), "w") as f:  # numbers only: Harbor refuses anything else
        json.dump({k: v for k, v in report.items() if isinstance(v, (int, float))}, f)
    with open(os.path.join(logs, "judge.json"), "w") as f:
        json.dump(report, f)
    print("reward %s: %d of %d expected tests passed" % (reward, len(spec["expect_pass"]) - len(bad),
                                                        len(spec["expect_pass"])))
    if contradiction:
        print("  reward 0: " + contradiction)
    for t in sorted(bad)[:20]:
        print("  not passed: %s (%s)" % (t, bad[t]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
