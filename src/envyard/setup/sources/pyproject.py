"""pyproject.toml: PEP 621 `[project]`, PEP 735 `[dependency-groups]`, PEP 517/518 `[build-system]`, and the
tools that keep dependencies or test settings there — Poetry, PDM, Hatch, Flit, setuptools, pytest, tox."""

from __future__ import annotations


from packaging.utils import canonicalize_name

from .base import Sink, resolve_rel
from .ini import parse_ini
from .requirements import emit_requirement, read_file
from .setupcfg import record_python_constraint
from .shell import record_command
from .specs import classifier_version, marker_for_python, poetry_to_pep440, version_hint
from .testing import record_pytest_config
from .tomlpos import TomlPositions, load_toml
from .tox import read_tox_ini_text, read_tox_native

# Build backends and build requirements that mean the project compiles native code.
_NATIVE_BACKENDS = {"scikit_build_core.build", "mesonpy", "maturin", "py_build_cmake.build", "enscons"}
_NATIVE_REQUIRES = {"cython", "pybind11", "setuptools-rust", "cmake", "scikit-build", "numpy", "cffi", "nanobind"}


class _Doc:
    def __init__(self, sink: Sink, rel: str, data: dict, pos: TomlPositions):
        self.sink, self.rel, self.data, self.pos = sink, rel, data, pos

    def table(self, *path: str) -> dict:
        node = self.data
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return node if isinstance(node, dict) else {}

    def requirements(self, path: tuple[str, ...], items: object, kind: str, fields: dict | None, via: str) -> None:
        """Each string of a TOML array of requirements, with its own line."""
        if not isinstance(items, list):
            if items is not None:
                self.sink.problem(self.rel, self.pos.key_line(*path), f"{'.'.join(path)} must be an array of strings")
            return
        strings = [i for i in items if isinstance(i, str)]
        for text, line in zip(strings, self.pos.locate(path, strings)):
            emit_requirement(self.sink, text, self.rel, line, kind, via, fields)

    def files(self, path: tuple[str, ...], files: object, kind: str, fields: dict | None, via: str) -> None:
        """Requirement files named by a dynamic-metadata setting (`{file = [...]}`)."""
        if isinstance(files, str):
            files = [files]
        if not isinstance(files, list):
            return
        for name in files:
            if isinstance(name, str):
                lines = self.pos.string_lines(path, name)
                target = resolve_rel(self.rel, name)
                if target:
                    read_file(self.sink, target, kind=kind, fields=fields, via=via,
                              included_from=(self.rel, lines[0] if lines else self.pos.key_line(*path)))


def read_pyproject(sink: Sink, rel: str = "pyproject.toml") -> None:
    loaded = load_toml(sink, rel)
    if loaded is None:
        return
    doc = _Doc(sink, rel, *loaded)
    _project(doc)
    _dependency_groups(doc)
    _build_system(doc)
    _poetry(doc)
    _pdm(doc)
    _hatch(doc)
    _flit(doc)
    _setuptools(doc)
    _pytest(doc)
    _tox(doc)


# ---------------------------------------------------------------------------------------------------- standards

def _project(doc: _Doc) -> None:
    project = doc.table("project")
    if not project:
        return
    pos, rel = doc.pos, doc.rel
    if isinstance(project.get("name"), str) and project["name"].strip():
        doc.sink.add("project_name", project["name"].strip(), rel, pos.key_line("project", "name"), "pep621.name")
    if isinstance(project.get("requires-python"), str):
        record_python_constraint(doc.sink, rel, pos.key_line("project", "requires-python"),
                                 project["requires-python"], "pep621.requires-python")
    doc.requirements(("project", "dependencies"), project.get("dependencies"), "dependency", None,
                     "pep621.dependencies")
    optional = project.get("optional-dependencies")
    if isinstance(optional, dict):
        for extra, items in optional.items():
            doc.requirements(("project", "optional-dependencies", extra), items, "extra", {"extra": extra},
                             "pep621.optional-dependencies")
    _classifiers(doc, ("project", "classifiers"), project.get("classifiers"), "pep621.classifiers")


