"""ExecResult and the bounded output buffer that fills it."""

from __future__ import annotations

import collections
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAX_OUTPUT = 1 << 20  # bytes kept in memory per stream; the rest spills to a file


class OutputBuffer:
    """Keeps the first and last `limit/2` bytes of a stream in memory; once the stream outgrows `limit`
    the whole stream is written to `spill_path` so nothing is lost."""

    def __init__(self, limit: int | None, spill_path: Path, on_chunk=None):
        self.on_chunk = on_chunk  # called with each chunk as it arrives (streaming to a client)
        self.limit = limit
        self.spill_path = spill_path
        self.total = 0
        self._head = bytearray()
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_len = 0
        self._spill = None

    def feed(self, data: bytes) -> None:
        if self.on_chunk is not None:
            self.on_chunk(data)
        self.total += len(data)
        if self.limit is None:
            self._head += data
            return
        half = self.limit // 2
        if self._spill is None and self.total > self.limit:
            self._spill = open(self.spill_path, "wb")
            self._spill.write(self._head)
            self._spill.writelines(self._tail)
        if self._spill is not None:
            self._spill.write(data)
        if len(self._head) < half:
            take = half - len(self._head)
            self._head += data[:take]
            data = data[take:]
        if data:
            self._tail.append(data)
            self._tail_len += len(data)
            while self._tail_len - len(self._tail[0]) >= half:
                self._tail_len -= len(self._tail.popleft())

    @property
    def truncated(self) -> bool:
        return self.limit is not None and self.total > self.limit

    def value(self) -> bytes:
        if self._spill is not None:
            self._spill.close()
        if not self.truncated:
            return bytes(self._head) + b"".join(self._tail)
        tail = b"".join(self._tail)[-(self.limit // 2) :]
        omitted = self.total - len(self._head) - len(tail)
        marker = f"\n[envyard: {omitted} bytes omitted; full output in {self.spill_path}]\n".encode()
        return bytes(self._head) + marker + tail


@dataclass
class ExecResult:
    """What one command did. `stdout_bytes`/`stderr_bytes` are exact; `stdout`/`stderr` are decoded for display.

    `truncated` means a stream exceeded the output cap: the middle was cut from the in-memory copy and the whole
    stream is in `stdout_file`/`stderr_file` until the sandbox closes. `oom_killed` tells an out-of-memory kill
    apart from an ordinary failure; `timed_out` means envyard killed the command's process tree at the deadline.
    """

    exit_code: int
    stdout_bytes: bytes
    stderr_bytes: bytes
    duration: float
    timed_out: bool = False
    truncated: bool = False
    oom_killed: bool = False
    stdout_file: str | None = None
    stderr_file: str | None = None

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
