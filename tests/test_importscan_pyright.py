"""L2's missing-import count (importscan.py) against real pyright (PyPI's basedpyright, which ships node), both run
inside a setup sandbox on the same environment. Skipped when basedpyright cannot be installed (no index)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envyard import Yard
from envyard.setup import importscan, pkgcache, pyright
from envyard.setup.interpreters import host_interpreter, setup_base
from envyard.setup.search import SCAN_SCRIPT, setup_env, setup_sandbox

REPOS = Path(__file__).resolve().parent / "fixtures" / "repos"
SRC = str(Path(__file__).resolve().parents[1] / "src")
ROOT = "/work/imports_app"

# Cases where a hand-made scan could go wrong: optional imports, static conditions, relative imports, comments
# that silence the rule, a module only typeshed's stubs provide, a submodule of an installed package.
TRICKY = '''import sys
from typing import TYPE_CHECKING
try:
    import envyard_optional_backend
except ImportError:
    envyard_optional_backend = None
if TYPE_CHECKING:
    import envyard_typing_only
if sys.version_info < (3, 0):
    import envyard_py2_only
if sys.platform == "win32":
    import envyard_windows_only
import envyard_silenced  # type: ignore
import yaml
import toolz.curried
import toolz.envyard_no_such_submodule
from . import sibling
from .envyard_missing_relative import x
from importsapp import add
'''


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    h = tmp_path_factory.mktemp("pyright-home")
    yield h
    subprocess.run([sys.executable, "-m", "envyard.cli.main", "gc"], env={"ENVYARD_HOME": str(h), "PYTHONPATH": SRC},
                   capture_output=True)


def test_importscan_agrees_with_pyright_in_the_sandbox(home, tmp_path):
    src = tmp_path / "imports_app"
    shutil.copytree(REPOS / "imports_app", src)
    (src / "importsapp" / "tricky.py").write_text(TRICKY)
    (src / "importsapp" / "sibling.py").write_text("")
    yard = Yard(home)
    cache = pkgcache.scope_dir(home, pkgcache.named_identity("tests"))
    with setup_sandbox(yard, setup_base(yard, host_interpreter()), cache) as sb:
        env = setup_env()
        sb.upload(src, ROOT)
        # the environment judged: the project and one of the four distributions its code imports
        made = sb.exec("uv venv -q /opt/venv && uv pip install -q -e . toolz", cwd=ROOT, env=env, timeout=600)
        assert made.exit_code == 0, made.stderr
        tool = sb.exec(pyright.install_command("/usr/bin/python3"), env=env, timeout=600)
        if tool.exit_code != 0:
            pytest.skip(f"basedpyright cannot be installed here: {tool.stderr.strip()[-300:]}")
        sb.write_file(SCAN_SCRIPT, importscan.script_source())
        mine = importscan.parse_scan(sb.exec(importscan.scan_command("/opt/venv/bin/python", ROOT, SCAN_SCRIPT),
                                             env=env, timeout=300).stdout)
        ran = sb.exec(pyright.run_command(ROOT, "/opt/venv/bin/python"), env=env, timeout=600)
    theirs, summary = pyright.parse(ran.stdout, ROOT)
    result = pyright.compare(mine["missing"], theirs)
    assert result["same"], result
    modules = {e["module"] for e in theirs}
    # missing: what nothing provides, the optional import (reported all the same), a missing submodule
    assert {"text_unidecode", "tomli_w", "humps", "envyard_optional_backend", "envyard_typing_only",
            "toolz.envyard_no_such_submodule", ".envyard_missing_relative"} <= modules, modules
    # not missing: unreachable branches, a silenced line, stub-only yaml, installed toolz, relative sibling
    assert not modules & {"envyard_py2_only", "envyard_windows_only", "envyard_silenced", "yaml", "toolz.curried",
                          "toolz", ".", "importsapp"}
    assert summary["filesAnalyzed"] == mine["files"]
