"""Fetching a project to set up, without building or running anything from it.

Three kinds of source besides a plain local directory (which is used as is); `fetch` picks one:

* `pypi:NAME[==VERSION]` (`fetch_pypi`): the release's sdist. The index's PEP 691 JSON page lists a release's
  files with their hashes and upload times; the sdist is downloaded, its sha256 checked, and unpacked with
  tarfile's `data` filter (no links or paths out of the target). The upload time is the release date.
* a source archive (`fetch_archive`): a local path or an http(s) URL ending in .tar.gz/.tgz/.tar.bz2/.tbz2/
  .tar.xz/.txz/.tar/.zip, unpacked the same safe way (tar: the `data` filter, which also refuses absolute or
  escaping links; zip: any member whose path leaves the target is refused; zipfile makes no links).
* a git repository (`fetch_git`): cloned with the `git` command, shallowly where the rev allows, never
  prompting for credentials, with an overall timeout that kills git and its helpers.

Every result is a `Fetched` whose `tmp` (an `envyard-fetch-*` temporary directory) the caller removes with
`cleanup()`; on any failure (KeyboardInterrupt included) the temporary directory is removed before raising.
`upload_time` is the source's date as ISO 8601 UTC (`2024-01-31T12:00:00Z`, PyPI's own format may carry
microseconds), meant as the dependency time cut-off: the sdist's upload time, the checked-out commit's
committer date, or for an archive the newest modification time among its members (see `fetch_archive`).
"""

from __future__ import annotations

import email.parser
import errno
import hashlib
import lzma
import os
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import BadInput, EnvyardError

INDEX = "https://pypi.org/simple"
ACCEPT = "application/vnd.pypi.simple.v1+json"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar", ".zip")
_ARCHIVE_FIX = "check that the file is a complete .tar.gz, .tar.bz2, .tar.xz or .zip archive"
SPEC_RE = re.compile(r"^pypi:([A-Za-z0-9][A-Za-z0-9._-]*)(?:==([A-Za-z0-9.+!_-]+))?$")


class FetchError(EnvyardError):
    """A server (package index, web server, git remote) could not be reached, timed out or gave something
    unusable: not the project's nor the request's fault; trying again later may work."""

    exit_code = 5


@dataclass
class Fetched:
    root: Path  # the unpacked project (for git: the working tree, `.git` included)
    name: str
    version: str  # "" when an archive's name carries none
    filename: str  # the sdist or archive's file name; for git, the URL (credentials removed)
    upload_time: str | None  # the source's date, ISO 8601 UTC; None when unknown
    tmp: Path  # delete when done
    commit: str | None = None  # git: the checked-out commit's full sha
    kind: str = "pypi"  # "pypi" | "archive" | "git"
    notes: list[str] = field(default_factory=list)  # what the fetch could not do but went on without (submodules)

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
    """Unpack `archive` into the new directory `dest` and return the project root: the single top directory when
    there is one, else `dest`. Raises BadInput for a corrupt archive or a member that would land outside `dest`
    (tar: the `data` filter refuses absolute paths, `..`, absolute links and links out of the target, device
    files; zip: absolute or `..` paths are refused, zipfile creates no links, executable bits are kept)."""
    dest.mkdir()
    try:
        if archive.name.lower().endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                top = dest.resolve()
                for member in z.namelist():
                    target = (dest / member).resolve()
                    if (member.startswith(("/", "\\")) or ".." in re.split(r"[/\\]", member)
                            or not (target == top or target.is_relative_to(top))):
                        raise BadInput(f"{archive.name}: unsafe path {member!r} in the archive (it leaves the "
                                       "target directory)", fix="use an archive from a trusted source")
                z.extractall(dest)
                for info in z.infolist():  # zipfile drops modes: keep the executable bits (configure, scripts)
                    if not info.is_dir() and (info.external_attr >> 16) & 0o111:
                        target = dest / info.filename
                        if target.is_file() and not target.is_symlink():
                            target.chmod(target.stat().st_mode | 0o111)
        else:
            with tarfile.open(archive) as t:
                t.extractall(dest, filter="data")
    except tarfile.FilterError as e:
        raise BadInput(f"{archive.name}: unsafe member in the archive: {e}",
                       fix="use an archive from a trusted source") from e
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise  # the machine's problem, not the archive's
        raise BadInput(f"{archive.name}: not a readable archive: {e}", fix=_ARCHIVE_FIX) from e
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError, ValueError,
            NotImplementedError) as e:
        raise BadInput(f"{archive.name}: not a readable archive: {e}", fix=_ARCHIVE_FIX) from e
    entries = list(dest.iterdir())
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else dest


