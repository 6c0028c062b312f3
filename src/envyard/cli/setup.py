"""`envyard setup`: turn a repository into a verified environment, with a live view of the search."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Optional

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from ..errors import BadInput, EnvyardError


def default_image_name(src: Path, fetched=None) -> str:
    """`setup/<project>`: from a fetched release's name and version, else from the directory's name."""
    label = (f"{fetched.name}-{fetched.version}" if fetched.version else fetched.name) if fetched else src.resolve().name
    return "setup/" + re.sub(r"[^a-z0-9._-]", "-", label.lower()).strip("-.")


def register(app: typer.Typer, out, err, fail, emit_json, make_yard) -> None:
    @app.command()
    def setup(
        source: str = typer.Argument(..., help="The project: a directory, pypi:NAME[==VERSION] (its sdist), a git "
                                                "URL or repository path (with --rev), or a source archive (path or URL)."),
        rev: Optional[str] = typer.Option(None, "--rev", help="Git commit, branch or tag to set up (git sources)."),
        name: Optional[str] = typer.Option(None, "--name", "-n", help="Image name (default: setup/<project name>)."),
        jobs: int = typer.Option(2, "--jobs", "-j", help="Candidate branches searched in parallel."),
        out_dir: Optional[Path] = typer.Option(None, "--out", "-o", help="Contract directory (default: "
                                               "./envyard-contract/<name>): new, empty, or an earlier contract; "
                                               "checked before the run starts (exit 2 otherwise)."),
        timeout: float = typer.Option(1800, "--timeout", help="Limit for each install step and for the test run (s)."),
        time_limit: Optional[float] = typer.Option(None, "--time-limit", help="Stop the search after this long (s): "
                                                   "running branches stop, the best finished one is kept and "
                                                   "replayed (the replay is not counted). Default: no limit."),
        project_dir: Optional[str] = typer.Option(None, "--project-dir", help="The Python project's directory "
                                                  "inside the repository (a monorepo's python/pkg). Default: the "
                                                  "root, or when the root has no packaging, the subdirectory with "
                                                  "packaging and the most tests. '.' forces the root."),
        cache_scope: Optional[str] = typer.Option(None, "--cache-scope", envvar="ENVYARD_CACHE_SCOPE",
                                                  help="Share the package cache with every setup given the same "
                                                       "NAME. Only for sources you trust alike: a project's build "
                                                       "can change what the cache gives the others. Default: one "
                                                       "cache per source."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        python: Optional[str] = typer.Option(None, "--python", help="Use only this Python release (X.Y or X.Y.Z), "
                                             "even where the project's constraint excludes it."),
        complete: bool = typer.Option(True, "--complete/--no-complete",
                                      help="When the L2 scan counts missing imports, install what the code imports "
                                           "(all extras, requirement files, dependency groups, the distributions "
                                           "of imported modules), and keep it only if the tests are verified with "
                                           "it or no worse than without it."),
    ):
        """Install a Python project in a sandbox, verify it level by level, save it as an image with a contract.

        Candidates (Python version, dependency cut-off) run as parallel branches; failed steps are repaired from
        snapshots. Levels: L0 install · L1 imports · L2 missing imports (reported) · L3 tests collected ·
        L4 tests run. Verified = L4 with a pass ratio of at least 0.9, sources unchanged, every service the
        tests expect provided, and a clean replay of setup.sh reaches the same level. Only a verified
        environment is saved as the image NAME; one the replay reproduced but below that (L3 only, a lower pass
        ratio, a missing service) is `partial`, saved with the tag `partial` (setup/x:partial); any other is
        saved with the tag `unverified` (setup/x:unverified; a tag T becomes T-partial / T-unverified). A
        failure inside the project's own code (a project bug) stops the search at once. Exit 0 when verified,
        1 when not (the reason is printed), 2 on bad input (a bad --out is refused before the run), 25 when the
        store's disk is full (before or during the run), 130 on Ctrl-C."""
        from ..setup.engine import check_contract_dir, setup_directory, write_contract
        from ..setup.pkgcache import named_identity, source_identity
        from ..setup.sources_fetch import fetch
        from ..store import parse_image_name

        fetched = None
        try:
            if timeout <= 0:
                raise BadInput(f"--timeout must be positive, got {timeout}")
            if time_limit is not None and time_limit <= 0:
                raise BadInput(f"--time-limit must be positive, got {time_limit}")
            if jobs < 1:
                raise BadInput(f"--jobs must be at least 1, got {jobs}")
            if cache_scope is not None and not cache_scope.strip():
                raise BadInput("--cache-scope is empty", fix="give a name, or leave it out for one cache per source")
            if out_dir is not None:
                check_contract_dir(out_dir)  # before any work: a bad --out must not cost a whole run
            with err.status(escape(f"fetching {source}")):
                fetched = fetch(source, rev)
            src = fetched.root if fetched is not None else Path(source)
            for note in fetched.notes if fetched is not None else []:
                err.print(f"[yellow]warning:[/] {escape(note)}")
            if not src.is_dir():
                raise BadInput(f"{source}: not a directory, archive, git repository or pypi:NAME",
                               fix="give a project checkout, a .tar.gz/.zip, a git URL, or pypi:NAME")
            image = parse_image_name(name or default_image_name(src, fetched))
            out_dir = out_dir or Path("envyard-contract") / image.split(":")[0].replace("/", "-")
            check_contract_dir(out_dir)
            yard = make_yard()
            forced = _forced_python(python, yard) if python else None
            view = BranchView(None if err.is_terminal else err)
            with Live(get_renderable=view.render, console=err, refresh_per_second=4, transient=True,
                      auto_refresh=err.is_terminal):
                result, ev = setup_directory(yard, src, image, jobs=jobs, step_timeout=timeout, test_timeout=timeout,
                                             on_update=view.update, available=forced, complete=complete,
                                             time_limit=time_limit, project_dir=project_dir,
                                             cache_identity=named_identity(cache_scope) if cache_scope
                                             else source_identity(source, fetched))
            contract = write_contract(out_dir, result, ev)
        except EnvyardError as e:
            fail(e)
        except KeyboardInterrupt:
            err.print("[yellow]interrupted: every branch and sandbox of this setup was stopped and removed[/]")
            raise typer.Exit(130)
        finally:
            if fetched is not None:
                fetched.cleanup()
        data = {**result.to_dict(), "contract": str(contract)}
        if as_json:
            emit_json(data)
        else:
            _print_result(out, result, contract)
        raise typer.Exit(0 if result.verified else 1)


