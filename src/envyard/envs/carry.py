"""What of an agent's work reaches the verifier: an allowlist of paths, then a filter inside them.

Verification runs in a fresh sandbox over the task's image plus one layer made here from the agent's
writable layer (its overlay upper dir). Only the paths the task says the agent produces are copied — by
default its workdir — so everything else the agent changed (the dynamic loader's config, the interpreter's
standard library, test runners, shells' start-up files, /tests, /logs) never exists for the verifier, and
copying costs what the answer weighs, not what the agent wrote elsewhere.

Inside the carried paths, a filter removes what would run code in the verifier without being the work
itself or would stall it:
- special files (FIFOs, sockets, device nodes): an answer file that is a FIFO would block the verifier;
- compiled bytecode (`__pycache__`, `*.pyc`): Python runs a cached .pyc whose recorded source size and
  time match, so a planted one could replace code whose source the verifier checks;
- what the dynamic loader, interpreters and shells read as they start (`/etc/ld.so.preload`, a
  `python3X.zip` shadowing the standard library, profile and rc files), interpreter start-up hooks
  (`sitecustomize.py`, `usercustomize.py`), `.pth` files that run code (unless the image had the very same
  file), and pytest plugins registered through entry points (except those the image registers already in that
  site directory: a plugin reinstalled at another version is a repair);
- symlinks into the verifier's own directories (an answer file pointing at the expected answer);
- new top-level entries of a carried directory named like a module the verifier imports (the standard
  library, the test runners, and outside site-packages the modules pytest imports as it starts): with the
  directory on `sys.path` (a workdir usually is) they would shadow the real ones; and new test-runner
  configs at any depth (`conftest.py`, `pytest.ini`, `pytest.toml`, and a `pyproject.toml`, `tox.ini` or
  `setup.cfg` holding a pytest section), which pytest would load;
- under protected paths (system bin dirs, the standard library, the test runners' own packages, the loader;
  plus the task's `protected` list), any change to a file of the image — it is restored —, a non-directory
  (a symlink, say) in place of an image directory holding protected files, and new commands that would
  shadow an image command earlier on PATH.

Removing an entry from the carried layer restores the image's version of it (or its absence).
"""

from __future__ import annotations

import fnmatch
import os
import stat
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EnvyardError
from ..overlay import is_opaque, is_whiteout, make_whiteout, mark_opaque, unmark_opaque
from ..store.store import remove_tree

# Never carried, whatever the task says: the verifier's own inputs and outputs, envyard's control dir.
NEVER_CARRIED = ("/tests", "/logs", "/solution", "/.envyard")
# Files of the image here may not be replaced or deleted, even when a carried path covers them.
ALWAYS_PROTECTED = (
    "/bin/*", "/sbin/*", "/usr/bin/*", "/usr/sbin/*", "/usr/local/bin/*", "/usr/local/sbin/*",
    "/usr/lib/python3.*", "/etc/python3*",
    "/lib64/ld-linux*", "/usr/lib64/ld-linux*", "/lib/*-linux-gnu/ld-linux*", "/usr/lib/*-linux-gnu/ld-linux*",
    "/lib/*-linux-gnu/libc.so*", "/usr/lib/*-linux-gnu/libc.so*", "/etc/ld.so.*", "/etc/environment",
    "*-packages/pytest", "*-packages/pytest.py", "*-packages/_pytest", "*-packages/pluggy", "*-packages/py.py",
    "*-packages/iniconfig", "*-packages/pytest-*", "*-packages/pluggy-*", "*-packages/_pytest-*",
)
# Read by the dynamic loader or by interpreters and shells as they start: never carried, new or changed.
STARTUP_FILES = (
    "/etc/ld.so.preload", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ld.so.cache", "*/python3*.zip",
    "/etc/environment", "/etc/profile", "/etc/profile.d", "/etc/bash.bashrc", "/etc/bashrc", "/etc/shells",
    "*/.bashrc", "*/.bash_profile", "*/.bash_login", "*/.bash_logout", "*/.profile", "*/.pythonrc*",
)
# Directories before the system's on PATH: a new file there must not shadow an image command.
SHADOWING_DIRS = ("/usr/local/sbin", "/usr/local/bin")
SYSTEM_BIN_DIRS = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
STARTUP_HOOKS = ("sitecustomize.py", "usercustomize.py")
# Module names a verifier is likely to import, plus test-runner configs: new top-level entries of a carried
# directory with these names are dropped.
SHADOW_MODULES = frozenset(sys.stdlib_module_names) | {"pytest", "_pytest", "pluggy", "py", "iniconfig", "nose",
                                                      "nose2", "hypothesis", "coverage"}
