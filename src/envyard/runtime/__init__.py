"""Sandbox backends and the pieces they share (limits, results, the backend interface)."""

from .backend import Backend, Capabilities, SandboxSpec
from .limits import Limits
from .result import ExecResult

__all__ = ["Backend", "Capabilities", "ExecResult", "Limits", "SandboxSpec"]
