"""A version for a source that cannot name its own.

Projects that take their version from git tags (setuptools-scm, hatch-vcs, versioneer, ...) call a git checkout
with no tag behind it `0.1.devN` or `0+untagged` — a shallow clone of a commit between releases (what `envyard
setup URL --rev SHA` fetches), or a tree committed without its history — and setuptools-scm refuses a tree with
neither `.git` nor PKG-INFO (a forge's archive of a commit). Whatever pins the project's own release then fails
to resolve or backtracks: pytest needs `pluggy>=1.5`, so a pluggy set up from such a checkout gets a pytest from
2016 that cannot import on 3.11; dask's `dataframe` extra needs dask-expr, which pins `dask==<release>`.

The fix: the release the source follows — the newest final release of the project on the package index
uploaded no later than a day after the source's date (a release is uploaded some hours after its tagged
commit). A git checkout gets it as a lightweight tag, in a step setup.sh repeats guarded (a checkout with any
reachable tag, a full clone, is left alone); a tree without git metadata gets setuptools-scm's per-project
override variable, or pbr's (versioneer has none: it stays `0+unknown` there).
"""

from __future__ import annotations

import re
import shlex
from datetime import datetime, timedelta

from packaging.utils import (InvalidSdistFilename, InvalidWheelFilename, canonicalize_name, parse_sdist_filename,
                             parse_wheel_filename)
from packaging.version import InvalidVersion, Version

from .evidence import Evidence, Fact
from .sources_fetch import ACCEPT, INDEX

GRACE = timedelta(days=1)  # a release's upload may come this long after its tagged commit
SCM_BASED = ("setuptools-scm", "hatch-vcs", "flit-scm")  # the tools that read setuptools-scm's override


def resolve(ev: Evidence, *, index: str = INDEX, timeout: float = 20) -> None:
    """When `ev`'s project takes its version from git tags and its source cannot give one, add a
    `checkout_version` fact: {"version", "uploaded", "why"} plus "tag" (a git checkout without a reachable tag:
    setup.sh tags it) or "env" (a tree with neither `.git` nor PKG-INFO, e.g. a forge's archive of a commit:
    the tool's override variable); or {"version": None, "why"} when the release it follows could not be found
    (the source then keeps the version its tool gives it; the recipe warns)."""
    tool = next(iter(ev.values("vcs_version")), None)
    if tool is None:
        return
    untagged = bool(ev.of("git_untagged"))
    # no PKG-INFO and no .git here or above (one git could not read, e.g. another user's, does not count)
    bare = ([f.via for f in ev.of("source_date")] == ["mtime"]
            and not any((d / ".git").exists() for d in (ev.root, *ev.root.parents)))
    if not untagged and not (bare and override(tool["tool"], "x")):
        return
    import httpx

    names = [n for n in ev.values("project_name") if isinstance(n, str)]
    dates = [d for d in ev.values("source_date") if isinstance(d, str)]
    what = "the checkout has no tag" if untagged else "the tree has no git metadata"
    unknown = f"{what}, and {tool['tool']} takes the version from git: "
    found = None
    if not names or not dates:
        value = {"version": None, "why": unknown + "the project's name or date is unknown, so the release it "
                                                   "follows is too"}
    else:
        name, date = names[0], dates[0]
        try:
            found = release_before(name, _parse(date) + GRACE, index=index, timeout=timeout)
        except LookupError:
            return  # not published: nothing can pin its releases, and the version git gives it is as good as any
        except (httpx.HTTPError, ValueError, KeyError) as e:  # unreachable, or not the index's JSON
            value = {"version": None, "why": unknown + f"looking up {name}'s releases failed "
                                                       f"({type(e).__name__}: {e})"}
        else:
            value = {"version": None, "why": unknown + f"no release of {name} on the index before {date[:10]}"}
    if found:
        version, uploaded = found
        how = f"tagged as {name} {version}" if untagged else f"{override(tool['tool'], name)}={version}"
        value = {"version": version, "uploaded": uploaded,
                 "why": f"{what} and {tool['tool']} takes the version from git: {how}, the newest release on the "
                        f"index by the source's date ({date[:10]}) + 1 day"}
        if untagged:
            value["tag"] = tool["tag_prefix"] + version
        else:
            value["env"] = {override(tool["tool"], name): version}
    ev.facts.append(Fact("checkout_version", value, ".git" if untagged else ".", None, "index"))


def override(tool: str, name: str) -> str | None:
    """The variable that sets `tool`'s version of distribution `name` without git, if it has one: setuptools-scm's
    per-project override (so a dependency built from source keeps its own), which hatch-vcs and flit-scm read
    too; pbr's PBR_VERSION."""
    if tool in SCM_BASED:
        return "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_" + re.sub(r"[^A-Z0-9]+", "_", canonicalize_name(name).upper())
    return "PBR_VERSION" if tool == "pbr" else None


def release_before(name: str, by: datetime, *, index: str = INDEX, timeout: float = 20) -> tuple[str, str] | None:
    """The newest final release of `name` on the index with a file uploaded no later than `by`, and that
    upload's time; None when there is none. Raises LookupError when the index has no project of that name."""
    import httpx

    name = canonicalize_name(name)
    resp = httpx.get(f"{index}/{name}/", headers={"Accept": ACCEPT}, timeout=timeout, follow_redirects=True)
    if resp.status_code == 404:
        raise LookupError(f"no project {name} on {index}")
    resp.raise_for_status()
    best: tuple[Version, str] | None = None
    for f in resp.json().get("files", []):
        v, uploaded = _file_version(f["filename"], name), f.get("upload-time")
        if v is None or not uploaded or f.get("yanked"):
            continue
        if v.is_prerelease or v.is_devrelease or v.local or _parse(uploaded) > by:
            continue
        if best is None or v > best[0]:
            best = (v, uploaded)
    return (str(best[0]), best[1]) if best else None


def _file_version(filename: str, name: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            dist, version, _, _ = parse_wheel_filename(filename)
        else:
            dist, version = parse_sdist_filename(filename)
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return version if dist == name else None


def tag_command(tag: str) -> str:
    """A shell command for setup.sh: tag HEAD as `tag` when the project root is in a git checkout that has no
    reachable tag; a no-op anywhere else (a full clone, a tree without .git)."""
    return (f"if git rev-parse --git-dir >/dev/null 2>&1 && ! git describe --tags >/dev/null 2>&1; "
            f"then git tag {shlex.quote(tag)} || true; fi")


def _parse(date: str) -> datetime:
    return datetime.fromisoformat(date.replace("Z", "+00:00"))
