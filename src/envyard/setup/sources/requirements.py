"""pip requirement files (`requirements*.txt`, `requirements/*.txt`, `*requirements*.in`, constraints files) with
their `-r`/`-c` includes, and Pipfile. Also `emit_requirement`, which every reader uses to record one requirement
string (PEP 508, pip-style URL, editable or local path)."""

from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .base import Sink, resolve_rel
from .shell import record_command
from .specs import requirement_value, version_hint
from .tomlpos import load_toml

_URL_RE = re.compile(r"^(?:git|hg|svn|bzr)\+\S+|^(?:https?|file|ftp)://\S+|^file:\S+", re.I)
_EGG_RE = re.compile(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)")
_ARCHIVE_RE = re.compile(r"\.(?:whl|tar\.gz|tgz|tar\.bz2|zip)$", re.I)
_REQ_DIRS = {"requirements", "reqs", "requirements.d", "requirement"}


def emit_requirement(sink: Sink, text: str, file: str, line: int | None, kind: str, via: str,
                     fields: dict | None = None, editable: bool = False) -> None:
    """Record one requirement as a fact of `kind` ("dependency", "extra", "dependency_group", "constraint",
    "build_requirement"), with `fields` (e.g. {"extra": "test"}) merged in. Editable or local paths become
    "local_package" facts; the project itself (`.`, `-e .`, `.[test]`) is skipped. Unreadable text → problem."""
    text = text.strip()
    if not text:
        return
    m = re.match(r"^(?:-e|--editable)(?:\s+|=)?(.*)$", text)
    if m:
        text, editable = m.group(1).strip(), True
    url_part, marker = _split_marker(text)
    if _URL_RE.match(url_part):
        egg = _EGG_RE.search(url_part)
        value = {"name": egg.group(1) if egg else None, "spec": "", "marker": marker, "url": url_part,
                 "requirement": text}
        if editable:
            value["editable"] = True
        sink.add(kind, {**value, **(fields or {})}, file, line, via)
        return
    if _looks_like_path(url_part):
        path, _, extras = url_part.partition("[")
        path = path.rstrip("/") or "/"
        resolved = resolve_rel("x", path)                   # pip resolves paths against the working directory
        if resolved == "":
            return                                          # the project itself
        value = {"path": path.rstrip("/"), "editable": editable}
        if resolved is not None:
            value["resolved"] = resolved
        if extras:
            value["extras"] = sorted(e.strip() for e in extras.rstrip("]").split(",") if e.strip())
        if marker:
            value["marker"] = marker
        sink.add("local_package", {**value, **(fields or {})}, file, line, via)
        return
    try:
        value = requirement_value(text)
    except ValueError as e:
        sink.problem(file, line, f"cannot read requirement {text!r}: {_short(e)}")
        return
    if editable:
        value["editable"] = True
    sink.add(kind, {**value, **(fields or {})}, file, line, via)


def _split_marker(text: str) -> tuple[str, str | None]:
    m = re.search(r"\s+;\s*|;\s+", text)
    if not m:
        return text, None
    return text[:m.start()].strip(), text[m.end():].strip() or None


def _looks_like_path(text: str) -> bool:
    if text.startswith((".", "/", "~")) or _ARCHIVE_RE.search(text):
        return True
    head = text.split("[", 1)[0]
    return "/" in head and "@" not in text and not re.search(r"[<>=!~ ]", head)


def _short(err: Exception) -> str:
    return str(err).splitlines()[0][:160]


# ---------------------------------------------------------------------------------------------------- files

def discover(sink: Sink) -> list[str]:
    """Requirement files the project keeps in the usual places: `*requirements*.txt|.in` and `constraints*.txt`
    at the root or one directory down, and every `.txt`/`.in` file in a `requirements/` directory."""
    def wanted(path: str, name: str) -> bool:
        if not name.endswith((".txt", ".in")):
            return False
        parts = path.split("/")
        if any(p in _REQ_DIRS for p in parts[:-1]) and len(parts) <= 3:
            return True
        lower = name.lower()
        return len(parts) <= 2 and ("requirements" in lower or lower.startswith("constraints"))
    return sink.files.matching(wanted)


