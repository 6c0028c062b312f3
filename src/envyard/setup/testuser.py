"""Tests that must not run as root: suites that start their own database server (testing.postgresql,
asyncpg's cluster helper) fail, because `initdb` and `postgres` refuse to run as root, and so does `mysqld`.

Setup runs everything as root. When a test run's output shows such a refusal, the search installs a small
wrapper (`as-test-user`) with a recipe step, hands the repository's copy to `nobody`, and from then on runs
the tests through the wrapper: the install stays root's, the tests run as an ordinary user. The step and the
wrapped test command are part of the recipe, so setup.sh, test.sh, the Dockerfile and the replay do the same.
"""

from __future__ import annotations

import re
import shlex

from .plan import Step

WRAPPER = "/opt/envyard/bin/as-test-user"
USER, GROUP, UID = "nobody", "nogroup", 65534

# What a server says when started as root (PostgreSQL 9-17, MariaDB/MySQL).
_REFUSES_ROOT = re.compile(
    r"initdb: (?:error: )?cannot be run as root"
    r"|\"root\" execution of the PostgreSQL server is not permitted"
    r"|Please consult the Knowledge Base to find out how to run mysqld as root")

# The wrapper: ordinary user, home in /tmp, the rest of the environment kept (PATH, the recipe's variables).
_SCRIPT = f"""#!/bin/sh
# written by envyard setup: runs the tests as {USER}, since servers they start (initdb, postgres, mysqld) refuse root
exec setpriv --reuid={UID} --regid={UID} --clear-groups env HOME=/tmp USER={USER} LOGNAME={USER} "$@"
"""


def refusal(text: str) -> str | None:
    """The line of a test run's output where a server refused to run as root, if any."""
    m = _REFUSES_ROOT.search(text)
    if m is None:
        return None
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    return text[start:end if end >= 0 else None].strip()[:200]


# An interpreter installed on the host (pyenv's under /root/.pyenv) sits below directories only root may enter:
# the test user gets the right to pass through (o+x, not to list) each directory above the venv's interpreter.
_TRAVERSE = ('p=$(readlink -f /opt/venv/bin/python); while [ "$p" != / ]; do p=$(dirname "$p"); '
             'chmod o+x "$p"; done')


def step(repository: str) -> Step:
    """Install the wrapper, let the test user reach the interpreter, and give the repository's copy
    (`repository`, relative to the project's directory: "." or, in a monorepo, "../..") to the test user, who
    may need to write in it."""
    install = f"mkdir -p {shlex.quote(WRAPPER.rsplit('/', 1)[0])} && printf %s {shlex.quote(_SCRIPT)} > {WRAPPER}"
    return Step("repair", f"{install} && chmod 755 {WRAPPER} && {_TRAVERSE} && "
                          f"chown -R {USER}:{GROUP} {shlex.quote(repository)}",
                f"the tests start servers that refuse to run as root: they run as {USER}")


def wrap(command: str | None) -> str | None:
    """A runner's command (optionally `cd DIR && ...`) run through the wrapper."""
    if not command or WRAPPER in command:
        return command
    head, sep, last = command.rpartition(" && ")
    return f"{head}{sep}{WRAPPER} {last}"
