"""The sandbox's resident shell ("holder"), its pre-started runners, and the small scripts they run.

Every sandbox runs one POSIX shell as its main process. Commands are never injected from outside: each runs
as a descendant of the holder, so it inherits the sandbox's namespaces, cgroups, dropped capabilities and
rlimits. Only /bin/sh is needed in the image.

To keep the exec round trip short, the holder always keeps one *runner* waiting: a shell already started in
a session of its own (setsid), blocked on reading its FIFO `spare.K`. The owner writes the request to that
FIFO itself when the runner is there (one process fewer on the round trip) and tells the holder `next K+1`;
the holder then starts runner K+1 in the background, off the caller's critical path. When runner K is not
there (still starting, or gone), the owner sends `run ID IN K` instead and the holder hands the request over,
starting the runner first if it is missing. The runner reports its pid (its session id, so a timeout can kill exactly its process tree),
runs the script in a subshell with its stdio on FIFOs, and reports the exit status.

The holder exits when its stdin reaches EOF — the owning process closed the sandbox or died — after killing
every other process in the sandbox, so the whole pid namespace goes down.

All files of the protocol live in the sandbox's ipc directory, bind-mounted read-only at /.envyard:
    ID.sh       the script to run          ID.in    stdin (when given)
    ID.out      FIFO for stdout            ID.err   FIFO for stderr
    ID.rc       FIFO for status lines: "pid N" when the command starts, "exit N" when it ends
    spare.K     FIFO on which runner K waits for its request (made by the owner before it is needed)
FIFOs can be opened on a read-only mount, so the sandbox can neither edit nor replace them, and output
never lands in the sandbox's filesystem.
"""

from __future__ import annotations

import re
import shlex

from ..errors import BadInput

IPC_MOUNT = "/.envyard"

RUNNER_SCRIPT = r"""
D=/.envyard
read -r id in <"$D/spare.$1" || exit 0
[ -n "$id" ] || exit 0
if [ "$in" = 1 ]; then i="$D/$id.in"; else i=/dev/null; fi
exec 5>"$D/$id.rc"
printf 'pid %s
' "$$" >&5
( . "$D/$id.sh" ) <"$i" >"$D/$id.out" 2>"$D/$id.err" 5>&-
echo "exit $?" >&5
"""

HOLDER_SCRIPT = r"""
D=/.envyard
if command -v setsid >/dev/null 2>&1; then S=setsid; else S=; fi
# Runners start through envyard's static setsid (runtime/setsid.py) when there is one for this CPU: the image's
# is dynamically linked, and loading it was the largest cost of a one-shot exec.
if [ -x "$D/setsid" ]; then RS="$D/setsid"; else RS=$S; fi
if command -v bash >/dev/null 2>&1; then B=bash; else B=/bin/sh; fi
R=__RUNNER__
# spawn K: start runner K in the background; rp is its pid, or empty when the fork failed (pids limit).
spawn() { before=$!; $RS /bin/sh -c "$R" runner "$1" </dev/null >/dev/null 2>&1 & if [ "$!" != "$before" ]; then rp=$!; else rp=; fi; }
spawn 1
# An owner that died before reading this leaves no reader: take the namespace down rather than die of
# SIGPIPE and leave runner 1 (and so bwrap's pid-1) waiting forever.
trap 'kill -9 -1; exit 1' PIPE
echo ready
trap - PIPE
while read -r op id in k; do
  case "$op" in
    run)
      # The waiting runner may be missing (its fork failed, or something killed it): start it now. If that
      # fails too, answer at once with status 254 rather than block on a FIFO nobody will open.
      if [ -z "$rp" ] || ! kill -0 "$rp" 2>/dev/null; then spawn "$k"; fi
      if [ -n "$rp" ]; then echo "$id $in" >"$D/spare.$k"; else echo "exit 254" >"$D/$id.rc"; fi
      spawn $((k + 1))
      ;;
    next)
      # The owner handed runner `id` its request itself: start the next one now.
      spawn "$id"
      ;;
    shell)
      # Background jobs start with SIGINT ignored, which a shell cannot undo itself; env resets it so that
      # interrupt() reaches session commands. Probed on first use to keep sandbox start-up short.
      if [ -z "$E" ]; then if env --default-signal=INT true 2>/dev/null; then E="env --default-signal=INT,QUIT"; else E=" "; fi; fi
      # `in` names the session's user ("-": root, the holder's own).
      if [ "$in" = - ]; then A=; else A="/bin/sh $D/as $in"; fi
      ( exec 5>"$D/$id.rc"; $S $E $A $B "$D/$id.loop" </dev/null >/dev/null 2>&1 3>&5 5>&-; echo "exit $?" >&5 ) &
      ;;
  esac
done
# EOF: the owner closed the sandbox or died. Take every process of the namespace down with us, or bwrap's
# pid-1 would wait for stray background jobs.
kill -9 -1 2>/dev/null
"""