def read_all(sink: Sink) -> None:
    # the root requirements.txt first, so that its facts read as the project's own rather than as an include
    for rel in sorted(discover(sink), key=lambda p: (p != "requirements.txt", "/" in p, p)):
        role = "constraints" if rel.rsplit("/", 1)[-1].lower().startswith("constraint") else "requirements"
        kind = "constraint" if role == "constraints" else "dependency"
        read_file(sink, rel, kind=kind, role=role, via="requirements.file")


def read_file(sink: Sink, rel: str, *, kind: str = "dependency", fields: dict | None = None, role: str = "requirements",
              via: str = "requirements.file", included_from: tuple[str, int] | None = None,
              chain: tuple[str, ...] = ()) -> None:
    """Read one requirement file and follow its `-r` (requirements) and `-c` (constraints) includes, relative to
    the including file. Each file is read once per (kind, role, fields); include cycles are reported."""
    if not sink.files.exists(rel):
        where, line = included_from or (rel, None)
        sink.problem(where, line, f"requirement file {rel} not found")
        return
    file_fact = {"path": rel, "role": role}
    if included_from:
        sink.add("requirements_file", file_fact, included_from[0], included_from[1], via)
    else:
        sink.add("requirements_file", file_fact, rel, None, via)
    done: set = sink.__dict__.setdefault("_requirement_files_done", set())
    key = (rel, kind, role, repr(sorted((fields or {}).items())))
    if key in done:
        return
    done.add(key)
    text = sink.read(rel)
    if text is None:
        return
    head = text[:2000].lower()
    if "pip-compile" in head or "uv pip compile" in head:
        tool = "pip-tools" if "pip-compile" in head else "uv-pip-compile"
        sink.add("lock_file", tool, rel, 1, "requirements.compiled")
    chain = chain + (rel,)
    for line, content in logical_lines(text):
        _read_line(sink, rel, line, content, kind, fields, role, chain)
    if role == "requirements":
        args, notes, refused = uv_arguments(sink, rel)
        if refused:
            sink.add("requirements_rewrite", {"path": rel, "args": args, "notes": notes}, rel, None,
                     "requirements.uv-rewrite")


def logical_lines(text: str):
    """(first line number, content) for each logical line: comments stripped, `\\` continuations joined."""
    buf, start = "", None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw
        if not buf and line.lstrip().startswith("#"):
            continue
        line = re.sub(r"(^|\s)#.*$", "", line)
        if start is None:
            start = number
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            yield start, buf.strip()
        buf, start = "", None
    if buf.strip():
        yield start, buf.strip()


_INCLUDE_RE = re.compile(r"^(-r|--requirement|-c|--constraint)(?:\s*=\s*|\s+|(?<=-r)|(?<=-c))(\S+)$")
_INDEX_RE = re.compile(r"^(?:-i|--index-url|--extra-index-url)(?:\s*=\s*|\s+)(\S+)$")


def _read_line(sink: Sink, rel: str, line: int, content: str, kind: str, fields: dict | None, role: str,
               chain: tuple[str, ...]) -> None:
    m = _INCLUDE_RE.match(content)
    if m:
        constraints = m.group(1) in ("-c", "--constraint")
        target = resolve_rel(rel, m.group(2))
        if target is None:
            sink.problem(rel, line, f"{m.group(1)} {m.group(2)}: outside the repository; not followed")
            return
        if target in chain:
            cycle = " → ".join(chain[chain.index(target):] + (target,))
            sink.problem(rel, line, f"{m.group(1)} {m.group(2)}: include cycle ({cycle}); not followed again")
            return
        if constraints:
            read_file(sink, target, kind="constraint", role="constraints", via="requirements.-c",
                      included_from=(rel, line), chain=chain)
        else:
            read_file(sink, target, kind=kind, fields=fields, role=role, via="requirements.-r",
                      included_from=(rel, line), chain=chain)
        return
    m = _INDEX_RE.match(content)
    if m:
        sink.add("package_index", m.group(1), rel, line, "requirements.index-url")
        return
    if content.startswith("-") and not re.match(r"^(?:-e|--editable)\b", content):
        return                                              # other pip options (--pre, -f, --only-binary, ...)
    content = re.split(r"\s+--(?:hash|global-option|install-option|config-settings)\b", content)[0]
    emit_requirement(sink, content, rel, line, kind, "requirements.line", fields)


