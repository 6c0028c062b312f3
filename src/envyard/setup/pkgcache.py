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
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from ..diskuse import PACKAGE_CACHE

if TYPE_CHECKING:
    from .sources_fetch import Fetched

SLUG_CHARS = 40
LEARNED_DIR = "setup-modules"  # in <store>/cache


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


def learned_path(scope: Path) -> Path:
    """Where the module → distribution names learned by setups of the cache `scope` are kept (modules.Learned):
    beside the caches, since uv removes files it does not know from a cache directory."""
    return scope.parent.parent / LEARNED_DIR / f"{scope.name}.json"
