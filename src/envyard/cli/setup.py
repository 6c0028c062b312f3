"""`envyard setup`: turn a repository into a verified environment (first version: local directories)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import BadInput, EnvyardError


def register(app: typer.Typer, out, err, fail, emit_json, make_yard) -> None:
    @app.command()
    def setup(
        source: str = typer.Argument(..., help="The project: a local directory or pypi:NAME[==VERSION] (its sdist)."),
        name: Optional[str] = typer.Option(None, "--name", "-n", help="Image name (default: setup/<directory name>)."),
        out_dir: Optional[Path] = typer.Option(None, "--out", "-o", help="Contract directory (default: ./envyard-contract/<name>)."),
        timeout: float = typer.Option(1800, "--timeout", help="Limit for each install step and for the test run (s)."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ):
        """Install a Python project in a sandbox, verify it level by level, save it as an image with a contract.

        Levels: L0 install · L1 imports · L2 missing imports (not yet) · L3 tests collected · L4 tests run.
        Verified = L3 or better, and a clean replay of setup.sh on a fresh base collects the tests too.
        Exit 0 when verified, 1 when not (the reason is printed), 2 on bad input."""
        from ..setup.engine import setup_directory, write_contract
        from ..store import parse_image_name

        from ..setup.sources_fetch import fetch_pypi

        fetched = None
        try:
            if re.match(r"^(git\+|https?://|git@)", source) or source.endswith((".tar.gz", ".tgz", ".zip")):
                raise BadInput(f"{source}: git URLs and tarballs are not supported yet",
                               fix="clone or unpack the project, then run `envyard setup DIR`; or use pypi:NAME")
            if timeout <= 0:
                raise BadInput(f"--timeout must be positive, got {timeout}")
            if source.startswith("pypi:"):
                with err.status(escape(f"fetching {source}")):
                    fetched = fetch_pypi(source)
                src, label = fetched.root, f"{fetched.name}-{fetched.version}"
            else:
                src = Path(source)
                if not src.is_dir():
                    raise BadInput(f"{source}: not a directory", fix="give the path of a project checkout, or pypi:NAME")
                label = src.resolve().name
            image = parse_image_name(name or "setup/" + re.sub(r"[^a-z0-9._-]", "-", label.lower()).strip("-."))
            yard = make_yard()
            with err.status("envyard setup", spinner="dots") as status:
                result, ev = setup_directory(yard, src, image, step_timeout=timeout, test_timeout=timeout,
                                             on_progress=lambda msg: status.update(escape(msg)))
            contract = write_contract(out_dir or Path("envyard-contract") / image.split(":")[0].replace("/", "-"), result, ev)
        except EnvyardError as e:
            fail(e)
        finally:
            if fetched is not None:
                fetched.cleanup()
        data = {**result.to_dict(), "contract": str(contract)}
        if as_json:
            emit_json(data)
        else:
            t = Table("LEVEL", "CHECK", "RESULT", "DETAIL", "TIME (s)")
            for lv in result.levels:
                mark = "[green]✓[/]" if lv.ok else "[red]✗[/]" if lv.ok is False else "–"
                t.add_row(f"L{lv.level}", lv.name, mark, escape(lv.detail), f"{lv.seconds:.1f}")
            out.print(t)
            r = result.recipe
            out.print(f"level reached: L{result.level} · Python {r.interpreter.version} ({r.interpreter.provider}) · "
                      f"{len(r.steps)} steps · {result.wall_time:.0f}s"
                      + (f" · pass ratio {result.pass_ratio:.2f}" if result.pass_ratio is not None else ""))
            if result.image:
                out.print(f"image {escape(result.image)}; contract in {escape(str(contract))}")
            if result.replay:
                out.print(("[green]verified[/]: " if result.verified else "[red]not verified[/]: ")
                          + escape(result.replay.get("detail", "")))
            if result.reason and not result.replay.get("ok"):
                out.print(f"[yellow]stopped at {escape(result.reason)}[/]")
        raise typer.Exit(0 if result.verified else 1)