# ------------------------------------------------------------------------------------ the same file, for uv

# pip's file options that `uv pip install` also takes as flags (pip's spelling → uv's flags); other options are left
# out of a rewritten install, with a note.
_UV_FLAGS = {"-i": ["--index-url"], "--index-url": ["--index-url"], "--extra-index-url": ["--extra-index-url"],
             "-f": ["--find-links"], "--find-links": ["--find-links"], "--no-binary": ["--no-binary"],
             "--only-binary": ["--only-binary"], "--no-index": ["--no-index"], "--pre": ["--prerelease", "allow"]}
_VALUELESS = {"--no-index", "--pre", "--prefer-binary", "--require-hashes"}
# Options uv's requirement-file parser accepts (as pip spells them, with a space or `=` before the value).
_UV_FILE_OPTIONS = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--no-binary", "--only-binary",
                    "--no-index", "--pre", "--prefer-binary", "--require-hashes", "--trusted-host", "--use-feature"}
_EDITABLE_RE = re.compile(r"^(-e|--editable)(\s*=\s*|\s+)?(\S.*)$")
_OPTION_RE = re.compile(r"^(-[A-Za-z]|--[\w-]+)(?:(\s*=\s*|\s+)(\S+))?\s*$")
_REQ_OPTION_RE = re.compile(r"\s+--(hash|global-option|install-option|config-settings|config-setting)\b.*$")


# git's own protocol (`git+git://github.com/sigmavirus24/betamax`, requests-toolbelt's dev-requirements.txt):
# pip reads it, uv refuses it, and GitHub has not served it since 2022; the same repository over https.
_GIT_PROTOCOL = re.compile(r"^git\+git://\S+$")


def _over_https(url: str) -> str:
    return "git+https://" + url.removeprefix("git+git://")


def _named(url: str) -> str:
    """`NAME @ URL` when the URL's `#egg=` names the distribution, else the URL as it is: a name guessed from the
    repository's path could be someone else's package on the index, which a failed fetch would then install
    in its place (rule unreachable-url-requirement)."""
    egg = re.search(r"[#&]egg=([A-Za-z0-9][\w.-]*)", url)
    return f"{egg.group(1)} @ {url}" if egg else url


_BARE_VCS = re.compile(r"^(?:git|hg|svn|bzr)\+https?://[^\s@]+(?:@[^\s#]*)?$")


def name_bare_urls(sink: Sink) -> None:
    """Name the bare repository URLs of rewritten requirement files (`git+git://github.com/sigmavirus24/betamax`,
    requests-toolbelt's dev-requirements.txt: no `#egg=`) when the repository's name is a distribution the
    project itself requires by name elsewhere (its tox deps say `betamax>0.5.0`): `betamax @ URL`. A named URL
    that cannot be fetched then gives way to the index's release (rule unreachable-url-requirement); a
    repository name the project never requires by name stays unnamed (someone else's package on the index)."""
    declared = {canonicalize_name(f.value["name"]): f.value["name"] for f in sink.facts
                if f.kind in ("dependency", "extra", "dependency_group") and isinstance(f.value, dict)
                and f.value.get("name") and not f.value.get("url")}
    for fact in sink.of("requirements_rewrite"):
        args = fact.value.get("args", []) if isinstance(fact.value, dict) else []
        for i, arg in enumerate(args):
            if not _BARE_VCS.match(arg) or (i and args[i - 1] in ("-e", "--editable")):
                continue
            repo = arg.split("://", 1)[1].split("@")[0].rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
            name = declared.get(canonicalize_name(repo)) if repo else None
            if name:
                args[i] = f"{name} @ {arg}"
                fact.value.setdefault("notes", []).append(
                    f"{arg} named {name}: the project requires {name} by name elsewhere")


