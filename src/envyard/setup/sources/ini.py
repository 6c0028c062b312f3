"""INI files (setup.cfg, tox.ini, pytest.ini) read with line numbers. `configparser` loses positions, so this
reader follows its rules for the parts that matter: `[section]` headers, `key = value` or `key: value`, indented
continuation lines, full-line `#`/`;` comments; repeated sections merge and later keys win."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SECTION_RE = re.compile(r"^\[\s*([^\]]+?)\s*\]\s*(?:[#;].*)?$")


@dataclass
class IniValue:
    key: str
    line: int
    parts: list[tuple[int, str]] = field(default_factory=list)   # (line, text) of each non-empty value line

    @property
    def text(self) -> str:
        return "\n".join(t for _, t in self.parts)


@dataclass
class IniFile:
    sections: dict[str, dict[str, IniValue]] = field(default_factory=dict)
    section_lines: dict[str, int] = field(default_factory=dict)

    def get(self, section: str, key: str) -> IniValue | None:
        return self.sections.get(section, {}).get(key.lower())

    def section_names(self) -> list[str]:
        return list(self.sections)


def parse_ini(text: str, first_line: int = 1) -> IniFile:
    ini = IniFile()
    section: dict[str, IniValue] | None = None
    current: IniValue | None = None
    for number, raw in enumerate(text.splitlines(), first_line):
        stripped = raw.strip()
        if not stripped or stripped.startswith(("#", ";")):
            continue
        if raw[:1] in (" ", "\t") and current is not None:
            current.parts.append((number, stripped))
            continue
        m = _SECTION_RE.match(stripped)
        if m:
            name = m.group(1)
            section = ini.sections.setdefault(name, {})
            ini.section_lines.setdefault(name, number)
            current = None
            continue
        if section is None:
            continue
        eq, colon = stripped.find("="), stripped.find(":")
        seps = [p for p in (eq, colon) if p > 0]
        if not seps:
            current = None
            continue
        at = min(seps)
        key = stripped[:at].strip().lower()
        value = stripped[at + 1:].strip()
        current = IniValue(key, number, [(number, value)] if value else [])
        section[key] = current
    return ini
