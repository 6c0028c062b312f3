"""How a project runs its tests, from files that are not tool configuration: pytest settings (shared by every file
that can hold them), `pytest.ini`, `conftest.py`, Makefile test targets, `manage.py` (Django), `runtests.py`,
and unittest-only test suites."""

from __future__ import annotations

import re
import shlex

from packaging.requirements import InvalidRequirement, Requirement

from .base import Sink
from .ini import parse_ini
from .knowledge import pytest_plugins
from .shell import record_apt, record_command, record_env

_TEST_FILE_RE = re.compile(r"(^|/)(test_[^/]*\.py|[^/]*_test\.py|tests\.py)$")
MAX_TEST_FILES_READ = 200
# Options of pytest's cache plugin (cacheprovider, and stepwise, which needs it)
CACHE_OPTIONS = {"--cache-clear", "--cache-show", "--lf", "--last-failed", "--ff", "--failed-first", "--nf",
                 "--new-first", "--lfnf", "--last-failed-no-failures", "--sw", "--stepwise", "--sw-skip",
                 "--stepwise-skip"}


def record_pytest_config(sink: Sink, file: str, line: int | None, via: str,
                         values: dict[str, tuple[object, int | None]]) -> None:
    """Facts from one pytest configuration: the runner, test paths, plugins it needs (from `addopts`,
    `required_plugins` and plugin-specific keys) and services named in `env` settings (pytest-env).
    `values` maps lower-cased keys to (value, line); values are strings or lists of strings."""
    sink.add("test_runner", "pytest", file, line, via)
    table = pytest_plugins()
    for key, (value, vline) in values.items():
        items = _items(value)
        if key == "testpaths":
            for item in items:
                sink.add("test_path", item, file, vline, f"{via}.testpaths")
        elif key == "addopts":
            try:
                tokens = shlex.split(" ".join(items))
            except ValueError:
                tokens = " ".join(items).split()
            for token in tokens:
                if token.split("=", 1)[0] in CACHE_OPTIONS:
                    sink.add("pytest_cache_option", token, file, vline, f"{via}.addopts")
                plugin = _plugin_for_option(token, table["options"])
                if plugin:
                    sink.add("test_plugin", {"name": plugin, "reason": f"addopts {token.split('=')[0]}"},
                             file, vline, f"{via}.addopts")
        elif key == "required_plugins":
            for item in " ".join(items).split():
                try:
                    name = Requirement(item).name
                except (InvalidRequirement, SyntaxError):  # packaging 26: SyntaxError for some
                    continue
                sink.add("test_plugin", {"name": name, "reason": "required_plugins"}, file, vline,
                         f"{via}.required_plugins")
        elif key in table["ini"]:
            sink.add("test_plugin", {"name": table["ini"][key], "reason": f"ini key {key}"}, file, vline,
                     f"{via}.{key}")
        if key == "python_paths" and "pythonpath" not in values and items:
            # pytest-pythonpath's key: the plugin no longer loads on current pytest (its hook markers are
            # deprecated, an error under `filterwarnings = error`; pytest 9 refuses its ini type), and pytest 7
            # has the same setting built in as `pythonpath`: use that, with the plugin off
            setting = shlex.quote("pythonpath=" + " ".join(" ".join(items).split()))
            sink.add("test_env", {"name": "PYTEST_ADDOPTS", "value": f"-p no:pythonpath -o {setting}"},
                     file, vline, f"{via}.python_paths")
        if key == "env":                                    # pytest-env: "D:NAME=value" / "NAME=value"
            for item in items:
                name, sep, val = re.sub(r"^[DR]:", "", item.strip()).partition("=")
                if sep:
                    record_env(sink, name.strip(), val.strip(), file, vline, f"{via}.env")


def _items(value: object) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return [line.strip() for line in str(value).splitlines() if line.strip()]


def _plugin_for_option(token: str, options: dict[str, str]) -> str | None:
    if not token.startswith("-"):
        return None
    name = token.split("=", 1)[0]
    for opt, dist in options.items():
        if opt.startswith("--"):
            if name == opt or name.startswith(opt + "-"):
                return dist
        elif token.startswith(opt) and (token == opt or token[len(opt):].isalnum()):
            return dist
    return None


