"""Warm pools: sandboxes started ahead of time for one exact spec, so `create` is a hand-over, not a spawn.

Starting bubblewrap costs ~7 ms on a small VM, which is most of a create. A pool keeps `size` sandboxes of one
spec running and idle; taking one is a pop, and a background thread starts the replacement. Pooled sandboxes
are ordinary sandboxes with leases: if the owner dies they go down with it, and gc reclaims their files.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from .local import LocalSandbox
from ..log import log



class WarmPool:
    def __init__(self, make: Callable[[], LocalSandbox], size: int):
        self._make = make
        self.size = size
        self._idle: collections.deque[LocalSandbox] = collections.deque()
        self._cond = threading.Condition()
        self._stopped = False
        self.errors = 0
        self._thread = threading.Thread(target=self._fill, name="envyard-warm-pool", daemon=True)
        self._thread.start()

    def _fill(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and len(self._idle) >= self.size:
                    self._cond.wait()
                if self._stopped:
                    return
            try:
                sb = self._make()
            except Exception as e:  # keep serving cold creates; report once per failure
                self.errors += 1
                log.warning("warm pool could not start a sandbox: %s", e)
                with self._cond:
                    self._cond.wait(1.0)
                continue
            with self._cond:
                if self._stopped:
                    sb.close()
                    return
                self._idle.append(sb)
                self._cond.notify_all()

    def take(self) -> LocalSandbox | None:
        """A ready sandbox, or None if the pool is empty right now (the caller then creates one itself)."""
        with self._cond:
            while self._idle:
                sb = self._idle.popleft()
                self._cond.notify_all()
                if sb.alive:
                    return sb
                sb.close()
            return None

    def wait_full(self, timeout: float = 30.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self._idle) >= self.size or self._stopped, timeout)

    def close(self) -> None:
        with self._cond:
            self._stopped = True
            idle = list(self._idle)
            self._idle.clear()
            self._cond.notify_all()
        self._thread.join(timeout=30)
        for sb in idle:
            sb.close()
