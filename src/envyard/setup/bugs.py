"""A failure inside the project's own code: the traceback's innermost frame (stdlib frames aside) is one of the
project's source files, not site-packages, and the error is not a missing module or a binary (ABI) problem.

No other interpreter, cut-off or repair makes such a failure go away, so the search stops on it (search.py)
instead of trying every candidate. Tracebacks come in two forms: CPython's (`File "PATH", line N, in F` then
`Type: message`) from the L1 import check and from builds, and pytest's (`PATH:N: in F` then `E   Type: message`)
from L3 collection.
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass
from pathlib import Path

CPYTHON_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in (.+))?$')
PYTEST_FRAME = re.compile(r"^(\S[^:\n]*\.py):(\d+): in (.+)$")
EXCEPTION = re.compile(r"^(?:E\s+)?((?:[A-Za-z_]\w*\.)*[A-Z]\w*)(?::\s?(.*))?$")  # "E   " is pytest's
# Failures that are the environment's, not the project's: a module missing or built for another ABI.
NOT_THE_PROJECT = re.compile(r"ModuleNotFoundError|ImportError|undefined symbol|cannot open shared object|"
                             r"\.so\b|incompatible architecture|GLIBC_|numpy\.core\.multiarray failed|"
                             r"compiled (?:against|using)|binary incompatib|PackageNotFoundError|DistributionNotFound|"
                             # a database or service the tests expect, unreachable or not set up as they expect
                             # (pymysql's suite connects at import: "OperationalError: Unknown database 'test1'")
                             r"OperationalError|InterfaceError|ConnectionRefusedError|ConnectionError|"
                             r"Connection refused|could not connect to server|Unknown database|Access denied for user|"
                             r"password authentication failed|(?:role|database) \S+ does not exist|"
                             # redis-py-cluster's conftest connects at import to a cluster on 127.0.0.1:7000
                             r"cannot be connected|no reachable node|reachable node|Connection reset by peer|"
                             r"Name or service not known|Temporary failure in name resolution|"
                             # a conftest that stops the run on purpose (`pytest.exit("Redis is not running")`,
                             # fakeredis's): a precondition of the environment, not a bug
                             r"_pytest\.outcomes\.Exit\b")
ENV_PATH = re.compile(r"site-packages|dist-packages|/opt/venv/|/\.venv/|/opt/envyard/")
STDLIB_PATH = re.compile(r"^(?:<frozen |<string>|<stdin>|/usr/(?:local/)?lib/python\d|/usr/lib/pypy)")


@dataclass(frozen=True)
class ProjectBug:
    error: str  # "RuntimeError: boom"
    file: str  # the innermost project frame, relative to the project root
    line: int
    stage: str  # install | import | collect
    traceback: str  # the last traceback, as printed (bounded)
    note: str = ""  # what else may explain it (a preparation of the tests that failed here)

    @property
    def signature(self) -> tuple:
        """What two branches' failures must share to be the same bug (the stage aside: L1 and L3 meet the same
        broken import)."""
        return (self.error, self.file, self.line)

    @property
    def headline(self) -> str:
        return f"{self.error} (in {self.file}, line {self.line}; at the {self.stage} stage)" + (
            f"; {self.note}" if self.note else "")

    def to_dict(self) -> dict:
        return asdict(self)


def project_bug(output: str, root: str, stage: str) -> ProjectBug | None:
    """The project bug the output's last traceback shows, or None when it is not one (or there is none).
    `root` is the project's directory in the sandbox; pytest prints paths relative to it."""
    lines = output.splitlines()
    frames: list[tuple[str, int, int]] = []  # (path, line, index in lines) of the last traceback
    start = None
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            frames, start = [], None  # a later (e.g. chained) traceback: the last one is the one that matters
            continue
        m = CPYTHON_FRAME.match(line) or PYTEST_FRAME.match(line)
        if m:
            if start is None or (frames and i - frames[-1][2] > 12):
                frames, start = [], i  # a new traceback
            frames.append((m.group(1), int(m.group(2)), i))
    if not frames:
        return None
    error = None
    end = len(lines)
    for j in range(frames[-1][2] + 1, min(len(lines), frames[-1][2] + 40)):
        text = lines[j].rstrip()
        if not text or text[0] in " \t":
            continue  # the frame's source line, carets
        m = EXCEPTION.match(text)
        if m:
            error, end = text[2:].strip() if text.startswith("E ") else text, j + 1
        break
    if error is None or NOT_THE_PROJECT.search(error):
        return None
    for path, lineno, _ in reversed(frames):
        if STDLIB_PATH.match(path):
            continue  # the stdlib raised on the project's behalf (json.loads, int(...)): look further out
        rel = _in_project(path, root)
        if rel is None:
            return None  # the innermost non-stdlib frame is a dependency's (or the toolchain's)
        text = "\n".join(lines[start:end])
        return ProjectBug(error[:300], rel, lineno, stage, text[-4000:])
    return None


def _in_project(path: str, root: str) -> str | None:
    root = root.rstrip("/")
    if ENV_PATH.search(path):
        return None
    if path.startswith(root + "/"):
        return path[len(root) + 1:]
    if not path.startswith(("/", "<")):
        return path  # pytest's paths relative to the project root
    return None


_NAME_ERROR = re.compile(r"^NameError: name '(\w+)' is not defined")
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def guarded_imports(bug: ProjectBug, root: Path) -> list[str]:
    """The modules behind a NameError that is not the project's fault: the name comes from an import the file
    guards with `try: ... except ImportError:` (mccabe's test module imports hypothesmith and hypothesis that
    way, then decorates a test with `@settings`), so a missing optional module shows as "name 'settings' is not
    defined". The top-level modules the guarded block imports; [] when the error is not such a NameError."""
    m = _NAME_ERROR.match(bug.error)
    path = root / bug.file
    if not m or not path.is_file():
        return []
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except (SyntaxError, ValueError):
        return []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try) or not any(_catches_import_error(h) for h in node.handlers):
            continue
        imports = [n for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))]
        bound = {(a.asname or a.name).split(".")[0] for n in imports for a in n.names}
        if m.group(1) in bound:
            modules = [a.name for n in imports if isinstance(n, ast.Import) for a in n.names]
            modules += [n.module for n in imports if isinstance(n, ast.ImportFrom) and n.module and not n.level]
            return list(dict.fromkeys(mod.split(".")[0] for mod in modules))
    return []


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names)
