"""Documentation (README*, CONTRIBUTING*, INSTALL*, docs/): `apt-get install` / `apt install` lines in code —
fenced or indented blocks, inline code spans, or shell-prompt lines. Prose is not read as commands."""

from __future__ import annotations

import re

from .base import Sink
from .shell import record_apt

MAX_DOC_FILES = 200
_DOC_EXT = (".md", ".rst", ".txt", ".markdown")
_PROMPT_RE = re.compile(r"^\s*(?:\$|#|>|%)?\s*(?:sudo\s+)?(?:apt-get|apt|aptitude)\s")


def doc_files(sink: Sink) -> list[str]:
    def wanted(path: str, name: str) -> bool:
        upper = name.upper()
        if "/" not in path:
            return upper.startswith(("README", "CONTRIBUTING", "INSTALL", "HACKING", "DEVELOP"))
        top = path.split("/", 1)[0]
        return top in ("docs", "doc") and name.lower().endswith(_DOC_EXT)
    return sink.files.matching(wanted, max_depth=3)[:MAX_DOC_FILES]


def read_docs(sink: Sink) -> None:
    for rel in doc_files(sink):
        text = sink.read(rel, limit=500_000, quiet=True)
        if text and "apt" in text:
            record_apt(sink, code_lines(text), rel, "docs.apt-get")


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line, text) of the lines of `text` that are code: inside ``` or ~~~ fences, indented by four spaces or a
    tab, shell-prompt lines, and the contents of inline `code` spans."""
    out: list[tuple[int, str]] = []
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        m = re.match(r"^(`{3,}|~{3,})", stripped)
        if m:
            fence = None if fence and stripped.startswith(fence) else fence or m.group(1)
            continue
        if fence or line.startswith(("    ", "\t")) or _PROMPT_RE.match(line):
            out.append((number, line))
            continue
        for span in re.findall(r"`+([^`]+)`+", line):
            out.append((number, span))
    return out
