"""Repairs as data: an error signature in a step's output → a typed fix, each from a table with tests.

First rule: a module the tests import but nothing installed (`ModuleNotFoundError: No module named 'x'`)
→ install its distribution (data/import_to_dist.toml maps import names that differ from distribution names).
"""

from __future__ import annotations

import re
import tomllib
from functools import lru_cache
from importlib import resources

MISSING_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([A-Za-z_][\w.]*)'")


@lru_cache(maxsize=1)
def import_to_dist() -> dict[str, str]:
    return tomllib.loads(resources.files("envyard.data").joinpath("import_to_dist.toml").read_text())


def missing_modules(output: str) -> list[str]:
    """Top-level module names from ModuleNotFoundError lines, in order of appearance, without repeats."""
    seen: list[str] = []
    for m in MISSING_MODULE.finditer(output):
        top = m.group(1).split(".")[0]
        if top not in seen:
            seen.append(top)
    return seen


def distributions_for(modules: list[str], local: set[str]) -> list[str]:
    """Distributions to install for missing modules; the project's own packages are not fetched from PyPI."""
    table = import_to_dist()
    return [table.get(m, m) for m in modules if m not in local and not m.startswith("_")]