# ------------------------------------------------------------------------------------------------- dispatch

_KINDS = ("a local directory, pypi:NAME[==VERSION], a source archive (path or http(s) URL ending in "
          ".tar.gz, .tgz, .tar.bz2, .tar.xz or .zip) or a git repository (git+https://…, https://….git, "
          "git@host:path, git://…, ssh://…, file://…, or a local repository with --rev)")
_FORGES = ("github.com", "gitlab.com", "bitbucket.org", "codeberg.org")
_SCP_RE = re.compile(r"^[A-Za-z0-9._~+-]+@[A-Za-z0-9.-]+:(?!//)")


def fetch(source: str, rev: str | None = None, *, timeout: float | None = None) -> Fetched | None:
    """Fetch `source` into a temporary directory, or return None for a plain local directory (use it as is).

    Accepted kinds, tried in this order:

    * `pypi:NAME[==VERSION]` → `fetch_pypi` (the release's sdist).
    * git: `git+URL` (pip's `git+https://host/repo.git@REV` form too: the `@REV` is taken as the rev),
      `git://…`, `ssh://…`, scp-style `user@host:path`, `https://….git`, `https://HOST/OWNER/REPO` on
      github.com, gitlab.com, bitbucket.org or codeberg.org, any other http(s) URL that is not an archive when
      `rev` is given, `file://…` (not an archive), a bare repository directory, and a local directory holding
      `.git` when `rev` is given → `fetch_git(url, rev)`.
    * archives: a local file or http(s)/file:// URL ending in .tar.gz, .tgz, .tar.bz2, .tbz2, .tar.xz, .txz,
      .tar or .zip → `fetch_archive`.
    * a local directory (a checkout with `.git` and no `rev` included: its working tree as it is, uncommitted
      changes too) → None.

    Raises BadInput (exit 2) for anything else, and for `rev` given with a non-git source (or a rev that
    contradicts the one in a pip-style URL); plus whatever the chosen fetcher raises (BadInput, FetchError).
    `timeout` (seconds) goes to the fetcher; None keeps each one's default (git: 300 s overall; http: 60 s
    per network operation)."""
    source = (source or "").strip()
    if not source:
        raise BadInput("empty source", fix=f"give {_KINDS}")
    kw = {} if timeout is None else {"timeout": timeout}
    shown = _redact(source)
    if rev is not None and (not rev.strip()):
        raise BadInput("empty --rev", fix="give a commit, branch or tag, or leave --rev out")

    def no_rev(kind: str) -> None:
        if rev is not None:
            raise BadInput(f"--rev {rev} given with {kind} {shown!r}, which is not a git repository",
                           fix="leave --rev out, or give a git URL or repository")

    if source.startswith("pypi:"):
        no_rev("the PyPI source")
        return fetch_pypi(source, **kw)
    low = source.lower()
    if low.startswith("git+"):
        url, url_rev = _split_pip_rev(source[4:])
        if url_rev and rev and url_rev != rev:
            raise BadInput(f"{shown!r} names rev {url_rev!r} but --rev is {rev!r}", fix="give the rev once")
        return fetch_git(url, rev or url_rev, **kw)
    if low.startswith(("git://", "ssh://")) or _SCP_RE.match(source):
        return fetch_git(source, rev, **kw)
    if low.startswith(("http://", "https://")):
        parts = urlsplit(source)
        path = unquote(parts.path)
        if _is_archive_name(path):
            no_rev("the archive")
            return fetch_archive(source, **kw)
        segments = [s for s in path.split("/") if s]
        forge = (parts.hostname or "").lower() in _FORGES and len(segments) == 2
        if path.rstrip("/").endswith(".git") or forge or rev is not None:
            return fetch_git(source, rev, **kw)
        raise BadInput(f"{shown}: neither an archive (.tar.gz, .tgz, .tar.bz2, .tar.xz, .zip) nor a git URL",
                       fix="for a git repository write git+URL (or give --rev); for an archive, its download URL")
    if low.startswith("file://"):
        if _is_archive_name(unquote(urlsplit(source).path)):
            no_rev("the archive")
            return fetch_archive(source, **kw)
        return fetch_git(source, rev, **kw)
    if "://" in source:
        raise BadInput(f"{shown}: unsupported URL scheme", fix=f"give {_KINDS}")
    path = Path(source).expanduser()
    if path.is_dir():
        if _is_bare_repo(path) or (rev is not None and (path / ".git").exists()):
            return fetch_git(source, rev, **kw)
        no_rev("the directory")
        return None
    if _is_archive_name(path.name) or path.is_file():
        no_rev("the archive")
        return fetch_archive(source, **kw)
    raise BadInput(f"{source}: no such file or directory", fix=f"give {_KINDS}")


