"""`envyard pull`, `push`, `save` and `load`: OCI images from and to registries and files (docs/images.md)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from ..errors import EnvyardError

INTERRUPTED = 130


class _Bars:
    """One progress bar per blob on stderr, fed by the Progress reports of envyard.images."""

    def __init__(self, console):
        self.live = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                             console=console, transient=False)
        self.tasks: dict[str, int] = {}

    def __call__(self, report) -> None:
        if report.digest is None or report.phase == "resolve" or (report.phase == "done"
                                                                  and report.digest not in self.tasks):
            self.live.console.print(escape(str(report)), highlight=False)
            return
        label = f"{report.digest[7:19]} {report.phase}"
        task = self.tasks.get(report.digest)
        if task is None:
            task = self.tasks[report.digest] = self.live.add_task(label, total=report.total or None)
        finished = report.phase in ("exists", "mounted", "done", "skip")
        self.live.update(task, description=label, total=report.total or None,
                         completed=report.total if finished else report.done)


@contextlib.contextmanager
def _progress(err, quiet: bool):
    if quiet:
        yield None
        return
    bars = _Bars(err)
    with bars.live:
        yield bars


def register(app: typer.Typer, out, err, fail, emit_json, make_yard) -> None:
    @app.command()
    def pull(ref: str = typer.Argument(..., help="Image reference: python:3.12-slim, ghcr.io/org/img:tag, "
                                       "127.0.0.1:5000/team/img:v1, or NAME@sha256:DIGEST."),
             as_json: bool = typer.Option(False, "--json", help="Print JSON (and no progress bars).")):
        """Pull an image from a registry, without a Docker daemon. Layers are stored once by digest, downloads
        resume after an interruption. The image is named in full (docker.io/library/python:3.12-slim) and
        found by its short name too."""
        from ..images import pull_image

        phases: dict[str, str] = {}  # layer digest → "exists" or "download", whichever came first

        try:
            yard = make_yard()
            with _progress(err, as_json) as bars:
                def on_progress(report) -> None:
                    if report.digest and report.phase in ("exists", "download"):
                        phases.setdefault(report.digest, report.phase)
                    if bars:
                        bars(report)

                img = pull_image(yard, ref, on_progress=on_progress)
        except EnvyardError as e:
            fail(e)
        except KeyboardInterrupt:
            err.print("interrupted: no image was recorded; the next pull resumes the download")
            raise typer.Exit(INTERRUPTED)
        if as_json:
            emit_json({**img.to_dict(), "digest": img.config.provenance.get("manifest_digest"),
                       "downloaded": sorted(d for d, p in phases.items() if p == "download"),
                       "reused": sorted(d for d, p in phases.items() if p == "exists")})
        else:
            out.print(f"{img.name} ({img.config.provenance.get('manifest_digest')}, {len(img.layers)} layers)",
                      markup=False)

    @app.command()
    def push(name: str = typer.Argument(..., help="An image in the store (see `envyard images`)."),
             ref: Optional[str] = typer.Argument(None, help="Where to push it, e.g. 127.0.0.1:5000/team/img:v1. "
                                                 "Default: NAME itself."),
             format: str = typer.Option("oci", "--format", help="Manifest media types: oci, or docker (schema 2)."),
             as_json: bool = typer.Option(False, "--json", help="Print JSON (and no progress bars).")):
        """Push an image to a registry. Layers the registry already has (or can mount from the repository they
        were pulled from) are not uploaded again."""
        from ..images import push_image

        try:
            yard = make_yard()
            with _progress(err, as_json) as bars:
                result = push_image(yard, name, ref, on_progress=bars, format=format)
        except EnvyardError as e:
            fail(e)
        except KeyboardInterrupt:
            err.print("interrupted: the tag was not written (uploaded layers stay in the registry)")
            raise typer.Exit(INTERRUPTED)
        if as_json:
            emit_json(result.to_dict())
        else:
            uploaded = sum(1 for layer in result.layers if layer["action"] == "uploaded")
            out.print(f"{result.reference} ({result.digest}, {uploaded} of {len(result.layers)} layers uploaded)",
                      markup=False)

    @app.command()
    def save(name: str = typer.Argument(..., help="An image in the store."),
             output: Path = typer.Option(..., "--output", "-o", help="The tar file (or directory, with --dir) to "
                                         "write; must not exist (--dir: or be empty)."),
             directory: bool = typer.Option(False, "--dir", help="Write an OCI layout directory, not a tar."),
             as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
        """Write an image as an OCI image layout (a tar, or a directory) that `envyard load` and `docker load`
        read."""
        from ..images import save_image

        try:
            yard = make_yard()
            with err.status(escape(f"saving {name}…")) as status:
                info = save_image(yard, name, output, directory=directory,
                                  on_progress=lambda r: status.update(escape(str(r))))
        except EnvyardError as e:
            fail(e)
        if as_json:
            emit_json(info)
        else:
            out.print(f"{info['name']} saved to {info['path']} ({info['digest']})", markup=False)

    @app.command()
    def load(path: Path = typer.Argument(..., help="An OCI layout (directory or tar) or `docker save` output."),
             name: Optional[str] = typer.Option(None, "--name", "-n", help="Image name (default: the name the "
                                                "archive carries)."),
             as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
        """Load an image from an OCI image layout or a `docker save` archive, with the checks of a pull."""
        from ..images import load_image

        try:
            yard = make_yard()
            with err.status(escape(f"loading {path}…")) as status:
                img = load_image(yard, path, name=name, on_progress=lambda r: status.update(escape(str(r))))
        except EnvyardError as e:
            fail(e)
        if as_json:
            emit_json(img.to_dict())
        else:
            out.print(f"{img.name} loaded ({len(img.layers)} layers)", markup=False)
