"""L2's import scan (envyard.setup.importscan): the script run the way the engine runs it, on fixture trees.

The expected verdicts are pyright's: every fixture below was checked against pyright 1.1.414
(`pyright ROOT --level error --outputjson` with the same interpreter) when it was written.
Each interpreter runs inside a bare venv (`--without-pip`) so that what is installed elsewhere cannot change
the counts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envyard.setup import importscan

SCRIPT = Path(importscan.__file__)


def _works(exe: str | None) -> str | None:
    if not exe:
        return None
    try:
        ok = subprocess.run([exe, "-c", "import venv"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return None
    return exe if ok else None


def _find(name: str) -> str | None:
    """pythonX.Y on PATH, or one that pyenv installed (its shims only run the selected version)."""
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    candidates = [shutil.which(name)] + [str(p) for p in sorted(pyenv.glob(name[len("python"):] + ".*/bin/" + name))]
    for candidate in candidates:
        if _works(candidate):
            return candidate
    return None


INTERPRETERS = {"system": _works("/usr/bin/python3"), "current": sys.executable}
OLDER = {v: _find(v) for v in ("python3.7", "python3.8", "python3.9", "python3.12", "python3.13")}


def _bare_venv(base: str, where: Path) -> str:
    subprocess.run([base, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True, timeout=60)
    return str(where / "bin" / "python")


def _scan(python: str, root: Path, *extra: str, env: dict | None = None) -> dict:
    cmd = importscan.scan_command(python, str(root), str(SCRIPT))
    if extra:
        cmd += " " + " ".join(extra)
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return importscan.parse_scan(out.stdout)


def _missing(report: dict) -> set[tuple[str, int, str]]:
    return {(m["file"], m["line"], m["module"]) for m in report["missing"]}


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


TREE = {
    # src layout: src/ is searched because it has no __init__.py (pyright's autoSearchPaths)
    "pyproject.toml": "[project]\nname = 'pkg'\n",
    "src/pkg/__init__.py": (
        "from . import sub\n"
        "from .sub import thing\n"
        "from .nosuch import x\n"  # 3: missing ".nosuch"
        "import pkg.sub.thing\n"
        "import pkg.nope\n"  # 5: missing
        "import pkg.stubmod\n"  # a .pyi alone resolves
        "from . import not_a_submodule\n"  # a missing name, not a missing module
    ),
    "src/pkg/sub/__init__.py": "",
    "src/pkg/sub/thing.py": "",
    "src/pkg/stubmod.pyi": "def f() -> int: ...\n",
    # flat layout beside it, and a namespace package (no __init__.py)
    "flat/__init__.py": "from .. import nowhere\n",  # 1: ".." is ROOT, which has no "nowhere": missing
    "nspkg/inner/mod.py": "from . import sibling\nfrom .. import inner\n",  # 1: missing "."
    "tests/helpers.py": "",
    "tests/test_a.py": (
        "import sys\n"
        "import pkg\n"  # 2: found through src/
        "import helpers\n"  # 3: found in the importing file's own directory
        "import json, os.path, collections.abc\n"
        "import json.nosuch\n"  # 5: missing submodule of an installed (stdlib) package
        "import envyard_fixture_missing_1\n"  # 6: missing
        "from envyard_fixture_missing_2 import a, b\n"  # 7: missing, once
        "from json import nosuchname\n"  # not reportMissingImports
        "try:\n"
        "    import envyard_fixture_try\n"  # 10: pyright reports it all the same
        "except ImportError:\n"
        "    pass\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    import envyard_fixture_tc\n"  # 15: TYPE_CHECKING is true for pyright
        "else:\n"
        "    import envyard_fixture_not_tc\n"
        "if sys.version_info < (3, 0):\n"
        "    import envyard_fixture_py2\n"
        "if sys.platform == 'win32':\n"
        "    import envyard_fixture_win\n"
        "def f():\n"
        "    import envyard_fixture_in_function\n"  # 23
        "    return\n"
        "    import envyard_fixture_after_return\n"
        "import envyard_fixture_ignored  # type: ignore\n"
        "import nspkg.inner.mod\n"
        "import yaml\n"  # 28: only typeshed's stubs have it: reportMissingModuleSource, not counted
        "import google.cloud.envyard_nosuch\n"  # 29: missing: typeshed has google.cloud, not this
        "import _sre\n"  # 30: compiled in, but not in typeshed: pyright reports it
        "import typing_extensions\n"  # 31: typeshed's stdlib has it: not counted even when not installed
        "import tstub\n"  # typings/
        "import flat\n"
    ),
    "typings/tstub/__init__.pyi": "",
    # a Python 2 file: an error, its imports still checked, and its version guard still honoured
    "scripts/old.py": (
        "import sys\n"
        "print 'hello'\n"
        "import envyard_fixture_py2_file\n"  # 3: missing
        "if sys.version_info[0] == 2:\n"
        "    import envyard_fixture_py2_guard\n"
        "    print 'py2'\n"
        "try:\n"
        "    import envyard_fixture_py2_try\n"  # 8: missing
        "except ImportError, e:\n"
        "    import envyard_fixture_py2_except\n"  # 10: missing
        "mode = 0755 + 10L\n"
        "def f():\n"
        "    raise ValueError, 'no'\n"
        "    import envyard_fixture_py2_after_raise\n"
    ),
    # pyright scans build/ too; it skips hidden directories, node_modules and virtual environments
    "build/lib/pkg/copy.py": "import envyard_fixture_build\n",  # 1: missing
    ".hidden/h.py": "import envyard_fixture_hidden\n",
    "node_modules/n/n.py": "import envyard_fixture_node\n",
    "env/pyvenv.cfg": "home = /usr/bin\n",
    "env/lib/v.py": "import envyard_fixture_venv\n",
}

EXPECTED = {
    ("src/pkg/__init__.py", 3, ".nosuch"),
    ("src/pkg/__init__.py", 5, "pkg.nope"),
    ("flat/__init__.py", 1, ".."),
    ("nspkg/inner/mod.py", 1, "."),
    ("tests/test_a.py", 5, "json.nosuch"),
    ("tests/test_a.py", 6, "envyard_fixture_missing_1"),
    ("tests/test_a.py", 7, "envyard_fixture_missing_2"),
    ("tests/test_a.py", 10, "envyard_fixture_try"),
    ("tests/test_a.py", 15, "envyard_fixture_tc"),
    ("tests/test_a.py", 23, "envyard_fixture_in_function"),
    ("tests/test_a.py", 29, "google.cloud.envyard_nosuch"),
    ("tests/test_a.py", 30, "_sre"),
    ("scripts/old.py", 3, "envyard_fixture_py2_file"),
    ("scripts/old.py", 8, "envyard_fixture_py2_try"),
    ("scripts/old.py", 10, "envyard_fixture_py2_except"),
    ("build/lib/pkg/copy.py", 1, "envyard_fixture_build"),
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    _write(root, TREE)
    return root


def _check_tree(report: dict) -> None:
    assert _missing(report) == EXPECTED
    assert report["files"] == 11
    assert [(s["file"], s["line"], s["module"]) for s in report["stub_only"]] == [
        ("tests/test_a.py", 28, "yaml"), ("tests/test_a.py", 31, "typing_extensions")]
    assert report["ignored"] == 1
    assert [e["file"] for e in report["errors"]] == ["scripts/old.py"]
    assert report["errors"][0]["error"].startswith("SyntaxError")


@pytest.mark.parametrize("which", ["system", "current"])
def test_tree_in_a_bare_venv(which: str, tree: Path, tmp_path: Path) -> None:
    if not INTERPRETERS[which]:
        pytest.skip("no /usr/bin/python3")
    python = _bare_venv(INTERPRETERS[which], tmp_path / "venv")
    _check_tree(_scan(python, tree))


@pytest.mark.parametrize("version", sorted(OLDER))
def test_tree_on_other_pythons(version: str, tree: Path, tmp_path: Path) -> None:
    """The script is stdlib-only and parses under 3.7+ grammars; the counts do not depend on the version."""
    if not OLDER[version]:
        pytest.skip(version + " not installed")
    grammar = subprocess.run([OLDER[version], "-c", "import ast,sys; ast.parse(open(sys.argv[1]).read())", str(SCRIPT)],
                             capture_output=True, text=True)
    assert grammar.returncode == 0, grammar.stderr
    python = _bare_venv(OLDER[version], tmp_path / "venv")
    _check_tree(_scan(python, tree))


def test_interpreter_itself_and_its_site_packages(tmp_path: Path) -> None:
    """Run by the interpreter directly (no venv): its own sys.path, .pth files and PYTHONPATH count."""
    python = _bare_venv(sys.executable, tmp_path / "venv")
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    _write(site, {
        "realpkg/__init__.py": "", "realpkg/sub.py": "",
        "onlystubs-stubs/__init__.pyi": "",  # PEP 561 stub package: resolves
        "native_ext.cpython-311-x86_64-linux-gnu.so": "",
        "yaml/__init__.py": "",  # installed: no longer stub-only, but yaml.nosuch is missing
        "test/__init__.py": "",  # a regular package shadows the repository's namespace dir of the same name
        "_editable.pth": str(tmp_path / "editable") + "\n",
    })
    _write(tmp_path, {"editable/edpkg/__init__.py": "", "pypath/pp.py": ""})
    root = tmp_path / "repo"
    _write(root, {
        "app.py": (
            "import realpkg.sub\n"
            "import realpkg.nosub\n"  # 2: missing
            "import onlystubs\n"
            "import native_ext\n"
            "import edpkg\n"
            "import pp\n"
            "import yaml\n"
            "import yaml.nosuch\n"  # 8: missing
            "import test.helpers\n"  # 9: missing: site-packages' test/ (a real package) wins over ./test/
        ),
        "test/helpers.py": "",
    })
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "pypath"))
    report = _scan(python, root, env=env)
    assert _missing(report) == {("app.py", 2, "realpkg.nosub"), ("app.py", 8, "yaml.nosuch"),
                                ("app.py", 9, "test.helpers")}
    assert report["stub_only"] == []


def test_pyright_configuration_is_honoured(tmp_path: Path) -> None:
    python = _bare_venv(sys.executable, tmp_path / "venv")
    files = {
        "a/a.py": "import envyard_cfg_a\nimport libmod\nif DEBUG:\n    import envyard_cfg_debug\n",
        "b/b.py": "import envyard_cfg_b\n",
        "lib/libmod.py": "",
        "gen/g.py": "import envyard_cfg_generated\n",
    }
    root = tmp_path / "json"
    _write(root, dict(files, **{"pyrightconfig.json": (
        '{\n  // comments and trailing commas are allowed\n  "exclude": ["b"],\n  "ignore": ["gen"],\n'
        '  "extraPaths": ["lib"],\n  "defineConstant": {"DEBUG": false},\n}\n')}))
    report = _scan(python, root)
    assert _missing(report) == {("a/a.py", 1, "envyard_cfg_a")}
    assert report["config"] == "pyrightconfig.json" and report["ignored"] == 1

    root = tmp_path / "toml"
    _write(root, dict(files, **{"pyproject.toml": "[tool.pyright]\nreportMissingImports = 'warning'\n"}))
    report = _scan(python, root)
    assert report["missing"] == [] and report["ignored"] == 5  # a, debug (DEBUG undefined), b, libmod, generated

    root = tmp_path / "off"
    _write(root, {"m.py": "# pyright: reportMissingImports=false\nimport envyard_cfg_off\n",
                  "n.py": "# type: ignore\nimport envyard_cfg_file_ignored\n",
                  "o.py": '"""doc"""\n# type: ignore\nimport envyard_cfg_not_file_level\n',
                  "p.py": "import envyard_cfg_p  # pyright: ignore[reportAttributeAccessIssue]\n"})
    report = _scan(python, root)
    assert _missing(report) == {("o.py", 3, "envyard_cfg_not_file_level"), ("p.py", 1, "envyard_cfg_p")}


def test_exclude_option_and_the_envyard_repository(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    _write(root, {"keep/k.py": "import envyard_keep\n", "vendor/v.py": "import envyard_vendor\n"})
    report = _scan(sys.executable, root, "--exclude", "vendor")
    assert _missing(report) == {("keep/k.py", 1, "envyard_keep")}
    # in-process, on envyard's own setup package: it runs and finds nothing missing there
    report = importscan.scan(str(SCRIPT.parent))
    assert report["files"] >= 5 and not report["errors"] and report["imports"] > 50


def test_parse_scan_and_command() -> None:
    report = {"files": 1, "imports": 2, "missing": [], "errors": [], "stub_only": []}
    assert importscan.parse_scan("noise\n" + json.dumps(report) + "\n") == report
    for garbage in ("", "Traceback (most recent call last):\n", "{not json}", '{"files": 1}', "[1, 2]"):
        with pytest.raises(ValueError):
            importscan.parse_scan(garbage)
    cmd = importscan.scan_command("/opt/venv/bin/python", "/data/my project")
    assert cmd == "cd '/data/my project' && /opt/venv/bin/python -I /tmp/envyard-importscan.py '/data/my project'"
    assert importscan.script_source() == SCRIPT.read_text()
    compile(importscan.script_source(), "importscan.py", "exec")