def _split_pip_rev(url: str) -> tuple[str, str | None]:
    """pip's `URL@REV#egg=…` → (URL, REV). The `@` must come after the host, so `ssh://git@host/…` keeps its
    user."""
    url = url.split("#", 1)[0]
    if _SCP_RE.match(url):
        host, _, path = url.partition(":")
        if "@" in path:
            path, rev = path.rsplit("@", 1)
            return f"{host}:{path}", rev or None
        return url, None
    parts = urlsplit(url)
    if parts.scheme and "@" in parts.path:
        path, rev = parts.path.rsplit("@", 1)
        return urlunsplit(parts._replace(path=path)), rev or None
    return url, None


def _is_archive_name(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def _archive_stem(name: str) -> str:
    low = name.lower()
    for suffix in ARCHIVE_SUFFIXES:
        if low.endswith(suffix):
            return name[: -len(suffix)]
    return name


# -------------------------------------------------------------------------------------------------- archives

def fetch_archive(source: str, *, timeout: float = 60, max_bytes: int = 2 << 30) -> Fetched:
    """A source archive from a local path, a `file://` URL or an http(s) URL (redirects followed; at most
    `max_bytes` downloaded), unpacked safely by `_unpack` into an `envyard-fetch-*` temporary directory.

    name/version: PKG-INFO's Name/Version when the archive is an sdist, else `NAME-VERSION` parsed from the file
    name, else from the single top directory (GitHub's `…/archive/refs/tags/v1.0.tar.gz` unpacks to
    `proj-1.0/`), else the top directory's name or the file's stem with version "".
    upload_time: the newest modification time among the archive's files and directories (ISO 8601 UTC), which
    approximates the release date for local files and URLs alike (`git archive` stamps the commit date,
    sdists their build time). Implausible stamps are ignored: before 1990 (0, zip's 1980 epoch), more than a
    day in the future, and hatchling's fixed reproducible-build stamp 2020-02-02. Zip members without the UTC
    extended-timestamp field are read as UTC (zip stores local time). When nothing plausible remains, a URL's
    HTTP Last-Modified header is used, else None.

    Raises BadInput for a missing or unreadable file, a non-archive name, a corrupt or unsafe archive, or an
    HTTP 404/410; FetchError for network failures, other HTTP errors and timeouts."""
    is_url = bool(re.match(r"^https?://", source, re.I))
    last_modified = None
    local: Path | None = None
    if not is_url:
        if source.lower().startswith("file://"):
            local = Path(unquote(urlsplit(source).path))
        else:
            local = Path(source).expanduser()
        if not local.exists():
            raise BadInput(f"{source}: no such file", fix="check the path of the archive")
        if not local.is_file():
            raise BadInput(f"{source}: not a file", fix="give an archive file, or the directory itself as the source")
        if not _is_archive_name(local.name):
            raise BadInput(f"{source}: not an archive name", fix=_ARCHIVE_FIX.replace("check that the file is", "give"))
    tmp = Path(tempfile.mkdtemp(prefix="envyard-fetch-"))
    try:
        if is_url:
            archive, last_modified = _download(source, tmp, timeout=timeout, max_bytes=max_bytes)
        else:
            archive = local
        root = _unpack(archive, tmp / "src")
        name, version = _archive_name_version(archive.name, root, tmp / "src")
        newest = _newest_member_time(archive)
        upload_time = newest or last_modified
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Fetched(root, name, version, archive.name, upload_time, tmp, kind="archive")


def _download(url: str, tmp: Path, *, timeout: float, max_bytes: int) -> tuple[Path, str | None]:
    import httpx

    shown = _redact(url)
    try:
        with httpx.stream("GET", url, timeout=timeout, follow_redirects=True) as r:
            if r.status_code in (404, 410):
                raise BadInput(f"{shown}: no such file on the server (HTTP {r.status_code})", fix="check the URL")
            if r.status_code != 200:
                raise FetchError(f"{shown}: the server answered HTTP {r.status_code}",
                                 fix="check the URL; try again later")
            filename = unquote(urlsplit(str(r.url)).path.rstrip("/").rsplit("/", 1)[-1])
            if not _is_archive_name(filename):
                filename = unquote(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1])
            if not _is_archive_name(filename):
                m = re.search(r'filename\*?=(?:UTF-8\'\')?"?([^";]+)"?', r.headers.get("content-disposition", ""))
                filename = unquote(m.group(1)) if m else filename
            filename = re.sub(r"[^A-Za-z0-9._+-]", "_", Path(filename).name).lstrip(".") or "archive"
            if not _is_archive_name(filename):
                raise BadInput(f"{shown}: not an archive name ({filename})",
                               fix="give the URL of a .tar.gz, .tar.bz2, .tar.xz or .zip archive")
            archive = tmp / filename
            size = 0
            with archive.open("wb") as out:
                for chunk in r.iter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise BadInput(f"{shown}: larger than {max_bytes >> 20} MiB",
                                       fix="download and unpack it yourself, then give the directory")
                    out.write(chunk)
            last_modified = _http_date(r.headers.get("last-modified"))
    except httpx.HTTPError as e:
        raise FetchError(f"cannot download {shown}: {e or type(e).__name__}",
                         fix="check the URL and the network; try again") from e
    return archive, last_modified