# Modules pytest imports (or tries) as it starts, beyond its own packages: shadowed from a directory before
# site-packages on sys.path (a workdir, for `python -m pytest`), they run inside pytest before any test. Dropped
# as new top-level entries outside site-packages (where a reinstalled distribution belongs).
PYTEST_STARTUP_IMPORTS = frozenset({"packaging", "pygments", "colorama", "exceptiongroup", "tomli", "attr", "org",
                                    "__pypy__", "tputil"})
RUNNER_CONFIGS = ("conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml")
# Files pytest reads its configuration from when they hold its section: a new one with it is dropped too.
PYTEST_SECTIONS = {"pyproject.toml": "[tool.pytest", "tox.ini": "[pytest]", "setup.cfg": "[tool:pytest]"}
MAX_LISTED = 100  # dropped paths listed in a verdict; the rest are counted
MAX_ENTRIES = 1_000_000  # more files than this in the agent's work scores 0 (copying them would stall)


@dataclass
class Carried:
    """The outcome of carrying an agent's work: the layer dir (None when the work was too large)."""

    layer: Path | None
    size: int = 0
    entries: int = 0
    too_large: bool = False
    dropped: list[str] = field(default_factory=list)
    dropped_count: int = 0

    def drop(self, path: str) -> None:
        self.dropped_count += 1
        if len(self.dropped) < MAX_LISTED:
            self.dropped.append(path)


def normalise_roots(roots: list[str]) -> list[str]:
    """Absolute, normalised, without roots nested in other roots."""
    clean = sorted({os.path.normpath(r) for r in roots})
    return [r for r in clean if not any(r != o and (o == "/" or r.startswith(o + "/")) for o in clean)]


def carry_changes(upper: Path, dest: Path, roots: list[str], lowers: list[Path], protected: list[str],
                  max_bytes: int) -> Carried:
    """Copy the entries of `upper` (an agent's writable layer, its processes gone) at and below `roots` into
    the empty directory `dest`, then filter them. `lowers` are the image's layer dirs, bottom first."""
    result = Carried(layer=dest)
    sources = []
    for root in normalise_roots(roots):
        src = _entry_in_upper(upper, root, result)
        if src is not None:
            sources.append((root, src))
    entries = 0
    for _root, src in sources:
        size, count = _apparent_size(src)
        result.size += size
        entries += count
        if result.size > max_bytes or entries > MAX_ENTRIES:
            return Carried(layer=None, size=result.size, entries=entries, too_large=True)
    for root, src in sources:
        _copy_entry(upper, src, dest, root)
    filter_carried(dest, lowers, [*ALWAYS_PROTECTED, *protected], result)
    return result


def _entry_in_upper(upper: Path, root: str, result: Carried) -> Path | None:
    """The upper dir's entry for `root`, or None when the agent changed nothing there. A parent that the
    agent replaced (by a file, a symlink or a deletion) carries nothing: the image's parent stays."""
    if root == "/":
        return upper
    current = upper
    parts = root.strip("/").split("/")
    for i, part in enumerate(parts):
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return None
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            result.drop("/" + "/".join(parts[: i + 1]) + " (replaced a parent of a carried path)")
            return None
    return current


def _apparent_size(path: Path) -> tuple[int, int]:
    """(bytes, entries) at and under `path`: bytes of regular files as a reader sees them (sparse holes
    count: a verifier reading the file pays for them). Stops counting past the limits' reach."""
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        return (st.st_size if stat.S_ISREG(st.st_mode) else 0), 1
    total, entries = 0, 1
    for dirpath, dirs, files in os.walk(path):
        entries += len(dirs) + len(files)
        if entries > MAX_ENTRIES:
            break
        for name in files:
            try:
                fst = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if stat.S_ISREG(fst.st_mode):
                total += fst.st_size
    return total, entries