def uv_arguments(sink: Sink, rel: str, chain: tuple[str, ...] = ()) -> tuple[list[str], list[str], bool]:
    """A requirement file as `uv pip install` arguments, its `-r` includes inlined and its `-c` includes as `-c
    PATH` (paths relative to the root, where the install runs; pip and uv resolve a line's local paths against
    the working directory, so those stay as written). Returns (arguments, notes on what was changed or left out,
    whether uv's own parser refuses some line of the file or its includes: `-e.`, `-rfile`, `-cfile`, options uv
    does not know, per-requirement options other than --hash). The project reads as pip reads it; only when uv
    would refuse it does the plan install these arguments instead of `-r FILE`."""
    args: list[str] = []
    notes: list[str] = []
    refused, hashes = False, 0
    text = sink.read(rel, quiet=True) if sink.files.exists(rel) else None
    if text is None:
        return args, [f"{rel}: not found"], False
    chain = chain + (rel,)
    for line, content in logical_lines(text):
        where = f"{rel}:{line}"
        m = _INCLUDE_RE.match(content)
        if m:
            flag, target = m.group(1), m.group(2)
            if not re.match(r"^(?:-r|--requirement|-c|--constraint)(?:\s*=\s*|\s+)\S", content):
                refused = True                               # -rfile, -cfile: pip reads them, uv does not
                notes.append(f"{where}: {content} read as {flag} {target}")
            resolved = resolve_rel(rel, target)
            if resolved is None or resolved in chain or not sink.files.exists(resolved):
                notes.append(f"{where}: {content} left out (outside the repository, missing or a cycle)")
                continue
            if flag in ("-c", "--constraint"):
                args += ["-c", resolved]
                continue
            sub, sub_notes, sub_refused = uv_arguments(sink, resolved, chain)
            args += sub
            notes += sub_notes
            refused = refused or sub_refused
            continue
        m = _EDITABLE_RE.match(content)
        if m:
            target = m.group(3).strip()
            if m.group(2) is None:                           # -e. / -e./lib: pip reads it, uv does not
                refused = True
                notes.append(f"{where}: {content} read as -e {target}")
            if _GIT_PROTOCOL.match(target):
                refused = True
                target = _over_https(target)
                notes.append(f"{where}: {content} read as -e {target} (uv has no git:// protocol)")
            args += ["-e", target]
            continue
        if _GIT_PROTOCOL.match(content):                     # pip took git+git://, uv refuses it
            refused = True
            notes.append(f"{where}: {content} read as {_named(_over_https(content))} (uv has no git:// protocol)")
            args.append(_named(_over_https(content)))
            continue
        if content.startswith("-"):
            m = _OPTION_RE.match(content)
            flag = m.group(1) if m else content.split()[0]
            value = m.group(3) if m else None
            if flag not in _UV_FILE_OPTIONS:
                refused = True
            if flag in _UV_FLAGS and (value is not None or flag in _VALUELESS):
                args += _UV_FLAGS[flag] + ([value] if value is not None else [])
            else:
                notes.append(f"{where}: the pip option {content} is ignored")
            continue
        m = _REQ_OPTION_RE.search(content)
        if m:
            if m.group(1) == "hash":
                hashes += 1                                  # a command line cannot carry them
            else:
                refused = True
                notes.append(f"{where}: per-requirement options ({m.group(0).strip()[:60]}) left out")
            content = content[:m.start()].strip()
        args.append(" ".join(content.split()))
    if hashes:
        notes.append(f"{rel}: the --hash values of {hashes} requirements are not checked")
    return args, notes, refused


