"""A background thread for slow clean-up (waiting for a killed sandbox, deleting trees), off the caller's path.

At normal interpreter exit the queue is drained (atexit). What a crash leaves queued stays discoverable:
sandbox rows of a dead owner and the store's trash directory are both reclaimed by gc.
"""

from __future__ import annotations

import atexit
import queue
import threading
from collections.abc import Callable

from .log import log

# At most this many clean-ups wait; beyond that `later` blocks until one is done. Sandboxes closed faster than
# they can be torn down would otherwise pile up processes, subvolumes and files without bound: with the cap,
# a tight create/close loop runs at the speed of the teardown, and memory and disk stay bounded.
MAX_PENDING = 32
_queue: "queue.Queue[Callable[[], None]] | None" = None
_thread: threading.Thread | None = None
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
    """Run `job` on the janitor thread; blocks while MAX_PENDING jobs are already waiting."""
    global _queue, _thread
    if threading.current_thread() is _thread:
        _run_inline(job)  # a clean-up that queues more: waiting on our own full queue would never end
        return
    with _lock:
        if _queue is None:
            _queue = queue.Queue(maxsize=MAX_PENDING)
            _thread = threading.Thread(target=_work, args=(_queue,), name="envyard-janitor", daemon=True)
            _thread.start()
            atexit.register(wait)
    _queue.put(job)


def _run_inline(job: Callable[[], None]) -> None:
    try:
        job()
    except Exception:
        log.exception("background clean-up failed")


def pending() -> int:
    """Clean-ups queued or running (for tests and benchmarks)."""
    return 0 if _queue is None else _queue.unfinished_tasks


def wait() -> None:
    """Block until every queued clean-up is done."""
    if _queue is not None:
        _queue.join()
