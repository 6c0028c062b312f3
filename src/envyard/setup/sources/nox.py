"""noxfile.py, read with `ast` and never imported: sessions, the commands they `session.run`, the packages they
`session.install`, and the Python versions they ask for."""

from __future__ import annotations

import ast

from .base import Sink, resolve_rel
from .requirements import emit_requirement, read_file
from .shell import classify, record_command
from .specs import version_hint


def read_noxfiles(sink: Sink) -> None:
    for rel in sink.files.named("noxfile.py", max_depth=0):
        text = sink.read(rel)
        if text is None:
            continue
        try:
            tree = ast.parse(text, filename=rel)
        except SyntaxError as e:
            sink.problem(rel, e.lineno, f"invalid Python: {e.msg}")
            continue
        constants = _module_constants(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                decorator = _session_decorator(node)
                if decorator is not None:
                    _read_session(sink, rel, node, decorator, constants)


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    out = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            out[stmt.targets[0].id] = stmt.value
    return out


def _session_decorator(fn) -> ast.expr | None:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
        if name == "session":
            return dec
    return None


def _strings(node: ast.expr | None, constants: dict) -> list[tuple[str, int]]:
    if isinstance(node, ast.Name) and node.id in constants:
        node = constants[node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [(node.value, node.lineno)]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [(e.value, e.lineno) for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _read_session(sink: Sink, rel: str, fn, decorator: ast.expr, constants: dict) -> None:
    name = fn.name
    if isinstance(decorator, ast.Call):
        for kw in decorator.keywords:
            if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                name = kw.value.value
            if kw.arg in ("python", "py"):
                for value, line in _strings(kw.value, constants):
                    hint = version_hint(value)
                    if hint:
                        sink.add("python_hint", hint, rel, line, "nox.session.python")
    param = fn.args.args[0].arg if fn.args.args else "session"
    found = False
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == param):
            continue
        method = node.func.attr
        args = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in node.args]
        if method in ("run", "run_always", "run_install") and args and args[0]:
            words = [a for a in args if a is not None]
            command = " ".join(words)
            if classify(command).tool not in (None, "install"):
                found |= record_command(sink, command, rel, node.lineno, "nox.session.run")
        elif method == "install":
            _installs(sink, rel, node.lineno, args, f"nox:{name}")
    if found:
        sink.add("test_command", f"nox -s {name}", rel, fn.lineno, "nox.session")


def _installs(sink: Sink, rel: str, line: int, args: list[str | None], group: str) -> None:
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg is None:
            continue
        if arg in ("-r", "--requirement", "-c", "--constraint") and i < len(args) and args[i]:
            target = resolve_rel(rel, args[i])
            i += 1
            if target is None:
                continue
            if arg in ("-c", "--constraint"):
                read_file(sink, target, kind="constraint", role="constraints", via="nox.install",
                          included_from=(rel, line))
            else:
                read_file(sink, target, kind="dependency_group", fields={"group": group}, via="nox.install",
                          included_from=(rel, line))
            continue
        if arg in ("-e", "--editable") and i < len(args) and args[i]:
            emit_requirement(sink, f"-e {args[i]}", rel, line, "dependency_group", "nox.install", {"group": group})
            i += 1
            continue
        if arg.startswith("-"):
            continue
        emit_requirement(sink, arg, rel, line, "dependency_group", "nox.install", {"group": group})
