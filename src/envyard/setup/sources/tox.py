"""tox configuration, read and never run: `tox.ini`, `[tox:tox]` in setup.cfg, `legacy_tox_ini` and native
`[tool.tox]` in pyproject.toml, and `tox.toml`. Yields Python hints from the env list, test commands, per-env
dependencies (`deps`), and services named by `setenv`/`passenv`."""

from __future__ import annotations

import itertools
import re

from .base import Sink, resolve_rel
from .ini import IniFile, IniValue, parse_ini
from .requirements import emit_requirement, read_file
from .shell import record_command, record_env
from .specs import tox_factor_version
from .testing import ini_values, record_pytest_config
from .tomlpos import TomlPositions, load_toml

_FACTOR_PREFIX_RE = re.compile(r"^!?[\w.{}!-]+(?:\s*,\s*!?[\w.{}!-]+)*\s*:\s+")


def expand_envlist(text: str) -> list[str]:
    """`py{38,39}-django{32,40}, lint` → every env name (brace products expanded)."""
    names = []
    for item in _split_top(text):
        names.extend(_expand(item))
    return names


def _split_top(text: str) -> list[str]:
    parts, buf, depth = [], [], 0
    for c in text:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if (c == "," or c == "\n") and depth == 0:
            parts.append("".join(buf))
            buf = []
            continue
        buf.append(c)
    parts.append("".join(buf))
    return [p.strip() for p in parts if p.strip() and not p.strip().startswith("#")]


def _expand(item: str) -> list[str]:
    pieces = re.split(r"(\{[^{}]*\})", item)
    options = [[o.strip() for o in p[1:-1].split(",")] if p.startswith("{") else [p] for p in pieces]
    return ["".join(combo) for combo in itertools.product(*options)]


def python_hints_from_envs(sink: Sink, names: list[str], file: str, line: int | None, via: str) -> None:
    for name in names:
        for factor in name.split("-"):
            version = tox_factor_version(factor)
            if version:
                sink.add("python_hint", version, file, line, via)


# ---------------------------------------------------------------------------------------------------- INI form

def read_tox_ini(sink: Sink) -> None:
    for rel in sink.files.named("tox.ini", max_depth=0):
        text = sink.read(rel)
        if text is not None:
            read_tox_ini_text(sink, rel, parse_ini(text), main_section="tox")


def read_tox_ini_text(sink: Sink, rel: str, ini: IniFile, main_section: str, prefix: str = "") -> None:
    """`prefix` is the section name prefix (`tox:` in setup.cfg, where envs are `[testenv:x]` all the same)."""
    main = ini.sections.get(main_section, {})
    envlist = main.get("envlist") or main.get("env_list")
    if envlist:
        for number, text in envlist.parts:
            python_hints_from_envs(sink, expand_envlist(text), rel, number, "tox.envlist")
    if prefix == "" and "pytest" in ini.sections:
        record_pytest_config(sink, rel, ini.section_lines["pytest"], "tox.ini [pytest]",
                             ini_values(ini.sections["pytest"]))
    for section, values in ini.sections.items():
        if section == "testenv":
            env = "testenv"
        elif section.startswith("testenv:"):
            env = section.split(":", 1)[1].strip()
        else:
            continue
        _read_env(sink, rel, env, values)


def _read_env(sink: Sink, rel: str, env: str, values: dict[str, IniValue]) -> None:
    label = "tox" if env == "testenv" else f"tox:{env}"
    commands = values.get("commands")
    found = False
    if commands:
        for number, text in _continued(commands.parts):
            text = _FACTOR_PREFIX_RE.sub("", text).lstrip("-").strip()
            if text and not text.startswith("{["):
                found |= record_command(sink, text, rel, number, "tox.commands")
    if found and env != "testenv":
        sink.add("test_command", f"tox -e {env}", rel, commands.line, "tox.env")
    if found and env == "testenv":
        sink.add("test_command", "tox", rel, commands.line, "tox.env")
    extras = values.get("extras") if env == "testenv" else None  # named envs are variants (py39-tinycss2, all)
    for number, text in (extras.parts if extras else []):
        for name in re.split(r"[\s,]+", _FACTOR_PREFIX_RE.sub("", text)):
            if name:
                sink.add("test_extra", name, rel, number, f"{label}.extras")
    deps = values.get("deps")
    if deps:
        for number, text in deps.parts:
            _dep(sink, rel, number, _FACTOR_PREFIX_RE.sub("", text).strip(), label)
    for key in ("setenv", "set_env"):
        for number, text in (values[key].parts if key in values else []):
            name, sep, value = _FACTOR_PREFIX_RE.sub("", text).partition("=")
            if sep:
                record_env(sink, name.strip(), value.strip(), rel, number, "tox.setenv")
    for key in ("passenv", "pass_env"):
        for number, text in (values[key].parts if key in values else []):
            for name in re.split(r"[\s,]+", _FACTOR_PREFIX_RE.sub("", text)):
                if name:
                    record_env(sink, name, None, rel, number, "tox.passenv")


