"""envyard's logger (`logging.getLogger("envyard")`), looked up on first use.

Importing `logging` costs a few milliseconds that `envyard run` would pay on every start although it logs only
when something goes wrong, so modules hold this stand-in, which forwards every call to the real logger.
"""

from __future__ import annotations


class _Logger:
    def __getattr__(self, name: str):
        import logging

        return getattr(logging.getLogger("envyard"), name)


log = _Logger()
