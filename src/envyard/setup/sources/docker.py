"""Dockerfiles in the repository, read as text: `FROM python:3.X` (a Python hint, with `ARG` defaults expanded),
`apt-get install` packages in `RUN`, test/install commands, and `ENV` variables that name services."""

from __future__ import annotations

import re

from .base import Sink
from .shell import record_apt, record_command, record_env
from .specs import image_python_version

_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def dockerfiles(sink: Sink) -> list[str]:
    def wanted(path: str, name: str) -> bool:
        return name in ("Dockerfile", "Containerfile") or name.startswith("Dockerfile.") or name.endswith(".Dockerfile")
    return sink.files.matching(wanted, max_depth=2)


def read_dockerfiles(sink: Sink) -> None:
    for rel in dockerfiles(sink):
        text = sink.read(rel)
        if text is not None:
            _read(sink, rel, text)


def _instructions(text: str):
    """(first line, instruction, [(line, text) of its physical lines]) with `\\` continuations followed."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        raw = lines[i]
        if not raw.strip() or raw.lstrip().startswith("#"):
            i += 1
            continue
        start = i + 1
        physical = [(i + 1, raw)]
        while raw.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            raw = lines[i]
            if raw.lstrip().startswith("#"):
                raw = "\\"                                      # comment lines inside a continued instruction
                continue
            physical.append((i + 1, raw))
        i += 1
        head = physical[0][1].strip().split(None, 1)
        yield start, head[0].upper(), physical


def _read(sink: Sink, rel: str, text: str) -> None:
    args: dict[str, str] = {}
    for start, instruction, physical in _instructions(text):
        body = " ".join(t.rstrip().rstrip("\\").strip() for _, t in physical).split(None, 1)
        rest = body[1] if len(body) > 1 else ""
        if instruction == "ARG":
            name, sep, default = rest.partition("=")
            if sep:
                args[name.strip()] = default.strip().strip("\"'")
        elif instruction == "FROM":
            words = [w for w in rest.split() if not w.startswith("--")]
            if words:
                image = _VAR_RE.sub(lambda m: args.get(m.group(1) or m.group(3), m.group(2) or ""), words[0])
                hint = image_python_version(image)
                if hint:
                    sink.add("python_hint", hint, rel, start, "dockerfile.from")
        elif instruction == "RUN":
            record_apt(sink, physical, rel, "dockerfile.apt-get")
            command = rest
            if command.startswith("["):
                continue                                        # exec form: rarely a test or install command
            record_command(sink, command, rel, start, "dockerfile.run")
        elif instruction == "ENV":
            for name, value in _env_pairs(rest):
                record_env(sink, name, value, rel, start, "dockerfile.env")


def _env_pairs(rest: str) -> list[tuple[str, str]]:
    if not rest.strip():
        return []
    if "=" not in rest.split(None, 1)[0]:
        parts = rest.split(None, 1)                             # legacy form: ENV NAME value
        return [(parts[0], parts[1] if len(parts) > 1 else "")]
    pairs = re.finditer(r"([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S*)", rest)
    return [(m.group(1), m.group(2).strip("\"'")) for m in pairs]
