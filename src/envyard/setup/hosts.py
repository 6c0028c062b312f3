"""Name lookups for setup sandboxes: the package indexes' addresses resolved once, on the host.

Installs open many connections at once (uv fetches in parallel), and every new connection asks the DNS
resolver for pypi.org or files.pythonhosted.org again. A resolver that drops some of a burst of queries (seen
on these machines: a fifth of 40 parallel lookups) stalls each lost one for glibc's 5 s timeout, so one
`uv pip install` of 56 cached packages took 12 s instead of 0.3 s. Setup sandboxes on the host's network
therefore get an /etc/hosts with those names already resolved (the host's own entries first, as Docker gives
a host-network container), and `RES_OPTIONS` that retry any other lookup after 1 s instead of 5. Both are
setup-time only: images and their contract (setup.sh, the Dockerfile) do not keep them (a snapshot leaves the
file's mount point out when the image had no /etc/hosts).

The addresses are looked up again for each setup run (and at most every few minutes), so a CDN that moves
is followed; a name that cannot be resolved now is left to DNS.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

# What setup sandboxes reach most: the Python package index and its files, and Debian's archive (apt steps).
INDEX_HOSTS = ("pypi.org", "files.pythonhosted.org", "deb.debian.org")
RES_OPTIONS = "timeout:1 attempts:3"  # glibc's default is 5 s per lost query
MAX_AGE = 300.0  # seconds an answer is reused before it is looked up again
HEDGE_AFTER = 1.0  # a lookup not answered by then is asked again beside the first (a lost query)
GIVE_UP = 8.0
PER_FAMILY = 2

_lock = threading.Lock()
_made: dict[Path, tuple[float, Path | None]] = {}  # when each file was last made, and what came of it


def lookup(name: str) -> list[str]:
    """The addresses of `name` (at most PER_FAMILY per address family, the resolver's order); [] when the
    resolver says it has none (or cannot answer now), or when no answer came within GIVE_UP seconds. A query
    not answered within HEDGE_AFTER may have been lost: it is asked again beside the first, and the first
    answer counts."""
    answer: list[list[str]] = []
    done = threading.Event()

    def ask() -> None:
        try:
            infos = socket.getaddrinfo(name, 443, type=socket.SOCK_STREAM)
        except OSError:
            infos = []
        seen: dict[int, list[str]] = {}
        for family, *_, addr in infos:
            kept = seen.setdefault(family, [])
            if addr[0] not in kept and len(kept) < PER_FAMILY:
                kept.append(addr[0])
        answer.append([a for family in sorted(seen) for a in seen[family]])
        done.set()

    deadline = time.monotonic() + GIVE_UP
    while not done.is_set() and time.monotonic() < deadline:
        threading.Thread(target=ask, name="envyard-lookup", daemon=True).start()
        done.wait(min(HEDGE_AFTER, max(0.0, deadline - time.monotonic())))
    return answer[0] if answer else []


def hosts_text(base: str, resolved: dict[str, list[str]]) -> str:
    """`base` (the host's /etc/hosts) with a line per resolved address added after it."""
    lines = [base.rstrip("\n"), "# added by envyard setup: package indexes resolved on the host (setup-time only)"]
    lines += [f"{addr}\t{name}" for name, addrs in resolved.items() for addr in addrs]
    return "\n".join(lines).lstrip("\n") + "\n"


def hosts_file(cache_dir: Path, names: tuple[str, ...] = INDEX_HOSTS) -> Path | None:
    """An /etc/hosts for setup sandboxes in `cache_dir` (rewritten when older than MAX_AGE), or None when no
    name resolves (no network: the sandboxes keep the image's own; not asked again before MAX_AGE, so an
    offline machine waits for the lookups once, not per sandbox)."""
    path = cache_dir / "setup-hosts"
    with _lock:
        when, made = _made.get(path, (-MAX_AGE, None))
        if time.monotonic() - when < MAX_AGE and (made is None or made.is_file()):
            return made
        found: dict[str, list[str]] = {}
        threads = [threading.Thread(target=lambda n=n: found.__setitem__(n, lookup(n)), daemon=True) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        resolved = {n: found[n] for n in names if found.get(n)}
        if not resolved:
            _made[path] = (time.monotonic(), None)
            return None
        try:
            base = Path("/etc/hosts").read_text(errors="replace")
        except OSError:
            base = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(hosts_text(base, resolved))
        os.replace(tmp, path)  # sandboxes that bound the old file keep it; new ones get this one
        _made[path] = (time.monotonic(), path)
        return path


def res_options() -> dict[str, str]:
    """RES_OPTIONS for setup commands, unless the host sets its own."""
    return {} if os.environ.get("RES_OPTIONS") else {"RES_OPTIONS": RES_OPTIONS}
