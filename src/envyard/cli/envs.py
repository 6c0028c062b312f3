"""`envyard task check` and `envyard rollout`: the agent-environment commands."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import EnvyardError
from .helpstyle import App

task_app = App(help="Work with task directories (Harbor / Terminal-Bench layout).", no_args_is_help=True)


def register(app: typer.Typer, out, err, fail, emit_json, make_yard) -> None:
    app.add_typer(task_app, name="task")

    @task_app.command("check")
    def task_check(dirs: list[Path] = typer.Argument(..., help="Task directories, or directories of tasks."),
                   as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
        """Validate tasks (envyard's layout, Harbor's, Terminal-Bench 1's); print every problem as file: field:
        why, and fields kept but not used as notes. Exit 2 if any task is malformed."""
        from ..envs.task import find_tasks, inspect_task, task_format

        try:
            tasks = find_tasks(dirs)
        except EnvyardError as e:
            fail(e)
        report = {}
        for t in tasks:
            problems, task = inspect_task(t)
            report[str(t)] = {"format": task_format(t), "problems": problems, "notes": task.notes if task else [],
                              "services": [s.name for s in task.services] if task else []}
        bad = {k: v for k, v in report.items() if v["problems"]}
        if as_json:
            emit_json({"tasks": len(report), "invalid": len(bad), "results": report,
                       "problems": {k: v["problems"] for k, v in report.items()}})
        else:
            for task, r in report.items():
                mark = "[red]✗[/]" if r["problems"] else "[green]✓[/]"
                services = f", services: {', '.join(r['services'])}" if r["services"] else ""
                out.print(f"{mark} {escape(task)} [dim]({r['format']}{escape(services)})[/]")
                for p in r["problems"]:
                    out.print(f"    {escape(p)}", highlight=False)
                for n in r["notes"]:
                    out.print(f"    [dim]note: {escape(n)}[/]", highlight=False)
        raise typer.Exit(2 if bad else 0)

    @app.command()
    def rollout(
        tasks: list[Path] = typer.Argument(..., help="Task directories, or directories of tasks."),
        policy: str = typer.Option("oracle", "--policy", "-p", help="oracle, noop, replay:FILE or openai:MODEL."),
        base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint for openai:MODEL "
                                               "(default $OPENAI_BASE_URL); the key comes from $OPENAI_API_KEY."),
        concurrency: int = typer.Option(4, "--concurrency", "-c", help="Episodes at once."),
        out_dir: Optional[Path] = typer.Option(None, "--out", "-o", help="Write episodes.jsonl (one chat record per "
                                               "episode), one JSONL trajectory per episode and summary.json here."),
        attempts: int = typer.Option(1, "--attempts", "-k", help="Run each task this many times; the summary "
                                     "gives pass@k."),
        resume: bool = typer.Option(False, "--resume", help="Continue an interrupted --out directory: the episodes "
                                    "its episodes.jsonl holds are not run again; the summary covers all."),
        as_json: bool = typer.Option(False, "--json", help="Print the episodes and summary as JSON."),
        backend: str = typer.Option("local", "--backend", help="Where the agent's and the verifier's sandboxes run: "
                                    "local (default) or docker (docs/docker.md)."),
        ray: Optional[str] = typer.Option(None, "--ray", help="Run the episodes on a Ray cluster: auto (the one this "
                                          "machine joined, or $RAY_ADDRESS) or HOST:PORT of its head; each node "
                                          "uses its own store (docs/scale.md)."),
        per_node: Optional[int] = typer.Option(None, "--per-node", help="With --ray: episodes at once per node "
                                               "(default: the node's CPU count)."),
    ):
        """Run a policy on tasks; print reward, steps, time and infrastructure failures per episode."""
        from ..envs.rollout import make_policy, run_rollouts, summarize
        from ..envs.task import find_tasks

        try:
            if concurrency < 1:
                from ..errors import BadInput

                raise BadInput(f"--concurrency must be at least 1, got {concurrency}")
            if attempts < 1:
                from ..errors import BadInput

                raise BadInput(f"--attempts must be at least 1, got {attempts}")
            if resume and out_dir is None:
                from ..errors import BadInput

                raise BadInput("--resume needs --out DIR", fix="pass the --out directory of the run to resume")
            if ray is None and per_node is not None:
                from ..errors import BadInput

                raise BadInput("--per-node needs --ray")
            if ray is not None and backend != "local":
                from ..errors import BadInput

                raise BadInput(f"--ray runs episodes with the local backend of each node, not --backend {backend}",
                               fix="drop --backend, or drop --ray")
            cluster = None
            if ray is not None:
                from ..envs.cluster import Cluster

                cluster = Cluster(address=ray, per_node=per_node)
            found = find_tasks(tasks)
            factory = make_policy(policy, base_url=base_url)
            yard = make_yard(backend) if cluster is None else None
            progress = Progress(TextColumn("rollout"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                TextColumn("{task.description}"), console=err, disable=as_json or not err.is_terminal)
            lock = threading.Lock()
            with progress:
                bar = progress.add_task("", total=len(found) * attempts)

                def done(ep):
                    with lock:
                        progress.update(bar, advance=1, description=f"{ep.task}: {ep.reward}")

                episodes = run_rollouts(yard, found, factory, concurrency=concurrency, out_dir=out_dir, on_done=done,
                                        attempts=attempts, resume=resume, cluster=cluster)
            if yard is not None:
                yard.close()
            if cluster is not None:
                cluster.close()
        except EnvyardError as e:
            fail(e)
        summary = summarize(episodes, policy, attempts)
        if out_dir is not None:
            (out_dir / "summary.json").write_text(json.dumps(
                {"summary": summary, "episodes": [e.to_dict() for e in episodes]}, indent=2))
        if as_json:
            emit_json({"summary": summary, "episodes": [e.to_dict() for e in episodes]})
        else:
            t = Table("TASK", "REWARD", "STEPS", "TIME (s)", "INFRA ERROR")
            for e in episodes:
                t.add_row(e.task, "-" if e.reward is None else f"{e.reward:g}", str(e.steps), f"{e.wall_time:.2f}",
                          escape(e.infra_error or ""))
            out.print(t)
            for e in episodes:  # the reason, not only the kind, of each infrastructure failure
                if e.infra_error:
                    out.print(f"{escape(e.task)}: {escape(e.infra_error)}: {escape(e.infra_detail or '')}",
                              highlight=False)
            out.print(f"{summary['solved']}/{len(episodes)} solved, mean reward {summary['mean_reward']}, "
                      f"{summary['infra_failures']} infrastructure failures")
            if attempts > 1:
                out.print(f"{summary['tasks']} tasks × {attempts} attempts: pass@1 {summary['pass@1']}, "
                          f"pass@{attempts} {summary[f'pass@{attempts}']}")
        failed_infra = summary["infra_failures"] > 0
        raise typer.Exit(1 if failed_infra else 0)