def _forced_python(want: str, yard) -> list:
    """`--python X.Y`: the machine's interpreters of that release (uv python install as the last resort)."""
    from ..setup import interpreters
    from ..setup.interpreters import minor

    want = want.strip()
    if not re.fullmatch(r"3\.\d+(\.\d+)?", want):
        raise BadInput(f"--python takes a release such as 3.8 or 3.8.18, got {want!r}")
    have = interpreters.available()
    chosen = interpreters.select(have, want)
    if not chosen:
        cache = yard.store.home / "cache"
        installed = interpreters.install_with_uv(want, cache)
        if installed is None:
            why = interpreters.install_failure(want, cache)
            raise BadInput(f"no Python {want} on this machine, which provides "
                           + ", ".join(i.label for i in sorted(have, key=lambda i: minor(i.version), reverse=True))
                           + (f"; `uv python install {want}` failed: {why}" if why else ""),
                           fix="choose one of those, or install it (pyenv install, uv python install)")
        chosen = interpreters.select([installed], want)
    return chosen


class BranchView:
    """The live view of the search: one row per branch, redrawn by rich a few times a second on a terminal;
    elsewhere (logs, CI) one line each time a branch starts doing something new."""

    def __init__(self, log_console=None):
        self.branches = []
        self.start = time.monotonic()
        self.log_console = log_console
        self.last: dict[int, tuple] = {}

    def update(self, branches) -> None:
        self.branches = list(branches)
        if self.log_console is None:
            return
        for b in self.branches:
            now = (b.state, b.doing)
            if self.last.get(b.id) != now:
                self.last[b.id] = now
                self.log_console.print(f"[{time.monotonic() - self.start:5.0f}s] branch {b.id} "
                                       f"({escape(b.cand.label)}): {b.state}, {escape(b.doing)}", highlight=False)

    def render(self):
        t = Table("#", "CANDIDATE", "STATE", "NOW", "LEVEL", "TIME", box=None, padding=(0, 1),
                  title=f"envyard setup · {time.monotonic() - self.start:.0f}s", title_justify="left")
        for b in self.branches:
            t.add_row(str(b.id), escape(b.cand.label), b.state, escape(b.doing[:60]),
                      f"L{b.level}" if b.level >= 0 else "–", f"{b.seconds:.0f}s")
        return t