def _classifiers(doc: _Doc, path: tuple[str, ...], items: object, via: str) -> None:
    if not isinstance(items, list):
        return
    strings = [c for c in items if isinstance(c, str)]
    for text, line in zip(strings, doc.pos.locate(path, strings)):
        version = classifier_version(text)
        if version:
            doc.sink.add("python_hint", version, doc.rel, line, via)


def _dependency_groups(doc: _Doc) -> None:
    groups = doc.table("dependency-groups")
    if not groups:
        return
    by_name = {canonicalize_name(name): name for name in groups}

    def expand(group: str, stack: tuple[str, ...], top: str) -> None:
        items = groups.get(group)
        if not isinstance(items, list):
            doc.sink.problem(doc.rel, doc.pos.key_line("dependency-groups", group),
                             f"dependency group {group!r} must be an array")
            return
        strings = [i for i in items if isinstance(i, str)]
        lines = iter(doc.pos.locate(("dependency-groups", group), strings))
        fields = {"group": top} if group == top else {"group": top, "included_from": group}
        for item in items:
            if isinstance(item, str):
                emit_requirement(doc.sink, item, doc.rel, next(lines), "dependency_group", "pep735.dependency-groups",
                                 fields)
            elif isinstance(item, dict) and isinstance(item.get("include-group"), str):
                target = by_name.get(canonicalize_name(item["include-group"]))
                line = (doc.pos.string_lines(("dependency-groups", group), item["include-group"])
                        or [doc.pos.key_line("dependency-groups", group)])[0]
                if target is None:
                    doc.sink.problem(doc.rel, line, f"dependency group {group!r} includes unknown group "
                                                    f"{item['include-group']!r}")
                elif target in stack:
                    doc.sink.problem(doc.rel, line, f"dependency group include cycle: "
                                                    f"{' → '.join(stack + (target,))}")
                else:
                    expand(target, stack + (target,), top)

    for name in groups:
        expand(name, (name,), name)


def _build_system(doc: _Doc) -> None:
    if "build-system" not in doc.data:
        return
    build = doc.table("build-system")
    pos, rel, sink = doc.pos, doc.rel, doc.sink
    doc.requirements(("build-system", "requires"), build.get("requires"), "build_requirement", None,
                     "pep518.build-system.requires")
    backend = build.get("build-backend")
    if isinstance(backend, str) and backend.strip():
        sink.add("build_backend", backend.strip(), rel, pos.key_line("build-system", "build-backend"),
                 "pep517.build-backend")
        if backend.strip() in _NATIVE_BACKENDS:
            sink.add("native_build", f"build backend {backend.strip()}", rel,
                     pos.key_line("build-system", "build-backend"), "pep517.build-backend")
    else:
        sink.add("build_backend", "setuptools.build_meta:__legacy__", rel, pos.key_line("build-system"),
                 "pep517.default")
    for fact in sink.of("build_requirement"):
        name = canonicalize_name(fact.value.get("name") or "") if isinstance(fact.value, dict) else ""
        if fact.file == rel and name in _NATIVE_REQUIRES:
            sink.add("native_build", f"build requirement {name}", rel, fact.line, "pep518.build-system.requires")


# ---------------------------------------------------------------------------------------------------- Poetry

