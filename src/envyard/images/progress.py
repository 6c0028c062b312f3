"""Progress reports of pulls, pushes and loads.

A report is a `str` (a readable line, so `on_progress=print` or a status line works as for the other
envyard commands) that also carries its facts as attributes, for progress bars."""

from __future__ import annotations

from typing import Callable

# phases, per blob: "resolve" (whole image), "exists" (already stored / already in the registry), "mounted",
# "download", "verify", "extract", "pack", "upload", "done", "skip" (an empty layer)


class Progress(str):
    phase: str
    digest: str | None
    done: int  # bytes so far (download, upload)
    total: int  # bytes expected, 0 when unknown

    def __new__(cls, text: str, *, phase: str, digest: str | None = None, done: int = 0, total: int = 0):
        self = super().__new__(cls, text)
        self.phase, self.digest, self.done, self.total = phase, digest, done, total
        return self


ProgressFn = Callable[[Progress], None]


def short(digest: str) -> str:
    return digest.split(":", 1)[-1][:12]


def report(on_progress: ProgressFn | None) -> ProgressFn:
    """`on_progress`, or a function that drops reports."""
    return on_progress or (lambda _p: None)
