"""Serving agent environments to remote trainers and agents.

`envyard.serve.http.create_app` builds the HTTP + WebSocket server (FastAPI). It is imported lazily so that
`import envyard.serve.<other>` does not pull in FastAPI.
"""

from __future__ import annotations

__all__ = ["create_app"]


def __getattr__(name: str):
    if name == "create_app":
        from .http import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
