"""Whether the project takes its version from git tags (setuptools-scm, hatch-vcs, versioneer, ...), and the tag
prefix it expects. Such a project calls a checkout with no tag behind it `0.1.devN` or `0+untagged`; the setup
gives that checkout the release it follows (envyard.setup.checkout_version)."""

from __future__ import annotations

import re
import tomllib

from packaging.utils import canonicalize_name

from .base import Sink
from .ini import parse_ini

# Build requirements that derive the version from `git describe` (or git tags some other way).
TOOLS = frozenset({"setuptools-scm", "hatch-vcs", "versioneer", "setuptools-git-versioning",
                   "poetry-dynamic-versioning", "dunamai", "flit-scm", "vcversioner", "pbr", "setuptools-git-version"})
_USE_SCM = re.compile(r"\buse_scm_version\s*=")


def read_vcs_version(sink: Sink) -> None:
    """Fact `vcs_version` {"tool", "tag_prefix"}: after the readers of pyproject.toml, setup.cfg and setup.py."""
    tool, where = None, None
    for fact in sink.of("build_requirement"):
        name = fact.value.get("name") if isinstance(fact.value, dict) else None
        if name and canonicalize_name(name) in TOOLS:
            tool, where = canonicalize_name(name), fact
            break
    prefix = ""
    pyproject = _toml(sink, "pyproject.toml")
    cfg = parse_ini(sink.read("setup.cfg", quiet=True) or "")
    versioneer = pyproject.get("tool", {}).get("versioneer")
    if isinstance(versioneer, dict) or "versioneer" in cfg.sections or sink.files.exists("versioneer.py"):
        tool = tool or "versioneer"
        setting = versioneer.get("tag_prefix") if isinstance(versioneer, dict) else None
        if setting is None and cfg.get("versioneer", "tag_prefix") is not None:
            setting = cfg.get("versioneer", "tag_prefix").text
        prefix = str(setting or "").strip().strip("'\"")  # setup.cfg writes an empty prefix as '' or ""
    if tool is None and "setuptools_scm" in pyproject.get("tool", {}):
        tool = "setuptools-scm"
    if tool is None and _USE_SCM.search(sink.read("setup.py", quiet=True) or ""):
        tool = "setuptools-scm"
    if tool is None:
        return
    file = where.file if where else "pyproject.toml" if pyproject else "setup.cfg" if cfg.sections else "setup.py"
    sink.add("vcs_version", {"tool": tool, "tag_prefix": prefix}, file, where.line if where else None,
             f"versioning:{tool}")


def _toml(sink: Sink, rel: str) -> dict:
    text = sink.read(rel, quiet=True) if sink.files.exists(rel) else None
    try:
        return tomllib.loads(text) if text else {}
    except tomllib.TOMLDecodeError:
        return {}  # the pyproject reader reports it
