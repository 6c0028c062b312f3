"""Facts about host processes read from /proc: start times (to survive pid reuse) and namespace membership."""

from __future__ import annotations

import os


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return _split_stat(f.read())
    except OSError:
        return None


def _split_stat(raw: bytes) -> list[str]:
    data = raw.decode(errors="replace")
    # The command name may contain spaces and parentheses: split after the last ')'.
    return data[data.rfind(")") + 2 :].split()


def start_time(pid: int) -> int:
    """Start time in clock ticks since boot, 0 if the process is gone."""
    f = _stat_fields(pid)
    return int(f[19]) if f else 0


def start_time_at(pid_dir: int) -> int:
    """Start time of the process whose /proc/<pid> directory `pid_dir` (an fd) holds open; 0 if it is gone.
    The fd stays tied to that one process, so a reused pid cannot answer in its place."""
    try:
        fd = os.open("stat", os.O_RDONLY | os.O_CLOEXEC, dir_fd=pid_dir)
    except OSError:
        return 0
    try:
        f = _split_stat(os.read(fd, 4096))
    except OSError:
        return 0
    finally:
        os.close(fd)
    return int(f[19]) if len(f) > 19 else 0


def is_alive(pid: int | None, start: int | None) -> bool:
    """True if `pid` runs and is the same process that started at `start` (not a reused pid), and not a zombie."""
    if not pid:
        return False
    f = _stat_fields(pid)
    if not f or f[0] == "Z":
        return False
    return start is None or int(f[19]) == start


def session_id(pid: int) -> int | None:
    f = _stat_fields(pid)
    return int(f[3]) if f else None


def parent_pid(pid: int) -> int | None:
    f = _stat_fields(pid)
    return int(f[1]) if f else None


def pid_namespace(pid: int) -> int | None:
    try:
        link = os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None
    return int(link[link.index("[") + 1 : -1])


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it, parents first, from the kernel's child lists (every thread's:
    a child belongs to the thread that forked it). Cheaper than scanning all of /proc on a busy host."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        found.append(p)
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
            except OSError:
                pass
    return found


def pids_in_namespace(ns_inode: int) -> list[int]:
    """Host pids of every process whose pid namespace is `ns_inode`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and pid_namespace(int(name)) == ns_inode:
            found.append(int(name))
    return found


def inner_pid(pid: int) -> int | None:
    """The pid a process has inside its own (innermost) pid namespace."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except OSError:
        return None
    return None


def cmdline(pid: int) -> list[bytes]:
    """A process's argv as bytes ([] for a zombie, a kernel thread or a process that is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            data = f.read()
    except OSError:
        return []
    return data.split(b"\0")[:-1] if data else []


def ns_pids(pid: int) -> list[int]:
    """The pid a process has in each pid namespace it belongs to, outermost first (NSpid)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except OSError:
        pass
    return []


def pidfd_if_same(pid: int, start: int) -> int | None:
    """A pidfd for `pid` if it still is the process that started at `start`, else None. Signals sent through
    it reach that process or nobody, even if the pid is reused later."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    if start_time(pid) != start:  # checked after opening: the pidfd pins the process we just compared
        os.close(fd)
        return None
    return fd


def process_tree(leader: int, pids: list[int], is_session: bool) -> list[int]:
    """`leader` and those of `pids` below it, following parents; with `is_session` (the leader led a session
    when first seen: it may be gone now), also that session's members, reparented or not. Parents come
    before their children: killed in this order, no shell outlives its child long enough to run on (a shell
    whose `sleep` died first could still print the line after it)."""
    parents = {p: parent_pid(p) for p in pids}
    tree, grew = {leader: None}, True
    while grew:
        grew = False
        for p, pp in parents.items():
            if p not in tree and (pp in tree or (is_session and session_id(p) == leader)):
                tree[p] = None
                grew = True
    return list(tree)
