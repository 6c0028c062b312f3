"""ExecResult and the bounded output buffer that fills it."""

from __future__ import annotations

import collections
import threading
from pathlib import Path

from ..record import Record

DEFAULT_MAX_OUTPUT = 1 << 20  # bytes kept in memory per stream; the rest spills to a file
MAX_OUTPUT_CEILING = 256 << 20  # the most one stream may keep in memory; what max_output=None means
DEFAULT_MAX_SPILL = 256 << 20  # bytes of one stream kept in its spill file on the host; the rest is dropped
SANDBOX_SPILL_BUDGET = 1 << 30  # what all spill files of one sandbox may hold together
# The file methods' bounds (runtime/files.py uses them): here so that `Sandbox`'s signatures need not import
# files.py, which `envyard run` does not use.
DEFAULT_MAX_READ = 64 << 20  # read_file
DEFAULT_MAX_DOWNLOAD = 1 << 30  # download: all files together
DEFAULT_MAX_ENTRIES = 100_000  # download: files, directories and links


class SpillBudget:
    """Host disk a sandbox's spill files may still use, shared by its concurrent commands. Without it, an
    agent printing gigabytes in every step would fill the owner's disk one capped step at a time."""

    def __init__(self, limit: int = SANDBOX_SPILL_BUDGET):
        self.left = limit
        self._lock = threading.Lock()

    def take(self, n: int) -> int:
        """Reserve up to `n` bytes; returns how many were granted."""
        with self._lock:
            granted = min(n, self.left)
            self.left -= granted
            return granted


class OutputBuffer:
    """Keeps the first and last halves of `limit` bytes of a stream in memory. Once the stream outgrows
    `limit`, it is also written to `spill_path`, up to `max_spill` bytes (and what `budget` allows); beyond
    that, bytes are only counted. Memory and disk use are bounded whatever the command prints."""

    def __init__(self, limit: int | None, spill_path: "str | Path", on_chunk=None, *, max_spill: int = DEFAULT_MAX_SPILL,
                 budget: SpillBudget | None = None):
        self.on_chunk = on_chunk  # called with each chunk as it arrives (streaming to a client)
        self.limit = MAX_OUTPUT_CEILING if limit is None else limit
        if self.limit < 1 or max_spill < 0:
            raise ValueError("OutputBuffer needs limit >= 1 and max_spill >= 0")
        self._head_cap = self.limit // 2
        self._tail_cap = self.limit - self._head_cap
        self.spill_path = spill_path
        self.max_spill = max_spill
        self.budget = budget
        self.total = 0
        self.spilled = 0  # bytes written to the spill file
        self._head = bytearray()
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_len = 0
        self._spill = None  # opened on the first byte it gets
        self._spilling = False
        self._spill_full = max_spill == 0

    def feed(self, data: bytes) -> None:
        if self.on_chunk is not None:
            self.on_chunk(data)
        self.total += len(data)
        if not self._spilling and self.total > self.limit:
            # Until now the stream fitted in memory whole, so head and tail are all of it.
            self._spilling = True
            self._to_spill(self._head)
            for part in self._tail:
                self._to_spill(part)
        if self._spilling:
            self._to_spill(data)
        if len(self._head) < self._head_cap:
            take = self._head_cap - len(self._head)
            self._head += data[:take]
            data = data[take:]
        if data:
            self._tail.append(data)
            self._tail_len += len(data)
            while self._tail and self._tail_len - len(self._tail[0]) >= self._tail_cap:
                self._tail_len -= len(self._tail.popleft())

    def _to_spill(self, data: bytes) -> None:
        if self._spill_full or not data:
            return
        n = min(len(data), self.max_spill - self.spilled)
        if self.budget is not None:
            n = self.budget.take(n)
        if n:
            if self._spill is None:
                self._spill = open(self.spill_path, "wb")
            self._spill.write(memoryview(data)[:n])
            self.spilled += n
        if n < len(data):
            self._spill_full = True

    @property
    def truncated(self) -> bool:
        """True when anything was cut from the in-memory copy (the spill file may hold more, see spill_file)."""
        return self.total > self.limit

    @property
    def spill_file(self) -> str | None:
        return str(self.spill_path) if self.spilled else None

    def value(self) -> bytes:
        if self._spill is not None:
            self._spill.close()
        if not self.truncated:
            return bytes(self._head) + b"".join(self._tail)
        tail = b"".join(self._tail)
        tail = tail[max(0, len(tail) - self._tail_cap):]
        omitted = self.total - len(self._head) - len(tail)
        dropped = max(0, self.total - len(tail) - max(self.spilled, len(self._head)))  # in neither copy
        if self.spilled == self.total:
            note = f"{omitted} bytes omitted; full output in {self.spill_path}"
        elif not dropped:
            note = (f"{omitted} bytes omitted; the first {self.spilled} bytes are in {self.spill_path}, "
                    "the rest is below")
        elif self.spilled:
            note = (f"{omitted} bytes omitted, {dropped} of them dropped for good; "
                    f"the first {self.spilled} bytes are in {self.spill_path}")
        else:
            note = (f"{omitted} bytes omitted and dropped (no spill file: the spill cap is 0 or the sandbox's "
                    "spill budget is spent)")
        return bytes(self._head) + f"\n[envyard: {note}]\n".encode() + tail


class ExecResult(Record):
    """What one command did. `stdout_bytes`/`stderr_bytes` are exact; `stdout`/`stderr` are decoded for display.

    `truncated` means a stream exceeded the output cap: the middle was cut from the in-memory copy (a marker says
    how many bytes) and the stream's first `max_spill` bytes are in `stdout_file`/`stderr_file` until the sandbox
    closes; anything beyond that was dropped, and the marker says so. `oom_killed` tells an out-of-memory kill
    apart from an ordinary failure; `timed_out` means envyard killed the command's process tree at the deadline.
    """

    def __init__(self, exit_code: int, stdout_bytes: bytes, stderr_bytes: bytes, duration: float,
                 timed_out: bool = False, truncated: bool = False, oom_killed: bool = False,
                 stdout_file: str | None = None, stderr_file: str | None = None):
        self.exit_code = exit_code
        self.stdout_bytes = stdout_bytes
        self.stderr_bytes = stderr_bytes
        self.duration = duration
        self.timed_out = timed_out
        self.truncated = truncated
        self.oom_killed = oom_killed
        self.stdout_file = stdout_file
        self.stderr_file = stderr_file

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode("utf-8", "replace")

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def to_dict(self) -> dict:
        return {
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "duration": round(self.duration, 6),
            "timed_out": self.timed_out,
            "truncated": self.truncated,
            "oom_killed": self.oom_killed,
            "stdout_file": self.stdout_file,
            "stderr_file": self.stderr_file,
        }
