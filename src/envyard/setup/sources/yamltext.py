"""YAML documents as plain data whose scalars remember their line: `Scalar` is a `str` with a `.line`.

PyYAML is used when it is installed (its node tree carries positions). Without it, a small reader for the block
YAML that CI and compose files use (mappings, sequences, flow `[...]`/`{...}`, quoted, plain and block scalars)
gives the same shapes. Every scalar stays a string: `3.10` is "3.10", never the float 3.1."""

from __future__ import annotations

import re

try:  # optional: a real parser when available
    import yaml
except ImportError:  # pragma: no cover - depends on the environment
    yaml = None


class Scalar(str):
    line: int | None = None

    def __new__(cls, value: str, line: int | None):
        obj = super().__new__(cls, value)
        obj.line = line
        return obj


class YamlError(ValueError):
    def __init__(self, message: str, line: int | None):
        super().__init__(message)
        self.line = line


def load_all(text: str, use_pyyaml: bool | None = None) -> list:
    """Every document of `text`. Raises YamlError (with a line when known) on text that cannot be read."""
    if (use_pyyaml is None and yaml is not None) or use_pyyaml:
        return _load_pyyaml(text)
    return _Reader(text).documents()


# ---------------------------------------------------------------------------------------------------- PyYAML

def _load_pyyaml(text: str) -> list:
    try:
        return [_convert(node) for node in yaml.compose_all(text, Loader=yaml.SafeLoader) if node is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise YamlError(str(e).replace("\n", " "), mark.line + 1 if mark else None) from None
    except RecursionError:
        raise YamlError("nesting too deep", None) from None


def _convert(node, depth: int = 0):
    if depth > 60:
        raise YamlError("nesting too deep", node.start_mark.line + 1)
    if isinstance(node, yaml.ScalarNode):
        line = node.start_mark.line + 1 + (1 if node.style in ("|", ">") else 0)
        return Scalar(node.value, line)
    if isinstance(node, yaml.SequenceNode):
        return [_convert(n, depth + 1) for n in node.value]
    if isinstance(node, yaml.MappingNode):
        out = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == "<<":
                merged = _convert(value, depth + 1)
                for m in merged if isinstance(merged, list) else [merged]:
                    if isinstance(m, dict):
                        for k, v in m.items():
                            out.setdefault(k, v)
                continue
            k = key.value if isinstance(key, yaml.ScalarNode) else str(_convert(key, depth + 1))
            out[Scalar(k, key.start_mark.line + 1)] = _convert(value, depth + 1)
        return out
    return None


# ---------------------------------------------------------------------------------------------------- fallback

_KEY_RE = re.compile(r"""^(?P<key>"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'      # quoted keys
                          |[^\s#'"\-?:,\[\]{}][^#]*?|-[^\s#][^#]*?|\?[^\s][^#]*?)  # plain keys
                       \s*:(?:\s+|$)(?P<rest>.*)$""", re.X)


class _Reader:
    def __init__(self, text: str):
        self.lines = text.replace("\t", "    ").splitlines()

    def documents(self) -> list:
        docs, start = [], 0
        bounds = [i for i, l in enumerate(self.lines) if re.match(r"^(---|\.\.\.)(\s|$)", l)] + [len(self.lines)]
        for end in bounds:
            doc, _ = self._node(start, 0, end)
            if doc is not None:
                docs.append(doc)
            start = end + 1
        return docs

    def _skip(self, i: int, end: int) -> int:
        while i < end and (not self.lines[i].strip() or self.lines[i].lstrip().startswith("#")):
            i += 1
        return i

    @staticmethod
    def _indent(line: str) -> int:
        return len(line) - len(line.lstrip(" "))

    def _node(self, i: int, min_indent: int, end: int):
        i = self._skip(i, end)
        if i >= end:
            return None, i
        line = self.lines[i]
        ind = self._indent(line)
        if ind < min_indent:
            return None, i
        body = line.strip()
        if body == "-" or body.startswith("- "):
            return self._sequence(i, ind, end)
        if _KEY_RE.match(body) and not body.startswith(("[", "{", '"', "'")) or \
                body.startswith(('"', "'")) and _KEY_RE.match(body):
            return self._mapping(i, ind, end)
        value, j = self._inline(body, i, ind, end)
        return value, j

    def _sequence(self, i: int, ind: int, end: int):
        items = []
        while True:
            i = self._skip(i, end)
            if i >= end:
                break
            line = self.lines[i]
            body = line.strip()
            if self._indent(line) != ind or not (body == "-" or body.startswith("- ")):
                break
            if body == "-":
                value, i = self._node(i + 1, ind + 1, end)
            else:
                # reuse the rest of the line as if it were indented: "- key: v" opens a mapping at ind + 2
                offset = len(line) - len(line.lstrip(" ")) + 1
                rest = line[offset:]
                self.lines[i] = " " * (offset + len(rest) - len(rest.lstrip(" "))) + rest.lstrip(" ")
                value, i = self._node(i, ind + 1, end)
            items.append(value)
        return items, i

    def _mapping(self, i: int, ind: int, end: int):
        out: dict = {}
        while True:
            i = self._skip(i, end)
            if i >= end:
                break
            line = self.lines[i]
            if self._indent(line) != ind:
                break
            m = _KEY_RE.match(line.strip())
            if not m or line.strip().startswith("- "):
                break
            key = Scalar(_unquote(m.group("key").strip()), i + 1)
            rest = _strip_comment(m.group("rest")).strip()
            rest = re.sub(r"^(?:&\S+|!!?\S+)\s*", "", rest)
            if rest[:1] in ("|", ">"):
                out[key], i = self._block(i, ind, end, folded=rest[0] == ">", chomp=rest[1:2])
                continue
            if rest:
                out[key], i = self._inline(rest, i, ind, end)
                continue
            j = self._skip(i + 1, end)
            if j < end and self._indent(self.lines[j]) == ind and self.lines[j].strip().startswith("-"):
                out[key], i = self._sequence(j, ind, end)       # a sequence may sit at the key's indent
            else:
                key_line = i + 1
                out[key], i = self._node(i + 1, ind + 1, end)
                if out[key] is None:
                    out[key] = Scalar("", key_line)
        return out, i

    def _block(self, i: int, ind: int, end: int, folded: bool, chomp: str):
        j = i + 1
        body: list[str] = []
        block_indent = None
        while j < end:
            line = self.lines[j]
            if line.strip():
                if self._indent(line) <= ind:
                    break
                if block_indent is None:
                    block_indent = self._indent(line)
                body.append(line[block_indent:] if self._indent(line) >= block_indent else line.lstrip())
            else:
                body.append("")
            j += 1
        while body and not body[-1] and chomp != "+":
            body.pop()
        text = (" ".join(body) if folded else "\n".join(body)) + ("" if chomp == "-" else "\n")
        return Scalar(text, i + 2), j

    def _inline(self, text: str, i: int, ind: int, end: int):
        text = _strip_comment(text).strip()
        if text.startswith(("[", "{")):
            # a flow collection may span lines: gather until brackets balance
            j, buf = i, text
            while _depth(buf) > 0 and j + 1 < end:
                j += 1
                buf += " " + _strip_comment(self.lines[j]).strip()
            return _flow(buf, i + 1), j + 1
        if text.startswith(("*", "&")):
            text = re.sub(r"^&\S+\s*", "", text)
        j = i + 1
        if not text.startswith(('"', "'")):                     # plain scalars continue on deeper lines
            while j < end and self.lines[j].strip() and self._indent(self.lines[j]) > ind \
                    and not _KEY_RE.match(self.lines[j].strip()) and not self.lines[j].strip().startswith("- "):
                text += " " + _strip_comment(self.lines[j]).strip()
                j += 1
        return Scalar(_unquote(text), i + 1), j


def _strip_comment(text: str) -> str:
    quote = None
    for k, c in enumerate(text):
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'" and (k == 0 or text[k - 1] in " \t[{,:"):
            quote = c
        elif c == "#" and (k == 0 or text[k - 1] in " \t"):
            return text[:k]
    return text


def _depth(text: str) -> int:
    depth, quote = 0, None
    for c in text:
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
    return depth


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return re.sub(r'\\(["\\/])', r"\1", text[1:-1]).replace("\\n", "\n").replace("\\t", "\t")
    return text


def _flow(text: str, line: int):
    """A one-level-deep-or-more flow collection `[a, "b", {k: v}]` / `{k: v}`."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        return [_flow(part, line) for part in _split_flow(text[1:-1])]
    if text.startswith("{") and text.endswith("}"):
        out = {}
        for part in _split_flow(text[1:-1]):
            k, sep, v = part.partition(":")
            if sep:
                out[Scalar(_unquote(k), line)] = _flow(v, line)
        return out
    return Scalar(_unquote(text), line)


def _split_flow(text: str) -> list[str]:
    parts, buf, depth, quote = [], [], 0, None
    for c in text:
        if quote:
            buf.append(c)
            if c == quote:
                quote = None
            continue
        if c in "\"'":
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append("".join(buf))
            buf = []
            continue
        buf.append(c)
    parts.append("".join(buf))
    return [p.strip() for p in parts if p.strip()]
