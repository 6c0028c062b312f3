"""Repairs that act in the sandbox, tested without one: which distribution provides a missing module
(envyard.setup.modules), leaving out requirements PyPI lacks, and L1 for unpackaged projects."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from types import SimpleNamespace

from envyard.setup import modules
from envyard.setup.interpreters import Interpreter
from envyard.setup.plan import OVERRIDES, Recipe, Step
from envyard.setup.repairs import Fix, diagnose
from envyard.setup.search import DEBIAN_HAS, IMPORT_FROM_SOURCE, Search, guessed_module


def test_candidates_for_a_module_most_likely_first():
    assert modules.candidates("humps") == ["humps", "py-humps", "pyhumps", "python-humps", "humps-python"]
    assert modules.candidates("yaml")[0] == "pyyaml"                              # the table first
    assert modules.candidates("humps", learned="pyhumps")[0] == "pyhumps"         # then what was learned
    assert len(modules.candidates("a_b.c")) <= modules.MAX_CANDIDATES


def test_names_the_project_imports_from_a_module(tmp_path):
    (tmp_path / "app.py").write_text("import humps\nfrom netaddr import IPNetwork, IPAddress as A\n"
                                     "import netaddr.strategy.ipv4\n\ndef f(s):\n    return humps.camelize(s)\n")
    (tmp_path / "broken.py").write_text("def (:\n")
    assert modules.imported_names(tmp_path, "humps") == ["humps:camelize"]
    assert modules.imported_names(tmp_path, "netaddr") == ["netaddr:IPNetwork", "netaddr:IPAddress",
                                                           "netaddr.strategy.ipv4:"]


def test_the_check_accepts_a_module_only_with_the_names_used(tmp_path):
    (tmp_path / "wrongdist.py").write_text("x = 1\n")
    (tmp_path / "needsdep.py").write_text("import not_installed_anywhere\n")
    def check(*args):
        return subprocess.run([sys.executable, "-c", modules.CHECK, *args], cwd=tmp_path, capture_output=True,
                              text=True).returncode
    assert check("json", "json:dumps", "json.decoder:") == 0
    assert check("wrongdist", "wrongdist:camelize") == 1                # a distribution that is not the one
    assert check("absent_module_xyz") == 1
    assert check("needsdep") == 0                     # the right one, whose own dependency the next round installs


def test_what_was_learned_is_kept(tmp_path):
    learned = modules.Learned(tmp_path / "cache" / "m.json")
    assert learned.get("humps") == (False, None)
    learned.put("humps", "pyhumps")
    learned.put("cnetconf", None)
    again = modules.Learned(tmp_path / "cache" / "m.json")
    assert again.get("humps") == (True, "pyhumps") and again.get("cnetconf") == (True, None)


def test_a_negative_from_before_install_failures_were_told_apart_is_not_trusted(tmp_path):
    """Earlier negatives also counted candidates that failed to install (mysqlclient without its Debian
    libraries): MySQLdb stayed "provided by nothing" for a week. Only negatives of the current format count."""
    path = tmp_path / "cache" / "m.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"MySQLdb": {"dist": None, "when": int(time.time())}}))
    learned = modules.Learned(path)
    assert learned.get("MySQLdb") == (False, None)
    learned.put("MySQLdb", None)
    assert learned.get("MySQLdb") == (True, None)


def test_a_wrong_guess_is_not_a_too_new_dependency():
    output = "E   ImportError: cannot import name 'camelize' from 'humps' (/opt/venv/lib/python3.11/site-packages/humps/__init__.py)"
    assert diagnose(output, stage="collect")[0].kind == "cutoff"
    assert guessed_module(output, {"humps": "humps"}) == "humps"
    assert guessed_module(output, {}) is None


class FakeWorkspace:
    def __init__(self, debian: set[str]):
        self.debian, self.commands, self.env = debian, [], {}

    def sh(self, command, cwd, timeout):
        self.commands.append(command)
        name = command.split("show --no-all-versions ", 1)[1].split()[0] if "apt-cache show" in command else ""
        return SimpleNamespace(exit_code=0 if name in self.debian else 100, stdout="", stderr="")


def test_a_requirement_pypi_lacks_is_left_out_and_installed_from_debian():
    fix = diagnose("  cause: Because alsa-utils was not found in the package registry and you require alsa-utils, "
                   "we can conclude that your requirements are unsatisfiable.", stage="install")[0]
    assert (fix.kind, fix.args) == ("drop", ("alsa-utils",))
    recipe = Recipe(Interpreter("host", "host", "/usr/bin/python3", "3.11.2"))
    failed = Step("requirements", "uv pip install -r requirements.txt", "requirements.file")
    ws = FakeWorkspace({"alsa-utils"})
    before, again = Search._fix_steps(None, fix, recipe, failed, ws)
    assert DEBIAN_HAS.format(name="alsa-utils") in ws.commands
    assert before[0].kind == "apt" and before[0].command.endswith("alsa-utils")
    assert before[1].command.endswith(f"'alsa-utils; sys_platform == \"never\"' >> {OVERRIDES}")
    assert again.command == f"uv pip install -r requirements.txt --override {OVERRIDES}"
    # a second name: the step keeps one --override; a name Debian lacks is only left out
    before2, again2 = Search._fix_steps(None, Fix("drop", ("internal-lib",), "not-on-pypi", "x"), recipe, again,
                                        FakeWorkspace(set()))
    assert [s.kind for s in before2] == ["repair"] and again2.command == again.command
    assert any("internal-lib" in n for n in recipe.notes)


def test_a_url_requirement_that_cannot_be_fetched_comes_from_the_index():
    """uvicorn's requirements.txt names `h11 @ git+https://github.com/...@master`: the index's h11 stands in, as a
    uv override (an override also replaces a URL requirement), and the step runs again obeying it."""
    output = ("error: Failed to download and build `h11 @ git+https://github.com/python-hyper/h11.git@master`\n"
              "  cause: Git operation failed\n"
              "         fatal: unable to access 'https://github.com/python-hyper/h11.git/': Could not resolve host\n")
    fix = diagnose(output, stage="install", retried=True)[0]
    assert (fix.kind, fix.args, fix.rule) == ("from_index", ("h11",), "unreachable-url-requirement")
    recipe = Recipe(Interpreter("host", "host", "/usr/bin/python3", "3.11.2"))
    failed = Step("requirements", "uv pip install -r requirements.txt", "requirements.file")
    before, again = Search._fix_steps(None, fix, recipe, failed, FakeWorkspace(set()))
    assert [s.kind for s in before] == ["repair"] and before[0].command.endswith(f"' h11 >> {OVERRIDES}")
    assert again.command == f"uv pip install -r requirements.txt --override {OVERRIDES}"
    assert any("h11" in n and "package index" in n for n in recipe.notes)


def test_unpackaged_modules_import_from_the_source_tree(tmp_path):
    (tmp_path / "app.py").write_text("import json\n")
    (tmp_path / "cli.py").write_text("import argparse\nargparse.ArgumentParser().add_argument('x')\n"
                                     "import sys; sys.exit(2)\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from app import json\n")
    ok = subprocess.run([sys.executable, "-c", IMPORT_FROM_SOURCE, "app", "cli", "pkg"], cwd=tmp_path,
                        capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.split("\n")[:2] == ["app pkg", "cli(exit 2)"]
    (tmp_path / "needs.py").write_text("import netaddr_not_installed\n")
    bad = subprocess.run([sys.executable, "-c", IMPORT_FROM_SOURCE, "app", "needs"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "No module named 'netaddr_not_installed'" in bad.stderr
    assert not (tmp_path / "__pycache__").exists()


def test_a_failed_install_is_told_by_the_line_that_says_why():
    """bcrypt's Rust extension: cargo cannot reach crates.io, and uv's last words are its generic hint
    (reconstructed output)."""
    from envyard.setup.search import telling_line
    cargo = ("   Compiling bcrypt\n    error: failed to get `pyo3` as a dependency of package `bcrypt-rust v0.1.0`\n"
             "    Caused by:\n      download of config.json failed\n"
             "      [6] Could not resolve hostname (Could not resolve host: index.crates.io)\n"
             "  error: `cargo metadata --manifest-path src/_bcrypt/Cargo.toml` failed with code 101\n\n"
             "hint: Build failures usually indicate a problem with the package or the build environment\n")
    assert telling_line(cargo) == "[6] Could not resolve hostname (Could not resolve host: index.crates.io)"
    assert telling_line("error: x failed\nhint: Build failures usually indicate a problem\n") == "error: x failed"
    assert telling_line("") == ""
    uv = ("error: Couldn't parse requirement in `dev-requirements.txt` at position 43\n"
          "  cause: Unsupported Git URL scheme `git:` in `git://github.com/sigmavirus24/betamax`\n"
          "         git+git://github.com/sigmavirus24/betamax\n         ^^^^^^^^^^^^^^^^^^^^^^^^\n")
    assert telling_line(uv) == "git+git://github.com/sigmavirus24/betamax"
