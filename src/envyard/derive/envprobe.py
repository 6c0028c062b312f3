"""Run inside a sandbox over a healthy image (not imported by envyard): prints, as JSON, what the environment
breakage generator needs to know about the environment the project's tests see.

It reads (and imports what the project imports, in a child interpreter, to see which files load): installed
distributions (name, version, files, requirements, editable or not), which of their
modules the project and its tests import (static, with `ast`), compiled extension modules those imports load
and the shared libraries they link (ldd) with the Debian package owning each (dpkg -S), `.pth` files, the
venv's commands and interpreter links, and the tools a repair could use. Kept compatible with Python 3.8.
"""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig

MAX_FILES = 400  # files listed per distribution
SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".tox", ".nox", ".venv", "venv", "build", "dist"}
# Libraries whose loss breaks every program (the shell, the interpreter itself): not a task, and the verifier's
# allowlist protects them anyway.
CORE_LIBS = re.compile(r"^(linux-vdso|linux-gate|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|"
                       r"libutil\.so|libgcc_s|libstdc\+\+|libz\.so|libtinfo|libpython)")
# Test runners and installers: breaking them breaks every test for a reason that is not the project's.
SHARED_OBJECT = re.compile(r"\.so(\.\d+)*$")
RUNNERS = {"pytest", "pip", "setuptools", "wheel", "uv", "nose", "nose2", "unittest2", "coverage", "pytest-cov",
           "pytest-xdist", "execnet", "tox", "nox"}
# stdlib modules whose work is done by an extension module that links a system library
STDLIB_EXTENSIONS = {"sqlite3": ["_sqlite3"], "lzma": ["_lzma"], "bz2": ["_bz2"], "ssl": ["_ssl"],
                     "hashlib": ["_hashlib"], "ctypes": ["_ctypes"], "zlib": ["zlib"], "decimal": ["_decimal"],
                     "curses": ["_curses"], "readline": ["readline"], "dbm": ["_dbm", "_gdbm"], "uuid": ["_uuid"],
                     "xml": ["pyexpat", "_elementtree"], "tkinter": ["_tkinter"], "gzip": ["zlib"],
                     "zipfile": ["zlib"], "urllib": ["_ssl"], "http": ["_ssl"]}


# Imported to see which files the project's imports load; these would open windows or print.
NEVER_IMPORT = {"this", "antigravity", "idlelib", "turtle", "turtledemo", "tkinter", "__main__", "__future__"}
LOADED = """
import importlib, json, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException:
        pass
print()
print(json.dumps(sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())} - {""})))
"""


def loaded_files(names, workdir):
    """Real paths of the module files that importing `names` loads (in a child interpreter: an import may run
    anything), or None when that could not be found out."""
    try:
        r = subprocess.run([sys.executable, "-c", LOADED, *sorted(names)], capture_output=True, text=True,
                           timeout=120, cwd=workdir, stdin=subprocess.DEVNULL)
        return {os.path.realpath(f) for f in json.loads(r.stdout.strip().splitlines()[-1])}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def canon(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def is_test_path(rel):
    parts = rel.split("/")
    name = parts[-1]
    return (any(p in ("test", "tests", "testing") for p in parts[:-1]) or name.startswith("test_")
            or name.endswith("_test.py") or name == "conftest.py")


def project_imports(root):
    """Top-level names imported by the project's code and by its tests, the tests' text (to find the commands
    they run), and every dotted name imported (`from a.b import c` gives a.b and a.b.c: c may be a module)."""
    src, tests, test_text, dotted = set(), set(), [], set()
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            try:
                text = open(full, encoding="utf-8", errors="replace").read()
                tree = ast.parse(text)
            except (OSError, SyntaxError, ValueError):
                continue
            found = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found.update(a.name.split(".")[0] for a in node.names)
                    dotted.update(a.name for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module.split(".")[0])
                    dotted.add(node.module)
                    dotted.update(node.module + "." + a.name for a in node.names if a.name != "*")
            if is_test_path(rel):
                tests |= found
                test_text.append(text)
            else:
                src |= found
    return src, tests, "\n".join(test_text), dotted


def ldd(path):
    try:
        out = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    libs = []
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line)
        if m and not CORE_LIBS.match(m.group(1)):
            libs.append({"soname": m.group(1), "path": m.group(2)})
    return libs


def dpkg_owner(path):
    if not shutil.which("dpkg"):
        return None
    real = os.path.realpath(path)
    for candidate in (path, real, "/usr" + path if not path.startswith("/usr/") else path,
                      "/usr" + real if not real.startswith("/usr/") else real):
        out = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True).stdout
        if out.strip():
            return out.split(":")[0].strip()
    return None


