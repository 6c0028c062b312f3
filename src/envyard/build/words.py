"""Variable substitution in Dockerfile words, as Docker's builder does it (not a shell: no globbing, no
commands, no arithmetic).

    $VAR  ${VAR}            the value, empty when unset
    ${VAR:-word} ${VAR-word}   word when VAR is unset or empty (":-") / unset ("-")
    ${VAR:+word} ${VAR+word}   word when VAR is set and non-empty (":+") / set ("+"), else empty
    ${VAR:?msg}  ${VAR?msg}    an error when VAR is unset or empty / unset

Quotes are removed as Docker removes them: '...' is literal, "..." expands `$` and lets a backslash escape
only `"`, `$` and `\\`; outside quotes a backslash makes the next character literal.
"""

from __future__ import annotations

import re

from .errors import DockerfileError

NAME_CHAR = re.compile(r"[A-Za-z0-9_]")


class _Lexer:
    def __init__(self, text: str, env: dict[str, str], line: int | None):
        self.text, self.env, self.line = text, env, line
        self.i = 0

    def peek(self) -> str:
        return self.text[self.i] if self.i < len(self.text) else ""

    def take(self) -> str:
        ch = self.peek()
        self.i += 1
        return ch

    def error(self, what: str) -> DockerfileError:
        return DockerfileError(f"{what} in {self.text!r}", line=self.line,
                               fix="check the ${...} syntax: ${VAR}, ${VAR:-default}, ${VAR:+alt}")

    def vars_only(self) -> str:
        """`$` expansions only; quotes and backslashes are text (a heredoc's body)."""
        out = []
        while self.i < len(self.text):
            out.append(self.dollar() if self.peek() == "$" else self.take())
        return "".join(out)

    # stop: characters that end the word here (the "}" of an enclosing ${VAR:-...})
    def word(self, stop: str = "") -> str:
        out = []
        while self.i < len(self.text):
            ch = self.peek()
            if ch in stop:
                break
            if ch == "'":
                self.take()
                end = self.text.find("'", self.i)
                if end < 0:
                    raise self.error("unterminated single quote")
                out.append(self.text[self.i:end])
                self.i = end + 1
            elif ch == '"':
                self.take()
                out.append(self.double_quoted())
            elif ch == "\\":
                self.take()
                out.append(self.take())  # a trailing backslash stays as nothing, as Docker's lexer does
            elif ch == "$":
                out.append(self.dollar())
            else:
                out.append(self.take())
        return "".join(out)

    def double_quoted(self) -> str:
        out = []
        while True:
            ch = self.peek()
            if not ch:
                raise self.error("unterminated double quote")
            if ch == '"':
                self.take()
                return "".join(out)
            if ch == "$":
                out.append(self.dollar())
            elif ch == "\\":
                self.take()
                nxt = self.take()
                out.append(nxt if nxt in ('"', "$", "\\") else "\\" + nxt)
            else:
                out.append(self.take())

    def dollar(self) -> str:
        self.take()  # $
        if self.peek() == "{":
            self.take()
            return self.braced()
        name = self.name()
        if not name:
            return "$"
        return self.env.get(name, "")

    def name(self) -> str:
        start = self.i
        while self.i < len(self.text) and NAME_CHAR.match(self.text[self.i]):
            self.i += 1
        return self.text[start:self.i]

    def braced(self) -> str:
        name = self.name()
        if not name:
            raise self.error("bad substitution")
        ch = self.take()
        if ch == "}":
            return self.env.get(name, "")
        colon = ch == ":"
        if colon:
            ch = self.take()
        if ch not in ("-", "+", "?"):
            raise self.error(f"unsupported modifier {ch!r} in ${{{name}...}}")
        word = self.word(stop="}")
        if self.take() != "}":
            raise self.error("missing '}'")
        value = self.env.get(name)
        is_set = value is not None and (value != "" or not colon)
        if ch == "-":
            return value if is_set else word
        if ch == "+":
            return word if is_set else ""
        if not is_set:
            raise DockerfileError(f"{name}: {word or 'is not set'}", line=self.line,
                                  fix=f"give it a value: --build-arg {name}=... or ARG/ENV {name}=...")
        return value


def expand(text: str, env: dict[str, str], line: int | None = None) -> str:
    """One word with variables substituted and quotes removed."""
    return _Lexer(text, env, line).word()


def expand_vars(text: str, env: dict[str, str], line: int | None = None) -> str:
    """Variables substituted, nothing else (the body of an unquoted heredoc in COPY)."""
    return _Lexer(text, env, line).vars_only()


def expand_words(text: str, env: dict[str, str], line: int | None = None) -> list[str]:
    """Several blank-separated words (EXPOSE, VOLUME), as Docker splits them: on blanks outside quotes, also
    those an unquoted variable expands to. Empty words are dropped."""
    lx = _Lexer(text, env, line)
    words: list[str] = []
    cur: list[str] = []

    def cut() -> None:
        if cur:
            words.append("".join(cur))
            cur.clear()

    while lx.i < len(text):
        ch = lx.peek()
        if ch.isspace():
            lx.take()
            cut()
        elif ch == "$":
            value = lx.dollar()
            pieces = value.split()
            if value[:1].isspace():
                cut()
            for k, piece in enumerate(pieces):
                if k:
                    cut()
                cur.append(piece)
            if value[-1:].isspace():
                cut()
        else:
            start = lx.i
            lx.word(stop=" \t\n$")
            cur.append(_Lexer(text[start:lx.i], env, line).word())
    cut()
    return [w for w in words if w]
