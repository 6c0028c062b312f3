"""The Dockerfile front-end: Docker's own parser (the `dockerfile` package wraps BuildKit's Go parser) turned
into stages of instructions with their flags split out and checked."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import dockerfile

from .errors import DockerfileError

INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
                "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}
HEREDOC = re.compile(r"<<(-?)(['\"]?)([A-Za-z0-9_.-]+)\2")


@dataclass(frozen=True)
class Heredoc:
    name: str
    content: str  # as written: the shell strips tabs itself for `<<-` when it runs the command
    chomp: bool  # `<<-`: leading tabs are stripped
    quoted: bool  # `<<"EOF"`: no variable expansion in the content

    def text(self) -> str:
        if not self.chomp:
            return self.content
        return "".join(line.lstrip("\t") for line in self.content.splitlines(keepends=True))


@dataclass
class Instruction:
    keyword: str  # upper case
    args: list[str]
    flags: list[str]  # raw, e.g. "--from=build"
    json: bool  # exec (JSON array) form
    line: int
    original: str
    heredocs: list[Heredoc] = field(default_factory=list)
    sub: str | None = None  # ONBUILD's instruction

    def flag_values(self, allowed: dict[str, bool]) -> dict[str, list[str]]:
        """Flags as name → values; `allowed` maps each known flag to whether it takes a value. Anything else is
        an error naming the instruction."""
        out: dict[str, list[str]] = {}
        for raw in self.flags:
            name, eq, value = raw[2:].partition("=")
            if name not in allowed:
                known = ", ".join(f"--{n}" for n in allowed) or "none"
                raise DockerfileError(f"{self.keyword} does not take --{name} (known here: {known})", line=self.line,
                                      fix="remove the flag")
            if allowed[name] and not eq:
                raise DockerfileError(f"{self.keyword} --{name} needs a value (--{name}=...)", line=self.line)
            out.setdefault(name, []).append(value if eq else "true")
        return out

    def heredoc_named(self, word: str) -> Heredoc | None:
        m = HEREDOC.fullmatch(word)
        if not m:
            return None
        return next((h for h in self.heredocs if h.name == m.group(3)), None)


@dataclass
class Stage:
    index: int
    name: str | None  # lower case, as Docker compares stage names
    base: str  # the FROM image, variables not yet substituted
    platform: str | None
    line: int
    instructions: list[Instruction] = field(default_factory=list)


@dataclass
class Dockerfile:
    global_args: list[Instruction]  # ARGs before the first FROM
    stages: list[Stage]

    def stage(self, ref: str) -> Stage | None:
        """A stage by name (any case) or by index."""
        for s in self.stages:
            if s.name is not None and s.name == ref.lower():
                return s
        if ref.isdigit() and int(ref) < len(self.stages):
            return self.stages[int(ref)]
        return None


def _heredocs(cmd, value_line: str) -> list[Heredoc]:
    marks = {m.group(3): m for m in HEREDOC.finditer(value_line)}
    out = []
    for h in cmd.heredocs:
        m = marks.get(h.name)
        out.append(Heredoc(h.name, h.content, bool(m and m.group(1)), bool(m and m.group(2))))
    return out


def parse(text: str) -> Dockerfile:
    try:
        commands = dockerfile.parse_string(text)
    except dockerfile.GoParseError as e:
        raise DockerfileError(f"cannot parse the Dockerfile: {e}", fix="fix the syntax at the place named") from None
    global_args: list[Instruction] = []
    stages: list[Stage] = []
    for cmd in commands:
        keyword = cmd.cmd.upper()
        if keyword not in INSTRUCTIONS:
            raise DockerfileError(f"unknown instruction {cmd.cmd!r}", line=cmd.start_line,
                                  fix="use Dockerfile instructions: " + ", ".join(sorted(INSTRUCTIONS)))
        inst = Instruction(keyword, list(cmd.value), list(cmd.flags), cmd.json, cmd.start_line, cmd.original,
                           _heredocs(cmd, cmd.value[0] if cmd.value else ""),
                           cmd.sub_cmd.upper() if cmd.sub_cmd else None)
        if keyword == "FROM":
            stages.append(_stage(inst, len(stages), stages))
        elif not stages:
            if keyword != "ARG":
                raise DockerfileError(f"{keyword} before the first FROM (only ARG may come first)", line=inst.line,
                                      fix="start the Dockerfile with FROM (ARG lines may precede it)")
            global_args.append(inst)
        else:
            stages[-1].instructions.append(inst)
    if not stages:
        raise DockerfileError("the Dockerfile has no FROM", fix="start it with e.g. FROM debian:bookworm")
    return Dockerfile(global_args, stages)


def _stage(inst: Instruction, index: int, earlier: list[Stage]) -> Stage:
    flags = inst.flag_values({"platform": True})
    args = inst.args
    if len(args) == 1:
        name = None
    elif len(args) == 3 and args[1].upper() == "AS":
        name = args[2].lower()
        if not re.fullmatch(r"[a-z][a-z0-9._-]*", name):
            raise DockerfileError(f"invalid stage name {args[2]!r}", line=inst.line,
                                  fix="start with a letter; use letters, digits, '.', '_' and '-'")
        if any(s.name == name for s in earlier):
            raise DockerfileError(f"stage name {args[2]!r} is used twice", line=inst.line, fix="rename one stage")
    else:
        raise DockerfileError("FROM takes IMAGE [AS NAME]", line=inst.line, fix="e.g. FROM debian:bookworm AS build")
    platform = flags.get("platform", [None])[-1]
    return Stage(index, name, args[0], platform, inst.line)
