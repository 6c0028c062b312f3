"""Pinned contracts: the exact versions of the environment that passed, and how a replay installs them.

A recipe says what to install (`uv pip install -e .[test]`, `pytest`), not which versions: replayed next month it
would resolve to something else. So when a branch ends, the versions in its environment are recorded (`uv pip
freeze`, only `name==version` lines: the project itself, by path or by the name its metadata gives, and other local
or editable installs are not distributions to pin), and the contract carries them as a constraints file,
`requirements.lock`: setup.sh, the Dockerfile and setup's own clean replay write it to PINS, export `UV_CONSTRAINT`
so that every `uv pip install` of the recipe resolves to those versions, and end with an exact install of the file
(`--no-deps`), which changes nothing when every pin already holds and puts back any a step could not honour (e.g.
the pip and setuptools that `uv venv --seed` brings). The replay then compares the versions installed with the pins.
Installs one by one can leave an environment whose requirements disagree (a later step downgrades what an earlier
one needed); resolving each step against all the pins would then fail, so when `uv pip check` finds such a conflict
the pins are not a constraint, and only the exact install at the end puts them in place.

A project that ships `uv.lock` is installed from it from the start: the recipe's first install step exports the
lock (`uv export --frozen`, every extra and group, markers kept) to LOCK_EXPORT, which constrains every install
of the search, so what passes is what the project locked, and the replay installs the same. A `poetry.lock` or
`pdm.lock` (without a uv.lock) is read on the host instead and written as constraints by the same kind of step
(locks.py). A lock step that cannot export or install its pins leaves an empty file: the lock is not used.
"""

from __future__ import annotations

import re
import shlex

from packaging.utils import canonicalize_name

PINS = "/opt/envyard/requirements.lock"
LOCK_EXPORT = "/opt/envyard/uv-lock.txt"
FREEZE = "uv pip freeze --exclude-editable"
PIN_LINE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+$")
EXACT = f"uv pip install --no-deps -r {PINS}"
CHECK = "uv pip check"
UV_LOCK_EXPORT = (f"mkdir -p /opt/envyard && (uv export --frozen --no-hashes --all-extras --all-groups --no-emit-project "
                  f"--no-emit-workspace --no-header --no-annotate -o {LOCK_EXPORT} >/dev/null || {{ echo 'envyard: "
                  f"uv.lock could not be exported: not used' >&2; : > {LOCK_EXPORT}; }})")


def source(lock_source: str, used: bool) -> tuple[str, str]:
    """Where the pins come from, and a warning when the project's lock was planned but its step left the
    constraints file empty (it could not be exported, or its pins cannot be installed here)."""
    if lock_source and used:
        return lock_source, ""
    return "uv pip freeze", (f"{lock_source} not used: its pins could not be exported, could not be installed "
                             "here, or conflicted with the project's requirements (the log and repairs say which); "
                             "the versions that passed are pinned instead" if lock_source else "")


def lock_conflict(output: str, constraints: str) -> str | None:
    """The locked `name==version` a failed resolution names (uv: "No solution found ... you require
    iniconfig>=2 and iniconfig==1.1.1"), when a pin of the lock's constraints file is to blame; else None."""
    if "No solution found" not in output:
        return None
    locked = {line.split(";")[0].strip().lower() for line in constraints.splitlines() if "==" in line}
    return next((p for p in re.findall(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]*[A-Za-z0-9]", output)
                 if p.lower() in locked), None)


def parse_freeze(stdout: str, project: list[str] = ()) -> list[str]:
    """The `name==version` lines of a freeze, sorted by name, without the project's own distributions
    (`project`: their names). The contract installs the project from its source; a step that replaced it with
    a release (a plugin pinning `project==X` while the checkout's version is `0+untagged`) leaves it in the
    freeze as `project==X`, and pinned, the replay's install of the source could not be resolved."""
    return _pin_lines(stdout, project, own=False)


def replaced_project(stdout: str, project: list[str]) -> list[str]:
    """The `name==version` lines of a freeze that are releases of the project itself: a step installed one over
    the source (parse_freeze leaves them out of the pins)."""
    return _pin_lines(stdout, project, own=True)


def _pin_lines(stdout: str, project: list[str], *, own: bool) -> list[str]:
    names = {canonicalize_name(n) for n in project}
    return sorted({line.strip() for line in stdout.splitlines() if PIN_LINE.match(line.strip())
                   and (canonicalize_name(line.partition("==")[0].strip()) in names) == own}, key=str.lower)


def versions(pins: list[str]) -> dict[str, str]:
    """name (normalized) → version."""
    out = {}
    for p in pins:
        name, _, version = p.partition("==")
        out[canonicalize_name(name)] = version
    return out


def differences(pins: list[str], installed: list[str]) -> list[str]:
    """What an environment has that differs from the pins: `name: pinned X, installed Y` (or missing/extra)."""
    want, have = versions(pins), versions(installed)
    out = []
    for name in sorted(set(want) | set(have)):
        if want.get(name) != have.get(name):
            out.append(f"{name}: pinned {want.get(name, '-')}, installed {have.get(name, '-')}")
    return out


def constraint_files(env: dict[str, str]) -> str:
    """UV_CONSTRAINT with the pins first (uv reads a space-separated list of files)."""
    return " ".join(dict.fromkeys([PINS, *env.get("UV_CONSTRAINT", "").split()]))


def write_script(pins: list[str]) -> str:
    """Shell lines that write the pins file (a here-document: the pins are plain `name==version` lines)."""
    return f"mkdir -p /opt/envyard && cat > {PINS} <<'ENVYARD_PINS'\n" + "".join(f"{p}\n" for p in pins) + \
        "ENVYARD_PINS\n"


def docker_run(pins: list[str]) -> str:
    """A Dockerfile RUN line that writes the pins file (no here-documents: they need BuildKit's syntax 1.4)."""
    return "RUN mkdir -p /opt/envyard && printf '%s\\n' " + " ".join(shlex.quote(p) for p in pins) + f" > {PINS}\n"