def _http_date(value: str | None) -> str | None:
    if not value:
        return None
    try:
        return _iso(parsedate_to_datetime(value).timestamp())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


_HATCH_EPOCH = 1580601600  # hatchling's default SOURCE_DATE_EPOCH: every member of its sdists carries it


def _newest_member_time(archive: Path) -> str | None:
    now = time.time()
    stamps: list[float] = []
    try:
        if archive.name.lower().endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                for info in z.infolist():
                    stamps.append(_zip_utc_mtime(info))
        else:
            with tarfile.open(archive) as t:
                stamps = [m.mtime for m in t.getmembers() if m.isfile() or m.isdir()]
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError, ValueError):
        return None
    plausible = [s for s in stamps if 631152000 <= s <= now + 86400 and int(s) != _HATCH_EPOCH]  # 1990-01-01
    return _iso(max(plausible)) if plausible else None


def _zip_utc_mtime(info: zipfile.ZipInfo) -> float:
    extra = info.extra
    i = 0
    while i + 4 <= len(extra):
        tag, size = int.from_bytes(extra[i:i + 2], "little"), int.from_bytes(extra[i + 2:i + 4], "little")
        body = extra[i + 4:i + 4 + size]
        if tag == 0x5455 and len(body) >= 5 and body[0] & 1:  # extended timestamp, mtime present
            return float(int.from_bytes(body[1:5], "little", signed=True))
        i += 4 + size
    try:
        return datetime(*info.date_time, tzinfo=timezone.utc).timestamp()
    except ValueError:
        return 0.0


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(int(timestamp), tz=timezone.utc).isoformat().replace("+00:00", "Z")


_NV_RE = re.compile(r"^(.*?)-(v?\d[^-]*)$")


def _archive_name_version(filename: str, root: Path, dest: Path) -> tuple[str, str]:
    pkg_info = root / "PKG-INFO"
    if pkg_info.is_file() and not pkg_info.is_symlink():
        try:
            headers = email.parser.Parser().parsestr(pkg_info.read_text(errors="replace")[:65536], headersonly=True)
            if headers.get("Name") and headers.get("Version"):
                return str(headers["Name"]).strip(), str(headers["Version"]).strip()
        except (OSError, ValueError):
            pass
    stem = _archive_stem(filename)
    top = root.name if root != dest else None
    for candidate in (stem, top):
        m = _NV_RE.match(candidate or "")
        if m and m.group(1):
            return m.group(1), m.group(2).removeprefix("v")
    return (top or stem), ""


# ------------------------------------------------------------------------------------------------------ git

