"""Attacks on the kernel interfaces a sandbox shares with its host: sysctls, /proc control files, masked
kernel files, system calls (seccomp), capabilities (user namespace) and a terminal's input queue."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pyseccomp
import pytest

from envyard.runtime import local

SYSCTLS = ("kernel/core_pattern", "kernel/pid_max", "vm/panic_on_oom", "vm/overcommit_memory", "fs/file-max")

# Writes each sysctl's current value back (so a success changes nothing) and reports what happened.
WRITE_BACK = """
for f in {files}; do
  v=$(cat /proc/sys/$f)
  if (printf '%s\\n' "$v" > /proc/sys/$f) 2>/dev/null; then echo "$f writable"; else echo "$f refused"; fi
done
"""


def _write_back(sb) -> list[str]:
    return sb.exec(WRITE_BACK.format(files=" ".join(SYSCTLS))).stdout.split("\n")[:-1]


def test_sysctls_are_read_only(sb):
    """kernel.core_pattern pointing at a program in the sandbox would run it as host root on the next crash."""
    assert _write_back(sb) == [f"{f} refused" for f in SYSCTLS]


def test_without_the_read_only_proc_sys_they_are_writable(yard, host, monkeypatch):
    monkeypatch.setattr(local, "mask_args", lambda: ())
    with yard.sandbox(host) as sb:
        assert _write_back(sb) == [f"{f} writable" for f in SYSCTLS]


def test_proc_control_files_are_read_only(sb):
    r = sb.exec("for p in /proc/sysrq-trigger /proc/irq/default_smp_affinity /proc/bus/pci/devices /proc/fs/ext4; do"
                " [ -e $p ] || continue; if touch $p 2>/dev/null; then echo \"$p writable\"; fi; done; echo done")
    assert r.stdout == "done\n"
    mounts = sb.exec("cat /proc/self/mountinfo").stdout
    for path in ("/proc/sys", "/proc/fs", "/proc/irq", "/proc/bus"):
        if os.path.exists(path):
            line = next(l for l in mounts.splitlines() if l.split()[4] == path)
            assert line.split()[5].startswith("ro"), line


def test_kernel_files_are_masked(sb):
    """Docker's masked paths: timers of every host process, the keyring list, firmware tables."""
    r = sb.exec("for f in /proc/keys /proc/timer_list /proc/kcore /proc/sched_debug; do"
                " [ -e $f ] && head -c 100 $f 2>/dev/null; done; ls -A /proc/acpi /sys/firmware 2>/dev/null; true")
    assert r.stdout.strip() in ("", "/proc/acpi:\n\n/sys/firmware:".strip()), r.stdout


def test_without_masks_the_host_timers_show(yard, host, monkeypatch):
    if not os.path.exists("/proc/timer_list"):
        pytest.skip("this kernel has no /proc/timer_list")
    monkeypatch.setattr(local, "mask_args", lambda: ())
    with yard.sandbox(host) as sb:
        assert "Timer List" in sb.exec("head -c 300 /proc/timer_list").stdout


# ---- system calls -------------------------------------------------------------------------------------------

# Run inside the sandbox: each call gets arguments that succeed (or fail differently) without the filter.
PROBE = r"""
import ctypes, errno, fcntl, json, os, pty, sys, termios
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
nr = json.loads(sys.argv[1])
L = ctypes.c_long
def call(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(L(nr[name]), *[L(a) for a in args])
    return 0 if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
buf = ctypes.create_string_buffer(512)
handle = ctypes.create_string_buffer(128); ctypes.memmove(handle, ctypes.pointer(ctypes.c_uint(120)), 4)
mount_id = ctypes.c_int()
out = {
  "unshare(CLONE_NEWUSER)": call("unshare", 0x10000000),
  "keyctl(GET_KEYRING_ID)": call("keyctl", 0, -3, 1),
  "add_key": call("add_key", ctypes.addressof(ctypes.create_string_buffer(b"user")),
                  ctypes.addressof(ctypes.create_string_buffer(b"x")), ctypes.addressof(buf), 1, -3),
  "kcmp(self, self)": call("kcmp", os.getpid(), os.getpid(), 0, 0, 0),
  "name_to_handle_at": call("name_to_handle_at", -100, ctypes.addressof(ctypes.create_string_buffer(b"/")),
                            ctypes.addressof(handle), ctypes.addressof(mount_id), 0),
  "io_uring_setup": call("io_uring_setup", 1, ctypes.addressof(buf)),
  "clone3(NULL)": call("clone3", 0, 0),
  "mount": call("mount", 0, ctypes.addressof(ctypes.create_string_buffer(b"/tmp")), 0, 0x1000, 0),
  "setns": call("setns", os.open("/proc/self/ns/uts", os.O_RDONLY), 0),
  "bpf": call("bpf", 0, 0, 0),
  "perf_event_open": call("perf_event_open", 0, 0, -1, -1, 0),
  "init_module": call("init_module", 0, 0, 0),
  "kexec_load": call("kexec_load", 0, 0, 0, 0),
  "userfaultfd": call("userfaultfd", 0),
  "open_tree": call("open_tree", -100, ctypes.addressof(ctypes.create_string_buffer(b"/")), 0),
  "syslog(SIZE_BUFFER)": call("syslog", 10, 0, 0),
}
master, slave = pty.openpty()
try:
    fcntl.ioctl(slave, termios.TIOCSTI, b"x")
    out["ioctl(TIOCSTI)"] = 0
except OSError as e:
    out["ioctl(TIOCSTI)"] = errno.errorcode[e.errno]
print(json.dumps(out))
"""
NAMES = ("unshare", "keyctl", "add_key", "kcmp", "name_to_handle_at", "io_uring_setup", "clone3", "mount", "setns",
         "bpf", "perf_event_open", "init_module", "kexec_load", "userfaultfd", "open_tree", "syslog")
