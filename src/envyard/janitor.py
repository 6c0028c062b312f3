"""A background thread for slow clean-up (waiting for a killed sandbox, deleting trees), off the caller's path.

At normal interpreter exit the queue is drained (atexit). What a crash leaves queued stays discoverable:
sandbox rows of a dead owner and the store's trash directory are both reclaimed by gc.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
from typing import Callable

log = logging.getLogger("envyard")
_queue: "queue.Queue[Callable[[], None]] | None" = None
_lock = threading.Lock()


def _work(q: "queue.Queue[Callable[[], None]]") -> None:
    while True:
        job = q.get()
        try:
            job()
        except Exception:  # clean-up must go on; gc catches whatever this leaves
            log.exception("background clean-up failed")
        finally:
            q.task_done()


def later(job: Callable[[], None]) -> None:
    global _queue
    with _lock:
        if _queue is None:
            _queue = queue.Queue()
            threading.Thread(target=_work, args=(_queue,), name="envyard-janitor", daemon=True).start()
            atexit.register(wait)
    _queue.put(job)


def wait() -> None:
    """Block until every queued clean-up is done."""
    if _queue is not None:
        _queue.join()
