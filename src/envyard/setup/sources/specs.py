"""Requirement strings and version constraints: PEP 508 requirements to fact values, Poetry constraints (`^`, `~`,
`||`) to PEP 440 specifiers, and Python version tokens (`3.10`, `py310`, `python:3.11-slim`) to hints."""

from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version


def requirement_value(text: str) -> dict:
    """A PEP 508 requirement as a fact value: name, spec, marker (None when absent), plus extras and url when
    present, and the normalized requirement string. Raises ValueError when `text` is not a valid requirement."""
    try:
        req = Requirement(text.strip())
    except (InvalidRequirement, SyntaxError) as e:  # packaging 26 raises SyntaxError for a newline in a marker
        raise ValueError(str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    spec = format_specifiers(req.specifier)
    marker = str(req.marker) if req.marker else None
    value: dict = {"name": req.name, "spec": spec, "marker": marker}
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    if req.extras:
        value["extras"] = sorted(req.extras)
    if req.url:
        value["url"] = req.url
        text = f"{req.name}{extras} @ {req.url}" + (f" ; {marker}" if marker else "")
    else:
        text = f"{req.name}{extras}{spec}" + (f"; {marker}" if marker else "")
    if any(c in text for c in "\r\n"):  # a marker's "\n" escape, decoded: the text would break a requirements file
        raise ValueError("a requirement that spans lines")
    value["requirement"] = text
    return value


_OP_ORDER = {"===": 0, "==": 1, "~=": 2, ">=": 3, ">": 4, "<=": 5, "<": 6, "!=": 7}


def format_specifiers(specs: SpecifierSet | str) -> str:
    """A specifier set as text, lower bounds before upper bounds (`>=1.2,<2` rather than `<2,>=1.2`)."""
    if isinstance(specs, str):
        specs = SpecifierSet(specs)
    return ",".join(str(s) for s in sorted(specs, key=lambda s: (_OP_ORDER.get(s.operator, 9), s.version)))


def python_spec(text: str) -> tuple[str, str | None]:
    """A Python constraint as a PEP 440 specifier string, leniently repaired when the text is almost valid (e.g.
    `>=3.6.*`, `>= 3.7 , <4`). Returns (spec, note) where note says what was repaired, or raises ValueError."""
    raw = text.strip().strip("\"'")
    try:
        return format_specifiers(raw), None
    except InvalidSpecifier:
        pass
    fixed = ",".join(_repair_clause(c) for c in re.split(r"\s*,\s*", raw) if c.strip())
    try:
        return format_specifiers(fixed), f"{text.strip()!r} is not valid PEP 440; read as {fixed!r}"
    except InvalidSpecifier:
        raise ValueError(f"{text.strip()!r} is not a valid version specifier") from None


def _repair_clause(clause: str) -> str:
    m = re.fullmatch(r"\s*(===|==|!=|~=|>=|<=|>|<|=)?\s*v?([0-9][0-9a-zA-Z.*+!-]*)\s*", clause)
    if not m:
        return clause
    op, version = m.group(1) or "==", m.group(2)
    if op == "=":
        op = "=="
    if version.endswith(".*") and op not in ("==", "!="):
        version = version[:-2]
    return f"{op}{version}"


# ---------------------------------------------------------------------------------------------------- Poetry

def poetry_to_pep440(constraint: str) -> str:
    """A Poetry version constraint as a PEP 440 specifier. `^1.2.3` → `>=1.2.3,<2.0.0`, `~1.2` → `>=1.2,<1.3`,
    `*` → ``. Alternatives joined with `||` become their hull (lowest lower bound, highest upper bound), which
    PEP 440 can express. Raises ValueError when the constraint cannot be read."""
    alternatives = [a.strip() for a in re.split(r"\|\|?", constraint.strip()) if a.strip()]
    if not alternatives:
        return ""
    sets = [_poetry_alternative(a) for a in alternatives]
    if len(sets) == 1:
        return sets[0]
    return _hull(sets)


def _poetry_alternative(text: str) -> str:
    text = re.sub(r"(===|==|!=|~=|>=|<=|>|<|=|\^|~)\s+", r"\1", text)
    clauses = [c for c in re.split(r"[\s,]+", text) if c]
    out: list[str] = []
    for clause in clauses:
        out.extend(_poetry_clause(clause.strip()))
    spec = ",".join(out)
    try:
        return format_specifiers(spec) if spec else ""
    except InvalidSpecifier:
        raise ValueError(f"{text!r} is not a valid Poetry constraint") from None


def _poetry_clause(clause: str) -> list[str]:
    if clause in ("*", ""):
        return []
    if clause.startswith("^"):
        return _caret(clause[1:].strip())
    if clause.startswith("~") and not clause.startswith("~="):
        return _tilde(clause[1:].strip())
    m = re.fullmatch(r"(===|==|!=|~=|>=|<=|>|<|=)?\s*(.+)", clause)
    if not m:
        raise ValueError(f"{clause!r} is not a valid Poetry constraint")
    op, version = m.group(1), m.group(2).strip()
    version = re.sub(r"\.[xX](?=$|\.)", ".*", version)
    if op in (None, "="):
        op = "=="
    return [f"{op}{version}"]


def _release(version: str) -> list[int]:
    """The release numbers of `version`, as many as were written (`1.2` → [1, 2], `1.2.3b1` → [1, 2, 3])."""
    try:
        v = Version(version)
    except InvalidVersion:
        raise ValueError(f"{version!r} is not a valid version") from None
    return list(v.release)


def _caret(version: str) -> list[str]:
    parts = _release(version)
    nonzero = next((i for i, p in enumerate(parts) if p != 0), len(parts) - 1)
    upper = parts[:nonzero + 1]
    upper[-1] += 1
    upper += [0] * (len(parts) - len(upper))
    return [f">={version}", "<" + ".".join(map(str, upper))]


def _tilde(version: str) -> list[str]:
    parts = _release(version)
    keep = 2 if len(parts) >= 2 else 1
    upper = parts[:keep]
    upper[-1] += 1
    upper += [0] * (len(parts) - len(upper))
    return [f">={version}", "<" + ".".join(map(str, upper))]


def _hull(specs: list[str]) -> str:
    lows: list[Version | None] = []
    highs: list[tuple[Version, str] | None] = []
    for spec in specs:
        low, high = None, None
        for s in SpecifierSet(spec):
            if "*" in s.version:
                continue
            v = Version(s.version)
            if s.operator in (">=", ">", "==", "~=", "==="):
                low = v if low is None or v > low else low
            if s.operator in ("<", "<=", "=="):
                op = "<" if s.operator == "<" else "<="
                high = (v, op) if high is None or v < high[0] else high
        lows.append(low)
        highs.append(high)
    out = []
    if all(lo is not None for lo in lows):
        out.append(f">={min(lows)}")
    if all(hi is not None for hi in highs):
        v, op = max(highs, key=lambda h: h[0])
        out.append(f"{op}{v}")
    return ",".join(out)


def marker_for_python(spec: str) -> str:
    """A PEP 508 marker that holds exactly when the running Python satisfies `spec`."""
    clauses = []
    for s in SpecifierSet(spec):
        version = s.version
        if version.endswith(".*"):
            var, version = "python_version", version[:-2]
        else:
            var = "python_full_version" if version.count(".") >= 2 else "python_version"
        clauses.append(f'{var} {s.operator} "{version}"')
    return " and ".join(sorted(clauses))


# ---------------------------------------------------------------------------------------------------- Python hints

_VERSION_RE = re.compile(r"^\s*v?([23])\.(\d{1,2})(?:\.(\d{1,3}))?(?:[-.]?(?:dev|rc|alpha|beta|a|b)[\w.-]*)?\s*$")
_TOX_FACTOR_RE = re.compile(r"^py([23])\.?(\d{1,2})$")
_IMAGE_RE = re.compile(r"^(?:[\w.-]+(?::\d+)?/)*python(?::|@|$)")


def version_hint(text: object) -> str | None:
    """`3.10`, `"3.10.4"`, `3.13-dev` → the version; `3.x`, `pypy3.9`, `${{ matrix.python }}` → None."""
    m = _VERSION_RE.match(str(text))
    if not m:
        return None
    return ".".join(g for g in m.groups() if g is not None)


def tox_factor_version(factor: str) -> str | None:
    """`py310` / `py3.10` → `3.10`; `py3`, `pypy3`, `lint` → None."""
    m = _TOX_FACTOR_RE.match(factor.strip())
    return f"{m.group(1)}.{m.group(2)}" if m else None


def image_python_version(image: str) -> str | None:
    """`python:3.11-slim`, `docker.io/library/python:3.9` → the version; other images → None."""
    image = image.strip().strip("\"'")
    if not _IMAGE_RE.match(image) or ":" not in image.rsplit("/", 1)[-1]:
        return None
    tag = image.rsplit(":", 1)[1].split("@")[0]
    m = re.match(r"([23]\.\d{1,2}(?:\.\d{1,3})?)(?:$|[-.])", tag)
    return m.group(1) if m else None


_CLASSIFIER_RE = re.compile(r"^\s*Programming Language\s*::\s*Python\s*::\s*([23]\.\d{1,2})\s*$")


def classifier_version(classifier: str) -> str | None:
    m = _CLASSIFIER_RE.match(classifier)
    return m.group(1) if m else None
