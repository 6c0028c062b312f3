"""setup.py, read with `ast` and never run. Values of the `setup(...)` call are taken when they are literals, names
bound by simple module-level assignments (including `+`, `+=`, `.append`, `.extend` on them), or `**kwargs` of
such a dict; anything computed at run time is reported as a problem, not guessed."""

from __future__ import annotations

import ast
import re

from .base import Sink
from .requirements import emit_requirement
from .setupcfg import record_python_constraint
from .specs import classifier_version


class Dynamic(Exception):
    """A value that only running setup.py would tell."""

    def __init__(self, node: ast.AST):
        try:
            text = ast.unparse(node)
        except Exception:  # noqa: BLE001 - unparse of odd nodes; only used in a message
            text = type(node).__name__
        super().__init__(text if len(text) <= 60 else text[:57] + "...")
        self.line = getattr(node, "lineno", None)


class _Module:
    def __init__(self, tree: ast.Module):
        self.values: dict[str, list[ast.expr]] = {}      # name → its assigned value plus later additions
        for stmt in tree.body:
            self._statement(stmt)

    def _statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    self.values[target.id] = [stmt.value]
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            self.values[stmt.target.id] = [stmt.value]
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and isinstance(stmt.op, ast.Add):
            self.values.setdefault(stmt.target.id, []).append(stmt.value)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            f = call.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in self.values \
                    and len(call.args) == 1:
                if f.attr == "append":
                    self.values[f.value.id].append(ast.List(elts=[call.args[0]], ctx=ast.Load()))
                elif f.attr == "extend":
                    self.values[f.value.id].append(call.args[0])

    # -- evaluation -------------------------------------------------------------------------------------

    def strings(self, node: ast.expr, depth: int = 0) -> list[tuple[str, int]]:
        """A list of strings with their lines (a string value counts as one item per line)."""
        if depth > 20:
            raise Dynamic(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [(line.strip(), node.lineno + k) for k, line in enumerate(node.value.splitlines())
                    if line.strip() and not line.strip().startswith("#")]
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    out.extend(self.strings(elt.value, depth + 1))
                else:
                    out.extend(self.string_items(elt, depth + 1))
            return out
        if isinstance(node, ast.Name) and node.id in self.values:
            out = []
            for part in self.values[node.id]:
                out.extend(self.strings(part, depth + 1))
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.strings(node.left, depth + 1) + self.strings(node.right, depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1 \
                and node.func.id in ("list", "tuple", "sorted", "set") and not node.keywords:
            return self.strings(node.args[0], depth + 1)
        raise Dynamic(node)

    def string_items(self, node: ast.expr, depth: int = 0) -> list[tuple[str, int]]:
        """One list element: a string, or a name bound to a string."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [(node.value.strip(), node.lineno)]
        if isinstance(node, ast.Name) and node.id in self.values and len(self.values[node.id]) == 1:
            value = self.values[node.id][0]
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return [(value.value.strip(), value.lineno)]     # where the text is, not where it is used
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.string_items(node.left, depth + 1), self.string_items(node.right, depth + 1)
            if len(left) == len(right) == 1:
                return [(left[0][0] + right[0][0], node.lineno)]
        raise Dynamic(node)

    def string(self, node: ast.expr) -> tuple[str, int]:
        items = self.string_items(node)
        return items[0]

    def mapping(self, node: ast.expr, depth: int = 0) -> list[tuple[str, ast.expr]]:
        """(key, value node) pairs of a dict literal, `dict(k=...)`, or a name bound to one."""
        if depth > 20:
            raise Dynamic(node)
        if isinstance(node, ast.Dict):
            out = []
            for k, v in zip(node.keys, node.values):
                if k is None:
                    out.extend(self.mapping(v, depth + 1))
                else:
                    out.append((self.string(k)[0], v))
            return out
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
            return [(kw.arg, kw.value) for kw in node.keywords if kw.arg] + \
                [pair for kw in node.keywords if kw.arg is None for pair in self.mapping(kw.value, depth + 1)]
        if isinstance(node, ast.Name) and node.id in self.values and len(self.values[node.id]) == 1:
            return self.mapping(self.values[node.id][0], depth + 1)
        raise Dynamic(node)


def _setup_call(tree: ast.Module) -> ast.Call | None:
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name == "setup" and (best is None or len(node.keywords) > len(best.keywords)):
                best = node
    return best


def read_setup_py(sink: Sink, rel: str = "setup.py") -> None:
    text = sink.read(rel)
    if text is None:
        return
    _read_pth_files(sink, rel, text)
    try:
        tree = ast.parse(text, filename=rel)
    except (SyntaxError, ValueError) as e:
        sink.problem(rel, getattr(e, "lineno", None), f"invalid Python: {getattr(e, 'msg', e)}; read by pattern only")
        _read_by_pattern(sink, rel, text)
        return
    call = _setup_call(tree)
    if call is None:
        return
    module = _Module(tree)
    keywords: list[tuple[str, ast.expr]] = []
    for kw in call.keywords:
        if kw.arg is not None:
            keywords.append((kw.arg, kw.value))
            continue
        try:
            keywords.extend(module.mapping(kw.value))
        except Dynamic as e:
            sink.problem(rel, e.line, f"setup(**{e}) is computed at run time; its keywords are not read")
    for name, node in keywords:
        try:
            _keyword(sink, rel, module, name, node)
        except Dynamic as e:
            sink.problem(rel, e.line or node.lineno, f"{name} is computed at run time ({e}); not read")


_PTH_NAME = re.compile(r"""['"]([\w.-]+\.pth)['"]""")


def _read_pth_files(sink: Sink, rel: str, text: str) -> None:
    """A `.pth` file of the repository that setup.py names (pytest-cov copies its `pytest-cov.pth` into the
    install with its own build commands): a regular install puts it at site-packages' root, where Python runs
    it at every start; an editable install does not."""
    for m in _PTH_NAME.finditer(text):
        for path in sink.files.paths:
            if path.rsplit("/", 1)[-1] == m.group(1):
                sink.add("site_pth", path, rel, text[:m.start()].count("\n") + 1, "setup.py.pth")


def _keyword(sink: Sink, rel: str, module: _Module, name: str, node: ast.expr) -> None:
    if name == "name":
        try:
            value, line = module.string(node)
        except Dynamic:
            return  # a computed name is no problem for setting up; only the contract's pins want it (pins.py)
        if value.strip():
            sink.add("project_name", value.strip(), rel, line, "setup.py:name")
    elif name == "python_requires":
        value, line = module.string(node)
        record_python_constraint(sink, rel, line, value, "setup.py:python_requires")
    elif name in ("install_requires", "requires"):
        for value, line in module.strings(node):
            emit_requirement(sink, value, rel, line, "dependency", "setup.py:install_requires")
    elif name == "tests_require":
        for value, line in module.strings(node):
            emit_requirement(sink, value, rel, line, "dependency_group", "setup.py:tests_require",
                             {"group": "tests_require"})
    elif name == "setup_requires":
        for value, line in module.strings(node):
            emit_requirement(sink, value, rel, line, "build_requirement", "setup.py:setup_requires")
    elif name == "extras_require":
        for extra, value_node in module.mapping(node):
            try:
                items = module.strings(value_node)
            except Dynamic as e:
                sink.problem(rel, e.line or value_node.lineno,
                             f"extras_require[{extra!r}] is computed at run time ({e}); not read")
                continue
            extra_name, _, marker = extra.partition(":")        # setuptools' "extra:marker" keys
            for value, line in items:
                if marker.strip():
                    value = f"{value}; {marker.strip()}" if ";" not in value else f"{value} and ({marker.strip()})"
                if extra_name.strip():
                    emit_requirement(sink, value, rel, line, "extra", "setup.py:extras_require",
                                     {"extra": extra_name.strip()})
                else:                                           # ":marker" keys: conditional install_requires
                    emit_requirement(sink, value, rel, line, "dependency", "setup.py:extras_require")
    elif name == "classifiers":
        for value, line in module.strings(node):
            version = classifier_version(value)
            if version:
                sink.add("python_hint", version, rel, line, "setup.py:classifiers")
    elif name == "test_suite":
        value, line = module.string(node)
        sink.add("test_suite", value, rel, line, "setup.py:test_suite")
    elif name == "package_dir":
        for key, value_node in module.mapping(node):
            if key == "":
                value, line = module.string(value_node)
                sink.add("package_dir", value.strip("/"), rel, line, "setup.py:package_dir")
    elif name == "packages" and isinstance(node, ast.Call):
        f = node.func
        fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        where = [a for a in node.args[:1]] + [kw.value for kw in node.keywords if kw.arg == "where"]
        if fname in ("find_packages", "find_namespace_packages") and where:
            value, line = module.string(where[0])
            if value.strip("./"):
                sink.add("package_dir", value.strip("/"), rel, line, f"setup.py:{fname}")
    elif name == "ext_modules":
        sink.add("native_build", "ext_modules", rel, node.lineno, "setup.py:ext_modules")


def _read_by_pattern(sink: Sink, rel: str, text: str) -> None:
    m = re.search(r"python_requires\s*=\s*(['\"])([^'\"]+)\1", text)
    if m:
        record_python_constraint(sink, rel, text[:m.start()].count("\n") + 1, m.group(2),
                                 "setup.py:python_requires (pattern)")