def _print_result(out, result, contract) -> None:
    if len(result.branches) > 1:
        bt = Table("BRANCH", "CANDIDATE", "STATE", "LEVEL", "TIME (s)", "REPAIRS / REASON")
        for b in result.branches:
            bt.add_row(str(b["id"]), escape(b["candidate"]), b["state"], f"L{b['level']}" if b["level"] >= 0 else "–",
                       f"{b['seconds']:.0f}", escape("; ".join(b["repairs"]) or b["reason"])[:100])
        out.print(bt)
    t = Table("LEVEL", "CHECK", "RESULT", "DETAIL", "TIME (s)")
    for lv in [*result.levels, *([result.integrity] if result.integrity else [])]:
        mark = "[green]✓[/]" if lv.ok else "[red]✗[/]" if lv.ok is False else "–"
        t.add_row(f"L{lv.level}" if lv.level >= 0 else "", lv.name, mark, escape(lv.detail), f"{lv.seconds:.1f}")
    out.print(t)
    if result.project_dir:
        out.print(f"project: {escape(result.project_dir)}/ ({escape(result.project_dir_why)})")
    r = result.recipe
    if r is not None:
        out.print(f"level reached: L{result.level} · Python {r.interpreter.version} ({r.interpreter.provider})"
                  + (f" · dependencies as of {r.cutoff[:10]}" if r.cutoff else "")
                  + f" · {len(r.steps)} steps · {len(result.repairs)} repairs · {result.wall_time:.0f}s"
                  + (f" · pass ratio {result.pass_ratio:.2f}" if result.pass_ratio is not None else ""))
    for rep in result.repairs:
        out.print(f"  repair: {escape(rep)}")
    for w in (r.warnings if r is not None else []):
        out.print(f"[yellow]warning[/]: {escape(w)}")
    c = result.completion
    if c.get("ran"):
        out.print(f"completeness pass: {'kept' if c.get('kept') else 'rolled back'} ({escape(str(c.get('detail')))})"
                  + (f" · installed: {escape(', '.join(c['installed']))}" if c.get("installed") else "")
                  + (f" · mapped: {escape(', '.join(f'{m}→{d}' for m, d in c['mapped'].items()))}"
                     if c.get("mapped") else "") + f" · {c.get('seconds', 0):.0f}s")
    if result.project_bug:
        out.print(f"[red]project bug[/]: the project's own code fails (no repair or other Python can fix it):\n"
                  f"{escape(result.project_bug['traceback'][-1500:])}")
    if result.replay:
        head = result.replay.get("head_start") or {}
        out.print(("[green]replay[/]: " if result.replay.get("ok") else "[red]replay failed[/]: ")
                  + escape(result.replay.get("detail", "")) + f" · {result.replay.get('seconds', 0):.0f}s"
                  + (f" after the search (its first {head['steps']} steps"
                     + (", and its run of the tests," if (head.get("tests_early") or {}).get("used") else "")
                     + " ran beside it)" if head.get("used") else ""))
    if result.reason and not result.verified:
        out.print(f"[yellow]{'not verified: ' if result.status == 'partial' else 'stopped at '}"
                  f"{escape(result.reason)}[/]")
    status = {"verified": "[green]verified[/]", "partial": "[yellow]partial (reproduced, NOT verified)[/]",
              "unverified": "[red]NOT verified[/]", "project-bug": "[red]NOT verified (project bug)[/]",
              "failed": "[red]failed[/]"}[result.status]
    saved = (f"image {escape(result.image)}" + ("" if result.verified else f" ({result.status}: not saved under "
                                                  f"{escape(result.name)})") if result.image else "no image")
    out.print(f"result: {status} · level reached {escape(result.level_name)} · {saved} · contract in "
              f"{escape(str(contract))}")
