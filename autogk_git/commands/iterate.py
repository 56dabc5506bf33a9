"""`autogk iterate`: the loop."""
from __future__ import annotations

import json

import click

from autogk_git.project import Project


@click.command("iterate", help="Run the optimization loop: propose, commit, benchmark, keep or revert.")
@click.option("-n", "n", type=click.IntRange(min=0), default=3, show_default=True,
              help="experiments to run; 0: until the agent stops or a budget is reached")
@click.option("--target", "-t", help="target name (default: [project] target, or the only one)")
@click.option("--agent", type=click.Choice(["auto", "tune", "anthropic", "command"]),
              help="override [agent] kind; auto: anthropic with ANTHROPIC_API_KEY set, else tune")
@click.option("--backend", type=click.Choice(["auto", "interpret", "local", "modal"]), help="override [bench] backend")
@click.option("--max-time", type=float, default=0.0, help="stop starting experiments after this many seconds")
@click.option("--parallel", "-j", type=click.IntRange(min=1), default=1, show_default=True,
              help="experiments at once, each in its own worktree and on its own GPU (or Modal container)")
@click.option("--json", "as_json", is_flag=True, help="print a JSON report at the end")
def iterate(n, target, agent, backend, max_time, parallel, as_json) -> int:
    import os
    from autogk_git.loop.iterate import iterate as run_loop

    if backend:
        os.environ["AUTOGK_BENCH_BACKEND"] = backend
    project = Project.find()
    say = (lambda s: click.echo(s, err=True)) if as_json else click.echo
    report = run_loop(project, target, n, agent, say, max_time_s=max_time, parallel=parallel)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=1))
        return 0
    kept = sum(e["decision"] == "keep" for e in report.experiments)
    click.echo(f"\ndone: {len(report.experiments)} experiment(s), {kept} kept, "
               f"{len(report.experiments) - kept} reverted; {report.stop_reason}")
    click.echo(f"look at: autogk log  |  git log --first-parent {project.trunk}  |  autogk show N  |  "
               f"mlflow ui --backend-store-uri {project.tracking_uri()}")
    return 0
