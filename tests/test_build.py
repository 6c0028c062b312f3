"""`envyard build`: real Dockerfiles built into real images (sandboxes, layers, cache), no mocks.

Builds run in a store of their own; its debian:bookworm stands on the test cache's layer (recorded as an
external layer, which this store never deletes), so every test starts from a cold build cache.
"""

from __future__ import annotations

import http.server
import importlib.util
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest

import envyard
from envyard.build import BuildError, ContextError, DockerfileError, RunFailed, build_image
from envyard.build.ignore import Ignore, parse as parse_ignore
from envyard.build.words import expand, expand_words
from envyard.errors import ImageNotFound

from bareenv import BARE, cli_cwd, sigint_default

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "dockerfiles"
NO_PULLER = importlib.util.find_spec("envyard.images") is None


@pytest.fixture(scope="module")
def byard(tmp_path_factory, debian_yard, debian):
    home = tmp_path_factory.mktemp("build-home")
    y = envyard.Yard(home)
    for layer_id in debian.layers:
        y.store.add_external_layer(layer_id, debian_yard.store.layer(layer_id).path,
                                   {"linked_from": str(debian_yard.store.home)})
    y.store.put_image("debian:bookworm", debian.layers, debian.config)
    yield y
    y.close()
    y.gc()


@pytest.fixture
def scratch_yard(tmp_path):
    """A store without any base image: FROM scratch needs none."""
    y = envyard.Yard(tmp_path / "home")
    yield y
    y.close()
    y.gc()


