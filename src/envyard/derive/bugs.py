"""Code bugs: small AST-level mutations of the project's own modules (not its tests, not vendored code), as a
careless edit would make them. Each operator finds its sites in a module's syntax tree and rewrites only the
source text of that node, so the rest of the file — comments, formatting — stays byte for byte.

The break is a script that replaces the lines around the site (checking they are still what was read); the
oracle is the same script the other way round (the reverse patch). Sites are enumerated for every module, then
shuffled with the seed: the same image and seed give the same candidates in the same order.

To add an operator: write `def _my_op(node, src) -> Iterator[Edit]` yielding edits for the node types it
handles, and add it to OPERATORS. An edit is a span of the source (from the node's positions) and its
replacement; anything that does not parse, or parses to the same tree, is dropped here.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import random
import re
import threading
from dataclasses import dataclass
from typing import Callable, Iterator

from .mutation import Mutation, SourceFacts
from .testrun import FAST_SUITE, can_select, related_test_files

MAX_SITES_PER_FILE = 400  # a huge module does not crowd out the others


@dataclass(frozen=True)
class Edit:
    op: str  # operator name: flip-comparison, off-by-one, ...
    line: int  # 1-based, first line of the span
    col: int  # character column of the span's start
    end_line: int
    end_col: int
    new: str  # replacement for the span
    node: str  # node type at the site


class Source:
    """A module's text with its lines (split on \\n only, as the sandbox writer splits them)."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.split("\n")

    def col(self, line: int, byte_col: int) -> int:
        """ast's UTF-8 byte column → character column."""
        return len(self.lines[line - 1].encode()[:byte_col].decode("utf-8", "replace"))

    def span(self, node) -> tuple[int, int, int, int]:
        return (node.lineno, self.col(node.lineno, node.col_offset), node.end_lineno,
                self.col(node.end_lineno, node.end_col_offset))

    def between(self, a, b) -> tuple[int, int, int, int, str]:
        """The text from the end of node `a` to the start of node `b` (an operator, maybe with parentheses)."""
        la, ca = a.end_lineno, self.col(a.end_lineno, a.end_col_offset)
        lb, cb = b.lineno, self.col(b.lineno, b.col_offset)
        return la, ca, lb, cb, self.segment(la, ca, lb, cb)

    def segment(self, l1, c1, l2, c2) -> str:
        if l1 == l2:
            return self.lines[l1 - 1][c1:c2]
        return "\n".join([self.lines[l1 - 1][c1:], *self.lines[l1:l2 - 1], self.lines[l2 - 1][:c2]])

    def apply(self, e: Edit) -> str:
        before = "\n".join(self.lines[:e.line - 1] + [self.lines[e.line - 1][:e.col]])
        after = "\n".join([self.lines[e.end_line - 1][e.end_col:]] + self.lines[e.end_line:])
        return before + e.new + after


def _replace_token(src: Source, a, b, token: str, new: str, op: str, node) -> Iterator[Edit]:
    """Replace the operator `token` found (once, as a word) between nodes a and b with `new`."""
    l1, c1, l2, c2, text = src.between(a, b)
    word = r"\b" if token[0].isalpha() else ""
    guard = ("", "") if token[0].isalpha() else (r"(?<![=<>!*/&|%^@+-])", r"(?![=<>*/&|])")
    pat = re.compile(guard[0] + word + r"\s+".join(map(re.escape, token.split())) + word + guard[1])
    found = list(pat.finditer(text))
    if len(found) != 1 or "#" in text:
        return
    m = found[0]
    # the span: from the operator's start to its end, in file coordinates
    start_line = l1 + text[:m.start()].count("\n")
    start_col = (c1 if start_line == l1 else 0) + len(text[:m.start()].rsplit("\n", 1)[-1])
    end_line = l1 + text[:m.end()].count("\n")
    end_col = (c1 if end_line == l1 else 0) + len(text[:m.end()].rsplit("\n", 1)[-1])
    yield Edit(op, start_line, start_col, end_line, end_col, new, type(node).__name__)


CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
       ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}
FLIP = {"<": ">=", ">=": "<", ">": "<=", "<=": ">", "==": "!=", "!=": "==", "is": "is not", "is not": "is",
        "in": "not in", "not in": "in"}
BOUNDARY = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
BINOP = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "//"), ast.FloorDiv: ("//", "*"),
         ast.Mod: ("%", "//"), ast.BitAnd: ("&", "|"), ast.BitOr: ("|", "&"), ast.LShift: ("<<", ">>"),
         ast.RShift: (">>", "<<")}
AUG = {ast.Add: ("+=", "-="), ast.Sub: ("-=", "+="), ast.Mult: ("*=", "//="), ast.BitOr: ("|=", "&="),
       ast.BitAnd: ("&=", "|=")}


def _comparison(node, src):
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in CMP:
        token = CMP[type(node.ops[0])]
        yield from _replace_token(src, node.left, node.comparators[0], token, FLIP[token], "flip-comparison", node)
        if token in BOUNDARY:
            yield from _replace_token(src, node.left, node.comparators[0], token, BOUNDARY[token],
                                      "off-by-one-comparison", node)