_GIT_ENV_KEEP = {"GIT_SSH", "GIT_SSH_VARIANT", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "GIT_SSL_NO_VERIFY",
                 "GIT_PROXY_COMMAND", "GIT_HTTP_PROXY_AUTHMETHOD", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
                 "GIT_CONFIG_NOSYSTEM", "GIT_EXEC_PATH", "GIT_CURL_VERBOSE", "GIT_TRACE", "GIT_TRACE_PACKET",
                 "GIT_TRACE_CURL"}
_GIT_CONFIG = ("credential.helper=", "core.askPass=", "core.hooksPath=/dev/null", "core.fsmonitor=false",
               "protocol.ext.allow=never", "advice.detachedHead=false", "init.defaultBranch=main",
               "http.lowSpeedLimit=1", "http.lowSpeedTime=60", "gc.auto=0", "maintenance.auto=false")
_NETWORK_RE = re.compile(
    r"could not resolve host|could not resolve hostname|name or service not known|temporary failure in name "
    r"resolution|couldn't connect to server|failed to connect|connection refused|connection timed out|"
    r"operation timed out|timed out|network is unreachable|no route to host|unable to connect|connection "
    r"reset|connection closed|ssl|tls|gnutls|operation too slow|early eof|the remote end hung up|"
    r"proxy", re.I)
_NOT_FOUND_RE = re.compile(r"does not appear to be a git repository|repository '.*' not found|repository not "
                           r"found|not a git repository|no such (?:file|repository)|\b404\b", re.I)
_AUTH_RE = re.compile(r"could not read (?:username|password)|terminal prompts disabled|authentication failed|"
                      r"permission denied|host key verification failed|\b40[13]\b|invalid username or password",
                      re.I)