def ini_values(section: dict) -> dict[str, tuple[object, int | None]]:
    return {key: (value.text, value.line) for key, value in section.items()}


# ---------------------------------------------------------------------------------------------------- files

def read_pytest_ini(sink: Sink) -> None:
    for rel in sink.files.named("pytest.ini", ".pytest.ini", max_depth=0):
        text = sink.read(rel)
        if text is None:
            continue
        ini = parse_ini(text)
        if "pytest" in ini.sections:
            record_pytest_config(sink, rel, ini.section_lines["pytest"], "pytest.ini",
                                 ini_values(ini.sections["pytest"]))
        else:
            sink.add("test_runner", "pytest", rel, None, "pytest.ini")


def read_conftests(sink: Sink) -> None:
    for rel in sink.files.named("conftest.py"):
        sink.add("test_runner", "pytest", rel, None, "conftest.py")
        text = sink.read(rel, quiet=True)
        if text is None:
            continue
        m = re.search(r"^pytest_plugins\s*=\s*(.+)$", text, re.M)
        if m:
            line = text[:m.start()].count("\n") + 1
            for name in re.findall(r"[\"']([\w.]+)[\"']", m.group(1)):
                sink.add("test_plugin", {"name": name, "reason": "pytest_plugins (module name)"}, rel, line,
                         "conftest.pytest_plugins")


_MAKE_TARGET_RE = re.compile(r"^(test|tests|check|unittest|unit-tests?|pytest|test-all|test-unit)\s*:(?!=)")


# A prerequisite's recipe that prepares what the tests read: a Python script the project ships (babel's
# `test: import-cldr`, whose recipe runs `python scripts/download_import_cldr.py` to build its locale data).
_PREPARE_SCRIPT_RE = re.compile(r"^(?:\$\(PYTHON\)|\$\{PYTHON\}|python3?)\s+(?:-\w+\s+)*([\w./-]+\.py)(?:\s+[^;&|<>`$]*)?$")
_NOT_PREPARATION = re.compile(r"clean|lint|install|develop|venv|deps|docs?$|release|upload|dist|format|check", re.I)


def read_makefiles(sink: Sink) -> None:
    for rel in sink.files.named("Makefile", "makefile", "GNUmakefile", max_depth=0):
        text = sink.read(rel)
        if text is None:
            continue
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            m = _MAKE_TARGET_RE.match(lines[i])
            if not m:
                i += 1
                continue
            target = m.group(1)
            if target in ("test", "tests"):
                sink.add("test_command", f"make {target}", rel, i + 1, "Makefile.target")
                _record_preparation(sink, rel, lines, lines[i].split(":", 1)[1].split("#", 1)[0].split())
            j = i + 1
            recipe: list[tuple[int, str]] = []
            while j < len(lines) and (lines[j].startswith("\t") or not lines[j].strip()
                                      or lines[j].lstrip().startswith("#")):
                if lines[j].startswith("\t"):
                    recipe.append((j + 1, lines[j].strip()))
                j += 1
            state: dict = {}
            for number, command in _join_continuations(recipe):
                record_command(sink, command.lstrip("@-+ "), rel, number, f"Makefile:{target}", state=state)
            record_apt(sink, recipe, rel, f"Makefile:{target}.apt-get")
            i = j