def _is_text(n) -> bool:
    return isinstance(n, ast.JoinedStr) or (isinstance(n, ast.Constant) and isinstance(n.value, (str, bytes)))


def _arithmetic(node, src):
    if isinstance(node, ast.BinOp) and type(node.op) in BINOP and not (_is_text(node.left) or _is_text(node.right)):
        token, new = BINOP[type(node.op)]
        yield from _replace_token(src, node.left, node.right, token, new, "wrong-operator", node)
    elif isinstance(node, ast.AugAssign) and type(node.op) in AUG and not _is_text(node.value):
        token, new = AUG[type(node.op)]
        yield from _replace_token(src, node.target, node.value, token, new, "wrong-operator", node)


def _boolean(node, src):
    if isinstance(node, ast.BoolOp) and len(node.values) >= 2:
        token, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        yield from _replace_token(src, node.values[0], node.values[1], token, new, "wrong-boolean-operator", node)


def _negation(node, src):
    if isinstance(node, (ast.If, ast.While, ast.IfExp)):
        test = node.test
        l1, c1, l2, c2 = src.span(test)
        text = src.segment(l1, c1, l2, c2)
        if _main_guard(test):
            return
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = src.segment(*src.span(test.operand))
            new = f"({inner})" if "\n" in inner else inner
        else:
            new = f"not ({text})"
        yield Edit("negate-condition", l1, c1, l2, c2, new, type(node).__name__)


def _main_guard(test) -> bool:
    text = ast.unparse(test)
    return "__name__" in text or "TYPE_CHECKING" in text or "sys.version_info" in text or "PY2" in text \
        or "PY3" in text


REMOVABLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Raise, ast.Delete)


def _removal(node, src):
    """A single-line statement in a block of at least two (so the block stays a block) becomes `pass`."""
    for attr in ("body", "orelse", "finalbody"):
        block = getattr(node, attr, None)
        if not isinstance(block, list) or len(block) < 2:
            continue
        for stmt in block:
            if not isinstance(stmt, REMOVABLE) or stmt.lineno != stmt.end_lineno:
                continue
            if isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Call):
                continue  # docstrings and bare names
            if isinstance(stmt, ast.AnnAssign) and stmt.value is None:
                continue
            if isinstance(stmt, ast.Return) and stmt.value is None:
                continue
            l1, c1, l2, c2 = src.span(stmt)
            yield Edit("remove-statement", l1, c1, l2, c2, "pass", type(stmt).__name__)


def _swap(node, src):
    if isinstance(node, ast.Call) and len(node.args) >= 2 and not any(isinstance(a, ast.Starred)
                                                                      for a in node.args[:2]):
        a, b = node.args[0], node.args[1]
        ta, tb = src.segment(*src.span(a)), src.segment(*src.span(b))
        if ta == tb:
            return
        l1, c1, _, _ = src.span(a)
        _, _, l2, c2 = src.span(b)
        _, _, _, _, mid = src.between(a, b)
        if "#" in mid:
            return
        yield Edit("swap-arguments", l1, c1, l2, c2, tb + mid + ta, "Call")


def _constant(node, src):
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        yield Edit("wrong-constant", *src.span(node), str(not node.value), "Constant")
    elif isinstance(node, ast.Constant) and type(node.value) is int and 0 <= node.value < 10_000:
        text = src.segment(*src.span(node))
        if not text.isdigit():
            return  # 0x.., 1_000: left alone
        yield Edit("off-by-one-constant", *src.span(node), str(node.value + 1), "Constant")
        if node.value > 0:
            yield Edit("off-by-one-constant", *src.span(node), str(node.value - 1), "Constant")


OPERATORS: list[Callable[[ast.AST, Source], Iterator[Edit]]] = [
    _comparison, _arithmetic, _boolean, _negation, _removal, _swap, _constant,
]


def _skipped(tree) -> set[int]:
    """Nodes not worth mutating: annotations, and the bodies of `if __name__ == ...`/`if TYPE_CHECKING:`."""
    out: set[int] = set()

    def mark(n):
        for sub in ast.walk(n):
            out.add(id(sub))
    for n in ast.walk(tree):
        if isinstance(n, (ast.arg, ast.AnnAssign)) and n.annotation is not None:
            mark(n.annotation)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if n.returns is not None:
                mark(n.returns)
            for d in n.decorator_list:
                mark(d)
        elif isinstance(n, ast.If) and _main_guard(n.test):
            mark(n)
    return out


_PARSE = threading.Lock()


def parse(text: str) -> ast.Module:
    """ast.parse, one thread at a time. CPython 3.11 keeps the AST constructor's recursion counter in state the
    whole interpreter shares, and two threads building trees at once can throw it off: one of them fails with a
    spurious `SystemError: AST constructor recursion depth mismatch` (python/cpython#106905). Two derive runs in
    one process (the benchmark's images in parallel, a server) hit it; parsing is cheap next to a test run."""
    with _PARSE:
        return ast.parse(text)