class _Git:
    """Runs git non-interactively in `cwd` against one overall deadline; kills git's whole process group (ssh,
    git-remote-https, index-pack…) on timeout or interruption."""

    def __init__(self, cwd: Path, shown: str, timeout: float):
        self.cwd, self.shown, self.timeout = cwd, shown, timeout
        self.deadline = time.monotonic() + timeout
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in _GIT_ENV_KEEP}
        true = "/bin/true" if os.path.exists("/bin/true") else (shutil.which("true") or "true")
        ssh = os.environ.get("GIT_SSH_COMMAND") or "ssh"
        env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": true, "SSH_ASKPASS": true,
                    "SSH_ASKPASS_REQUIRE": "never", "GIT_SSH_COMMAND": f"{ssh} -o BatchMode=yes -o ConnectTimeout=30",
                    "GIT_PAGER": "cat", "GIT_OPTIONAL_LOCKS": "0", "GIT_CEILING_DIRECTORIES": str(cwd.parent),
                    "LC_ALL": "C", "LANG": "C"})
        env.pop("LANGUAGE", None)
        self.env = env

    def run(self, *args: str, cwd: Path | None = None) -> tuple[int, str, str]:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise self._timed_out()
        cmd = ["git"]
        for item in _GIT_CONFIG:
            cmd += ["-c", item]
        proc = subprocess.Popen(cmd + list(args), cwd=cwd or self.cwd, env=self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=remaining)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise self._timed_out() from None
        except BaseException:
            _kill_group(proc)
            raise
        return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")

    def _timed_out(self) -> FetchError:
        return FetchError(f"git did not finish with {self.shown} within {self.timeout:g} s",
                          fix="check that the host is reachable and the repository not huge; raise the timeout")

    def check(self, *args: str) -> str:
        rc, out, err = self.run(*args)
        if rc != 0:
            raise self.failure(err)
        return out

    def failure(self, stderr: str) -> EnvyardError:
        """The one-line cause of a failed git command that talked to the remote, as the right error class."""
        lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
        first = next((ln for ln in lines if ln.lower().startswith(("fatal:", "error:", "ssh:"))),
                     lines[0] if lines else "")
        detail = re.sub(r"^(fatal|error): (unable to access '[^']*': )?", "", first)[:300]
        if re.search(r"dubious ownership", stderr):
            return BadInput(f"{self.shown}: git refuses a repository owned by another user ({detail})",
                            fix="run as its owner, or `git config --global --add safe.directory PATH`")
        if _NETWORK_RE.search(stderr) and not _NOT_FOUND_RE.search(stderr):
            return FetchError(f"cannot reach {self.shown}: {detail}",
                              fix="check the URL's host and the network (is the host reachable from this "
                                  "machine?); or fetch the source elsewhere and give its directory or archive")
        if _AUTH_RE.search(stderr):
            return BadInput(f"{self.shown}: the repository does not exist or needs credentials ({detail})",
                            fix="check the URL; envyard never prompts: for a private repository use an ssh URL "
                                "(git@host:path) with a key in ssh-agent and the host in known_hosts")
        if _NOT_FOUND_RE.search(stderr):
            return BadInput(f"{self.shown}: no git repository there ({detail})", fix="check the URL or path")
        return FetchError(f"git failed with {self.shown}: {detail or 'no message'}", fix="check the URL; try again")


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill git's process group. Only while git itself is unreaped: its pid, hence the group id, cannot have
    been reused by then."""
    if proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _redact(url: str) -> str:
    """The URL without a password or token in its user part."""
    parts = urlsplit(url)
    if parts.scheme and parts.password is not None:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        user = parts.username if parts.username and parts.username not in ("x-access-token", "oauth2") else ""
        return urlunsplit(parts._replace(netloc=(f"{user}@" if user else "") + host))
    if parts.scheme and parts.username and "@" in parts.netloc and parts.scheme in ("http", "https"):
        return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))  # a bare token as the user
    return url


def _is_bare_repo(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def _is_git_repo(path: Path) -> bool:
    return (path / ".git").exists() or _is_bare_repo(path)


def _repo_name(url: str) -> str:
    if "://" in url:
        path = unquote(urlsplit(url).path)
    elif _SCP_RE.match(url):
        path = url.split(":", 1)[1]
    else:
        path = url
    segments = [s for s in re.split(r"[/\\]", path) if s and s != "."]
    while segments and segments[-1] == ".git":
        segments.pop()
    name = segments[-1] if segments else ""
    name = re.sub(r"\.git$", "", name)
    return re.sub(r"[^A-Za-z0-9._-]", "-", name).strip(".-") or "repo"


_HEX_RE = re.compile(r"^[0-9a-fA-F]{4,64}$")


def fetch_git(url: str, rev: str | None = None, *, timeout: float = 300) -> Fetched:
    """Clone `url` at `rev` with the `git` command into an `envyard-fetch-*` temporary directory.

    url: https://, http://, git://, ssh:// and scp-style `user@host:path` URLs, file:// URLs, and local paths
    of a repository (a directory holding `.git`, or a bare repository); a leading `git+` is dropped.
    rev: a branch, a tag, a full ref (`refs/…`), a full commit sha, or an abbreviated sha of 4+ hex digits
    (resolved in the fetched history; an ambiguous one is refused); None means the remote's HEAD. Names are
    looked up first (`git ls-remote`), so a branch or tag that looks like hex wins over a sha.

    How: `git init` + `git ls-remote` (one quick round trip that tells an unreachable host, a missing
    repository and a missing rev apart), then `git fetch --depth 1` of the branch, tag, HEAD or full sha
    plus the tags that point at that commit (so `git describe` and setuptools-scm see a tag exactly on it;
    off a tag the shallow history has none, and envyard.setup.checkout_version tags the setup's copy as the
    release the commit follows), and a detached checkout. A full sha the
    server will not serve directly, or an abbreviated sha, falls back to fetching all branches and tags with
    `--filter=blob:none` (a full fetch where the server ignores filters). Submodules are checked out
    (`_submodules`; one that cannot be fetched becomes a note in `notes`, not an error). Git never prompts
    (GIT_TERMINAL_PROMPT=0, GIT_ASKPASS and SSH_ASKPASS set to true, credential helpers cleared, ssh
    BatchMode=yes with a 30 s connect timeout, the
    environment's GIT_DIR-like variables dropped, hooks disabled); `timeout` bounds the whole fetch, and git's
    process group is killed when it runs out or on KeyboardInterrupt.

    The result's root is the working tree *with* its `.git` (shallow: one commit deep in the common case),
    so `git status`/`git log` work on it; the remote `origin` is kept with any password or token removed from
    its URL. commit = the full sha; upload_time = its committer date (ISO 8601 UTC); name = the repository's
    base name without `.git`; version = the tag when `rev` is a tag, else the 12-digit short sha;
    filename = the URL (credentials removed); kind = "git".

    Raises BadInput: a malformed url or rev, a local path that does not exist or is not a repository, a
    repository that does not exist or needs credentials (git cannot tell those apart on most hosts), an empty
    repository, no commit/branch/tag named `rev`, an ambiguous short sha. FetchError: a host that does not
    resolve or refuses or drops the connection, TLS trouble, a timeout, any other git failure."""
    if shutil.which("git") is None:
        raise FetchError("the git command is not installed", fix="install git (apt-get install git)")
    if url.startswith("git+"):
        url = url[4:]
    if not url or url.startswith("-") or any(c in url for c in "\n\r\0"):
        raise BadInput(f"{url!r} is not a git URL or path",
                       fix="give an https://, ssh:// or git@host:path URL, or a path")
    if rev is not None and (not rev or rev.startswith("-") or re.search(r"[\s\0~^:?*\[\\]|\.\.|@\{", rev)):
        raise BadInput(f"{rev!r} is not a valid git rev", fix="give a commit sha, a branch or a tag name")
    shown = _redact(url)
    remote = url
    if "://" not in url and not _SCP_RE.match(url):
        path = Path(url).expanduser()
        if not path.exists():
            raise BadInput(f"{url}: no such directory", fix="give the path of a git repository, or a git URL")
        if not path.is_dir() or not _is_git_repo(path):
            raise BadInput(f"{url}: not a git repository (no .git in it)",
                           fix="give the top directory of a git checkout, or a bare repository; a plain directory "
                               "is used as is without --rev")
        remote = str(path.resolve())
        shown = remote
    name = _repo_name(remote if "://" not in url and not _SCP_RE.match(url) else url)
    tmp = Path(tempfile.mkdtemp(prefix="envyard-fetch-"))
    try:
        work = tmp / name
        work.mkdir()
        git = _Git(work, shown, timeout)
        git.check("init", "-q")
        git.check("remote", "add", "origin", remote)
        heads, _ = _ls_remote(git)
        if not heads:
            raise BadInput(f"{shown}: the repository is empty (no branches or tags)", fix="check the URL")
        version = None
        target = None  # what to fetch shallowly: a ref name or a full sha
        if rev is None or rev == "HEAD":
            if "HEAD" not in heads:
                raise BadInput(f"{shown}: the repository has no default branch (HEAD)",
                               fix="give --rev BRANCH; branches: " + _some_refs(heads, "refs/heads/"))
            target = "HEAD"
        elif rev.startswith("refs/") and rev in heads:
            target = rev
            if rev.startswith("refs/tags/"):
                version = rev.removeprefix("refs/tags/")
        elif f"refs/tags/{rev}" in heads:
            target, version = f"refs/tags/{rev}", rev
        elif f"refs/heads/{rev}" in heads:
            target = f"refs/heads/{rev}"
        elif _HEX_RE.match(rev):
            full = len(rev) in (40, 64)
            matches = {ref for ref, sha in heads.items() if sha.startswith(rev.lower())}
            if matches:
                target = sorted(matches, key=lambda r: (not r.startswith("refs/heads/"), r))[0]
            elif full:
                target = rev.lower()
        else:
            raise BadInput(f"no commit, branch or tag named {rev!r} in {shown}",
                           fix=_known_refs(heads))
        commit = None
        if target is not None:
            rc, _, err = git.run("fetch", "-q", "--depth", "1", "origin", target)
            if rc == 0:
                commit = _verify(git, "FETCH_HEAD")
                tags = sorted(ref for ref, sha in heads.items() if ref.startswith("refs/tags/") and sha == commit)
                if tags:  # the tags on this commit, for `git describe` and setuptools-scm (best effort)
                    git.run("fetch", "-q", "--depth", "1", "--no-tags", "origin", *[f"+{t}:{t}" for t in tags[:50]])
            else:
                refused = re.search(r"not our ref|unadvertised|does not allow|no such remote ref|"
                                    r"couldn't find remote ref|not found", err, re.I)
                if not _HEX_RE.match(target) or (_NETWORK_RE.search(err) and not refused):
                    raise git.failure(err)  # else: a sha the server would not serve by itself, see below
        if commit is None:  # an abbreviated sha, or a full one the server would not serve by itself
            git.check("fetch", "-q", "--filter=blob:none", "origin",
                      "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*")
            rc, out, err = git.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
            if rc != 0:
                if "ambiguous" in err:
                    raise BadInput(f"{rev!r} is an ambiguous short sha in {shown}",
                                   fix="give more digits of the commit")
                raise BadInput(f"no commit, branch or tag named {rev!r} in {shown}",
                               fix=_known_refs(heads))
            commit = out.strip()
        rc, _, err = git.run("checkout", "-q", "--detach", commit)
        if rc != 0:
            last = err.strip().splitlines()[-1] if err.strip() else "no message"
            raise git.failure(err) if _NETWORK_RE.search(err) else FetchError(
                f"git could not check out {commit[:12]} of {shown}: {last}", fix="try again")
        notes = _submodules(git, local=("://" not in url and not _SCP_RE.match(url)) or url.startswith("file://"))
        date = git.check("show", "-s", "--no-show-signature", "--format=%cI", "HEAD").strip()
        try:
            upload_time = datetime.fromisoformat(date).astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
        except ValueError:
            upload_time = None
        if shown != remote:
            git.run("remote", "set-url", "origin", shown)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Fetched(work, name, version or commit[:12], shown, upload_time, tmp, commit=commit, kind="git",
                   notes=notes)


def _submodules(git: _Git, *, local: bool) -> list[str]:
    """Check out the submodules `.gitmodules` declares (recursively, shallowly where the server allows), as a
    `git clone --recursive` would: C extensions often build from sources kept in one (python-rapidjson's
    RapidJSON). A failure is a note, not an error: many submodules are docs or test data the setup may not need;
    the setup's failure reason names the ones still missing (missing_submodules).

    A remote superproject must not make envyard copy other local repositories into the sandbox: file://
    submodules (and local paths) are allowed only when the superproject itself is local, and refused otherwise
    whatever the user's git configuration says."""
    if not (git.cwd / ".gitmodules").is_file():
        return []
    config = ["-c", f"protocol.file.allow={'always' if local else 'never'}"]
    rc, _, err = git.run(*config, "submodule", "update", "--init", "--recursive", "--depth", "1")
    if rc != 0:  # a commit the server will not serve shallowly: the whole history of the submodule
        rc, _, err = git.run(*config, "submodule", "update", "--init", "--recursive")
    missing = missing_submodules(git.cwd)
    if rc == 0 and not missing:
        return []
    cause = git.failure(err).message if rc != 0 else "git left them empty"
    return [f"git submodules not checked out ({', '.join(missing) or 'some'}): {cause}"]


def submodule_paths(root: Path) -> list[str]:
    """The paths `.gitmodules` declares (`path = …` lines), in order; [] without one."""
    try:
        text = (root / ".gitmodules").read_text(errors="replace")
    except OSError:
        return []
    paths = []
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        path = value.strip().strip('"')
        if sep and key.strip() == "path" and path and not path.startswith("/") and ".." not in path.split("/"):
            paths.append(path)  # (git refuses paths outside the tree too)
    return paths


def missing_submodules(root: Path) -> list[str]:
    """The declared submodule paths that are absent or empty in the tree: a checkout made without
    `--recursive` (or an archive of one)."""
    missing = []
    for rel in submodule_paths(root):
        path = root / rel
        try:
            empty = not path.is_dir() or next(path.iterdir(), None) is None
        except OSError:
            empty = True
        if empty:
            missing.append(rel)
    return missing


def _ls_remote(git: _Git) -> tuple[dict[str, str], str | None]:
    """{ref: sha} advertised by origin (peeled tags give the commit), and the branch HEAD points at."""
    out = git.check("ls-remote", "--symref", "origin")
    refs: dict[str, str] = {}
    head_target = None
    for line in out.splitlines():
        if line.startswith("ref: "):
            target, _, ref = line[5:].partition("\t")
            if ref == "HEAD":
                head_target = target
            continue
        sha, _, ref = line.partition("\t")
        if ref.endswith("^{}"):
            refs[ref[:-3]] = sha  # an annotated tag's commit
        elif ref and ref not in refs:
            refs[ref] = sha
    return refs, head_target


def _verify(git: _Git, what: str) -> str:
    return git.check("rev-parse", "--verify", "--end-of-options", f"{what}^{{commit}}").strip()


def _known_refs(refs: dict[str, str]) -> str:
    return f"branches: {_some_refs(refs, 'refs/heads/')}; tags: {_some_refs(refs, 'refs/tags/')}"


def _some_refs(refs: dict[str, str], prefix: str, limit: int = 8) -> str:
    names = sorted(r.removeprefix(prefix) for r in refs if r.startswith(prefix))
    if not names:
        return "(none)"
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