def _record_preparation(sink: Sink, rel: str, lines: list[str], prerequisites: list[str]) -> None:
    """`test_prepare` facts for the test target's prerequisites whose recipe only runs Python scripts of the
    project (files that exist), e.g. a data download or generation step. Prerequisites that clean, lint, install
    or run tests themselves are not preparation."""
    for name in prerequisites:
        if _NOT_PREPARATION.search(name) or not re.fullmatch(r"[\w.-]+", name):
            continue
        start = next((n for n, line in enumerate(lines) if re.match(rf"^{re.escape(name)}\s*:(?!=)", line)), None)
        if start is None:
            continue
        recipe = []
        for line in lines[start + 1:]:
            if not line.startswith("\t"):
                if line.strip() and not line.lstrip().startswith("#"):
                    break
                continue
            recipe.append(line.strip().lstrip("@-+ "))
        scripts = [_PREPARE_SCRIPT_RE.match(command) for command in recipe]
        paths = [m.group(1).removeprefix("./") for m in scripts if m]
        if (not recipe or len(paths) < len(recipe) or not all(map(sink.files.exists, paths))
                or any("test" in p.rsplit("/", 1)[-1].lower() for p in paths)):
            continue
        commands = [re.sub(r"^(?:\$\(PYTHON\)|\$\{PYTHON\}|python3?)(?=\s)", "python", c) for c in recipe]
        sink.add("test_prepare", {"command": " && ".join(commands), "target": name}, rel, start + 1,
                 "Makefile.test-prerequisite")


