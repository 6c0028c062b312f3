""".dockerignore: Docker's pattern rules.

One pattern a line; `#` starts a comment line; blank lines are skipped. Patterns are cleaned like paths and a
leading `/` is dropped, so they are always relative to the context's root. `*` matches within one path segment,
`?` one character, `[...]` a class, `**` any number of segments (also none), `\\` escapes. A pattern that
matches a directory excludes everything below it. `!pattern` re-includes what an earlier pattern excluded;
the last pattern that matches a path decides.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import ContextError

_REGEX_SPECIAL = set(".+()|{}$^")


@dataclass(frozen=True)
class Pattern:
    text: str
    exclusion: bool  # a `!` line: re-includes
    regex: re.Pattern


def _compile(pattern: str) -> re.Pattern:
    out, i = ["^"], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            if pattern[i + 1:i + 2] == "*":
                i += 1
                if pattern[i + 1:i + 2] == "/":
                    i += 1
                out.append(".*" if i + 1 >= len(pattern) else "(.*/)?")
            else:
                out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "\\":
            if i + 1 < len(pattern):
                i += 1
                out.append(re.escape(pattern[i]))
            else:
                out.append(r"\\")
        elif ch in _REGEX_SPECIAL:
            out.append("\\" + ch)
        else:
            out.append(ch)  # '[' and ']' keep their meaning: a character class
        i += 1
    out.append("$")
    try:
        return re.compile("".join(out))
    except re.error as e:
        raise ContextError(f".dockerignore: bad pattern {pattern!r}: {e}", fix="fix or remove that line") from None


def compile_segment(pattern: str) -> re.Pattern:
    """One path segment of a COPY source glob (Go's filepath.Match: `*`, `?`, `[...]`, `\\`)."""
    return _compile(pattern)


def parse(text: str) -> list[Pattern]:
    patterns = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exclusion = line.startswith("!")
        if exclusion:
            line = line[1:].strip()
            if not line:
                raise ContextError('.dockerignore: "!" alone is not a pattern', fix="write !PATTERN")
        line = posixpath.normpath(line)
        if len(line) > 1 and line.startswith("/"):
            line = line.lstrip("/")
        patterns.append(Pattern(line, exclusion, _compile(line)))
    return patterns


class Ignore:
    """Which context paths (relative, '/'-separated) the .dockerignore excludes."""

    def __init__(self, patterns: list[Pattern]):
        self.patterns = patterns
        self.has_exclusions = any(p.exclusion for p in patterns)

    @classmethod
    def load(cls, context: Path, dockerfile: Path | None = None) -> "Ignore":
        """`<Dockerfile>.dockerignore` beside the Dockerfile wins over the context's `.dockerignore` (BuildKit)."""
        for candidate in ([dockerfile.with_name(dockerfile.name + ".dockerignore")] if dockerfile else []) + \
                [context / ".dockerignore"]:
            if candidate.is_file():
                return cls(parse(candidate.read_text(errors="replace")))
        return cls([])

    def excluded(self, rel: str) -> bool:
        if not self.patterns or rel in ("", "."):
            return False
        parts = rel.split("/")
        parents = ["/".join(parts[:i]) for i in range(1, len(parts))]
        matched = False
        for p in self.patterns:
            if p.exclusion != matched:
                continue  # only a pattern that could change the verdict is worth testing
            hit = bool(p.regex.match(rel)) or any(p.regex.match(parent) for parent in parents)
            if hit:
                matched = not p.exclusion
        return matched

    def may_reinclude_below(self, rel: str) -> bool:
        """Whether an excluded directory must still be walked: with any `!` pattern, something inside may be
        re-included (walking it is slower, never wrong)."""
        return self.has_exclusions
