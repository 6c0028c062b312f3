"""What the `host` image hides of the machine it shows.

The `host` image is the machine's own root, read-only. Read-only is not private: without a mask, any
sandbox over it could read password hashes, SSH host keys, users' home directories (cloud credentials,
tokens in ~/.npmrc), container engines' state, and every envyard store on the machine — their databases,
layers and the upper dirs of other live sandboxes. The mask is one small directory laid over the host's
root as an overlay layer:

- directories become empty (opaque): /root, /home, /tmp, /var/tmp, /run, TLS private keys, container
  engines' and Kubernetes' state, and every envyard store known on this machine;
- /etc/shadow and /etc/gshadow keep their entries with every password hash replaced by `*` (so tools that
  read the user database still work);
- SSH host private keys are deleted (overlay whiteouts).

Stores are found through a machine-wide registry that every store adds itself to when opened as root
(store/registry.py). The mask depends on the machine (which stores exist, the shadow files), so it is not a
sealed layer but an external one, `host-mask`, whose directory is rebuilt whenever that state changes; every
image over `host` picks up the current mask at its next sandbox start. Masks are kept per content digest,
so a sandbox started over an older mask keeps it intact.

To give one sandbox a hidden path on purpose, bind it: `yard.sandbox("host", ro_binds={path: path})`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..overlay import make_whiteout, mark_opaque
from ..store.registry import known_stores

HIDDEN_DIRS = ("root", "home", "tmp", "var/tmp", "run", "etc/ssl/private", "var/lib/docker", "var/lib/containerd",
               "var/lib/containers", "etc/docker", "etc/kubernetes", "var/lib/kubelet", "var/lib/envyard")
SCRUBBED = ("etc/shadow", "etc/shadow-", "etc/gshadow", "etc/gshadow-")
REMOVED_GLOBS = ("etc/ssh/ssh_host_*_key",)


def _under_hidden_dir(rel: str) -> bool:
    return any(rel == d or rel.startswith(d + "/") for d in HIDDEN_DIRS)


def _scrub_user_database(text: str) -> str:
    """Replace the password field (the second) of each shadow/gshadow entry with `*`, keeping `!` locks."""
    lines = []
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) > 1 and fields[1] not in ("", "*", "!", "!*"):
            fields[1] = "!*" if fields[1].startswith("!") else "*"
        lines.append(":".join(fields))
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def mask_spec(own_store: Path) -> dict:
    """What to hide on this machine now, as plain data (its digest names the mask directory)."""
    stores = {str(own_store), *known_stores()}
    hidden = [d for d in HIDDEN_DIRS if os.path.isdir("/" + d) and not os.path.islink("/" + d)]
    for home in sorted(stores):
        rel = home.strip("/")
        if rel and not _under_hidden_dir(rel) and os.path.isdir(home) and not os.path.islink(home):
            hidden.append(rel)
    scrubbed = {}
    for rel in SCRUBBED:
        try:
            scrubbed[rel] = _scrub_user_database(Path("/", rel).read_text(errors="replace"))
        except OSError:
            continue
    import glob  # here: a start that reuses the recorded mask (most) never globs

    removed = sorted(os.path.relpath(p, "/") for g in REMOVED_GLOBS for p in glob.glob("/" + g))
    return {"hidden": sorted(hidden), "scrubbed": scrubbed, "removed": removed}


def spec_digest(spec: dict) -> str:
    import hashlib  # here: its import (OpenSSL) is a cost every `envyard run` would pay

    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def _make_parents(root: Path, rel: str) -> None:
    """Create rel's parent directories in the mask with the host's owner and mode: in an overlay the topmost
    layer that has a directory decides its attributes."""
    parts = Path(rel).parts[:-1]
    for i in range(1, len(parts) + 1):
        sub = Path(*parts[:i])
        target = root / sub
        if not target.exists():
            target.mkdir()
            _copy_owner_mode(Path("/", sub), target)


def _copy_owner_mode(host: Path, target: Path) -> None:
    try:
        st = host.stat()
    except OSError:
        return
    os.chown(target, st.st_uid, st.st_gid)
    os.chmod(target, st.st_mode & 0o7777)


def build_mask(dest: Path, spec: dict) -> None:
    """Write the mask directory for `spec` at `dest` (which must not exist yet)."""
    dest.mkdir(mode=0o755)
    for rel in spec["hidden"]:
        _make_parents(dest, rel)
        target = dest / rel
        target.mkdir(exist_ok=True)
        _copy_owner_mode(Path("/", rel), target)
        mark_opaque(target)
    for rel, text in spec["scrubbed"].items():
        _make_parents(dest, rel)
        (dest / rel).write_text(text)
        _copy_owner_mode(Path("/", rel), dest / rel)
    for rel in spec["removed"]:
        _make_parents(dest, rel)
        make_whiteout(dest / rel)
    for tmp in ("tmp", "var/tmp"):
        if (dest / tmp).is_dir():
            os.chmod(dest / tmp, 0o1777)
