"""setup.cfg (setuptools declarative configuration), read as text: python_requires, install_requires,
extras_require, tests_require, setup_requires, classifiers, package_dir, `[tool:pytest]`, `[tox:tox]`, nose."""

from __future__ import annotations

import re

from .base import Sink, resolve_rel
from .ini import IniFile, IniValue, parse_ini
from .requirements import emit_requirement, read_file
from .specs import classifier_version, python_spec
from .testing import ini_values, record_pytest_config
from .tox import read_tox_ini_text


def read_setup_cfg(sink: Sink, rel: str = "setup.cfg") -> None:
    text = sink.read(rel)
    if text is None:
        return
    ini = parse_ini(text)
    options = ini.sections.get("options", {})
    value = options.get("python_requires")
    if value and value.text:
        record_python_constraint(sink, rel, value.line, value.text, "setup.cfg:python_requires")
    _requirements(sink, rel, options.get("install_requires"), "dependency", None, "setup.cfg:install_requires")
    _requirements(sink, rel, options.get("tests_require"), "dependency_group", {"group": "tests_require"},
                  "setup.cfg:tests_require")
    _requirements(sink, rel, options.get("setup_requires"), "build_requirement", None, "setup.cfg:setup_requires")
    for extra, value in ini.sections.get("options.extras_require", {}).items():
        _requirements(sink, rel, value, "extra", {"extra": extra}, "setup.cfg:extras_require")
    name = ini.get("metadata", "name")
    if name and name.text.strip():
        sink.add("project_name", name.text.strip(), rel, name.line, "setup.cfg:name")
    classifiers = ini.get("metadata", "classifiers")
    if classifiers:
        for number, line in classifiers.parts:
            version = classifier_version(line)
            if version:
                sink.add("python_hint", version, rel, number, "setup.cfg:classifiers")
    package_dir = options.get("package_dir")
    if package_dir:
        for number, line in package_dir.parts:
            name, sep, path = line.partition("=")
            if sep and not name.strip() and path.strip():
                sink.add("package_dir", path.strip().strip("/"), rel, number, "setup.cfg:package_dir")
    where = ini.get("options.packages.find", "where")
    if where and where.text.strip() not in ("", "."):
        sink.add("package_dir", where.text.strip().strip("/"), rel, where.line, "setup.cfg:packages.find.where")
    test_suite = options.get("test_suite")
    if test_suite and test_suite.text:
        sink.add("test_suite", test_suite.text, rel, test_suite.line, "setup.cfg:test_suite")
    if "tool:pytest" in ini.sections:
        record_pytest_config(sink, rel, ini.section_lines["tool:pytest"], "setup.cfg [tool:pytest]",
                             ini_values(ini.sections["tool:pytest"]))
    if "nosetests" in ini.sections:
        sink.add("test_runner", "nose", rel, ini.section_lines["nosetests"], "setup.cfg [nosetests]")
    if "tox:tox" in ini.sections:
        read_tox_ini_text(sink, rel, _tox_view(ini), main_section="tox:tox", prefix="tox:")


def _tox_view(ini: IniFile) -> IniFile:
    """setup.cfg's tox sections with the names tox.ini would give them."""
    view = IniFile()
    for name, values in ini.sections.items():
        if name == "tox:tox" or name.startswith("testenv"):
            view.sections[name] = values
            view.section_lines[name] = ini.section_lines[name]
    return view


def _requirements(sink: Sink, rel: str, value: IniValue | None, kind: str, fields: dict | None, via: str) -> None:
    if value is None:
        return
    for number, line in value.parts:
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line.startswith("file:"):
            for target in line[5:].split(","):
                path = resolve_rel(rel, target.strip())
                if path:
                    read_file(sink, path, kind=kind, fields=fields, via=f"{via}.file", included_from=(rel, number))
            continue
        if line.startswith("attr:"):
            sink.problem(rel, number, f"{value.key} is computed at build time ({line}); not read")
            continue
        for item in (line.split(",") if kind == "build_requirement" and "," in line and ";" not in line
                     else [line]):
            emit_requirement(sink, item, rel, number, kind, via, fields)


def record_python_constraint(sink: Sink, rel: str, line: int | None, text: str, via: str) -> None:
    """A `python_constraint` fact from a requires-python-like value (repaired when almost valid)."""
    try:
        spec, note = python_spec(text)
    except ValueError as e:
        sink.problem(rel, line, str(e))
        return
    if note:
        sink.problem(rel, line, note)
    sink.add("python_constraint", spec, rel, line, via)
