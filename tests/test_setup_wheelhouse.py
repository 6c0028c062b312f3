"""The replay's wheelhouse (setup/wheelhouse.py): wheels a branch built from sdists are offered to the replay,
so an index that sends no cache headers (uv then builds an sdist again at every install) costs one build, not
two. Real uv against a real local index that serves an sdist without cache headers; real setup sandboxes."""

from __future__ import annotations

import functools
import http.server
import io
import os
import subprocess
import sys
import tarfile
import textwrap
import threading
from pathlib import Path

import pytest

import envyard
from envyard.setup.evidence import gather
from envyard.setup.interpreters import host_interpreter, setup_base, uv_binary
from envyard.setup.plan import Candidate, plan
from envyard.setup.replay import logged, replay_sandbox
from envyard.setup.search import Search, Workspace, setup_env, setup_sandbox
from envyard.setup.wheelhouse import MOUNT, built

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "setup" / "tinycalc"

# An in-tree build backend with no build requirements: the sdist builds without reaching any other index.
BACKEND = textwrap.dedent('''
    import base64, hashlib, os, zipfile

    NAME, VERSION = "envyard_wh_demo", "1.0"
    DIST = NAME + "-" + VERSION + ".dist-info"


    def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
        name = NAME + "-" + VERSION + "-py3-none-any.whl"
        files = {NAME + "/__init__.py": b"VALUE = 42\\n",
                 DIST + "/METADATA": ("Metadata-Version: 2.1\\nName: envyard-wh-demo\\nVersion: " + VERSION
                                      + "\\n").encode(),
                 DIST + "/WHEEL": b"Wheel-Version: 1.0\\nGenerator: demo\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
        record = []
        with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
            for path, data in files.items():
                z.writestr(path, data)
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                record.append(path + ",sha256=" + digest + "," + str(len(data)))
            z.writestr(DIST + "/RECORD", "\\n".join(record + [DIST + "/RECORD,,"]) + "\\n")
        return name
''')
PYPROJECT = ('[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n\n'
             '[project]\nname = "envyard-wh-demo"\nversion = "1.0"\n')


class NoCacheHeaders(http.server.SimpleHTTPRequestHandler):
    """Serves files the way the proxy in front of PyPI on these machines does: no Last-Modified, ETag or
    Cache-Control, so uv can never tell that its cached sdist is still good."""

    def send_header(self, keyword, value):
        if keyword.lower() not in ("last-modified", "etag", "cache-control"):
            super().send_header(keyword, value)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("index")
    (root / "files").mkdir()
    with tarfile.open(root / "files" / "envyard_wh_demo-1.0.tar.gz", "w:gz") as tar:
        for name, text in {"pyproject.toml": PYPROJECT, "backend.py": BACKEND,
                           "PKG-INFO": "Metadata-Version: 2.1\nName: envyard-wh-demo\nVersion: 1.0\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"envyard_wh_demo-1.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    page = root / "simple" / "envyard-wh-demo"
    page.mkdir(parents=True)
    (page / "index.html").write_text('<a href="../../files/envyard_wh_demo-1.0.tar.gz">envyard_wh_demo-1.0.tar.gz</a>\n')
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(NoCacheHeaders, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


def test_uv_output_names_the_distributions_it_built_from_the_index_only():
    out = ("Resolved 3 packages in 875ms\n   Building cytoolz==0.11.2\n   Building toolz @ file:///work/tz\n"
           "      Built toolz @ file:///work/tz\n      Built cytoolz==0.11.2\n"
           "      Built h11 @ git+https://github.com/python-hyper/h11@master\nPrepared 2 packages in 18.02s\n"
           " + cytoolz==0.11.2\n")
    assert built(out) == [("cytoolz", "0.11.2")]
    assert built("Installed 1 package in 13ms\n + cytoolz==0.11.2\n") == []


def _install(venv: Path, cache: Path, index: str, **env) -> subprocess.CompletedProcess:
    subprocess.run([uv_binary(), "venv", "-q", "--python", sys.executable, str(venv)], check=True,
                   env={**os.environ, "UV_CACHE_DIR": str(cache)})
    return subprocess.run([uv_binary(), "pip", "install", "--python", str(venv / "bin" / "python"),
                           "--index-url", index, "envyard-wh-demo"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "UV_CACHE_DIR": str(cache), "UV_NO_PROGRESS": "1", **env})


def test_a_wheel_uv_built_is_taken_from_the_wheelhouse_instead_of_being_built_again(tmp_path, index):
    yard = envyard.Yard(tmp_path / "home")
    try:
        search = Search(yard, gather(FIXTURE), FIXTURE, "/work/tinycalc", [host_interpreter()], jobs=1)
        interp = host_interpreter()
        first = _install(tmp_path / "a", search.cache, index)
        assert first.returncode == 0, first.stderr
        assert built(first.stderr) == [("envyard-wh-demo", "1.0")]
        assert search.wheels.record(interp, first.stderr) == ["envyard_wh_demo-1.0-py3-none-any.whl"]
        # without the wheelhouse uv builds it again: the index's answers carry no cache headers
        again = _install(tmp_path / "b", search.cache, index)
        assert again.returncode == 0 and "Building envyard-wh-demo==1.0" in again.stderr
        found = _install(tmp_path / "c", search.cache, index, UV_FIND_LINKS=str(search.wheels.directory(interp)))
        assert found.returncode == 0, found.stderr
        assert "Building" not in found.stderr and "+ envyard-wh-demo==1.0" in found.stderr
        root = search.wheels.root
        search.wheels.close()
        assert not root.exists()
    finally:
        yard.close()


def test_the_replays_sandboxes_install_what_a_branch_built_without_building_it(tmp_path, index):
    yard = envyard.Yard(tmp_path / "home")
    try:
        host = host_interpreter()
        search = Search(yard, gather(FIXTURE), FIXTURE, "/work/tinycalc", [host], jobs=2)
        recipe = plan(search.ev, Candidate(host))
        base = setup_base(yard, host)
        install = (f"uv venv -q /opt/venv && uv pip install --python /opt/venv/bin/python --index-url {index} "
                   "envyard-wh-demo")
        log: list[str] = []
        ws = Workspace(yard, base, search.cache, threading.Event(), log, search.track,
                       built=lambda out: search.wheels.record(host, out))
        try:
            r = ws.sh(install, "/", 120)
            assert r.exit_code == 0 and "Built envyard-wh-demo==1.0" in r.stderr, r.stderr
        finally:
            ws.close()
        assert [p.name for p in search.wheels.directory(host).iterdir()] == ["envyard_wh_demo-1.0-py3-none-any.whl"]
        with setup_sandbox(yard, base, search.cache) as plain:  # a branch's sandbox: no wheelhouse, built again
            r = plain.exec(install, env=setup_env(), timeout=120)
            assert r.exit_code == 0 and "Building envyard-wh-demo==1.0" in r.stderr
        with replay_sandbox(search, base, recipe) as sb:
            r = logged(yard, sb, "/", recipe.env, [])(install, 120)
            assert r.exit_code == 0, r.stderr
            assert "Building" not in r.stderr and "+ envyard-wh-demo==1.0" in r.stderr
            assert sb.exec("/opt/venv/bin/python -c 'import envyard_wh_demo as m; print(m.VALUE)'").stdout == "42\n"
            assert sb.exec(f"touch {MOUNT}/x").exit_code != 0  # the replay reads the branches' wheels, never writes
        search.wheels.close()
    finally:
        yard.close()
        yard.gc()
        assert yard.sandboxes() == []