def _poetry(doc: _Doc) -> None:
    poetry = doc.table("tool", "poetry")
    if not poetry:
        return
    extras = poetry.get("extras") if isinstance(poetry.get("extras"), dict) else {}
    extras_of: dict[str, list[str]] = {}
    for extra, names in extras.items():
        for n in names if isinstance(names, list) else []:
            if isinstance(n, str):
                extras_of.setdefault(canonicalize_name(n.split("[")[0].strip()), []).append(extra)
    base = ("tool", "poetry")
    if isinstance(poetry.get("name"), str) and poetry["name"].strip():
        doc.sink.add("project_name", poetry["name"].strip(), doc.rel, doc.pos.key_line(*base, "name"), "poetry.name")
    deps = poetry.get("dependencies")
    if isinstance(deps, dict):
        for name, spec in deps.items():
            line = doc.pos.key_line(*base, "dependencies", name)
            if name.lower() == "python":
                _poetry_python(doc, spec, line)
                continue
            _poetry_dependency(doc, name, spec, line, "dependency", None, "poetry.dependencies", extras_of)
    groups = poetry.get("group")
    if isinstance(groups, dict):
        for group, conf in groups.items():
            gdeps = conf.get("dependencies") if isinstance(conf, dict) else None
            for name, spec in (gdeps.items() if isinstance(gdeps, dict) else []):
                line = doc.pos.key_line(*base, "group", group, "dependencies", name)
                _poetry_dependency(doc, name, spec, line, "dependency_group", {"group": group}, "poetry.group",
                                   None)
    dev = poetry.get("dev-dependencies")
    if isinstance(dev, dict):
        for name, spec in dev.items():
            line = doc.pos.key_line(*base, "dev-dependencies", name)
            _poetry_dependency(doc, name, spec, line, "dependency_group", {"group": "dev"},
                               "poetry.dev-dependencies", None)
    _classifiers(doc, base + ("classifiers",), poetry.get("classifiers"), "poetry.classifiers")
    packages = poetry.get("packages")
    if isinstance(packages, list):
        for entry in packages:
            if isinstance(entry, dict) and isinstance(entry.get("from"), str):
                lines = doc.pos.string_lines(base + ("packages",), entry["from"])
                doc.sink.add("package_dir", entry["from"].strip("/"), doc.rel, lines[0] if lines else None,
                             "poetry.packages.from")


def _poetry_python(doc: _Doc, spec: object, line: int | None) -> None:
    if not isinstance(spec, str):
        doc.sink.problem(doc.rel, line, "tool.poetry.dependencies.python must be a string")
        return
    try:
        converted = poetry_to_pep440(spec)
    except ValueError as e:
        doc.sink.problem(doc.rel, line, f"python constraint {spec!r}: {e}")
        return
    if converted:
        record_python_constraint(doc.sink, doc.rel, line, converted, "poetry.python")


def _poetry_dependency(doc: _Doc, name: str, spec: object, line: int | None, kind: str, fields: dict | None,
                       via: str, extras_of: dict[str, list[str]] | None) -> None:
    for entry in spec if isinstance(spec, list) else [spec]:
        try:
            built = _poetry_requirement(name, entry)
        except ValueError as e:
            doc.sink.problem(doc.rel, line, f"dependency {name!r}: {e}")
            continue
        if built is None:
            doc.sink.problem(doc.rel, line, f"dependency {name!r}: cannot read {entry!r}")
            continue
        text, optional, path = built
        if path is not None:
            doc.sink.add("local_package", {"name": name, "path": path[0], "editable": path[1], **(fields or {})},
                         doc.rel, line, via)
            continue
        if optional and extras_of is not None:
            for extra in extras_of.get(canonicalize_name(name), []) or [None]:
                emit_requirement(doc.sink, text, doc.rel, line, "extra", via, {"extra": extra})
        else:
            emit_requirement(doc.sink, text, doc.rel, line, kind, via, fields)


def _poetry_requirement(name: str, entry: object) -> tuple[str, bool, tuple[str, bool] | None] | None:
    """(PEP 508 requirement text, optional, (path, editable) for path dependencies)."""
    if isinstance(entry, str):
        return f"{name}{poetry_to_pep440(entry)}", False, None
    if not isinstance(entry, dict):
        return None
    optional = bool(entry.get("optional"))
    if isinstance(entry.get("path"), str):
        return "", optional, (entry["path"], bool(entry.get("develop")))
    extras = entry.get("extras")
    extras = [e for e in extras if isinstance(e, str)] if isinstance(extras, list) else []
    extras_text = f"[{','.join(extras)}]" if extras else ""
    markers = []
    if isinstance(entry.get("markers"), str):
        markers.append(f"({entry['markers']})")
    if isinstance(entry.get("python"), str):
        python = poetry_to_pep440(entry["python"])
        if python:
            markers.append(marker_for_python(python))
    if isinstance(entry.get("platform"), str):
        markers.append(f'sys_platform == "{entry["platform"]}"')
    marker = f" ; {' and '.join(markers)}" if markers else ""
    if isinstance(entry.get("git"), str):
        url = entry["git"] if entry["git"].startswith("git+") else f"git+{entry['git']}"
        ref = next((entry[k] for k in ("rev", "tag", "branch") if isinstance(entry.get(k), str)), None)
        url += f"@{ref}" if ref else ""
        if isinstance(entry.get("subdirectory"), str):
            url += f"#subdirectory={entry['subdirectory']}"
        return f"{name}{extras_text} @ {url}{marker}", optional, None
    if isinstance(entry.get("url"), str):
        return f"{name}{extras_text} @ {entry['url']}{marker}", optional, None
    version = entry.get("version", "*")
    spec = poetry_to_pep440(version) if isinstance(version, str) else ""
    return f"{name}{extras_text}{spec}{marker.replace(' ; ', '; ')}", optional, None