def _copy_entry(upper: Path, src: Path, dest: Path, root: str) -> None:
    """cp -a one entry (xattrs, whiteouts and hard links kept) to the same place under `dest`. Its parents
    are made with the agent's owner and mode but never its opaque marks: an opaque parent would hide every
    other entry of the image in that directory."""
    rel = Path(root.lstrip("/"))
    target = dest / rel
    for i in range(1, len(rel.parts)):
        sub = Path(*rel.parts[:i])
        if not (dest / sub).exists():
            (dest / sub).mkdir()
            st = os.lstat(upper / sub)
            os.chown(dest / sub, st.st_uid, st.st_gid)
            os.chmod(dest / sub, stat.S_IMODE(st.st_mode))
    if root == "/":
        cmd = ["cp", "-a", "--reflink=auto", f"{src}/.", str(dest)]
    else:
        cmd = ["cp", "-a", "--reflink=auto", "-T", str(src), str(target)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise EnvyardError(f"copying the agent's work at {root} failed: {done.stderr.strip()[-300:]}")


def _matches(path: str, patterns) -> bool:
    """True if `path` or one of its parent directories matches a pattern."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) or "/" for i in range(2, len(parts) + 1)]
    return any(fnmatch.fnmatchcase(p, pat) for p in prefixes for pat in patterns)


def _image_entry(path: str, lowers: list[Path]) -> Path | None:
    """The image's file at `path` (from the topmost layer that decides it), or None when the image has none:
    a whiteout, an opaque directory or a non-directory at an ancestor in a higher layer hides the lower ones."""
    rel = path.strip("/")
    parts = rel.split("/") if rel else []
    for layer in reversed(lowers):
        candidate = layer / rel
        try:
            return None if is_whiteout(os.lstat(candidate)) else candidate
        except OSError:
            pass
        if _hides_below(layer, parts):
            return None
    return None


def _hides_below(layer: Path, parts: list[str]) -> bool:
    for i in range(1, len(parts)):
        ancestor = layer.joinpath(*parts[:i])
        try:
            st = os.lstat(ancestor)
        except OSError:
            return False  # this layer has nothing at or below here: lower layers decide
        if not stat.S_ISDIR(st.st_mode) or is_opaque(ancestor):
            return True
    return False


def _same_content(path: str, full: str, lowers: list[Path]) -> bool:
    original = _image_entry(path, lowers)
    try:
        return original is not None and Path(full).read_bytes() == original.read_bytes()
    except OSError:
        return False


def _runs_code(pth: str) -> bool:
    """A .pth line starting with `import` is executed at every interpreter start."""
    try:
        lines = Path(pth).read_text(errors="replace").splitlines()
    except OSError:
        return True
    return any(line.startswith(("import ", "import\t")) for line in lines)


def _has_pytest_section(name: str, full: str) -> bool:
    """A pyproject.toml, tox.ini or setup.cfg (a regular file) that holds pytest's configuration section."""
    header = PYTEST_SECTIONS.get(name)
    if header is None or not os.path.isfile(full) or os.path.islink(full):
        return False
    try:
        text = Path(full).read_text(errors="replace")
    except OSError:
        return True
    if name == "pyproject.toml":  # TOML can also say it with dotted keys, without a [tool.pytest...] header
        try:
            return "pytest" in tomllib.loads(text).get("tool", {})
        except (tomllib.TOMLDecodeError, AttributeError):
            return True  # pytest could not read it either: nothing of the answer is lost by dropping it
    return any(line.strip().replace(" ", "").startswith(header) for line in text.splitlines())


def _pytest_plugin_entries(lines: list[str]) -> dict[int, str]:
    """Line index → normalized text (no whitespace) of each entry of an entry_points.txt's [pytest11] section."""
    out, inside = {}, False
    for i, line in enumerate(lines):
        if line.strip().startswith("["):
            inside = line.strip() == "[pytest11]"
        elif inside and line.strip() and not line.lstrip().startswith(("#", ";")):
            out[i] = "".join(line.split())
    return out


def _image_pytest_plugins(path: str, lowers: list[Path]) -> set[str]:
    """The [pytest11] entries the image registers in the site directory of the entry_points.txt at `path`."""
    site = os.path.dirname(os.path.dirname(path))
    names = {e.name for layer in lowers if (layer / site.strip("/")).is_dir()
             for e in os.scandir(layer / site.strip("/")) if e.name.endswith(".dist-info")}
    found: set[str] = set()
    for name in names:
        image = _image_entry(f"{site}/{name}/entry_points.txt", lowers)
        if image is not None and image.is_file():
            found.update(_pytest_plugin_entries(image.read_text(errors="replace").splitlines()).values())
    return found


def _without_pytest_plugins(entry_points: str, path: str, lowers: list[Path]) -> bool:
    """Remove from an entry_points.txt the [pytest11] entries (pytest's plugin auto-loading) that the image does
    not already register in that site directory: a distribution reinstalled at another version (a repair) keeps
    its plugin, a new one is not loaded. True if anything was removed."""
    try:
        lines = Path(entry_points).read_text(errors="replace").splitlines(keepends=True)
    except OSError:
        return False
    entries = _pytest_plugin_entries(lines)
    if not entries:
        return False
    allowed = _image_pytest_plugins(path, lowers)
    drop = {i for i, entry in entries.items() if entry not in allowed}
    if drop:
        Path(entry_points).write_text("".join(line for i, line in enumerate(lines) if i not in drop))
    return bool(drop)


def filter_carried(layer: Path, lowers: list[Path], protected: list[str], result: Carried) -> None:
    """Edit the carried layer in place (see the module docstring); record what was dropped."""
    for dirpath, dirnames, filenames in os.walk(layer, topdown=True):
        rel_dir = "/" + os.path.relpath(dirpath, layer)
        rel_dir = "/" if rel_dir == "/." else rel_dir
        package = os.path.exists(os.path.join(dirpath, "__init__.py")) or _image_entry(f"{rel_dir}/__init__.py", lowers)
        for name in [*dirnames, *filenames]:
            full = os.path.join(dirpath, name)
            path = rel_dir.rstrip("/") + "/" + name
            st = os.lstat(full)
            if (is_whiteout(st) or stat.S_ISDIR(st.st_mode) and is_opaque(full)) \
                    and _protected_within(path, lowers, protected, below_only=True):
                _delete_around_protected(full, path, lowers, protected)
                result.drop(f"{path} (deleted or emptied, but holds protected files, which stay)")
                st = os.lstat(full)
            reason = _drop_reason(path, name, full, st, rel_dir, bool(package), lowers, protected)
            if reason is None:
                continue
            remove_tree(Path(full))
            result.drop(f"{path} ({reason})")
            if name in dirnames:
                dirnames.remove(name)


def _drop_reason(path: str, name: str, full: str, st: os.stat_result, rel_dir: str, in_package: bool,
                 lowers: list[Path], protected: list[str]) -> str | None:
    """Why this carried entry must not reach the verifier, or None to keep it."""
    if any(path == d or path.startswith(d + "/") for d in NEVER_CARRIED):
        return "not carried"
    if is_whiteout(st):
        return "deletes a protected file" if _matches(path, [*protected, *STARTUP_FILES]) else None
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        return "special file"
    if _matches(path, STARTUP_FILES):
        return "start-up file"
    if stat.S_ISLNK(st.st_mode) and _points_into_verifier(path, full):
        return "points at the verifier's files"
    if name == "__pycache__" or name.endswith((".pyc", ".pyo")):
        return "bytecode"
    if name in STARTUP_HOOKS:
        return "start-up hook"
    if name.endswith(".pth") and _runs_code(full) and not _same_content(path, full, lowers):
        return "start-up hook"
    if name == "entry_points.txt" and not _same_content(path, full, lowers) \
            and _without_pytest_plugins(full, path, lowers):
        return None  # kept, without the pytest plugins the image does not register
    image = _image_entry(path, lowers)
    in_image = image is not None
    top = name.split(".", 1)[0]
    if not in_image and (name in RUNNER_CONFIGS or _has_pytest_section(name, full)
                         or (not in_package and top in SHADOW_MODULES)
                         or (not in_package and top in PYTEST_STARTUP_IMPORTS and not rel_dir.endswith("-packages"))):
        return "shadows a module or test config"
    if _matches(path, protected) and in_image and not stat.S_ISDIR(st.st_mode):
        return "replaces a protected file"
    if in_image and not stat.S_ISDIR(st.st_mode) and os.path.isdir(image) and not os.path.islink(image) \
            and _protected_within(path, lowers, protected, below_only=True):
        return "replaces a directory holding protected files"  # e.g. a symlink to a copy with other files
    if rel_dir in SHADOWING_DIRS and any(_image_entry(f"{d}/{name}", lowers) for d in SYSTEM_BIN_DIRS):
        return "shadows a system command"
    return None


def _delete_around_protected(full: str, path: str, lowers: list[Path], protected: list[str]) -> None:
    """The agent deleted or emptied a directory of the image (a whiteout, or an opaque directory: `rm -rf d`,
    `rm -rf d && mkdir d`) that holds protected files. Hidden, they would be missing for the verifier (its
    tools: a verifier that cannot start is a masked infrastructure error). Rewrite it as a plain directory with
    one whiteout per image entry that is neither protected nor recreated: the agent's deletions still count,
    the protected files show through."""
    if is_whiteout(os.lstat(full)):
        os.unlink(full)
        os.mkdir(full)
        image_dir = os.lstat(_image_entry(path, lowers))
        os.chown(full, image_dir.st_uid, image_dir.st_gid)
        os.chmod(full, stat.S_IMODE(image_dir.st_mode))
    unmark_opaque(full)
    present = set(os.listdir(full))
    for name in _image_children(path, lowers):
        child, child_path = os.path.join(full, name), f"{path.rstrip('/')}/{name}"
        if name in present:
            if os.path.isdir(child) and not os.path.islink(child):
                mark_opaque(child)  # recreated: it must not merge with the image's
        elif _matches(child_path, protected):
            continue  # shows through
        elif _protected_within(child_path, lowers, protected):
            make_whiteout(child)
            _delete_around_protected(child, child_path, lowers, protected)
        else:
            make_whiteout(child)


def _image_children(path: str, lowers: list[Path]) -> set[str]:
    """Names in the image's directory `path`, merged over its layers as overlayfs would."""
    rel = path.strip("/")
    parts = rel.split("/") if rel else []
    names: set[str] = set()
    gone: set[str] = set()
    for layer in reversed(lowers):
        d = layer / rel
        try:
            if not stat.S_ISDIR(os.lstat(d).st_mode):
                break
        except OSError:
            if _hides_below(layer, [*parts, ""]):  # an ancestor here hides the lower layers' directory
                break
            continue
        for entry in os.scandir(d):
            if entry.name in gone or entry.name in names:
                continue
            (gone if is_whiteout(entry.stat(follow_symlinks=False)) else names).add(entry.name)
        if is_opaque(d):
            break
    return names


def _protected_within(path: str, lowers: list[Path], protected: list[str], below_only: bool = False) -> bool:
    """True if the image's `path` (unless `below_only`), or anything the image has beneath it, matches a
    protected pattern."""
    if not below_only and _matches(path, protected):
        return True
    entry = _image_entry(path, lowers)
    if entry is None or not stat.S_ISDIR(os.lstat(entry).st_mode):
        return False
    return any(_protected_within(f"{path}/{n}", lowers, protected) for n in _image_children(path, lowers))


def _points_into_verifier(path: str, link: str) -> bool:
    """A symlink whose target (resolved lexically, as the verifier would) lies in /tests, /logs, ...: an
    answer file pointing at the expected answer."""
    target = os.readlink(link)
    resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
    return any(resolved == d or resolved.startswith(d + "/") for d in NEVER_CARRIED)


