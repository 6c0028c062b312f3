"""`envyard build`: a Dockerfile into an image, without Docker; `envyard build-cache`: list and prune its cache."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from ..errors import BadInput, EnvyardError
from .helpstyle import App

INTERRUPTED = 130


def _build_args(pairs: list[str]) -> dict[str, str]:
    """--build-arg K=V, or K alone to take K's value from this environment (as docker build does)."""
    args = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not key:
            raise BadInput(f"--build-arg takes NAME=VALUE, got {pair!r}")
        if not eq:
            if key not in os.environ:
                continue  # docker build skips a bare name that is not set
            value = os.environ[key]
        args[key] = value
    return args


class StepPrinter:
    """Progress on stderr, one line per step (coloured on a terminal): the line is written when the step ends,
    or as soon as it prints something, whose output then follows, indented."""

    def __init__(self, err, quiet: bool):
        self.err, self.quiet = err, quiet
        self.steps: list[dict] = []
        self._pending: tuple[str, str] | None = None  # the current step's line, not written yet
        self._line_open = False

    def __call__(self, event: dict) -> None:
        kind = event["event"]
        if kind == "step":
            self.steps.append({"n": event["n"], "line": event["line"], "stage": event["stage"],
                               "instruction": event["instruction"], "cached": False, "layer": False})
            head = f"[{event['n']}/{event['total']}]"
            self._pending = (f"[bold cyan]{head}[/] {escape(event['instruction'])}", f"{head} {event['instruction']}")
        elif kind == "output":
            self._flush()
            if not self.quiet:
                text = event["text"]
                self.err.file.write(("" if self._line_open else "    ") + text.replace("\n", "\n    ").rstrip(" "))
                self._line_open = not text.endswith("\n")
                self.err.file.flush()
        elif kind == "done":
            self.steps[-1].update(seconds=event["seconds"], cached=event["cached"], layer=event["layer"],
                                  touches_files=event.get("touches_files", False))
            note = " CACHED" if event["cached"] else (f" {event['seconds']:.1f}s" if event["seconds"] >= 0.05 else "")
            self._flush(note)
        elif kind == "warning":
            self._flush()
            self._write(f"[yellow]warning:[/] {escape(event['message'])}", f"warning: {event['message']}")

    def _flush(self, note: str = "") -> None:
        if self._pending is not None:
            styled, plain = self._pending
            self._pending = None
            self._write(styled + (f"[green]{note}[/]" if note.strip() == "CACHED" else f"[dim]{note}[/]"), plain + note)

    def _write(self, styled: str, plain: str) -> None:
        if self.quiet:
            return
        if self._line_open:
            self.err.file.write("\n")
            self._line_open = False
        if self.err.is_terminal:
            self.err.print(styled, highlight=False)
        else:
            self.err.file.write(plain + "\n")
            self.err.file.flush()


def register(app: typer.Typer, out, err, fail, emit_json, make_yard) -> None:
    @app.command()
    def build(
        context: Path = typer.Argument(..., help="The build context: the directory COPY and ADD read from."),
        tag: str = typer.Option(..., "--tag", "-t", help="Name of the image to make, name[:tag]."),
        file: Optional[Path] = typer.Option(None, "--file", "-f", help="The Dockerfile (default: CONTEXT/Dockerfile)."),
        build_arg: list[str] = typer.Option([], "--build-arg", help="NAME=VALUE for an ARG, repeatable (NAME alone: "
                                            "its value here)."),
        target: Optional[str] = typer.Option(None, "--target", help="Build up to this stage (FROM ... AS NAME)."),
        no_cache: bool = typer.Option(False, "--no-cache", help="Run every step again (the cache is still updated)."),
        timeout: Optional[float] = typer.Option(None, "--timeout", help="Limit for the whole build, in seconds."),
        as_json: bool = typer.Option(False, "--json", help="No progress; print the image and its steps as JSON."),
    ):
        """Build a Dockerfile into an image, without Docker: RUN steps run in sandboxes, COPY/ADD write layers
        directly, unchanged steps come from the build cache. FROM names an image in the store (`envyard base
        pull`, `base import`, an earlier build) or `scratch`. Exit codes: 0 built, 2 bad input, 3 FROM image not
        found, 9 bad Dockerfile, 10 file not in the context, 11 a RUN failed, 12 timeout, 130 Ctrl-C. See
        docs/build.md."""
        from ..build import RunFailed, build_image

        printer = StepPrinter(err, quiet=as_json)
        yard = None
        started = time.monotonic()
        try:
            if timeout is not None and timeout <= 0:
                raise BadInput(f"--timeout must be positive, got {timeout}")
            yard = make_yard()
            img = build_image(yard, context, dockerfile=file, tag=tag, build_args=_build_args(build_arg),
                              target=target, no_cache=no_cache, on_progress=printer, timeout=timeout)
        except RunFailed as e:
            if as_json:  # nothing was streamed: show the end of the output
                err.file.write(e.output[-2000:] + ("\n" if not e.output.endswith("\n") else ""))
            fail(e)
        except EnvyardError as e:
            fail(e)
        except KeyboardInterrupt:
            err.print("interrupted: the running step was stopped and nothing of it was kept")
            raise typer.Exit(INTERRUPTED)
        finally:
            if yard is not None:
                yard.close()
        seconds = time.monotonic() - started
        cached = sum(1 for s in printer.steps if s["cached"])
        file_steps = sum(1 for s in printer.steps if s.get("touches_files"))
        if as_json:
            emit_json({**img.to_dict(), "steps": printer.steps, "cached_steps": cached, "seconds": round(seconds, 3)})
        else:
            out.print(f"{img.name} built in {seconds:.1f}s ({len(img.layers)} layers; {cached} of {file_steps} "
                      "steps that make layers came from the cache)", markup=False)

    cache_app = App(help="The build cache: each cached step is an image named buildcache/<key>.",
                    no_args_is_help=True)
    app.add_typer(cache_app, name="build-cache")

    @cache_app.command("ls")
    def cache_ls(as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
        """List build cache entries (newest use first) and their total size."""
        from ..build import cache

        try:
            yard = make_yard()
            entries = sorted(cache.entries(yard.store), key=lambda i: -i.created)
            new_bytes = {i.name: yard.store.layer(i.layers[-1]).size if i.layers else 0 for i in entries}
        except EnvyardError as e:
            fail(e)
        if as_json:
            emit_json([{"name": i.name, "layers": i.layers, "last_used": i.created, "top_layer_size": new_bytes[i.name]}
                       for i in entries])
            return
        for i in entries:
            used = time.strftime("%Y-%m-%d %H:%M", time.localtime(i.created))
            out.print(f"{i.name}  last used {used}  top layer {new_bytes[i.name] / 1e6:.1f} MB", markup=False)
        out.print(f"{len(entries)} entries", markup=False)

    @cache_app.command("prune")
    def cache_prune(older_than: float = typer.Option(0, "--older-than", help="Only entries unused for this many "
                                                     "hours (default: all)."),
                    as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
        """Remove build cache entries; their layers go once no image or sandbox uses them."""
        from ..build import cache

        try:
            if older_than < 0:
                raise BadInput(f"--older-than must be >= 0, got {older_than}")
            gone = cache.prune(make_yard().store, older_than * 3600)
        except EnvyardError as e:
            fail(e)
        if as_json:
            emit_json({"removed": gone})
        else:
            out.print(f"removed {len(gone)} build cache entries", markup=False)
