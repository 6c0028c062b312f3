"""A version for a git checkout that has no tag behind it.

Projects that take their version from git tags (setuptools-scm, hatch-vcs, versioneer, ...) call such a
checkout `0.1.devN` or `0+untagged`: a shallow clone of a commit between releases (what `envyard setup URL --rev
SHA` fetches), or a tree committed without its history. Whatever pins the project's own release then fails to
resolve or replaces the editable install with a release: dask's `dataframe` extra needs dask-expr, which pins
`dask==<release>`; a pytest plugin in pytest's own test requirements needs `pytest>=7`.

The fix: tag the checked-out commit as the release it follows — the newest final release of the project on the
package index uploaded no later than a day after the commit (a release is uploaded some hours after its tagged
commit). Only the setup's copy of the source is tagged; setup.sh repeats the step guarded, so a checkout that has
any reachable tag (a full clone) is left alone.
"""

from __future__ import annotations

import shlex
from datetime import datetime, timedelta

from packaging.utils import (InvalidSdistFilename, InvalidWheelFilename, canonicalize_name, parse_sdist_filename,
                             parse_wheel_filename)
from packaging.version import InvalidVersion, Version

from .evidence import Evidence, Fact
from .sources_fetch import ACCEPT, INDEX

GRACE = timedelta(days=1)  # a release's upload may come this long after its tagged commit


def resolve(ev: Evidence, *, index: str = INDEX, timeout: float = 20) -> None:
    """When `ev`'s source is an untagged checkout of a project versioned from git tags, add a `checkout_version`
    fact: {"version", "tag", "uploaded", "why"}, or {"version": None, "why"} when the release it follows could
    not be found (the checkout then keeps the version git gives it; the recipe warns)."""
    if not ev.of("git_untagged") or not ev.of("vcs_version"):
        return
    import httpx

    tool = ev.of("vcs_version")[0].value
    names = [n for n in ev.values("project_name") if isinstance(n, str)]
    dates = [d for d in ev.values("source_date") if isinstance(d, str)]
    unknown = f"the checkout has no tag, and {tool['tool']} takes the version from one: "
    value: dict
    if not names or not dates:
        value = {"version": None, "why": unknown + "the project's name or date is unknown, so the release it "
                                                   "follows is too; it keeps the version git gives it"}
    else:
        name, date = names[0], dates[0]
        try:
            found = release_before(name, _parse(date) + GRACE, index=index, timeout=timeout)
        except (httpx.HTTPError, ValueError, KeyError) as e:  # unreachable, or not the index's JSON
            found, value = None, {"version": None, "why": unknown + f"looking up {name}'s releases failed "
                                                                    f"({type(e).__name__}: {e})"}
        else:
            value = {"version": None, "why": unknown + f"no release of {name} on the index before {date[:10]}"}
        if found:
            version, uploaded = found
            value = {"version": version, "tag": tool["tag_prefix"] + version, "uploaded": uploaded,
                     "why": f"the checkout has no tag and {tool['tool']} takes the version from one: tagged as "
                            f"{name} {version}, its newest release uploaded by the commit's date ({date[:10]}) "
                            f"+ 1 day"}
    ev.facts.append(Fact("checkout_version", value, ".git", None, "index"))


def release_before(name: str, by: datetime, *, index: str = INDEX, timeout: float = 20) -> tuple[str, str] | None:
    """The newest final release of `name` on the index with a file uploaded no later than `by`, and that
    upload's time; None when there is none (or the project is not on the index)."""
    import httpx

    name = canonicalize_name(name)
    resp = httpx.get(f"{index}/{name}/", headers={"Accept": ACCEPT}, timeout=timeout, follow_redirects=True)
    if resp.status_code == 404:
        return None
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