def sites(path: str, text: str) -> list[Edit]:
    """Every mutation of one module, checked: the result parses and differs from the original tree."""
    try:
        tree = parse(text)
    except (SyntaxError, ValueError):
        return []
    skip = _skipped(tree)
    src = Source(text)
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        for op in OPERATORS:
            try:
                out.extend(op(node, src))
            except (AttributeError, IndexError, ValueError):
                continue
    return out


def _checked(src: Source, e: Edit, original_dump: str) -> str | None:
    new = src.apply(e)
    try:
        if ast.dump(parse(new)) == original_dump:
            return None
    except (SyntaxError, ValueError):
        return None
    return new


WRITER = '''import re, sys
path, start, old, new = {path!r}, {start}, {old!r}, {new!r}
with open(path, newline="") as f:
    lines = f.read().split("\\n")
if lines[start:start + len(old)] != old:
    sys.exit("envyard: %s has changed since this patch was made" % path)
lines[start:start + len(old)] = new
with open(path, "w", newline="") as f:
    f.write("\\n".join(lines))
'''


def edit_script(workdir: str, python: str, path: str, start: int, old: list[str], new: list[str]) -> str:
    """sh that replaces lines [start, start+len(old)) of `path` (0-based) with `new`, checking they are `old`,
    and drops the module's cached bytecode."""
    program = WRITER.format(path=path, start=start, old=old, new=new)
    stem = path.rsplit("/", 1)[-1][:-3]
    cache = (path.rsplit("/", 1)[0] + "/__pycache__" if "/" in path else "__pycache__")
    return (f"set -e\ncd {workdir}\n{python} -I - <<'ENVYARD_PATCH'\n{program}ENVYARD_PATCH\n"
            f"rm -f {cache}/{stem}.*.pyc\n")


def scope_of(facts: SourceFacts, path: str, e: Edit, coverage: dict | None) -> tuple[str, ...] | None:
    """The test files that can notice an edit: those executing its lines (None: none does, skip it; () = the
    whole suite). Without coverage: the whole suite, or for a slow one the test files naming the module."""
    if coverage is None:
        if facts.suite_seconds > FAST_SUITE and can_select(facts):
            return related_test_files(path, facts.test_files)
        return ()
    lines = coverage.get(path, {})
    owners = set().union(*(lines.get(n, ()) for n in range(e.line, e.end_line + 1)))
    if not owners:
        return None
    known = set(facts.files)
    files = owners - {"<collect>"}
    # module and class bodies (and code only run while collecting) can change what every test sees
    if "<import>" in owners or not files or not files <= known:
        return ()
    # a function also run while collecting: the test files that call it (the others are not run: docs/derive.md)
    return tuple(sorted(files))


def mutation_of(facts: SourceFacts, path: str, src: Source, e: Edit, mutated: str,
                scope: tuple[str, ...] = ()) -> Mutation:
    new_lines = mutated.split("\n")
    # the changed lines: the span's lines before, the same lines after (the replacement may add lines)
    delta = len(new_lines) - len(src.lines)
    old = src.lines[e.line - 1:e.end_line]
    new = new_lines[e.line - 1:e.end_line + delta]
    site = f"{path}:{e.line}:{e.col}:{e.node}"
    digest = hashlib.sha256(f"{site}|{e.op}|{e.new}".encode()).hexdigest()[:8]
    diff = "".join(difflib.unified_diff([l + "\n" for l in new_lines], [l + "\n" for l in src.lines],
                                        f"a/{path}", f"b/{path}"))
    return Mutation(
        kind="bug", name=f"{e.op}-{digest}", site=site,
        break_script=edit_script(facts.workdir, facts.python, path, e.line - 1, old, new),
        fix_script=edit_script(facts.workdir, facts.python, path, e.line - 1, new, old),
        patch_lines=max(len(old), len(new)), files=(path,), test_scope=scope,
        meta={"operator": e.op, "file": path, "line": e.line, "reverse_patch": diff})


def candidates(facts: SourceFacts, rng: random.Random) -> Iterator[Mutation]:
    sources: dict[str, str] = (facts.extra.get("bug") or {}).get("sources") or {}
    coverage = (facts.extra.get("bug") or {}).get("coverage")
    all_sites: list[tuple[str, Edit]] = []
    for path in sorted(sources):
        found = sites(path, sources[path])
        if len(found) > MAX_SITES_PER_FILE:
            found = random.Random(f"{rng.random()}").sample(found, MAX_SITES_PER_FILE)
        all_sites.extend((path, e) for e in found)
    rng.shuffle(all_sites)
    parsed: dict[str, tuple[Source, str]] = {}
    for path, e in all_sites:
        if path not in parsed:
            parsed[path] = (Source(sources[path]), ast.dump(parse(sources[path])))
        src, dump = parsed[path]
        scope = scope_of(facts, path, e, coverage)
        if scope is None:
            continue  # no test executes it: it cannot fail one
        mutated = _checked(src, e, dump)
        if mutated is not None:
            yield mutation_of(facts, path, src, e, mutated, scope)
