"""Which package cache a setup's sandboxes get: one per source.

uv's cache is writable from the setup sandboxes, and every build of an sdist or of the project runs the
project's own code there (setup.py, a build backend, a Makefile). A cache shared by all setups would let one
repository plant code in the unpacked wheels that every later setup installs from it (a cache-poisoning
channel between projects). So each source gets a cache of its own under `<store>/cache/packages/`, keyed by
what the user named (a directory's path, a PyPI project, a git or archive URL; never by the name a project gives
itself): setting up a project again, or another revision of it, reuses its cache; two projects share nothing.
`envyard setup --cache-scope NAME` shares one cache among setups given the same NAME, for sources trusted alike.
What the repairs learned about module → distribution names is kept per cache too: a check that runs in the
project's sandbox can be made to fail, or to accept a look-alike distribution, by the project.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
import uuid
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from packaging.utils import canonicalize_name

from ..diskuse import PACKAGE_CACHE

if TYPE_CHECKING:
    from .sources_fetch import Fetched

SLUG_CHARS = 40
LEARNED_DIR = "setup-modules"  # in <store>/cache

# PyPI's own caching policy, restated for uv (see index_policy): index pages fresh for 10 minutes, files forever
# (a file's URL names its content; PyPI never reuses a file name).
INDEX_POLICY = """\
# Written by envyard for its setup sandboxes: PyPI's own cache headers, for when a proxy or mirror strips them.
[[index]]
url = "https://pypi.org/simple"
default = true
cache-control = { api = "max-age=600", files = "max-age=365000000, immutable" }
"""
INDEX_POLICY_INSIDE = "/etc/uv/uv.toml"  # uv's system-level configuration, below the project's own
_UV_INDEX_KEYS = {"index", "index-url", "extra-index-url", "find-links", "no-index"}


def directory_identity(src: Path) -> str:
    return f"dir:{src.resolve()}"


def named_identity(name: str) -> str:
    return f"named:{name}"


def source_identity(source: str, fetched: "Fetched | None") -> str:
    """The identity of what the user asked `envyard setup` for (see the module's docstring)."""
    if fetched is None:
        return directory_identity(Path(source).expanduser())
    if fetched.kind == "pypi":
        return f"pypi:{canonicalize_name(fetched.name)}"
    if fetched.kind == "git":
        return f"git:{fetched.filename}"  # the URL, credentials removed; not the revision
    where = source if "://" in source else str(Path(source).expanduser().resolve())
    return f"archive:{where}"


def scope_dir(home: Path, identity: str) -> Path:
    """The cache directory of `identity` in the store at `home`, created, its time set to now (`envyard gc
    --cache` removes the least recently used first). The name is readable and carries a hash of the whole
    identity, so two identities never meet in one directory."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", identity.split(":", 1)[-1]).strip("._-")
    if len(slug) > SLUG_CHARS:  # keep the end (a path's last parts, a URL's repository), cut at a separator
        slug = slug[-SLUG_CHARS:].split("_", 1)[-1]
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    path = home.joinpath(*PACKAGE_CACHE) / f"{slug or 'source'}-{digest}"
    path.mkdir(parents=True, exist_ok=True)
    os.utime(path)
    return path


def index_policy(home: Path, project_dirs: list[Path], named_indexes: bool) -> Path | None:
    """The uv configuration file that setup sandboxes see at INDEX_POLICY_INSIDE (written under `<home>/cache`),
    or None when the project names package indexes of its own (`named_indexes`: requirements `-i`, Pipfile
    sources; or uv settings in `project_dirs`), which that file's default index would override.

    Why: a setup installs from its cache over and over (each step, each branch, the completeness pass, the
    replay), and uv reuses a cached index page or file only while its HTTP response is fresh. PyPI's responses
    say how long (max-age=600 on pages; files immutable), but a proxy or mirror that strips those headers (these
    machines reach PyPI through one that sends none) makes every install fetch every page and download every
    file again, and build every sdist again (docopt: 1.3 s per install). Setup-time only: images and their
    contract do not keep it."""
    if named_indexes or any(_uv_indexes(d) for d in project_dirs):
        return None
    path = home / "cache" / "setup-uv.toml"
    try:
        if path.read_text() == INDEX_POLICY:
            return path
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    tmp.write_text(INDEX_POLICY)
    os.replace(tmp, path)  # sandboxes that bound the old file keep it
    return path


def is_pypi(url: str) -> bool:
    """Whether an index URL is PyPI's own Simple API (a Pipfile's default `[[source]]`, a requirement file's
    `-i https://pypi.org/simple`): naming it is not naming an index of one's own."""
    parts = urlsplit(str(url).strip())
    return parts.hostname in ("pypi.org", "pypi.python.org") and parts.path.rstrip("/") == "/simple"


def _uv_indexes(directory: Path) -> bool:
    """Whether uv's configuration in `directory` (uv.toml, or pyproject.toml's [tool.uv]) names indexes."""
    if (directory / "uv.toml").is_file():
        return True  # any uv.toml: uv reads it instead of pyproject.toml's table; not worth parsing
    try:
        tool = tomllib.loads((directory / "pyproject.toml").read_text(errors="replace")).get("tool", {})
    except (OSError, tomllib.TOMLDecodeError):
        return False
    uv = tool.get("uv", {}) if isinstance(tool, dict) else {}
    if not isinstance(uv, dict):
        return False
    pip = uv.get("pip", {})
    return bool(_UV_INDEX_KEYS & set(uv)) or (isinstance(pip, dict) and bool(_UV_INDEX_KEYS & set(pip)))


def learned_path(scope: Path) -> Path:
    """Where the module → distribution names learned by setups of the cache `scope` are kept (modules.Learned):
    beside the caches, since uv removes files it does not know from a cache directory."""
    return scope.parent.parent / LEARNED_DIR / f"{scope.name}.json"