def main():
    from importlib import metadata

    workdir = os.getcwd()
    paths = sysconfig.get_paths()
    site = sorted({paths["purelib"], paths["platlib"]})
    src_imports, test_imports, test_text, dotted = project_imports(workdir)
    imported = src_imports | test_imports

    dists, module_owner = [], {}
    for d in metadata.distributions(path=site):
        name = d.metadata["Name"]
        if not name:
            continue
        files = [str(f) for f in (d.files or [])]
        top = set()
        top_txt = d.read_text("top_level.txt")
        if top_txt:
            top.update(t.strip() for t in top_txt.split() if t.strip())
        for f in files:
            first = f.split("/")[0]
            if first.endswith((".dist-info", ".egg-info", ".data")) or first.startswith(".."):
                continue
            if "/" in f or f.endswith(".py") or ".so" in f:
                top.add(first.split(".")[0])
        direct = d.read_text("direct_url.json") or "{}"
        try:
            editable = bool(json.loads(direct).get("dir_info", {}).get("editable"))
        except ValueError:
            editable = False
        for t in top:
            module_owner.setdefault(t, canon(name))
        dists.append({"name": canon(name), "version": d.version, "editable": editable,
                      "location": str(d.locate_file("")).rstrip("/"),
                      "requires": list(d.requires or []), "top": sorted(top), "files": files[:MAX_FILES],
                      "compiled": [f for f in files if SHARED_OBJECT.search(f) and not f.startswith("..")],
                      "installer": (d.read_text("INSTALLER") or "").strip()})

    def closure(roots):
        by_name = {x["name"]: x for x in dists}
        seen, todo = set(), list(roots)
        while todo:
            n = todo.pop()
            if n in seen or n not in by_name:
                continue
            seen.add(n)
            for req in by_name[n]["requires"]:
                if "extra ==" in req:
                    continue
                m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
                if m:
                    todo.append(canon(m.group(1)))
        return seen

    project = {x["name"] for x in dists if x["editable"]}
    runner = closure(RUNNERS) - project
    needed = (closure(project) | {module_owner[m] for m in imported if m in module_owner}) - project
    for x in dists:
        x["project"] = x["name"] in project
        x["runner"] = x["name"] in runner and x["name"] not in {module_owner.get(m) for m in imported}
        x["required"] = x["name"] in needed and not x["project"]
        x["imported"] = sorted(m for m in x["top"] if m in imported)

    # Which files the project's imports load: the modules worth breaking. Without it (the import crashed the
    # child), every compiled file of the needed distributions and a table for the standard library stand in.
    loaded = loaded_files({m for m in dotted if m.split(".")[0] not in NEVER_IMPORT}, workdir)
    for x in dists:
        x["loaded"] = ([f for f in x["files"] if os.path.realpath(os.path.join(x["location"], f)) in loaded]
                       if loaded is not None else [])
    extensions = []
    for x in dists:
        if not x["required"]:
            continue
        for f in x["compiled"]:
            full = os.path.join(x["location"], f)
            if loaded is None or os.path.realpath(full) in loaded:
                extensions.append({"path": full, "top": f.split("/")[0].split(".")[0], "dist": x["name"],
                                   "libs": ldd(full)})
    dynload = os.path.join(sysconfig.get_paths()["stdlib"], "lib-dynload")
    if os.path.isdir(dynload):
        wanted = {e for m in imported if m in STDLIB_EXTENSIONS for e in STDLIB_EXTENSIONS[m]}
        for name in sorted(os.listdir(dynload)):
            full = os.path.join(dynload, name)
            used = os.path.realpath(full) in loaded if loaded is not None else name.split(".")[0] in wanted
            if used:
                extensions.append({"path": full, "top": name.split(".")[0], "dist": None, "stdlib": True,
                                   "libs": ldd(full)})
    libs = {}
    for ext in extensions:
        for lib in ext["libs"]:
            entry = libs.setdefault(lib["path"], {"path": lib["path"], "soname": lib["soname"],
                                                  "real": os.path.realpath(lib["path"]), "users": []})
            entry["users"].append(ext["top"])
    for entry in libs.values():
        inside = next((b for b in site if entry["real"].startswith(b + "/")), None)
        entry["owner"] = ({"dist": module_owner.get(os.path.relpath(entry["real"], inside).split("/")[0]
                                                    .split(".")[0])} if inside else {"deb": dpkg_owner(entry["path"])})

    pth = []
    for base in site:
        for name in sorted(os.listdir(base)):
            if name.endswith(".pth"):
                text = open(os.path.join(base, name), errors="replace").read()
                pth.append({"path": os.path.join(base, name), "content": text,
                            "runs_code": any(l.startswith(("import ", "import\t")) for l in text.splitlines())})

    bindir = os.path.dirname(sys.executable)
    scripts, links = [], []
    for name in sorted(os.listdir(bindir)):
        full = os.path.join(bindir, name)
        if os.path.islink(full):
            links.append({"path": full, "target": os.readlink(full)})
            continue
        try:
            with open(full, "rb") as f:
                head = f.read(4096)
        except OSError:
            continue
        if not head.startswith(b"#!") or len(head) >= 4096:
            continue
        used = re.search(r"""["'\s\[]%s["'\s,\]]""" % re.escape(name), test_text) is not None
        scripts.append({"path": full, "name": name, "content": head.decode("utf-8", "replace"),
                        "mode": os.stat(full).st_mode & 0o7777, "used_by_tests": used})

    cfg = os.path.join(sys.prefix, "pyvenv.cfg")
    venv_cfg = {"path": cfg, "content": open(cfg, errors="replace").read()} if os.path.isfile(cfg) else None

    print(json.dumps({
        "python": sys.executable, "prefix": sys.prefix, "site": site, "bindir": bindir, "workdir": workdir,
        "dists": dists, "imports": {"src": sorted(src_imports), "tests": sorted(test_imports)},
        "extensions": extensions, "libs": sorted(libs.values(), key=lambda e: e["path"]), "pth": pth,
        "scripts": scripts, "links": links, "venv_cfg": venv_cfg,
        "tools": {t: shutil.which(t) for t in ("uv", "apt-get", "dpkg", "git")},
    }))


if __name__ == "__main__":
    main()