def _join_continuations(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    out, buf, start = [], "", None
    for number, text in lines:
        if start is None:
            start = number
        if text.endswith("\\"):
            buf += text[:-1] + " "
            continue
        out.append((start, buf + text))
        buf, start = "", None
    if buf:
        out.append((start, buf))
    return out


def read_django(sink: Sink) -> None:
    for rel in sink.files.named("manage.py", max_depth=1):
        text = sink.read(rel, quiet=True)
        if not text or "django" not in text.lower():
            continue
        line = next((n for n, l in enumerate(text.splitlines(), 1) if "DJANGO_SETTINGS_MODULE" in l), None)
        directory = rel.rsplit("/", 1)[0] if "/" in rel else None
        command = f"cd {directory} && python manage.py test" if directory else "python manage.py test"
        sink.add("test_runner", "django", rel, line, "django.manage.py")
        sink.add("test_command", command, rel, line, "django.manage.py")


def read_runtests(sink: Sink) -> None:
    for rel in sink.files.named("runtests.py", "run_tests.py", max_depth=1):
        sink.add("test_command", f"python {rel}", rel, None, "runtests.py")


_TEST_DIR_PART = re.compile(r"^(tests?|testing)$")
_UNITTEST_MAIN = re.compile(r"^\s*unittest\.main\(", re.M)


def read_test_scripts(sink: Sink) -> None:
    """Test scripts that pytest's file pattern misses and that run themselves (`if __name__ == "__main__":
    unittest.main()`), such as decorator's `tests/test.py`: each is a test command `python PATH` (runners.py runs
    it through pytest, which collects a file named on its command line whatever its name, then natively)."""
    found = 0
    for rel in sink.files.paths:
        parts = rel.split("/")
        name = parts[-1]
        if not name.endswith(".py") or _TEST_FILE_RE.search(rel) or "test" not in name.lower() or len(parts) > 4:
            continue
        if len(parts) > 1 and not any(_TEST_DIR_PART.match(d) for d in parts[:-1]):
            continue
        text = sink.read(rel, limit=262144, quiet=True) or ""
        m = _UNITTEST_MAIN.search(text)
        if not m or "__main__" not in text:
            continue
        sink.add("test_command", f"python {rel}", rel, text[:m.start()].count("\n") + 1, "unittest.main")
        found += 1
        if found >= 3:
            return


_README_RUN = re.compile(r"^\s*(?:[$%>]\s*)?(?:python[\d.]*|pypy3?)\s+([\w.-]+\.py)\s*$")


def read_test_readmes(sink: Sink) -> None:
    """A README in a test directory that says how to run its scripts (ply's `test/README`: `$ python
    testlex.py`): each script it names that exists there becomes `cd DIR && python SCRIPT`, since such scripts
    are written to run from their own directory (ply's put `..` on sys.path and write tables to the cwd)."""
    found = 0
    for rel in sink.files.paths:
        parts = rel.split("/")
        if len(parts) < 2 or len(parts) > 4 or not parts[-1].upper().startswith("README") or \
                not _TEST_DIR_PART.match(parts[-2]):
            continue
        directory = "/".join(parts[:-1])
        for number, line in enumerate((sink.read(rel, limit=65536, quiet=True) or "").splitlines(), 1):
            m = _README_RUN.match(line)
            if m and "test" in m.group(1).lower() and sink.files.exists(f"{directory}/{m.group(1)}"):
                sink.add("test_command", f"cd {directory} && python {m.group(1)}", rel, number, "readme.test-script")
                found += 1
                if found >= 3:
                    return


_DEFINES_TESTS = re.compile(r"^\s*def test_?\w*\(self\b|^def test_?\w*\(", re.M)  # test functions or methods


def read_package_test_modules(sink: Sink) -> None:
    """A package's own `test.py` (parameterized keeps its whole suite in `parameterized/test.py`) is outside
    pytest's default file pattern too; named on pytest's command line it is collected. Only inside a package
    (a `test.py` at the root is usually a runner script, as lxml's is), only when it defines tests, and not
    when it runs itself (read_test_scripts has it then)."""
    found = []
    for rel in sink.files.named("test.py"):
        directory = rel.rsplit("/", 1)[0] if "/" in rel else ""
        if not directory or not sink.files.exists(f"{directory}/__init__.py"):
            continue
        text = sink.read(rel, limit=262144, quiet=True) or ""
        if _DEFINES_TESTS.search(text) and not (_UNITTEST_MAIN.search(text) and "__main__" in text):
            found.append(rel)
    if found:
        sink.add("test_command", "pytest " + " ".join(found[:10]), found[0], None, "layout.package_test_py")


def read_test_files(sink: Sink) -> None:
    """Where test files are, and — when there is no pytest configuration and no test imports pytest — the
    unittest (or nose) discovery command for suites written with `unittest`."""
    read_package_test_modules(sink)
    tests = [p for p in sink.files.paths if _TEST_FILE_RE.search(p) and not p.startswith(("docs/", "doc/"))]
    if not tests:
        return
    dirs: dict[str, int] = {}
    for p in tests:
        d = p.rsplit("/", 1)[0] if "/" in p else "."
        dirs[d] = dirs.get(d, 0) + 1
    for d, count in sorted(dirs.items())[:30]:
        sink.add("test_dir", {"path": d, "files": count}, d, None, "layout.test_files")
    # `tests.py` is outside pytest's default file pattern (test_*.py, *_test.py): named on its command line it is
    # collected all the same (webencodings keeps its suite in webencodings/tests.py and runs `py.test` on it)
    unmatched = [p for p in tests if p.rsplit("/", 1)[-1] == "tests.py"]
    if unmatched:
        sink.add("test_command", "pytest " + " ".join(unmatched[:10]), unmatched[0], None, "layout.tests_py")
    uses_unittest: list[tuple[str, int]] = []
    uses_pytest = uses_nose = False
    for rel in tests[:MAX_TEST_FILES_READ]:
        text = sink.read(rel, limit=65536, quiet=True) or ""
        if re.search(r"^\s*(?:import|from)\s+pytest\b", text, re.M) or "@pytest." in text:
            uses_pytest = True
        if re.search(r"^\s*(?:import|from)\s+nose\b", text, re.M):
            uses_nose = True
        m = re.search(r"^\s*(?:import\s+unittest\b|from\s+unittest\b)", text, re.M)
        if m:
            uses_unittest.append((rel, text[:m.start()].count("\n") + 1))
    has_pytest_config = any(f.value == "pytest" for f in sink.of("test_runner"))
    if uses_nose and not has_pytest_config:
        sink.add("test_runner", "nose", tests[0], None, "nose.imports")
    if not uses_unittest or uses_pytest or has_pytest_config:
        return
    rel, line = uses_unittest[0]
    sink.add("test_runner", "unittest", rel, line, "unittest.imports")
    tops = {p.split("/", 1)[0] for p, _ in uses_unittest}
    top = next(iter(tops)) if len(tops) == 1 else None
    if top and top.endswith(".py"):
        top = None
    if top and not sink.files.exists(f"{top}/__init__.py"):
        command = f"python -m unittest discover -s {top}"
    else:
        command = "python -m unittest discover"
    sink.add("test_command", command, rel, line, "unittest.discover")