HOLDER_SCRIPT = HOLDER_SCRIPT.replace("__RUNNER__", shlex.quote(RUNNER_SCRIPT))

# `/bin/sh /.envyard/as USER[:GROUP] CMD [ARGS...]`: run CMD as that user (a name or a uid) with its groups and
# HOME, the way a container runtime applies an image's USER: a numeric user without a passwd entry gets group 0,
# an explicit group replaces the user's groups. The switch is made by the image's own tools (util-linux's setpriv,
# which keeps the environment, else runuser or su); names are looked up in the image's /etc/passwd and /etc/group.
AS_USER_SCRIPT = r"""
spec=$1; shift
u=${spec%%:*}; grp=
case "$spec" in *:*) grp=${spec#*:} ;; esac
name=; uid=; gid=; home=/
while IFS=: read -r n _ i g _ h _; do
  if [ "$n" = "$u" ] || [ "$i" = "$u" ]; then name=$n; uid=$i; gid=$g; home=$h; break; fi
done < /etc/passwd
if [ -z "$uid" ]; then
  case "$u" in
    ''|*[!0-9]*) echo "envyard: there is no user '$u' in the image's /etc/passwd" >&2; exit 126 ;;
  esac
  uid=$u; gid=0
fi
if [ -n "$grp" ]; then
  case "$grp" in
    *[!0-9]*) g=; while IFS=: read -r n _ i _; do [ "$n" = "$grp" ] && { g=$i; break; }; done < /etc/group
              [ -n "$g" ] || { echo "envyard: there is no group '$grp' in the image's /etc/group" >&2; exit 126; }
              gid=$g ;;
    *) gid=$grp ;;
  esac
fi
export HOME="$home" USER="${name:-$uid}" LOGNAME="${name:-$uid}"
if command -v setpriv >/dev/null 2>&1; then
  if [ -z "$name" ] || [ -n "$grp" ]; then exec setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$@"; fi
  exec setpriv --reuid="$uid" --regid="$gid" --init-groups -- "$@"
elif [ -n "$name" ] && [ -z "$grp" ] && command -v runuser >/dev/null 2>&1; then exec runuser -m -u "$name" -- "$@"
elif [ -n "$name" ] && [ -z "$grp" ] && command -v su >/dev/null 2>&1; then
  exec su -m -s /bin/sh "$name" -c 'exec "$0" "$@"' "$@"
fi
echo "envyard: cannot run as '$spec': the image has none of setpriv, runuser and su" >&2
exit 126
"""
AS_USER = f"{IPC_MOUNT}/as"
ROOT_USERS = (None, "", "root", "0", "0:0", "root:root")

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_env(env: dict[str, str] | None) -> dict[str, str]:
    env = dict(env or {})
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_NAME.match(key):
            raise BadInput(f"invalid environment variable name {key!r}", fix="use letters, digits and '_'")
        if not isinstance(value, str) or "\0" in value:
            raise BadInput(f"environment variable {key} must be a string without NUL bytes",
                           fix=f"give {key} a str value (convert numbers with str())")
    return env


def command_script(cmd: str | list[str], cwd: str, env: dict[str, str], user: str | None = None) -> str:
    """A script that enters `cwd`, exports `env` and runs `cmd` (sourced by a runner in a subshell), as `user`
    when one other than root is given.

    A string runs as the body of a shell (as `sh -c` would); an argv list is exec'd directly, so a missing
    program yields the shell's exit code 127.
    """
    lines = [f"cd -- {shlex.quote(cwd)} || exit 126"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    if isinstance(cmd, list) and not cmd:
        raise BadInput("empty command", fix="give a shell string or a non-empty argv list")
    if user not in ROOT_USERS:
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else cmd
        lines.append(f"exec /bin/sh {AS_USER} {shlex.quote(user)} {shlex.join(argv)}")
    elif isinstance(cmd, str):
        lines.append(cmd)
    else:
        lines.append("exec " + shlex.join(cmd))
    return "\n".join(lines) + "\n"


def session_loop_script(session_id: str, workdir: str) -> str:
    """The loop a persistent shell runs: source each command file in the current shell, report its status.

    Sourcing keeps `cd`, variables and functions between commands. The status goes to fd 3, never to the
    command's output, so no sentinel text can leak into what the caller sees.
    """
    d = f"{IPC_MOUNT}/{session_id}"
    return (
        'printf "pid %s\\n" "$$" >&3\n'
        f"cd -- {shlex.quote(workdir)} 2>/dev/null\n"
        f'exec 4<"{d}.cmd"\n'
        "while IFS= read -r __envyard_n <&4; do\n"
        f'  . "{d}-$__envyard_n.sh" </dev/null >"{d}-$__envyard_n.out" 2>"{d}-$__envyard_n.err" 3>&- 4<&-\n'
        '  printf "done %s %s\\n" "$__envyard_n" "$?" >&3\n'
        "done\n"
    )
