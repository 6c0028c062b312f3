"""The `envyard` command line (typer). Every reporting command takes --json for scripts."""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .. import __version__
from ..errors import BadInput, EnvyardError, SandboxNotFound
from ..runtime.limits import Limits
from .helpstyle import App
from .run import RUN_ERROR, Failed
from .run import check_spec as _spec, env_pairs as _env, strip_dashes as _strip_dashes  # noqa: F401  (shared)

app = App(
    help="envyard: executable environments for agents — fast, daemonless, forkable sandboxes over a layer store.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    # -h as well as --help; subcommands and groups inherit this from the top-level context
    context_settings={"help_option_names": ["-h", "--help"]},
)
base_app = App(help="Make base images: the host's root, Debian via debootstrap, or an imported archive.",
               no_args_is_help=True)
app.add_typer(base_app, name="base")

# Piped output is read by people's scripts: tables are never cut to 80 columns there (`setup/x:la…`).
out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 4096)
err = Console(stderr=True, soft_wrap=True)


def _yard(backend: str = "local"):
    from ..yard import Yard

    return Yard(backend=backend)


BACKEND_HELP = "Where the sandbox runs: local (namespaces, default) or docker (a Docker engine; docs/docker.md)."


def _fail(e: EnvyardError, code: int | None = None) -> None:
    err.print(f"[bold red]error:[/] {escape(e.message)}", highlight=False)
    if e.fix:
        err.print(f"[bold]fix:[/] {escape(e.fix)}", highlight=False)
    raise typer.Exit(code if code is not None else e.exit_code)


def _emit_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _limits(memory: str | None, pids: int | None, cpus: float | None, disk: str | None = None) -> Limits:
    return Limits(memory=memory, pids=pids, cpus=cpus, disk=disk)


def _version(value: bool):
    if value:
        out.print(f"envyard {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version.")):
    """envyard keeps images as stacks of layers in $ENVYARD_HOME and runs sandboxes over them."""


# ---- sandboxes -----------------------------------------------------------------------------------------------


@app.command(context_settings={"allow_interspersed_args": False})
def run(
    image: str = typer.Argument(..., help="Image name, e.g. host or debian:bookworm."),
    cmd: list[str] = typer.Argument(..., help="The command and its arguments (put them after --)."),
    network: str = typer.Option("none", help="none (default) or host."),
    memory: Optional[str] = typer.Option(None, help="Memory limit, e.g. 512M."),
    pids: Optional[int] = typer.Option(None, help="Maximum number of processes."),
    cpus: Optional[float] = typer.Option(None, help="CPU share, e.g. 0.5."),
    disk: Optional[str] = typer.Option(None, help="What the sandbox may write, e.g. 2G (default 10G)."),
    env: list[str] = typer.Option([], "--env", "-e", help="KEY=VALUE, repeatable."),
    workdir: Optional[str] = typer.Option(None, "--workdir", "-w", help="Working directory inside the sandbox."),
    timeout: Optional[float] = typer.Option(None, help="Kill the command after this many seconds (exit 124)."),
    as_json: bool = typer.Option(False, "--json", help="Capture output and print an ExecResult as JSON."),
    security: str = typer.Option("default", help="default, or relaxed: no seccomp filter (nested sandboxes, "
                                 "user namespaces, io_uring, perf); see docs/security.md."),
    backend: str = typer.Option("local", "--backend", help=BACKEND_HELP),
):
    """Run one command in a throwaway sandbox. Options go before IMAGE. The exit code is the command's (124 after
    --timeout); envyard's own errors exit 125."""
    from .run import run as run_command

    try:
        code = run_command(image, cmd, network=network, memory=memory, pids=pids, cpus=cpus, disk=disk, env=env,
                           workdir=workdir, timeout=timeout, as_json=as_json, security=security, backend=backend)
    except Failed as e:
        _fail(e.error, RUN_ERROR)
    raise typer.Exit(code)


@app.command()
def shell(
    image: str = typer.Argument("host", help="Image to open a shell in."),
    network: str = typer.Option("none", help="none (default) or host."),
    memory: Optional[str] = typer.Option(None, help="Memory limit, e.g. 512M."),
    security: str = typer.Option("default", help="default, or relaxed: no seccomp filter (nested sandboxes, "
                                 "user namespaces, io_uring, perf); see docs/security.md."),
    backend: str = typer.Option("local", "--backend", help=BACKEND_HELP),
):
    """Open an interactive shell in a throwaway sandbox (bash when the image has it)."""
    try:
        yard = _yard(backend)
        _spec(image, network, None)
        code = yard.run_attached(image, ["/bin/sh", "-c", "command -v bash >/dev/null && exec bash -i || exec sh -i"],
                                 network=network, limits=_limits(memory, None, None), security=security)
    except EnvyardError as e:
        _fail(e, RUN_ERROR)
    raise typer.Exit(code)