def fixture(tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    shutil.copytree(FIXTURES / name, dest, symlinks=True)
    return dest


def write_dockerfile(tmp_path: Path, text: str, files: dict[str, str] | None = None) -> Path:
    ctx = tmp_path / "ctx"
    ctx.mkdir(exist_ok=True)
    (ctx / "Dockerfile").write_text(text)
    for name, content in (files or {}).items():
        (ctx / name).parent.mkdir(parents=True, exist_ok=True)
        (ctx / name).write_text(content)
    return ctx


class Events:
    def __init__(self):
        self.events: list[dict] = []

    def __call__(self, event):
        self.events.append(event)

    def ran(self) -> list[str]:
        """Instructions of the steps that made a layer or ran without a cache hit (file steps only)."""
        steps = {e["n"]: e["instruction"] for e in self.events if e["event"] == "step"}
        return [steps[e["n"]] for e in self.events if e["event"] == "done" and e["touches_files"] and not e["cached"]]

    def cached(self) -> list[str]:
        steps = {e["n"]: e["instruction"] for e in self.events if e["event"] == "step"}
        return [steps[e["n"]] for e in self.events if e["event"] == "done" and e["cached"]]


def layer_tree(yard, image) -> dict[str, tuple[str, int, str]]:
    """path → (type, mode, owner) of every entry in an image's only layer (for single-layer scratch images)."""
    out = {}
    for layer_id in image.layers:
        root = yard.store.layer(layer_id).path
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                full = Path(dirpath) / name
                st = full.lstat()
                kind = "dir" if full.is_dir() and not full.is_symlink() else "link" if full.is_symlink() else "file"
                out["/" + str(full.relative_to(root))] = (kind, st.st_mode & 0o7777, f"{st.st_uid}:{st.st_gid}")
    return out


def make_archive(path: Path) -> None:
    with tarfile.open(path, "w:gz") as tf:
        def add(name, data=None, mode=0o644, uid=0, kind=tarfile.REGTYPE, link=""):
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.uid, info.gid, info.linkname = kind, mode, uid, uid, link
            info.size = len(data) if data else 0
            tf.addfile(info, io.BytesIO(data) if data else None)
        add("top", kind=tarfile.DIRTYPE, mode=0o750, uid=4321)
        add("top/x.txt", b"from the archive\n", mode=0o600, uid=4321)
        add("top/link", kind=tarfile.SYMTYPE, link="x.txt")
        add("/abs.txt", b"leading slash stripped\n")


# ---- pure functions -------------------------------------------------------------------------------------------


def test_substitution_follows_dockers_rules():
    env = {"A": "1", "EMPTY": "", "S": "x y"}
    assert expand("$A-${A}-$MISSING.", env) == "1-1-."
    assert expand("${MISSING:-dflt} ${EMPTY:-dflt} ${EMPTY-dflt}|", env) == "dflt dflt |"
    assert expand("${A:+alt} ${EMPTY:+alt} ${EMPTY+alt} ${MISSING+alt}|", env) == "alt  alt |"
    assert expand("'$A' \"$A\" \\$A \"\\$A\" \"a\\b\"", env) == "$A 1 $A $A a\\b"
    assert expand("${MISSING:-${A}0}", env) == "10"
    assert expand_words("80 $S '8 9'", env) == ["80", "x", "y", "8 9"]
    with pytest.raises(DockerfileError, match="MISSING: need it"):
        expand("${MISSING:?need it}", env)
    with pytest.raises(DockerfileError):
        expand("${A", env)


def test_dockerignore_patterns():
    ig = Ignore(parse_ignore("# c\n*.log\n/build\nsecret\n!secret/keep.txt\n**/tmp*\ndocs/**/*.md\n"))
    assert ig.excluded("app.log") and not ig.excluded("src/app.log")  # '*' stays in one segment
    assert ig.excluded("build") and ig.excluded("build/x/y")  # a directory takes its contents with it
    assert ig.excluded("secret/key.pem") and not ig.excluded("secret/keep.txt")  # the last match decides
    assert ig.excluded("tmpfile") and ig.excluded("a/b/tmpdir/f")  # '**' spans any number of segments
    assert ig.excluded("docs/a/b/x.md") and ig.excluded("docs/x.md") and not ig.excluded("docs/x.txt")
    assert not Ignore(parse_ignore("!x\n")).excluded("x")
    with pytest.raises(ContextError):
        parse_ignore("!\n")


# ---- builds over debian:bookworm -----------------------------------------------------------------------------


def test_every_instruction_over_debian(byard, tmp_path):
    ctx = fixture(tmp_path, "everything")
    (ctx / "files" / "top.txt").chmod(0o600)  # git keeps only the executable bit: the mode is set here
    make_archive(ctx / "archive.tar.gz")
    events = Events()
    img = build_image(byard, ctx, tag="test/everything:1", build_args={"FLAVOR": "spicy", "HTTP_PROXY": ""},
                      on_progress=events)
    c = img.config
    assert c.env["APP"] == "/srv/app" and c.env["GREETING"] == "hello world"
    assert c.env["PATH"].startswith("/opt/tools/bin:/usr/local/sbin:")  # $PATH from the base's default
    assert (c.env["DEFAULTED"], c.env["ALT"], c.env["KEEP"]) == ("spicy", "v1.0", "$NOT_EXPANDED")
    assert "VERSION" not in c.env and "FLAVOR" not in c.env  # ARGs are not kept in the image
    assert c.labels == {"org.example.version": "1.0", "with space": "yes"}
    assert (c.workdir, c.user) == ("/home/app/work", "root")
    assert c.entrypoint == ["/opt/tools/bin/tool"] and c.cmd == ["--help"]
    assert c.exposed_ports == ["8080/tcp", "53/udp"] and c.stop_signal == "SIGINT"
    assert c.healthcheck == {"Test": ["CMD-SHELL", "test -f /srv/app/run-env.txt"], "Interval": 30 * 10**9,
                             "Timeout": 5 * 10**9, "Retries": 2}
    p = c.provenance
    assert p["volumes"] == ["/data"] and p["onbuild"] == ["RUN echo triggered"]
    assert p["shell"] == ["/bin/bash", "-o", "pipefail", "-c"] and p["author"] == "someone@example.org"
    assert [e for e in events.events if e["event"] == "warning"] == []  # FLAVOR used, HTTP_PROXY predefined

    paths = ["/srv/app/files", "/srv/app/files/top.txt", "/srv/app/files/deep/d.txt", "/srv/app/multi/a.txt",
             "/srv/app/multi/b.txt", "/srv/app/multi/c.txt", "/srv/app/docs/README.md", "/srv/app/docs/NOTES.md",
             "/srv/app/mode640.txt", "/srv/app/renamed.txt", "/srv/app/intodir/a.txt", "/opt/unpacked/top",
             "/opt/unpacked/top/x.txt", "/opt/unpacked/top/link", "/opt/unpacked/abs.txt", "/opt/tools/bin/tool",
             "/home/app/work", "/home/app/work/made-by-app", "/home/app/work/heredoc.txt"]
    with byard.sandbox(img) as sb:
        r = sb.exec(["stat", "-c", "%n %a %u:%g %F", *paths])
        assert r.exit_code == 0, r.stderr
        stats = {line.split()[0]: line.split(None, 1)[1] for line in r.stdout.splitlines()}
        files = sb.exec("cd /srv/app && cat run-env.txt tool-out.txt exec.txt ca-path.txt; cd /home/app/work && "
                        "cat uid.txt shell.txt tabs.txt heredoc.txt; readlink /opt/unpacked/top/link; "
                        "test -e /etc/envyard-host-ca.crt || echo no-ca-in-image").stdout
    assert stats["/srv/app/files"].startswith("755 0:0 directory")
    assert stats["/srv/app/files/top.txt"].startswith("600 0:0 regular")  # modes kept, owners root
    assert stats["/srv/app/files/deep/d.txt"].startswith("644 0:0")
    assert stats["/srv/app/multi/c.txt"].startswith("644")  # a directory source: its contents, not itself
    assert stats["/srv/app/mode640.txt"].startswith("640 0:0")
    assert stats["/srv/app/intodir/a.txt"].startswith("644 0:0 regular")
    assert stats["/opt/unpacked/top"].startswith("750 4321:4321 directory")  # the archive's owners and modes
    assert stats["/opt/unpacked/top/x.txt"].startswith("600 4321:4321 regular")
    assert stats["/opt/unpacked/top/link"].endswith("symbolic link")
    assert stats["/opt/tools/bin/tool"].startswith("755 1234:1234 regular")
    assert stats["/home/app/work"].startswith("755 1234:1234 directory")  # WORKDIR made for USER app
    assert stats["/home/app/work/made-by-app"].startswith("644 1234:1234")  # the RUN really ran as app
    assert stats["/home/app/work/heredoc.txt"].startswith("644 0:0")
    assert files.splitlines() == [
        "hello world 1.0 spicy v1.0", "tool ran: ", "exec-form 1.0", "/etc/envyard-host-ca.crt",
        "1234", "app", "/home/app", "/bin/bash 5", "indented", "version=1.0", "x.txt", "no-ca-in-image"]


def test_cache_reruns_only_from_the_changed_step(byard, tmp_path):
    ctx = fixture(tmp_path, "cache")
    cold = Events()
    t0 = time.monotonic()
    first = build_image(byard, ctx, tag="test/cache:1", on_progress=cold)
    cold_s = time.monotonic() - t0
    assert len(cold.ran()) == 4 and cold.cached() == []

    warm = Events()
    t0 = time.monotonic()
    again = build_image(byard, ctx, tag="test/cache:1", on_progress=warm)
    warm_s = time.monotonic() - t0
    assert warm.ran() == [] and len(warm.cached()) == 4  # nothing reruns
    assert again.layers == first.layers
    assert warm_s < cold_s

    (ctx / "app" / "input.txt").write_text("v2\n")
    changed = Events()
    third = build_image(byard, ctx, tag="test/cache:1", on_progress=changed)
    assert changed.cached() == ['RUN echo "step one" > /one.txt']
    assert changed.ran() == ["COPY app/ /app/", "RUN cat /app/input.txt > /app/derived.txt",
                             'RUN echo "$MODE" > /mode.txt']
    assert third.layers[:2] == first.layers[:2] and third.layers[2:] != first.layers[2:]
    with byard.sandbox(third) as sb:
        assert sb.exec("cat /app/derived.txt").stdout == "v2\n"

    (ctx / "app" / "input.txt").touch()  # a new mtime, same content: still a hit
    assert Events().ran() == [] and build_image(byard, ctx, tag="test/cache:1").layers == third.layers

    arg = Events()
    build_image(byard, ctx, tag="test/cache:2", build_args={"MODE": "slow"}, on_progress=arg)
    assert arg.ran() == ['RUN echo "$MODE" > /mode.txt']  # a build arg reruns the RUNs that see it

    nocache = Events()
    build_image(byard, ctx, tag="test/cache:3", no_cache=True, on_progress=nocache)
    assert len(nocache.ran()) == 4


def test_cache_entries_over_a_setup_image_do_not_pass_for_it(byard, tmp_path):
    from envyard.derive.facts import setup_image
    from envyard.errors import NotASetupImage

    base = byard.image("debian:bookworm")
    prov = {"provider": "setup", "verified": True, "status": "verified", "level": 4,
            "test_runner": "pytest", "test_command": "python3 -m pytest"}
    byard.store.put_image("test/verified:1", base.layers, base.config.replace(provenance=prov))
    assert setup_image(byard, "test/verified:1").name == "test/verified:1"
    ctx = write_dockerfile(tmp_path, "FROM test/verified:1\nRUN echo one > /one\nRUN echo two > /two\n")
    cached = lambda: {i.name: i for i in byard.store.images() if i.name.startswith("buildcache/")}  # noqa: E731
    before = cached()
    built = build_image(byard, ctx, tag="test/over-verified:1")
    assert built.config.provenance["provider"] == "build"
    entries = [i for name, i in cached().items() if name not in before]
    assert len(entries) == 2  # one per RUN
    for entry in entries:  # a step's state is no verified environment: derive refuses it
        assert entry.config.provenance == {"provider": "buildcache"}
        with pytest.raises(NotASetupImage):
            setup_image(byard, entry.name)


def test_multistage_copy_from_and_target(byard, tmp_path):
    ctx = fixture(tmp_path, "multistage")
    img = build_image(byard, ctx, tag="test/multi:1")  # the failing middle stage is never built
    tree = layer_tree(byard, img)
    assert tree["/artifact.txt"] == ("file", 0o644, "0:0")
    assert tree["/opt/bin/run"] == ("file", 0o755, "4321:4321")  # COPY --from keeps owners
    assert tree["/opt/bin"] == ("dir", 0o755, "4321:4321")
    assert "/debian_version" in tree and img.config.workdir == "/"
    builder = build_image(byard, ctx, tag="test/multi:builder", target="builder")
    assert builder.config.workdir == "/build" and len(builder.layers) > len(img.layers)
    with pytest.raises(RunFailed):
        build_image(byard, ctx, tag="test/multi:bad", target="never-needed")
    with pytest.raises(DockerfileError, match="no stage named 'nope'"):
        build_image(byard, ctx, tag="test/multi:x", target="nope")


def test_add_url_from_a_local_server(byard, tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    (served / "data.txt").write_text("served over http\n")
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(served), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/data.txt"
    try:
        import hashlib
        good = "sha256:" + hashlib.sha256(b"served over http\n").hexdigest()
        ctx = write_dockerfile(tmp_path, f"FROM scratch\nADD {url} /dl/\nADD --checksum={good} {url} /named.txt\n")
        tree = layer_tree(byard, build_image(byard, ctx, tag="test/url:1"))
        assert tree["/dl/data.txt"] == ("file", 0o600, "0:0")  # Docker's mode for downloads
        assert tree["/named.txt"] == ("file", 0o600, "0:0")
        ctx = write_dockerfile(tmp_path, f"FROM scratch\nADD --checksum=sha256:{'0' * 64} {url} /x\n")
        with pytest.raises(BuildError, match="does not match --checksum"):
            build_image(byard, ctx, tag="test/url:2")
        ctx = write_dockerfile(tmp_path, f"FROM scratch\nADD {url}.missing /x\n")
        with pytest.raises(BuildError, match="HTTP 404"):
            build_image(byard, ctx, tag="test/url:3")
    finally:
        server.shutdown()
        server.server_close()


def test_run_as_user_needs_the_user(byard, tmp_path):
    ctx = write_dockerfile(tmp_path, "FROM debian:bookworm\nUSER nobody:nogroup\nRUN id -u > /tmp/id && id -g >> /tmp/id"
                                     "\nUSER 4242\nRUN id -u > /tmp/id2 || true\nUSER ghost\nRUN true\n")
    with pytest.raises(DockerfileError, match="no user 'ghost'") as e:
        build_image(byard, ctx, tag="test/user:1")
    assert e.value.line == 7
    ctx = write_dockerfile(tmp_path, "FROM debian:bookworm\nUSER nobody:nogroup\nRUN id -u > /tmp/id && id -g >> /tmp/id"
                                     "\nUSER 4242\nRUN id -u > /tmp/id2 && test \"$HOME\" = /\n")
    img = build_image(byard, ctx, tag="test/user:2")
    with byard.sandbox(img) as sb:
        assert sb.exec("cat /tmp/id /tmp/id2").stdout == "65534\n65534\n4242\n"


def test_a_failing_run_names_its_step_and_leaves_nothing(byard, tmp_path):
    ctx = write_dockerfile(tmp_path, "FROM debian:bookworm\nRUN echo fine\nRUN echo working; echo 'it broke' >&2; exit 3\n")
    before_layers = set(os.listdir(byard.store.layers_dir))
    with pytest.raises(RunFailed) as e:
        build_image(byard, ctx, tag="test/fail:1")
    err = e.value
    assert err.line == 3 and err.returncode == 3 and "it broke" in err.output and "working" in err.output
    assert "line 3" in err.message and "exited 3" in err.message and "it broke" in err.message
    assert err.exit_code == 11
    byard.wait_closed()
    assert [s for s in byard.sandboxes() if s.owner_alive()] == []
    assert not [n for n in os.listdir(byard.store.layers_dir) if n.startswith(".new-")]
    assert set(os.listdir(byard.store.layers_dir)) == before_layers  # `RUN echo fine` made no layer
    assert not byard.store.has_image("test/fail:1")


def test_a_run_past_the_disk_limit_is_diskfull_not_the_dockerfiles_failure(byard, tmp_path, monkeypatch):
    """A RUN that writes more than a build step may (a real btrfs quota, lowered to 64M here) fails with
    DiskFull (exit 25) naming the limit, not as a failing command of the Dockerfile (exit 11)."""
    from envyard.errors import DiskFull

    if not byard.can_limit_disk:
        pytest.skip("no disk limits on this machine (btrfs volume unavailable)")
    monkeypatch.setattr("envyard.build.executor.BUILD_DISK", "64M")
    ctx = write_dockerfile(tmp_path, "FROM debian:bookworm\nRUN head -c 160M /dev/zero > /fill\n")
    with pytest.raises(DiskFull, match=r"disk limit \(64M\).*Disk quota exceeded") as e:
        build_image(byard, ctx, tag="test/diskfull:1")
    assert e.value.exit_code == 25
    byard.wait_closed()
    assert [s for s in byard.sandboxes() if s.owner_alive()] == []
    assert not byard.store.has_image("test/diskfull:1")


def test_bad_inputs(byard, tmp_path):
    cases = [
        ("FROM debian:bookworm\nFROBNICATE x\n", DockerfileError, "line 2: unknown instruction 'FROBNICATE'"),
        ("FROM debian:bookworm\nCOPY missing.txt /x\n", ContextError, "missing.txt is not in the build context"),
        ("FROM --platform=linux/arm64 debian:bookworm\n", DockerfileError, "envyard builds for this machine only"),
        # with a registry puller (envyard.images) this becomes that puller's error, still naming the image
        ("FROM no-such-image:1\n", ImageNotFound if NO_PULLER else envyard.EnvyardError, "no-such-image"),
        ("RUN true\n", DockerfileError, "before the first FROM"),
        ("FROM scratch\nRUN true\n", BuildError, "RUN needs /bin/sh"),
        ("FROM scratch\nCOPY --frob=1 a /a\n", DockerfileError, "does not take --frob"),
        ("FROM scratch\nCOPY ../outside /a\n", ContextError, "outside the build context"),
        ("FROM scratch\nCOPY Dockerfile Dockerfile /a\n", DockerfileError, "must be a directory ending in /"),
        ("FROM debian:bookworm\nRUN --mount=type=secret,id=x true\n", DockerfileError, "type=secret is not supported"),
        ("FROM scratch\nEXPOSE 80/bogus\n", DockerfileError, "is not a port"),
        ("FROM scratch\nSHELL /bin/bash\n", DockerfileError, "JSON array"),
    ]
    for text, kind, message in cases:
        ctx = write_dockerfile(tmp_path, text)
        with pytest.raises(kind) as e:
            build_image(byard, ctx, tag="test/bad:1")
        assert message in str(e.value), (text, str(e.value))
        assert e.value.fix


# ---- FROM scratch: no sandbox at all --------------------------------------------------------------------------


def test_from_scratch(scratch_yard, tmp_path):
    ctx = fixture(tmp_path, "scratch")
    img = build_image(scratch_yard, ctx, tag="test/scratch:1", build_args={"OWNER": "1500"})
    tree = layer_tree(scratch_yard, img)
    assert tree["/etc"] == ("dir", 0o755, "1500:1500") and tree["/etc/motd"] == ("file", 0o644, "1500:1500")
    assert tree["/etc/motd.copy"] == ("file", 0o644, "0:0") and tree["/app"] == ("dir", 0o755, "0:0")
    c = img.config
    assert (c.workdir, c.user, c.cmd) == ("/app", "1000", ["/app/run"])
    assert c.env == {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "A": "1",
                     "B": "two words"}


def test_dockerignore_is_honoured(scratch_yard, tmp_path):
    ctx = fixture(tmp_path, "ignore")
    img = build_image(scratch_yard, ctx, tag="test/ignore:1")
    files = sorted(p for p, (kind, _, _) in layer_tree(scratch_yard, img).items() if kind == "file")
    assert files == ["/ctx/.dockerignore", "/ctx/keep.txt", "/ctx/secret/keep.txt", "/ctx/src/debug.log",
                     "/ctx/src/main.py"]
    (ctx / "Dockerfile").write_text("FROM scratch\nCOPY secret/key.pem /k\n")
    with pytest.raises(ContextError, match="excluded by .dockerignore"):
        build_image(scratch_yard, ctx, tag="test/ignore:2")
    # an ignored file changing does not invalidate the cache
    (ctx / "Dockerfile").write_text("FROM scratch\nCOPY . /ctx/\n")
    events = Events()
    (ctx / "app.log").write_text("changed\n")
    build_image(scratch_yard, ctx, tag="test/ignore:3", on_progress=events)
    assert events.ran() == [] and events.cached() == ["COPY . /ctx/"]


# ---- the command line -----------------------------------------------------------------------------------------


def envyard_cli(home, *args, timeout=300, **popen):
    return subprocess.run([sys.executable, "-m", "envyard.cli.main", *map(str, args)], capture_output=True,
                          text=True, env={"ENVYARD_HOME": str(home), **BARE}, timeout=timeout,
                          cwd=cli_cwd(), **popen)


def test_cli_build_exit_codes_and_json(scratch_yard, tmp_path):
    home = scratch_yard.store.home
    ctx = fixture(tmp_path, "scratch")
    r = envyard_cli(home, "build", "-t", "cli/scratch:1", ctx, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["name"] == "cli/scratch:1" and data["config"]["cmd"] == ["/app/run"] and len(data["steps"]) == 8
    r = envyard_cli(home, "build", "-t", "cli/scratch:1", ctx)
    assert r.returncode == 0 and "[3/8] COPY --chown=${OWNER}:${OWNER} rootfs/ / CACHED" in r.stderr
    assert "3 of 3 steps that make layers came from the cache" in r.stdout
    ls = envyard_cli(home, "images")
    assert "buildcache/" not in ls.stdout and "cli/scratch" in ls.stdout
    assert "buildcache/" in envyard_cli(home, "images", "--all").stdout
    bad = [("FROM scratch\nBOGUS\n", 9), ("FROM scratch\nCOPY nope /x\n", 10)] + [("FROM nope:1\n", 3)] * NO_PULLER
    for text, code in bad:
        (ctx / "Dockerfile").write_text(text)
        r = envyard_cli(home, "build", "-t", "cli/bad:1", ctx)
        assert r.returncode == code, (text, r.stderr)
        assert "error:" in r.stderr and "fix:" in r.stderr
    pruned = envyard_cli(home, "build-cache", "prune", "--json")
    assert pruned.returncode == 0 and json.loads(pruned.stdout)["removed"]
    assert "0 entries" in envyard_cli(home, "build-cache", "ls").stdout


def test_cli_run_failure_timeout_and_interrupt(byard, tmp_path):
    home = byard.store.home
    ctx = write_dockerfile(tmp_path, "FROM debian:bookworm\nRUN echo some output; exit 7\n")
    r = envyard_cli(home, "build", "-t", "cli/fail:1", ctx)
    assert r.returncode == 11 and "some output" in r.stderr and "line 2" in r.stderr and "exited 7" in r.stderr
    (ctx / "Dockerfile").write_text("FROM debian:bookworm\nRUN sleep 30\n")
    t0 = time.monotonic()
    r = envyard_cli(home, "build", "-t", "cli/slow:1", ctx, "--timeout", "2")
    assert r.returncode == 12 and time.monotonic() - t0 < 20, r.stderr
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "envyard.cli.main", "build", "-t", "cli/slow:2", str(ctx)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cli_cwd(),
                            env={"ENVYARD_HOME": str(home), **BARE, "TMPDIR": str(tmp)}, preexec_fn=sigint_default)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(s.owner_pid == proc.pid for s in byard.sandboxes()):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert not [s for s in byard.sandboxes() if s.owner_pid == proc.pid]
    assert not [n for n in os.listdir(home / "layers") if n.startswith(f".new-{proc.pid}-")]
    assert list(tmp.iterdir()) == []


def test_a_harbor_task_image_is_built_from_its_dockerfile(byard):
    from envyard.envs import load_task
    from envyard.envs.verify import task_image

    task = load_task(Path(__file__).resolve().parent / "fixtures" / "tasks" / "harbor-hello")
    img = task_image(byard, task)
    assert img.config.workdir == "/app" and img.config.env["GREETING_FILE"] == "/app/hello.txt"
    assert img.config.provenance["provider"] == "build"
