"""Sandbox backends and the pieces they share (limits, results, the backend interface).

The names below are loaded on first use (PEP 562), so that importing one submodule (e.g. `runtime.limits` on
`envyard run`'s path) does not import the others, or `typing` for the Protocols."""

_EXPORTS = {"Backend": "backend", "Capabilities": "backend", "SandboxSpec": "backend", "Limits": "limits",
            "ExecResult": "result"}

__all__ = ["Backend", "Capabilities", "ExecResult", "Limits", "SandboxSpec"]


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