def _continued(parts: list[tuple[int, str]]) -> list[tuple[int, str]]:
    out, buf, start = [], "", None
    for number, text in parts:
        if start is None:
            start = number
        if text.endswith("\\"):
            buf += text[:-1].rstrip() + " "
            continue
        out.append((start, buf + text))
        buf, start = "", None
    if buf:
        out.append((start, buf.strip()))
    return out


def _dep(sink: Sink, rel: str, number: int | None, text: str, label: str) -> None:
    text = re.sub(r"\s+#.*$", "", text).strip()
    if not text or "{" in text:
        return                                              # substitutions ({[testenv]deps}, {env:X}) are not ours
    m = re.match(r"^(-r|-c|--requirement|--constraint)\s*=?\s*(\S+)$", text)
    if m:
        target = resolve_rel(rel, m.group(2))
        if target is None:
            return
        if m.group(1) in ("-c", "--constraint"):
            read_file(sink, target, kind="constraint", role="constraints", via="tox.deps",
                      included_from=(rel, number))
        else:
            read_file(sink, target, kind="dependency_group", fields={"group": label}, via="tox.deps",
                      included_from=(rel, number))
        return
    if text.startswith("-") and not text.startswith(("-e", "--editable")):
        return
    emit_requirement(sink, text, rel, number, "dependency_group", "tox.deps", {"group": label})


# ---------------------------------------------------------------------------------------------------- TOML form

def read_tox_toml(sink: Sink) -> None:
    for rel in sink.files.named("tox.toml", max_depth=0):
        loaded = load_toml(sink, rel)
        if loaded is not None:
            read_tox_native(sink, rel, *loaded, ())


def read_tox_native(sink: Sink, rel: str, data: dict, pos: TomlPositions, base: tuple[str, ...]) -> None:
    """tox 4 TOML configuration rooted at `base` (() in tox.toml, ("tool", "tox") in pyproject.toml)."""
    envs = data.get("env_list") or data.get("envlist")
    if isinstance(envs, list):
        for name in envs:
            if isinstance(name, str):
                lines = pos.string_lines(base + ("env_list",), name) or [pos.key_line(*base, "env_list")]
                python_hints_from_envs(sink, [name], rel, lines[0], "tox.env_list")
    sections = []
    if isinstance(data.get("env_run_base"), dict):
        sections.append(("testenv", data["env_run_base"], base + ("env_run_base",)))
    if isinstance(data.get("env"), dict):
        for name, conf in data["env"].items():
            if isinstance(conf, dict):
                sections.append((name, conf, base + ("env", name)))
    for env, conf, path in sections:
        label = "tox" if env == "testenv" else f"tox:{env}"
        found = False
        for command in conf.get("commands", []) if isinstance(conf.get("commands"), list) else []:
            if isinstance(command, list) and all(isinstance(c, str) for c in command) and command:
                lines = pos.string_lines(path + ("commands",), command[0]) or [pos.key_line(*path, "commands")]
                text = " ".join(_quote(c) for c in command).lstrip("-").strip()
                found |= record_command(sink, text, rel, lines[0], "tox.commands")
        if found:
            sink.add("test_command", "tox" if env == "testenv" else f"tox -e {env}", rel,
                     pos.key_line(*path, "commands"), "tox.env")
        deps = conf.get("deps")
        if isinstance(deps, list):
            for dep, line in zip(deps, pos.locate(path + ("deps",), [d for d in deps if isinstance(d, str)])):
                if isinstance(dep, str):
                    _dep(sink, rel, line, dep, label)
        set_env = conf.get("set_env")
        if isinstance(set_env, dict):
            for name, value in set_env.items():
                if isinstance(value, str):
                    record_env(sink, name, value, rel, pos.key_line(*path, "set_env", name) or
                               pos.key_line(*path, "set_env"), "tox.set_env")
        pass_env = conf.get("pass_env")
        if isinstance(pass_env, list):
            for name in pass_env:
                if isinstance(name, str):
                    record_env(sink, name, None, rel, pos.key_line(*path, "pass_env"), "tox.pass_env")


def _quote(token: str) -> str:
    return token if re.fullmatch(r"[\w@%+=:,./{}\[\]-]+", token) else repr(token)
