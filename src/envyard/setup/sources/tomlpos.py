"""Line numbers for TOML documents. `tomllib` gives values but no positions, so this scanner walks the text once
and remembers where each key is assigned and where each string literal sits (under the key it belongs to)."""

from __future__ import annotations

import re
import tomllib

_BARE = r"[A-Za-z0-9_\-]+"
_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'"
_KEY = rf"(?:{_BARE}|{_QUOTED})(?:[ \t]*\.[ \t]*(?:{_BARE}|{_QUOTED}))*"
_HEADER_RE = re.compile(rf"\[\[?[ \t]*({_KEY})[ \t]*\]\]?")
_ASSIGN_RE = re.compile(rf"({_KEY})[ \t]*=")
_PART_RE = re.compile(rf"[ \t]*({_BARE}|{_QUOTED})[ \t]*(?:\.|$)")


def split_key(text: str) -> tuple[str, ...]:
    parts = []
    for m in _PART_RE.finditer(text):
        part = m.group(1)
        if part[0] in "\"'":
            part = _unquote(part)
        parts.append(part)
    return tuple(parts)


def _unquote(literal: str) -> str:
    if literal.startswith('"') and "\\" in literal:
        try:
            return tomllib.loads(f"x = {literal}")["x"]
        except tomllib.TOMLDecodeError:
            pass
    return literal[1:-1]


class TomlPositions:
    """Where keys and string literals of a TOML text are. Paths are tuples of keys, tables included."""

    def __init__(self, text: str):
        self.keys: dict[tuple[str, ...], int] = {}
        self.strings: list[tuple[tuple[str, ...], str, int]] = []   # (owning key path, content, first line)
        self._scan(text)

    def key_line(self, *path: str) -> int | None:
        return self.keys.get(tuple(path))

    def string_lines(self, path: tuple[str, ...], value: str) -> list[int]:
        """Lines of every string literal equal to `value` that sits under `path` (in order)."""
        n = len(path)
        return [line for owner, content, line in self.strings if owner[:n] == path and content == value]

    def locate(self, path: tuple[str, ...], values: list[str]) -> list[int | None]:
        """A line for each of `values` (strings under `path`, in document order); repeated values take successive
        occurrences. Falls back to the line of the key itself."""
        used: dict[str, int] = {}
        out: list[int | None] = []
        for value in values:
            lines = self.string_lines(path, value)
            k = used.get(value, 0)
            used[value] = k + 1
            out.append(lines[k] if k < len(lines) else self.key_line(*path))
        return out

    def _scan(self, text: str) -> None:
        i, n, line = 0, len(text), 1
        table: tuple[str, ...] = ()
        current: tuple[str, ...] = ()
        depth = 0
        line_start = True
        while i < n:
            c = text[i]
            if c == "\n":
                line += 1
                i += 1
                line_start = True
                continue
            if c in " \t\r":
                i += 1
                continue
            if c == "#":
                j = text.find("\n", i)
                i = n if j < 0 else j
                continue
            if line_start and depth == 0:
                line_start = False
                if c == "[":
                    m = _HEADER_RE.match(text, i)
                    if m:
                        table = current = split_key(m.group(1))
                        self.keys.setdefault(table, line)
                        i = m.end()
                        continue
                m = _ASSIGN_RE.match(text, i)
                if m:
                    current = table + split_key(m.group(1))
                    self.keys.setdefault(current, line)
                    i = m.end()
                    continue
            line_start = False
            if c in "\"'":
                i, line = self._string(text, i, line, current)
                continue
            if c in "[{":
                depth += 1
            elif c in "]}":
                depth = max(0, depth - 1)
            i += 1

    def _string(self, text: str, i: int, line: int, owner: tuple[str, ...]) -> tuple[int, int]:
        quote = text[i]
        triple = text.startswith(quote * 3, i)
        if triple:
            start = i + 3
            end = text.find(quote * 3, start)
            while quote == '"' and end > 0 and _escaped(text, end):
                end = text.find(quote * 3, end + 1)
            if end < 0:
                end = len(text)
            while text.startswith(quote, end + 3):     # up to two extra quotes belong to the content
                end += 1
            raw = text[start:end]
            first_line = line
            body = raw
            if body.startswith("\r\n"):
                body, first_line = body[2:], line + 1
            elif body.startswith("\n"):
                body, first_line = body[1:], line + 1
            content = body
            if quote == '"' and "\\" in content:
                try:
                    content = tomllib.loads(f'x = """{raw}"""')["x"]
                except tomllib.TOMLDecodeError:
                    pass
            self.strings.append((owner, content, first_line))
            return end + 3, line + raw.count("\n")
        j = i + 1
        while j < len(text) and text[j] != quote and text[j] != "\n":
            j += 2 if (quote == '"' and text[j] == "\\") else 1
        self.strings.append((owner, _unquote(text[i:j + 1]), line))
        return j + 1, line


def _escaped(text: str, pos: int) -> bool:
    k, backslashes = pos - 1, 0
    while k >= 0 and text[k] == "\\":
        backslashes += 1
        k -= 1
    return backslashes % 2 == 1


def error_line(err: tomllib.TOMLDecodeError) -> int | None:
    m = re.search(r"at line (\d+)", str(err))
    return int(m.group(1)) if m else None


def load_toml(sink, rel: str) -> tuple[dict, TomlPositions] | None:
    """Read and parse a TOML file of the repository; a broken one becomes a problem (file, line, why)."""
    text = sink.read(rel)
    if text is None:
        return None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        sink.problem(rel, error_line(e), f"invalid TOML: {e}")
        return None
    return data, TomlPositions(text)