# ---------------------------------------------------------------------------------------------------- PDM, Hatch, Flit

def _pdm(doc: _Doc) -> None:
    pdm = doc.table("tool", "pdm")
    if not pdm:
        return
    dev = pdm.get("dev-dependencies")
    if isinstance(dev, dict):
        for group, items in dev.items():
            doc.requirements(("tool", "pdm", "dev-dependencies", group), items, "dependency_group",
                             {"group": group}, "pdm.dev-dependencies")
    scripts = pdm.get("scripts")
    if isinstance(scripts, dict):
        for name, script in scripts.items():
            if name == "_":
                continue
            command = script if isinstance(script, str) else \
                (script.get("cmd") or script.get("shell")) if isinstance(script, dict) else None
            if isinstance(command, list):
                command = " ".join(c for c in command if isinstance(c, str))
            if isinstance(command, str):
                record_command(doc.sink, command, doc.rel, doc.pos.key_line("tool", "pdm", "scripts", name),
                               "pdm.scripts")


def _hatch(doc: _Doc) -> None:
    hatch = doc.table("tool", "hatch")
    if not hatch:
        return
    sink, rel, pos = doc.sink, doc.rel, doc.pos
    envs = hatch.get("envs")
    for env, conf in (envs.items() if isinstance(envs, dict) else []):
        if not isinstance(conf, dict):
            continue
        path = ("tool", "hatch", "envs", env)
        for key in ("dependencies", "extra-dependencies"):
            doc.requirements(path + (key,), conf.get(key), "dependency_group", {"group": f"hatch:{env}"},
                             f"hatch.envs.{key}")
        scripts = conf.get("scripts")
        for name, script in (scripts.items() if isinstance(scripts, dict) else []):
            commands = [script] if isinstance(script, str) else [s for s in script if isinstance(s, str)] \
                if isinstance(script, list) else []
            for command in commands:
                lines = pos.string_lines(path + ("scripts", name), command) or [pos.key_line(*path, "scripts", name)]
                record_command(sink, command, rel, lines[0], "hatch.envs.scripts")
        if isinstance(conf.get("python"), str) and version_hint(conf["python"]):
            sink.add("python_hint", version_hint(conf["python"]), rel, pos.key_line(*path, "python"),
                     "hatch.envs.python")
        matrix = conf.get("matrix")
        for entry in matrix if isinstance(matrix, list) else []:
            for key in ("python", "py"):
                values = entry.get(key) if isinstance(entry, dict) else None
                for value in values if isinstance(values, list) else []:
                    hint = version_hint(value) if isinstance(value, str) else None
                    if hint:
                        lines = pos.string_lines(path + ("matrix", key), value)
                        sink.add("python_hint", hint, rel, lines[0] if lines else pos.key_line(*path, "matrix"),
                                 "hatch.envs.matrix")
    hook = doc.table("tool", "hatch", "metadata", "hooks", "requirements_txt")
    if hook:
        base = ("tool", "hatch", "metadata", "hooks", "requirements_txt")
        doc.files(base + ("files",), hook.get("files"), "dependency", None, "hatch.requirements_txt")
        optional = hook.get("optional-dependencies")
        for extra, files in (optional.items() if isinstance(optional, dict) else []):
            doc.files(base + ("optional-dependencies", extra), files, "extra", {"extra": extra},
                      "hatch.requirements_txt")
    wheel = doc.table("tool", "hatch", "build", "targets", "wheel")
    for package in wheel.get("packages", []) if isinstance(wheel.get("packages"), list) else []:
        if isinstance(package, str) and "/" in package.strip("/"):
            lines = pos.string_lines(("tool", "hatch", "build", "targets", "wheel", "packages"), package)
            sink.add("package_dir", package.strip("/").rsplit("/", 1)[0], rel, lines[0] if lines else None,
                     "hatch.build.targets.wheel.packages")