# ---------------------------------------------------------------------------------------------------- Pipfile

_MARKER_KEYS = ("os_name", "sys_platform", "platform_machine", "platform_system", "platform_python_implementation",
                "python_version", "python_full_version", "implementation_name")


def read_pipfile(sink: Sink, rel: str = "Pipfile") -> None:
    loaded = load_toml(sink, rel)
    if loaded is None:
        return
    data, pos = loaded
    for source in data.get("source", []) if isinstance(data.get("source"), list) else []:
        if isinstance(source, dict) and isinstance(source.get("url"), str):
            lines = pos.string_lines(("source", "url"), source["url"])
            sink.add("package_index", source["url"], rel, lines[0] if lines else None, "pipfile.source")
    for table, kind, fields, via in (("packages", "dependency", None, "pipfile.packages"),
                                     ("dev-packages", "dependency_group", {"group": "dev"}, "pipfile.dev-packages")):
        packages = data.get(table)
        if not isinstance(packages, dict):
            continue
        for name, spec in packages.items():
            line = pos.key_line(table, name)
            text_req = _pipfile_requirement(name, spec)
            if text_req is None:
                sink.problem(rel, line, f"cannot read [{table}] entry {name!r}")
            elif isinstance(text_req, tuple):
                path, editable = text_req
                sink.add("local_package", {"name": name, "path": path, "editable": editable, **(fields or {})},
                         rel, line, via)
            else:
                emit_requirement(sink, text_req, rel, line, kind, via, fields)
    requires = data.get("requires")
    if isinstance(requires, dict):
        for key in ("python_version", "python_full_version"):
            hint = version_hint(requires.get(key, ""))
            if hint:
                sink.add("python_hint", hint, rel, pos.key_line("requires", key), f"pipfile.requires.{key}")
    scripts = data.get("scripts")
    if isinstance(scripts, dict):
        for name, command in scripts.items():
            if isinstance(command, str):
                record_command(sink, command, rel, pos.key_line("scripts", name), "pipfile.scripts")


def _pipfile_requirement(name: str, spec: object) -> str | tuple[str, bool] | None:
    if isinstance(spec, str):
        version = "" if spec.strip() in ("*", "") else spec.strip()
        if version and version[0].isdigit():
            version = "==" + version
        return f"{name}{version}"
    if not isinstance(spec, dict):
        return None
    if "path" in spec and isinstance(spec["path"], str):
        return spec["path"], bool(spec.get("editable"))
    extras = spec.get("extras") or []
    extras_text = f"[{','.join(extras)}]" if isinstance(extras, list) and extras else ""
    markers = [spec["markers"]] if isinstance(spec.get("markers"), str) else []
    for key in _MARKER_KEYS:
        if isinstance(spec.get(key), str):
            markers.append(f"{key} {spec[key].strip()}")
    marker = f"; {' and '.join(markers)}" if markers else ""
    for vcs in ("git", "hg", "svn", "bzr"):
        if isinstance(spec.get(vcs), str):
            url = spec[vcs] if spec[vcs].startswith(f"{vcs}+") else f"{vcs}+{spec[vcs]}"
            ref = spec.get("ref") or spec.get("tag") or spec.get("branch")
            return f"{name}{extras_text} @ {url}{'@' + ref if ref else ''}{' ' + marker if marker else ''}"
    if isinstance(spec.get("file"), str):
        return f"{name}{extras_text} @ {spec['file']}{' ' + marker if marker else ''}"
    version = spec.get("version", "*")
    version = "" if not isinstance(version, str) or version.strip() == "*" else version.strip()
    if version and version[0].isdigit():
        version = "==" + version
    try:
        Requirement(f"{name}{extras_text}{version}{marker}")
    except (InvalidRequirement, SyntaxError):  # packaging 26 raises SyntaxError for a newline in a marker
        return None
    return f"{name}{extras_text}{version}{marker}"
