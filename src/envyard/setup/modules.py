"""Which distribution provides a missing top-level module: candidates, the check that accepts one, and what was
learned.

The import name and the distribution's name differ in a long tail (`humps` is `pyhumps`, `netaddr` is `netaddr`,
`cv2` is `opencv-python-headless`), and a wrong guess can install an unrelated project that happens to have the
module (the `humps` distribution is not `pyhumps`). So the search tries a few candidates in the sandbox — what an
earlier setup learned, the table's entry (data/import_to_dist.toml), the name itself, then py-X, pyX, python-X,
X-python — and keeps one only when, installed, `import X` works and X has the names the project imports from it
(`from humps import camelize`). A wrong one is uninstalled before the next is tried. What was learned is kept with
the source's package cache (pkgcache.learned_path), so its later setups try the right distribution first (and
skip a module no candidate provided, for a week); other projects' setups do not see it.
"""

from __future__ import annotations

import ast
import json
import os
import re
import threading
import time
from pathlib import Path

from packaging.utils import canonicalize_name

from .repairs import import_to_dist

MAX_CANDIDATES = 6
MAX_NAMES = 24             # names checked per module
MAX_SCAN_FILES = 3000
MAX_SCAN_BYTES = 500_000
NEGATIVE_SECONDS = 7 * 86400
NEGATIVE_FORMAT = 2  # a negative means every candidate installed and none provided the module
_LOCK = threading.Lock()


def candidates(module: str, learned: str | None = None) -> list[str]:
    """Distributions that may provide `module`, most likely first, at most MAX_CANDIDATES."""
    top = module.split(".")[0]
    table = import_to_dist().get(top)
    base = top.lower().replace("_", "-")
    names = [learned, table, top]
    if not base.startswith("py"):
        names += [f"py-{base}", f"py{base}"]
    names += [f"python-{base}", f"{base}-python"]
    out: list[str] = []
    seen: set[str] = set()
    for n in names:
        if not n:
            continue
        key = canonicalize_name(re.split(r"[<>=!~;\[ ]", n, maxsplit=1)[0])
        if key not in seen:
            seen.add(key)
            out.append(n)
    return out[:MAX_CANDIDATES]


def imported_names(src: Path, module: str) -> list[str]:
    """What the project's Python files import from `module`, as "dotted.module:name" (or "dotted.module:"), so a
    candidate can be checked against it. Read with `ast`, never run; bounded in files and size."""
    top = module.split(".")[0]
    found: dict[str, None] = {}
    count = 0
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in ("node_modules", "__pycache__")
                       and not os.path.exists(os.path.join(dirpath, d, "pyvenv.cfg"))]
        for name in filenames:
            if not name.endswith(".py"):
                continue
            count += 1
            if count > MAX_SCAN_FILES:
                return list(found)[:MAX_NAMES]
            path = os.path.join(dirpath, name)
            try:
                if os.path.getsize(path) > MAX_SCAN_BYTES:
                    continue
                text = Path(path).read_text("utf-8", errors="replace")
                if top not in text:
                    continue
                tree = ast.parse(text)
            except (OSError, SyntaxError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                        and node.module.split(".")[0] == top:
                    for alias in node.names:
                        found[f"{node.module}:{'' if alias.name == '*' else alias.name}"] = None
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name.split(".")[0] == top and "." in alias.name:
                            found[f"{alias.name}:"] = None
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == top \
                        and module == top:
                    found[f"{top}:{node.attr}"] = None             # `import humps` … `humps.camelize(...)`
    return list(found)[:MAX_NAMES]


# Run with the environment's Python: argv[1] is the top-level module, then "module:name" items. Exit 0 when the
# module imports and has every name; a module it imports that is missing (not itself) does not count against it.
CHECK = """import importlib, sys
top = sys.argv[1]
def load(mod):
    try:
        return importlib.import_module(mod)
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] != top:
            return None
        raise
try:
    load(top)
    for item in sys.argv[2:]:
        mod, _, name = item.partition(":")
        m = load(mod)
        if m is None or not name or hasattr(m, name):
            continue
        try:
            importlib.import_module(mod + "." + name)
        except ModuleNotFoundError:
            raise ImportError("cannot import name %r from %r" % (name, mod))
except Exception as e:
    print("%s: %s" % (type(e).__name__, e))
    sys.exit(1)
"""


class Learned:
    """import name → distribution (or None: nothing found), kept in a JSON file in the store."""

    def __init__(self, path: Path):
        self.path = path

    def _load(self) -> dict:
        try:
            data = json.loads(self.path.read_text("utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def get(self, module: str) -> tuple[bool, str | None]:
        """(known, distribution): known with None means no candidate provided it recently."""
        entry = self._load().get(module)
        if not isinstance(entry, dict):
            return False, None
        dist = entry.get("dist")
        if isinstance(dist, str):
            return True, dist
        # negatives from before NEGATIVE_FORMAT also counted candidates that failed to install (mysqlclient
        # without its Debian libraries): not trusted
        if entry.get("format") == NEGATIVE_FORMAT and time.time() - float(entry.get("when", 0)) < NEGATIVE_SECONDS:
            return True, None
        return False, None

    def put(self, module: str, dist: str | None) -> None:
        with _LOCK:
            data = self._load()
            data[module] = {"dist": dist, "when": int(time.time())} | ({} if dist else {"format": NEGATIVE_FORMAT})
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True), "utf-8")
            os.replace(tmp, self.path)