def _flit(doc: _Doc) -> None:
    meta = doc.table("tool", "flit", "metadata")
    if not meta:
        return
    base = ("tool", "flit", "metadata")
    if isinstance(meta.get("requires-python"), str):
        record_python_constraint(doc.sink, doc.rel, doc.pos.key_line(*base, "requires-python"),
                                 meta["requires-python"], "flit.requires-python")
    doc.requirements(base + ("requires",), meta.get("requires"), "dependency", None, "flit.metadata.requires")
    extras = meta.get("requires-extra")
    for extra, items in (extras.items() if isinstance(extras, dict) else []):
        doc.requirements(base + ("requires-extra", extra), items, "extra", {"extra": extra},
                         "flit.metadata.requires-extra")
    if "dev-requires" in meta:
        doc.requirements(base + ("dev-requires",), meta.get("dev-requires"), "dependency_group", {"group": "dev"},
                         "flit.metadata.dev-requires")
    _classifiers(doc, base + ("classifiers",), meta.get("classifiers"), "flit.classifiers")


def _setuptools(doc: _Doc) -> None:
    st = doc.table("tool", "setuptools")
    if not st:
        return
    pos, rel, sink = doc.pos, doc.rel, doc.sink
    package_dir = st.get("package-dir")
    if isinstance(package_dir, dict) and isinstance(package_dir.get(""), str):
        sink.add("package_dir", package_dir[""].strip("/"), rel, pos.key_line("tool", "setuptools", "package-dir"),
                 "setuptools.package-dir")
    find = doc.table("tool", "setuptools", "packages", "find")
    where = find.get("where")
    for w in ([where] if isinstance(where, str) else where if isinstance(where, list) else []):
        if isinstance(w, str) and w.strip("./"):
            sink.add("package_dir", w.strip("/"), rel, pos.key_line("tool", "setuptools", "packages", "find", "where"),
                     "setuptools.packages.find.where")
    dynamic = doc.table("tool", "setuptools", "dynamic")
    base = ("tool", "setuptools", "dynamic")
    deps = dynamic.get("dependencies")
    if isinstance(deps, dict):
        doc.files(base + ("dependencies",), deps.get("file"), "dependency", None, "setuptools.dynamic.dependencies")
    optional = dynamic.get("optional-dependencies")
    for extra, conf in (optional.items() if isinstance(optional, dict) else []):
        if isinstance(conf, dict):
            doc.files(base + ("optional-dependencies", extra), conf.get("file"), "extra", {"extra": extra},
                      "setuptools.dynamic.optional-dependencies")


# ---------------------------------------------------------------------------------------------------- pytest, tox

def _pytest(doc: _Doc) -> None:
    pytest = doc.table("tool", "pytest")
    if not pytest:
        return
    ini = pytest.get("ini_options")
    if isinstance(ini, dict):
        values = {k.lower(): (v, doc.pos.key_line("tool", "pytest", "ini_options", k)) for k, v in ini.items()}
        record_pytest_config(doc.sink, doc.rel, doc.pos.key_line("tool", "pytest", "ini_options"),
                             "pytest.ini_options", values)
    native = {k: v for k, v in pytest.items() if k != "ini_options"}
    if native:                                                  # pytest ≥ 9: settings directly in [tool.pytest]
        values = {k.lower(): (v, doc.pos.key_line("tool", "pytest", k)) for k, v in native.items()}
        record_pytest_config(doc.sink, doc.rel, doc.pos.key_line("tool", "pytest"), "pytest.toml", values)


def _tox(doc: _Doc) -> None:
    tox = doc.table("tool", "tox")
    if not tox:
        return
    legacy = tox.get("legacy_tox_ini")
    if isinstance(legacy, str):
        lines = doc.pos.string_lines(("tool", "tox", "legacy_tox_ini"), legacy)
        first = lines[0] if lines else (doc.pos.key_line("tool", "tox", "legacy_tox_ini") or 1)
        read_tox_ini_text(doc.sink, doc.rel, parse_ini(legacy, first_line=first), main_section="tox")
    else:
        read_tox_native(doc.sink, doc.rel, tox, doc.pos, ("tool", "tox"))
