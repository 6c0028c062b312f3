"""`envyard pull`, `push`, `save`, `load`, `images` and `rmi` with registry names, in subprocesses: output,
--json, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .registry import Raw, free_port, tar_layer


@pytest.fixture
def cli(tmp_path):
    env = {**os.environ, "ENVYARD_HOME": str(tmp_path / "home"), "COLUMNS": "200", "NO_COLOR": "1"}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "envyard.cli.main", *args], env=env, capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)

    yield run
    run("gc")


@pytest.fixture(scope="module")
def small(registry):
    Raw(registry.url).image("cli/small", "v1", [(tar_layer([("etc/", None), ("etc/small", b"1")]), "gzip"),
                                                (tar_layer([("etc/more", b"2")]), "zstd")],
                            config_extra={"Cmd": ["sh"]})
    return f"{registry.host}/cli/small:v1"


def test_pull_push_images_rmi(cli, small, registry):
    r = cli("pull", "--json", small)
    assert r.returncode == 0, r.stderr
    pulled = json.loads(r.stdout)
    assert pulled["name"] == small and len(pulled["layers"]) == 2 and len(pulled["downloaded"]) == 2
    assert pulled["config"]["cmd"] == ["sh"] and pulled["digest"].startswith("sha256:")
    again = json.loads(cli("pull", "--json", small).stdout)
    assert again["downloaded"] == [] and len(again["reused"]) == 2

    r = cli("pull", small)  # progress bars go to stderr, the result line to stdout
    assert r.returncode == 0 and r.stdout.startswith(f"{small} (sha256:")

    target = f"{registry.host}/cli/copy:v2"
    r = cli("push", "--json", small, target)
    assert r.returncode == 0, r.stderr
    pushed = json.loads(r.stdout)
    assert pushed["reference"] == target and [x["action"] for x in pushed["layers"]] == ["mounted", "mounted"]

    listed = json.loads(cli("images", "--json").stdout)
    assert [i["name"] for i in listed] == [small]
    r = cli("images")
    assert small in r.stdout and "registry" in r.stdout
    r = cli("rmi", "--json", small)
    assert json.loads(r.stdout) == {"removed": [small], "errors": []}


def test_save_and_load(cli, small, tmp_path):
    assert cli("pull", small).returncode == 0
    out = tmp_path / "small.tar"
    r = cli("save", small, "-o", str(out), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["format"] == "oci-tar"
    assert cli("rmi", small).returncode == 0
    r = cli("load", str(out), "--name", "small:loaded", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["name"] == "small:loaded"
    r = cli("save", small, "-o", str(tmp_path / "x.tar"))
    assert r.returncode == 3 and "no image named" in r.stderr


@pytest.mark.parametrize("ref,code,words", [
    ("{host}/cli/none:v1", 14, "has no"),
    ("127.0.0.1:{closed}/cli/x:v1", 16, "cannot reach registry"),
    ("Not A Name", 2, "invalid image name"),
])
def test_pull_errors_exit_codes(cli, registry, ref, code, words):
    r = cli("pull", ref.format(host=registry.host, closed=free_port()))
    assert r.returncode == code, r.stderr
    assert words in r.stderr and "fix:" in r.stderr
    assert r.stdout == ""


def test_push_errors(cli, registry):
    r = cli("push", "nothing:here", f"{registry.host}/x/y:v1")
    assert r.returncode == 3
    r = cli("push", "host", f"{registry.host}/x/host:v1")
    assert r.returncode == 2 and "host's root filesystem" in r.stderr
    r = cli("push", "host", f"{registry.host}/x/y@sha256:" + "a" * 64)
    assert r.returncode == 2 and "digest" in r.stderr
    r = cli("push", "--format", "v1", "host", f"{registry.host}/x/y:v1")
    assert r.returncode == 2 and "unknown manifest format" in r.stderr