@app.command()
def ps(as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
    """List sandboxes in the store, with their owner process and whether it is still alive."""
    try:
        recs = _yard().sandboxes()
    except EnvyardError as e:
        _fail(e)
    if as_json:
        _emit_json([r.to_dict() for r in recs])
        return
    t = Table("ID", "IMAGE", "OWNER PID", "OWNER", "NETWORK", "AGE")
    for r in recs:
        t.add_row(r.id, r.image, str(r.owner_pid), "alive" if r.owner_alive() else "dead (gc reclaims)", r.network,
                  f"{time.time() - r.created:.0f}s")
    out.print(t)


@app.command()
def rm(ids: list[str] = typer.Argument(..., help="Sandbox ids (see `envyard ps`)."),
       as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
    """Kill sandboxes and delete their files, whoever owns them."""
    from ..gc import reclaim

    try:
        yard = _yard()
    except EnvyardError as e:
        _fail(e)
    removed, failed = [], []
    for sid in ids:
        rec = yard.store.sandbox(sid)
        if rec is None:
            failed.append(SandboxNotFound(f"no sandbox {sid}", fix="list sandboxes with `envyard ps`"))
            continue
        reclaim(yard.store, rec)
        removed.append(sid)
    _report_removals(removed, failed, as_json)


@app.command()
def snapshot(sandbox_id: str = typer.Argument(..., help="A running sandbox (see `envyard ps`)."),
             name: str = typer.Option(..., "--name", "-n", help="Name of the new image, name[:tag]."),
             as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
    """Save a running sandbox's changes as a new image; the sandbox keeps running."""
    from .. import procinfo
    from ..runtime.local import copy_upper, upper_dir_of
    from ..store import parse_image_name

    try:
        yard = _yard()
        name = parse_image_name(name)
        rec = yard.store.sandbox(sandbox_id)
        if rec is None or not procinfo.is_alive(rec.init_pid, rec.init_start):
            raise SandboxNotFound(f"no running sandbox {sandbox_id}", fix="list sandboxes with `envyard ps`")
        parent = yard.image(rec.image)
        built = copy_upper(yard.store, upper_dir_of(yard.store, rec.id), procinfo.pid_namespace(rec.init_pid),
                           rec.init_pid)
        layer = yard.store.seal_layer(built, {"snapshot_of": rec.id, "image": rec.image})
        parent.config.provenance = {**parent.config.provenance, "snapshot_of": rec.id, "parent_image": rec.image}
        img = yard.store.put_image(name, [*rec.layers, layer.id], parent.config)
    except EnvyardError as e:
        _fail(e)
    if as_json:
        _emit_json(img.to_dict())
    else:
        out.print(f"{img.name} ({len(img.layers)} layers, {layer.size / 1e6:.1f} MB new)")


@app.command()
def gc(as_json: bool = typer.Option(False, "--json", help="Print JSON."),
       backend: Optional[str] = typer.Option(None, "--backend", help="Also reap this backend's leftovers: docker "
                                             "removes containers of dead owners. Default: docker too when its "
                                             "socket answers."),
       cache: bool = typer.Option(False, "--cache", help="Also prune the package cache of `envyard setup` "
                                  "(see `envyard df`), down to --cache-max."),
       cache_max: str = typer.Option("0", "--cache-max", help="With --cache: keep at most this much, e.g. 2G "
                                     "(0: empty it)."),
       dedupe: bool = typer.Option(True, "--dedupe/--no-dedupe", help="Store identical files of layers once "
                                   "(layers on the sandbox volume, each looked at once).")):
    """Reclaim sandboxes of dead owners (processes, cgroups, files), unfinished and unused layers, and trash;
    store identical files of layers once."""
    try:
        from ..diskuse import parse_size, prune_cache

        keep = parse_size(cache_max)
        yard = _yard()
        report = yard.gc()
        if dedupe:
            from ..store.dedupe import dedupe as share_identical_files

            report["dedupe"] = share_identical_files(yard.store)
        if cache:
            report["package_cache"] = prune_cache(yard.store, keep)
        if backend == "docker" or (backend is None and _docker_reachable()):
            from ..runtime.docker_backend import reap_containers

            report.update(reap_containers(yard.store, required=backend == "docker"))
        elif backend not in (None, "local"):
            raise BadInput(f"unknown backend {backend!r}", fix="use local or docker")
    except EnvyardError as e:
        _fail(e)
    if as_json:
        _emit_json(report)
        return
    for key, value in report.items():
        if key == "package_cache":
            out.print(f"package cache: {value['before_bytes'] / 1e6:.1f} MB -> {value['after_bytes'] / 1e6:.1f} MB")
            continue
        if key == "dedupe":
            out.print(f"identical files stored once: {value['files']} ({value['bytes'] / 1e6:.1f} MB) in "
                      f"{value['layers']} new layers")
            continue
        n = value if isinstance(value, int) else len(value)
        out.print(f"{key.replace('_', ' ')}: {n}")


def _docker_reachable() -> bool:
    from ..runtime.docker_backend import docker_socket_present

    return docker_socket_present()


# ---- images --------------------------------------------------------------------------------------------------


@app.command()
def images(as_json: bool = typer.Option(False, "--json", help="Print JSON."),
           show_all: bool = typer.Option(False, "--all", "-a", help="Also list build cache entries (buildcache/...).")):
    """List images in the store (build cache entries only with --all)."""
    try:
        yard = _yard()
        imgs = [i for i in yard.images() if show_all or not i.name.startswith("buildcache/")]
        sizes = {i.name: yard.store.image_size(i) for i in imgs}
    except EnvyardError as e:
        _fail(e)
    if as_json:
        _emit_json([{**i.to_dict(), "size": sizes[i.name]} for i in imgs])
        return
    t = Table("NAME", "LAYERS", "SIZE", "PROVIDER", "CREATED")
    for i in imgs:
        t.add_row(i.name, str(len(i.layers)), f"{sizes[i.name] / 1e6:.1f} MB", _provider(i.config.provenance),
                  time.strftime("%Y-%m-%d %H:%M", time.localtime(i.created)))
    out.print(t)


def _provider(provenance: dict) -> str:
    """What made the image; a snapshot says so, with what made the image it was taken of."""
    made_by = str(provenance.get("provider", ""))
    if provenance.get("snapshot_of"):
        return f"snapshot ({made_by})" if made_by else "snapshot"
    return made_by or "snapshot"


@app.command()
def rmi(names: list[str] = typer.Argument(..., help="Image names."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
    """Remove images (their layers go when nothing else uses them)."""
    try:
        yard = _yard()
    except EnvyardError as e:
        _fail(e)
    removed, failed = [], []
    for n in names:
        try:
            removed.append(yard.remove_image(n).name)
        except EnvyardError as e:
            failed.append(e)
    _report_removals(removed, failed, as_json)


def _report_removals(removed: list[str], failed: list[EnvyardError], as_json: bool) -> None:
    """Print what went and what could not; exit with the first failure's code (all items are tried)."""
    if as_json:
        _emit_json({"removed": removed, "errors": [e.message for e in failed]})
    else:
        for item in removed:
            out.print(f"removed {item}", markup=False)
    if failed:
        if as_json:
            raise typer.Exit(failed[0].exit_code)
        for e in failed[1:]:
            err.print(f"error: {e.message}", markup=False)
        _fail(failed[0])


@base_app.command("pull")
def base_pull(spec: str = typer.Argument(..., help="host, or debian:<suite> (bullseye, bookworm, trixie)."),
              as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
    """Build a base image (cached: a second pull returns at once)."""
    try:
        yard = _yard()
        if as_json:
            img = yard.pull(spec)
        else:
            with err.status(escape(f"building {spec}…")) as status:
                img = yard.pull(spec, on_progress=lambda line: status.update(escape(f"{spec}: {line}")))
    except EnvyardError as e:
        _fail(e)
    except KeyboardInterrupt:
        err.print("interrupted; the partial build was removed")
        raise typer.Exit(130)
    if as_json:
        _emit_json(img.to_dict())
    else:
        out.print(f"{img.name} ready ({yard.store.image_size(img) / 1e6:.0f} MB)")


@base_app.command("import")
def base_import(path: Path = typer.Argument(..., help="A rootfs tarball or a `docker save` archive."),
                name: str = typer.Option(..., "--name", "-n", help="Image name, name[:tag]."),
                as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
    """Import a rootfs tarball or `docker save` archive as an image."""
    try:
        yard = _yard()
        with err.status(escape(f"importing {path}…")) as status:
            img = yard.import_image(path, name, on_progress=lambda line: status.update(escape(line)))
    except EnvyardError as e:
        _fail(e)
    if as_json:
        _emit_json(img.to_dict())
    else:
        out.print(f"{img.name} imported ({len(img.layers)} layers)")


# ---- diagnostics and the tour --------------------------------------------------------------------------------


@app.command()
def doctor(as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
    """Check this machine can run sandboxes (bubblewrap, overlayfs, namespaces, cgroups); list images to rebuild."""
    report = {"envyard": __version__, "home": None, "ok": False}
    try:
        yard = _yard()
        report["home"] = str(yard.store.home)
        report.update(yard.backend.check())
        with yard.sandbox("host") as sb:
            r = sb.exec("echo ok")
        report["sandbox"] = r.stdout.strip() == "ok"
        report["ok"] = report["sandbox"]
        if yard.backend.name == "local":
            from ..runtime.local import images_to_rebuild

            report["images_to_rebuild"] = images_to_rebuild(yard.store)
    except EnvyardError as e:
        report["error"] = str(e)
        if as_json:
            _emit_json(report)
            raise typer.Exit(e.exit_code)
        _fail(e)
    if as_json:
        _emit_json(report)
        return
    for k, v in report.items():
        out.print(f"{k}: {v}")


@app.command()
def demo(
    image: str = typer.Option("host", help="Image to use (default: the host's root, no set-up)."),
    forks: int = typer.Option(4, help="How many sandboxes to fork from the snapshot."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
):
    """A tour of the core: create a sandbox, run commands, snapshot it, fork it, reset it — with timings."""
    timings: dict[str, float] = {}

    def timed(key, fn):
        t = time.perf_counter()
        value = fn()
        timings[key] = (time.perf_counter() - t) * 1000
        return value

    snap = None
    try:
        if forks < 1:
            raise BadInput(f"--forks must be at least 1, got {forks}")
        yard = _yard()
        yard.image(image)  # first use of `host` mounts its view; keep that out of the create timing
        sb = timed("create_ms", lambda: yard.sandbox(image))
        try:
            first = timed("first_exec_ms", lambda: sb.exec("uname -sr; echo hello from $(hostname)"))
            execs = [sb.exec("true").duration * 1000 for _ in range(20)]
            timings["exec_median_ms"] = statistics.median(execs)
            sh = sb.shell()
            sh.run("cd /tmp && export GREETING=hi")
            session = [timed("_", lambda: sh.run("true")) and timings["_"] for _ in range(50)]
            timings.pop("_", None)
            timings["session_roundtrip_median_ms"] = statistics.median(session)
            sb.write_file("/tmp/state.txt", "written before the snapshot\n")
            snap = timed("snapshot_ms", lambda: sb.snapshot())
            kids = timed("fork_total_ms", lambda: yard.fork(snap, forks))
            timings["fork_per_child_ms"] = timings["fork_total_ms"] / forks
            seen = [k.read_file("/tmp/state.txt").decode().strip() for k in kids]
            for k in kids:
                k.close()
            sb.exec("rm -rf /tmp/state.txt /etc/hostname")
            timed("reset_ms", sb.reset)
            after_reset = sb.exec("test -e /etc/hostname && echo restored").stdout.strip()
        finally:
            timed("close_ms", sb.close)
            if snap is not None:
                yard.remove_image(snap.name)
    except EnvyardError as e:
        _fail(e)
    result = {
        "image": image, "first_output": first.stdout.strip().splitlines(), "forks_saw_snapshot": seen,
        "reset": after_reset, "timings_ms": {k: round(v, 3) for k, v in timings.items()},
        "cgroups": getattr(yard.backend, "cgroups", None) and yard.backend.cgroups.mode,
    }
    if as_json:
        _emit_json(result)
        return
    out.print(f"[bold]envyard demo[/] on image [cyan]{image}[/] (cgroups: {result['cgroups']})")
    for line in result["first_output"]:
        out.print(f"  sandbox says: {line}")
    out.print(f"  {forks} forks of the snapshot each read: {seen[0]!r}")
    out.print(f"  after reset, the deleted /etc/hostname is {after_reset or 'still missing (unexpected)'}")
    t = Table("step", "time (ms)")
    for k, v in result["timings_ms"].items():
        t.add_row(k.removesuffix("_ms").replace("_", " "), f"{v:.2f}")
    out.print(t)


from . import build as _build  # noqa: E402  (command groups live in their own modules)
from . import derive as _derive  # noqa: E402
from . import disk as _disk  # noqa: E402
from . import envs as _envs  # noqa: E402
from . import images as _images  # noqa: E402
from . import mcp as _mcp  # noqa: E402
from . import serve as _serve  # noqa: E402
from . import setup as _setup  # noqa: E402

for _module in (_images, _setup, _derive, _build, _envs, _serve, _mcp, _disk):
    _module.register(app, out, err, _fail, _emit_json, _yard)


def entry() -> None:
    from .entry import main as console_main

    console_main(app)


if __name__ == "__main__":
    entry()
