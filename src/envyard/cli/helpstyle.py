"""typer, with plainer help screens. Recent typer releases print a flag's type as if it took a value
(`--json <bool>`), write usage lines as `{image} {cmd}...`, and in the command list keep a docstring's hard
line breaks (and its whole first paragraph, however long), and in a command's own help keep the hard line
breaks of every paragraph after the first, so a paragraph wrapped at 110 columns in the source comes out
ragged at any other width. `App` is `typer.Typer` whose groups and commands fix these as they are built: flags
show no type, arguments are named the way click and most tools do (`IMAGE CMD...`), a command's line in the
list is its first paragraph on one line, cut to its first sentence when that paragraph is long, and each
paragraph of a help text is one line that the terminal wraps (list items keep their own lines). Everything else
(options, parsing, errors) is typer's own."""

from __future__ import annotations

import inspect
import re

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

SHORT_HELP_MAX = 160  # a first paragraph longer than this is cut to its first sentence in the command list
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`])")
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s")


def reflow(text: str) -> str:
    """`text` with the single line breaks inside each paragraph joined, except before a list item; paragraphs
    (blank-line separated) and click's no-rewrap blocks (starting with \\b) stay as they are."""
    paragraphs = []
    for para in inspect.cleandoc(text).split("\n\n"):
        if para.startswith("\b"):
            paragraphs.append(para)
            continue
        lines: list[str] = []
        for line in para.split("\n"):
            if lines and not _LIST_ITEM.match(line):
                lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
            else:
                lines.append(line)
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


def short_help(text: str) -> str:
    """What a command list shows for a command whose help is `text`."""
    first = " ".join(inspect.cleandoc(text).split("\n\n")[0].split())
    if len(first) > SHORT_HELP_MAX:
        first = _SENTENCE_END.split(first, maxsplit=1)[0]
    return first


def _plain_names(params) -> None:
    for p in params:
        if getattr(p, "is_flag", False) and not getattr(p, "count", False):
            p.metavar = ""  # typer shows an option's metavar in place of its type
        elif isinstance(p, TyperArgument) and p.metavar is None:
            p.metavar = p.name.upper() + ("..." if p.nargs != 1 else "")


class _Plain:
    """Mixed into typer's command and group classes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _plain_names(self.params)
        if self.help:
            self.help = reflow(self.help)
        if self.short_help is None and self.help:
            self.short_help = short_help(self.help)

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)  # built on first use, so not among params above
        _plain_names([option] if option is not None else [])
        return option

    def collect_usage_pieces(self, ctx):
        """`[OPTIONS] IMAGE CMD...`, as click writes a usage line (typer writes `{image} {cmd}...`)."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for p in self.get_params(ctx):
            if isinstance(p, TyperArgument):
                pieces.append(p.metavar if p.required else f"[{p.metavar}]")
        if isinstance(self, TyperGroup):
            pieces.append(self.subcommand_metavar)
        return pieces


class Command(_Plain, TyperCommand):
    pass


class Group(_Plain, TyperGroup):
    pass


class App(typer.Typer):
    """`typer.Typer` building `Group`s and `Command`s unless told otherwise."""

    def __init__(self, **kwargs):
        kwargs.setdefault("cls", Group)
        super().__init__(**kwargs)

    def command(self, *args, **kwargs):
        kwargs.setdefault("cls", Command)
        return super().command(*args, **kwargs)
