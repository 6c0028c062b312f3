"""greetlib: a tiny greeting library (vendored copy)."""

import os

__version__ = "1.3.0"

_STYLES = {"standard": str, "shout": str.upper}


def greet(name: str = "greetlib") -> str:
    mode = os.environ.get("GREETLIB_MODE", "standard")
    try:
        style = _STYLES[mode]
    except KeyError:
        raise ValueError(f"unknown GREETLIB_MODE {mode!r}; expected one of: {', '.join(sorted(_STYLES))}") from None
    return style(f"hello from {name}")
