"""`envyard derive`: validated agent tasks derived from a verified setup image (docs/derive.md)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import BadInput, EnvyardError


def register(app: typer.Typer, out, err, fail, emit_json, make_yard) -> None:
    @app.command()
    def derive(
        source: str = typer.Argument(..., help="A verified setup image (e.g. setup/NAME), or a project to set up "
                                                "first: a directory or pypi:NAME==VERSION."),
        kind: str = typer.Option("bug", "--kind", "-k", help="Kinds of tasks, comma-separated: bug (code bugs), "
                                                              "env (environment breakage), commit (commit inversion)."),
        n: int = typer.Option(10, "--n", "-n", help="How many validated tasks to write (at most)."),
        seed: int = typer.Option(0, "--seed", "-s", help="Chooses the mutation sites: the same seed gives the same "
                                                           "tasks."),
        out_dir: Path = typer.Option(..., "--out", "-o", help="Where the tasks go (new or empty); report.json too."),
        workers: int = typer.Option(2, "--workers", "-j", help="Candidates screened and validated at once."),
        max_candidates: int = typer.Option(0, "--max-candidates", help="Give up after this many candidates "
                                           "(default 25 × N)."),
        rewrite_model: Optional[str] = typer.Option(None, "--rewrite-model", help="Optional: have this model "
                                                    "(any OpenAI-compatible chat endpoint) rewrite each task's "
                                                    "instruction as a user's issue; a rewrite that leaks the fix "
                                                    "or drops the failing tests is refused and the deterministic "
                                                    "one kept."),
        base_url: Optional[str] = typer.Option(None, "--base-url", help="With --rewrite-model: the endpoint "
                                               "(default $OPENAI_BASE_URL); the key comes from $OPENAI_API_KEY."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ):
        """Derive agent tasks from a verified environment by breaking it on purpose, keeping only what
        validation in forks proves fair: with no change the verifier scores 0 (the same tests fail 3 times out
        of 3), with the oracle's fix it scores 1, within its time limit. Tasks are written in the Harbor layout
        (instruction.md, task.toml, environment/, tests/, solution/); dropped candidates are listed with their
        reason in OUT/report.json. With --rewrite-model a model rewrites the instructions in natural language
        (instruction.deterministic.md keeps the original; [metadata] instruction says which is used). Exit 0
        when at least one task was written, 1 when none was, 2 on bad input (also a --rewrite-model with no
        endpoint configured), 3 when the image does not exist, 24 when it is not a verified setup image, 130 on
        Ctrl-C."""
        from ..derive.pipeline import check_out, derive as run_derive, parse_kinds

        cancel = threading.Event()
        try:
            kinds = parse_kinds(kind)
            if n < 1:
                raise BadInput(f"--n must be at least 1, got {n}")
            if workers < 1:
                raise BadInput(f"--workers must be at least 1, got {workers}")
            check_out(out_dir)
            if base_url is not None and rewrite_model is None:
                raise BadInput("--base-url needs --rewrite-model", fix="add --rewrite-model MODEL, or drop --base-url")
            if rewrite_model is not None:  # a bad configuration fails before the setup and the baseline run
                from ..derive.rewrite import Rewriter

                Rewriter(rewrite_model, base_url=base_url)
            yard = make_yard()
            image = _image_of(source, yard, err)
            progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=err,
                                transient=True, disable=as_json and not err.is_terminal)
            counts = {"candidates": 0, "dropped": 0}
            with progress:
                bar = progress.add_task("deriving", total=n, note="")

                def on_event(what, data):
                    if what == "candidate":
                        counts["candidates"] += 1
                    elif what == "dropped":
                        counts["dropped"] += 1
                    elif what == "kept":
                        progress.advance(bar)
                    elif what == "rewritten":
                        return
                    elif what in ("phase", "skipped-kind"):
                        progress.update(bar, description=escape(str(data))[:70])
                        if what == "skipped-kind":
                            err.print(f"[yellow]skipped:[/] {escape(str(data))}")
                        return
                    progress.update(bar, description="deriving",
                                    note=f"{counts['candidates']} candidates, {counts['dropped']} dropped")

                report = run_derive(yard, image, kinds=kinds, n=n, seed=seed, out=out_dir, workers=workers,
                                    max_candidates=max_candidates or None, on_event=on_event, cancel=cancel,
                                    rewrite_model=rewrite_model, base_url=base_url)
        except EnvyardError as e:
            fail(e)
        except KeyboardInterrupt:
            cancel.set()
            err.print("[yellow]interrupted: every sandbox and snapshot of this run was removed; finished tasks "
                      f"and {escape(str(out_dir))}/report.json stay[/]")
            raise typer.Exit(130)
        data = report.to_dict()
        if as_json:
            emit_json(data)
        else:
            _print(out, data)
        raise typer.Exit(0 if data["kept"] else 1)


def _image_of(source: str, yard, err) -> str:
    """The setup image to derive from: the image itself, or the one `envyard setup` makes of a project."""
    is_path = Path(source).exists() or source.startswith(("pypi:", "/", "./", "../"))
    if not is_path:
        return source
    from ..setup.engine import setup_directory
    from ..setup.pkgcache import source_identity
    from .setup import default_image_name
    from ..setup.sources_fetch import fetch
    from ..store import parse_image_name

    fetched = fetch(source, None)
    try:
        src = fetched.root if fetched is not None else Path(source)
        if not src.is_dir():
            raise BadInput(f"{source}: not a directory, pypi:NAME==VERSION or an image name")
        name = parse_image_name(default_image_name(src, fetched))
        with err.status(escape(f"envyard setup {source} → {name}")):
            result, _ = setup_directory(yard, src, name, cache_identity=source_identity(source, fetched))
    finally:
        if fetched is not None:
            fetched.cleanup()
    if not result.verified:
        from ..errors import NotASetupImage

        raise NotASetupImage(f"envyard setup of {source} did not verify it ({result.status}: {result.reason})",
                             fix="run `envyard setup` on it to see why; derive needs a verified environment")
    return result.image


def _print(out, data: dict) -> None:
    t = Table("CANDIDATES", "KEPT", "DROPPED", "TASKS/HOUR", "VALIDATION S/TASK (MEDIAN)", "WALL (S)")
    t.add_row(str(data["candidates"]), str(data["kept"]), str(data["dropped"]), f"{data['tasks_per_hour']:.0f}",
              str(data["validation_s_per_task_median"] or "–"), f"{data['wall_s']:.0f}")
    out.print(t)
    if data["dropped_by_reason"]:
        d = Table("DROPPED BECAUSE", "COUNT")
        for reason, count in data["dropped_by_reason"].items():
            d.add_row(reason, str(count))
        out.print(d)
    if data["tasks"]:
        k = Table("TASK", "KIND", "FAILING TESTS", "DIFFICULTY")
        for task in data["tasks"][:50]:
            k.add_row(escape(task["name"]), task["kind"], str(task["failing_tests"]), task["difficulty"])
        out.print(k)
    if data.get("rewrite"):
        rw = data["rewrite"]
        why = ", ".join(f"{k} {v}" for k, v in rw["deterministic_by_reason"].items())
        out.print(f"instructions rewritten by {escape(rw['model'])}: {rw['rewritten']} of {data['kept']}"
                  + (f" (deterministic kept: {escape(why)})" if why else ""))
    out.print(f"{data['kept']} tasks in {escape(data['out'])} (report: {escape(data['out'])}/report.json)")
