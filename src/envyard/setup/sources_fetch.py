"""Fetching a project to set up: `pypi:NAME[==VERSION]` as its released sdist, without building anything.

The index's PEP 691 JSON page lists a release's files with their hashes and upload times; the sdist is
downloaded, its sha256 checked, and unpacked with tarfile's `data` filter (no links or paths out of the
target). The upload time is the release date, which a later time cut-off can use.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import BadInput, EnvyardError

INDEX = "https://pypi.org/simple"
ACCEPT = "application/vnd.pypi.simple.v1+json"
SPEC_RE = re.compile(r"^pypi:([A-Za-z0-9][A-Za-z0-9._-]*)(?:==([A-Za-z0-9.+!_-]+))?$")


class FetchError(EnvyardError):
    """The index could not be reached or gave something unusable (not the project's fault)."""

    exit_code = 5


@dataclass
class Fetched:
    root: Path  # the unpacked project
    name: str
    version: str
    filename: str
    upload_time: str | None
    tmp: Path  # delete when done

    def cleanup(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def fetch_pypi(spec: str, *, index: str = INDEX, timeout: float = 60) -> Fetched:
    import httpx

    m = SPEC_RE.match(spec)
    if not m:
        raise BadInput(f"{spec!r} is not a PyPI source", fix="write pypi:NAME or pypi:NAME==VERSION")
    name, version = canonicalize_name(m.group(1)), m.group(2)
    url = f"{index}/{name}/"
    try:
        resp = httpx.get(url, headers={"Accept": ACCEPT}, timeout=timeout, follow_redirects=True)
    except httpx.HTTPError as e:
        raise FetchError(f"cannot reach the package index at {url}: {e}", fix="check the network; try again") from e
    if resp.status_code == 404:
        raise BadInput(f"no project named {m.group(1)!r} on the package index", fix="check the name on pypi.org")
    if resp.status_code != 200:
        raise FetchError(f"the package index answered {resp.status_code} for {url}", fix="try again later")
    files = resp.json().get("files", [])
    sdists = [f for f in files if f["filename"].endswith((".tar.gz", ".zip")) and not f.get("yanked")]
    by_version: dict[str, dict] = {}
    for f in sdists:
        v = _version_of(f["filename"], name)
        if v:
            by_version.setdefault(v, f)
    if version is None:
        if not by_version:
            raise BadInput(f"{name} has no source distribution on the index", fix="set up a checkout of it instead")
        version = max(by_version, key=_sort_key)
    if version not in by_version:
        known = ", ".join(sorted(by_version, key=_sort_key)[-5:])
        raise BadInput(f"{name}=={version} has no source distribution on the index",
                       fix=f"recent versions with an sdist: {known}" if known else "set up a checkout instead")
    info = by_version[version]
    tmp = Path(tempfile.mkdtemp(prefix="envyard-fetch-"))
    try:
        archive = tmp / info["filename"]
        try:
            with httpx.stream("GET", info["url"], timeout=timeout, follow_redirects=True) as r:
                r.raise_for_status()
                with archive.open("wb") as out:
                    for chunk in r.iter_bytes():
                        out.write(chunk)
        except httpx.HTTPError as e:
            raise FetchError(f"download of {info['filename']} failed: {e}", fix="try again") from e
        expected = info.get("hashes", {}).get("sha256")
        if expected and hashlib.sha256(archive.read_bytes()).hexdigest() != expected:
            raise FetchError(f"{info['filename']}: sha256 does not match the index", fix="try again")
        root = _unpack(archive, tmp / "src")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Fetched(root, name, version, info["filename"], info.get("upload-time"), tmp)


def _version_of(filename: str, name: str) -> str | None:
    stem = re.sub(r"\.(tar\.gz|zip)$", "", filename)
    prefix = re.match(r"^(.*?)-(\d[^-]*)$", stem)
    if not prefix or canonicalize_name(prefix.group(1)) != name:
        return None
    try:
        return str(Version(prefix.group(2)))
    except InvalidVersion:
        return None


def _sort_key(v: str):
    ver = Version(v)
    return (not ver.is_prerelease, ver)


def _unpack(archive: Path, dest: Path) -> Path:
    dest.mkdir()
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            for member in z.namelist():
                if member.startswith("/") or ".." in Path(member).parts:
                    raise BadInput(f"{archive.name}: unsafe path {member!r} in the archive")
            z.extractall(dest)
    else:
        with tarfile.open(archive) as t:
            t.extractall(dest, filter="data")
    entries = list(dest.iterdir())
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else dest
