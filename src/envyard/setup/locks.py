"""The versions a project locked in `poetry.lock` or `pdm.lock`, as a constraints file for uv.

A shipped uv.lock is exported by uv itself (pins.UV_LOCK_EXPORT). Poetry's and PDM's locks are read here, on the
host, with tomllib: every `[[package]]` table gives `name==version`, with its environment marker where the format
has one (poetry's lock-version 2.1 `markers`, PDM's `marker`). The result is written into the environment by a
plain shell step (`printf` of the lines), so setup.sh and the Dockerfile stay self-contained.

Markers matter only when a name is locked at several versions (one per Python range, say): a constraint applies
only to what gets installed, so a pin for a package this interpreter never installs is harmless. That is why a
marker naming an extra (poetry's `extra == "test"` on optional packages) is dropped when the name has one version:
in a constraints file no extra is active, so the pin would never apply. Entries that
are not registry distributions (git, url, file, directory sources, or another index) are left out, with the
reason. A file that cannot be read, or a lock format this module does not know, is not used at all (LockError).
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass, field

from packaging.markers import InvalidMarker, Marker
from packaging.version import InvalidVersion, Version

LOCKED = "/opt/envyard/locked.txt"  # the constraints file a poetry.lock or pdm.lock becomes
CHECK_LOG = "/tmp/envyard-lock-check.txt"
EXTRA = re.compile(r"\bextra\s*[=!]=|[=!]=\s*extra\b")  # poetry marks optional packages with their extras
NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
# the lock formats this reader knows: poetry's lock-version 1.x (Poetry < 1.3) and 2.x; PDM's lock_version 3.x, 4.x
POETRY_MAJORS = (1, 2)
PDM_MAJORS = (3, 4)


class LockError(Exception):
    """The lock file cannot be used: unreadable, not a lock of its kind, or a format version not known here."""


@dataclass
class Locked:
    tool: str  # poetry | pdm
    pins: list[str] = field(default_factory=list)  # `name==version` or `name==version ; marker`, sorted by name
    skipped: list[str] = field(default_factory=list)  # `name: why`, entries that are not pinned

    @property
    def file(self) -> str:
        return f"{self.tool}.lock"


def normalize(name: str) -> str:
    """PEP 503's normal form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(tool: str, text: str) -> Locked:
    """Parse a poetry.lock or pdm.lock text. Raises LockError when the file as a whole cannot be used."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise LockError(f"not valid TOML ({e})") from None
    meta = data.get("metadata")
    if not isinstance(meta, dict):
        raise LockError("no [metadata] table: not a lock file written by the tool")
    key, majors = ("lock-version", POETRY_MAJORS) if tool == "poetry" else ("lock_version", PDM_MAJORS)
    version = meta.get(key)
    version = str(version) if isinstance(version, (int, float)) and not isinstance(version, bool) else version
    if not isinstance(version, str) or not re.match(r"^\d+(\.\d+)*$", version):
        raise LockError(f"[metadata] has no {key}")
    if int(version.split(".")[0]) not in majors:
        raise LockError(f"{key} {version} is not a format envyard reads (it reads "
                        + ", ".join(f"{m}.x" for m in majors) + ")")
    packages = data.get("package", [])
    if not isinstance(packages, list) or not all(isinstance(p, dict) for p in packages):
        raise LockError("[[package]] entries are not tables")
    out = Locked(tool)
    entries: dict[str, list[tuple[str, str | None]]] = {}  # name → (version, marker)
    for p in packages:
        name, ver = p.get("name"), p.get("version")
        if not isinstance(name, str) or not isinstance(ver, str):
            out.skipped.append(f"{name or '?'}: no name or version")
            continue
        name = name.split("[", 1)[0].strip()  # older PDM locks list `pkg[extra]` entries of their own
        why = _not_registry(tool, p)
        if why:
            out.skipped.append(f"{normalize(name)}: {why}")
            continue
        if not NAME.match(name):
            out.skipped.append(f"{name}: not a distribution name")
            continue
        try:
            Version(ver)
        except InvalidVersion:
            out.skipped.append(f"{normalize(name)}: version {ver!r} is not a PEP 440 version")
            continue
        try:
            marker = _marker(tool, p)
        except (InvalidMarker, TypeError, SyntaxError) as e:  # some packaging releases raise SyntaxError
            out.skipped.append(f"{normalize(name)}: its marker cannot be read ({str(e).splitlines()[0]})")
            continue
        entries.setdefault(normalize(name), []).append((ver, marker))
    for name, found in sorted(entries.items()):
        by_version: dict[str, list[str | None]] = {}
        for ver, marker in found:
            by_version.setdefault(ver, []).append(marker)
        if len(by_version) > 1 and any(None in ms for ms in by_version.values()):
            out.skipped.append(f"{name}: locked at several versions ({', '.join(by_version)}) without markers "
                               "telling them apart")
            continue
        for ver, markers in by_version.items():
            # one version under several markers: any of them (a marker-less entry holds everywhere)
            marker = None if None in markers else " or ".join(f"({m})" for m in dict.fromkeys(markers)) \
                if len(set(markers)) > 1 else markers[0]
            if marker and len(by_version) == 1 and EXTRA.search(marker):
                marker = None  # `extra == ...` is false in a constraints file: the pin would never apply
            out.pins.append(f"{name}=={ver}" + (f" ; {marker}" if marker else ""))
    return out


def _not_registry(tool: str, p: dict) -> str:
    """Why an entry is not a registry distribution to pin ("" when it is one)."""
    if tool == "poetry":
        source = p.get("source")
        kind = source.get("type") if isinstance(source, dict) else None
        if kind in ("git", "url", "file", "directory"):
            return f"a {kind} source, not a registry distribution"
        if kind:  # "legacy" and the like: a package index other than PyPI, whose versions PyPI may not have
            return f"from another package index ({source.get('reference') or source.get('url') or kind})"
        return ""
    for key in ("git", "hg", "svn", "bzr", "url", "path"):
        if p.get(key):
            return f"a {key} source, not a registry distribution"
    return ""


def _marker(tool: str, p: dict) -> str | None:
    """The entry's environment marker, checked (raises InvalidMarker), or None."""
    raw = p.get("markers") if tool == "poetry" else p.get("marker")
    if raw is None or raw == "":
        return None
    if isinstance(raw, dict):  # poetry 2.x: one marker per dependency group; all groups are installed, so any
        values = list(dict.fromkeys(str(v) for v in raw.values()))
        if not values:
            return None
        raw = values[0] if len(values) == 1 else " or ".join(f"({v})" for v in values)
    if not isinstance(raw, str):
        raise TypeError(f"a {type(raw).__name__}, not a string")
    marker = str(Marker(raw))
    if any(c in marker for c in "\r\n"):  # a "\n" escape packaging decoded: it would add a line to the file
        raise InvalidMarker("a marker that spans lines")
    return marker


def step_command(locked: Locked, check_flags: str = "") -> str:
    """One shell line (fit for a Dockerfile RUN too) that writes the constraints file and checks that its
    pins can be installed here (`uv pip install --dry-run --no-deps`: each version exists for this interpreter);
    when they cannot, it says so and empties the file, so the lock is not used."""
    lines = " ".join(shlex.quote(p) for p in locked.pins)
    return (f"mkdir -p /opt/envyard && printf '%s\\n' {lines} > {LOCKED} && (env -u UV_CONSTRAINT uv pip install "
            f"--dry-run --no-deps{check_flags} -r {LOCKED} >/dev/null 2>{CHECK_LOG} || {{ tail -n 5 {CHECK_LOG} >&2; "
            f"echo 'envyard: {locked.file} pins cannot be installed here: not used' >&2; : > {LOCKED}; }})")
