"""A verifier prepared ahead: started over the task's image while the agent works, used for one episode only.

Starting a verifier sandbox and putting /tests and /logs in place is most of what verification costs. A
TerminalEnv starts one PreparedVerifier per episode, in a background thread, as the agent's sandbox starts;
at submit, verify() merges the agent's carried work into it (Sandbox.apply_layer) instead of starting a fresh
sandbox over image + carried layer. Both give the tests the same files (see runtime/applylayer.py).

What keeps it tamper-proof: the prepared verifier is a separate sandbox (its own mount, pid, IPC and network
namespaces; nothing bound in from the agent's), made from the task's image alone, so nothing the agent did
before submit can reach it; the agent's processes are dead before anything is merged; and it serves one
episode, then is closed (`take` hands it over once). If it is not ready in time, died, or failed to prepare,
`take` returns None and verify() starts a fresh verifier as before.
"""

from __future__ import annotations

import logging
import threading

from ..yard import Sandbox, Yard

log = logging.getLogger("envyard")
READY_TIMEOUT = 60.0  # waiting for a slow preparation still beats starting a second verifier beside it


class PreparedVerifier:
    def __init__(self, yard: Yard, start):
        """`start()` makes and prepares the verifier sandbox (verify.start_verifier); it runs in a thread."""
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._sandbox: Sandbox | None = None
        self._closed = False
        self.error: str | None = None
        self._thread = threading.Thread(target=self._prepare, args=(start,), name="envyard-verifier-prep",
                                        daemon=True)
        self._thread.start()

    def _prepare(self, start) -> None:
        sb = None
        try:
            sb = start()
        except Exception as e:  # noqa: BLE001 - any failure means: verify with a fresh sandbox
            self.error = str(e)
            log.info("preparing a verifier failed (a fresh one will be used): %s", e)
        with self._lock:
            if self._closed:
                if sb is not None:
                    sb.close()
            else:
                self._sandbox = sb
        self._ready.set()

    def take(self, timeout: float = READY_TIMEOUT) -> Sandbox | None:
        """The prepared verifier, running, handed over to the caller (who closes it); None when there is none to
        use. Only the first call can get one."""
        ready = self._ready.wait(timeout)
        with self._lock:
            sb, self._sandbox = self._sandbox, None
            self._closed = True  # a preparation still running closes its sandbox itself
        if not ready or sb is None:
            return None
        if not sb.alive:
            sb.close()
            self.error = "the prepared verifier died before it was used"
            return None
        return sb

    def close(self) -> None:
        """Discard it unused (the episode ended without verification, or the env closes)."""
        with self._lock:
            sb, self._sandbox = self._sandbox, None
            self._closed = True
        if sb is not None:
            sb.close()