# Refused even without the filter, by missing capabilities (the filter is the second wall for these). The
# rest succeed, or fail for another reason than EPERM, when the filter is off: the proof that it is the filter.
REFUSED_WITHOUT_FILTER = ("setns", "userfaultfd", "syslog(SIZE_BUFFER)", "ioctl(TIOCSTI)")


def _probe(sb) -> dict:
    numbers = {n: pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, n) for n in NAMES}
    r = sb.exec(["/usr/bin/python3", "-c", PROBE, json.dumps(numbers)])
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_seccomp_refuses_kernel_surfaces(sb):
    results = _probe(sb)
    assert results.pop("clone3(NULL)") == "ENOSYS"  # so that the C library falls back to clone, which is checked
    assert results == {name: "EPERM" for name in results}


def test_without_the_filter_those_calls_go_through(yard, host):
    with yard.sandbox(host, security="relaxed") as sb:
        results = _probe(sb)
    assert {k: v for k, v in results.items() if v == "EPERM"} == {k: "EPERM" for k in REFUSED_WITHOUT_FILTER}


def test_no_new_user_namespace_from_the_shell(sb):
    r = sb.exec("unshare --user --map-root-user id; unshare -r true; echo rc=$?")
    assert "Operation not permitted" in r.stderr and r.stdout.endswith("rc=1\n")


# ---- capabilities and the user namespace --------------------------------------------------------------------


def test_root_inside_holds_its_capabilities_in_a_child_user_namespace(sb):
    assert sb.exec("readlink /proc/self/ns/user").stdout.strip() != os.readlink("/proc/self/ns/user")
    assert sb.exec("cat /proc/self/uid_map").stdout.split() == ["0", "0", "4294967295"]
    caps = int(sb.exec("grep CapEff /proc/self/status").stdout.split()[1], 16)
    assert caps == 0xa00425fb  # Docker's default set minus CAP_MKNOD
    assert sb.exec("grep -E 'NoNewPrivs|Seccomp:' /proc/self/status").stdout.split() == ["NoNewPrivs:", "1",
                                                                                        "Seccomp:", "2"]


RAW_SOCKET = ("import socket\ntry:\n socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); print('raw')\n"
              "except PermissionError: print('refused')")


def test_host_network_sandbox_cannot_open_raw_sockets_on_the_host(yard, host):
    """CAP_NET_RAW counts only in the sandbox's user namespace, not on the host's network."""
    with yard.sandbox(host, network="host") as sb:
        assert sb.exec(["/usr/bin/python3", "-c", RAW_SOCKET]).stdout == "refused\n"
    with yard.sandbox(host) as sb:  # in its own network namespace, which it owns, it may
        assert sb.exec(["/usr/bin/python3", "-c", RAW_SOCKET]).stdout == "raw\n"


def test_apt_and_chown_to_other_users_work_as_root(sb):
    r = sb.exec("touch /tmp/x && chown 42:65534 /tmp/x && stat -c %u:%g /tmp/x && su -s /bin/sh -c 'id -u' nobody")
    assert r.stdout.split() == ["42:65534", "65534"], r.stderr


def test_processes_outside_the_sandbox_cannot_be_named(sb):
    pids = sb.exec("ls /proc | grep -E '^[0-9]+$'").stdout.split()
    assert len(pids) < 10 and "1" in pids
    assert sb.exec(f"kill -0 {os.getpid()} 2>/dev/null || echo gone").stdout == "gone\n"


# ---- a terminal's input queue --------------------------------------------------------------------------------

TIOCSTI = ("import fcntl, termios\ntry:\n fcntl.ioctl(0, termios.TIOCSTI, b'x'); print('injected')\n"
           "except OSError as e: print('refused', e.errno)")


@pytest.mark.parametrize("security,expect", [("default", "refused 1"), ("relaxed", "injected")])
def test_attached_run_cannot_type_into_the_users_terminal(yard, security, expect):
    """`envyard run` keeps the caller's terminal; TIOCSTI would queue keystrokes for the user's shell."""
    master, slave = pty.openpty()
    tty = os.ttyname(slave)

    def own_the_terminal():  # a new session whose controlling terminal is the pty, as in a user's shell
        os.setsid()
        os.close(os.open(tty, os.O_RDWR))

    try:
        r = subprocess.run([sys.executable, "-m", "envyard.cli.main", "run", "--security", security, "host", "--",
                            "/usr/bin/python3", "-c", TIOCSTI], stdin=slave, capture_output=True, text=True,
                           env={**os.environ, "ENVYARD_HOME": str(yard.store.home)}, timeout=60,
                           preexec_fn=own_the_terminal)
    finally:
        os.close(master)
        os.close(slave)
    assert r.stdout.strip() == expect, r.stderr
