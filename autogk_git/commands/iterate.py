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
@click.option("--max-iterations", type=click.IntRange(min=0), default=None,
              help="stop after this many experiments (overrides -n; 0: no limit)")
@click.option("--budget-usd", type=click.FloatRange(min=0), default=None,
              help="stop starting experiments once LLM spend reaches this (overrides [agent] budget_usd; 0: none)")
@click.option("--parallel", "-j", type=click.IntRange(min=1), default=1, show_default=True,
              help="experiments at once, each in its own worktree and on its own GPU (or Modal container)")
@click.option("--merge-untimed", is_flag=True,
              help="merge correct candidates an untimed backend (CPU) cannot time, instead of holding them "
                   "(overrides [bench] untimed)")
@click.option("--json", "as_json", is_flag=True, help="print a JSON report at the end")
def iterate(n, target, agent, backend, max_time, max_iterations, budget_usd, parallel, merge_untimed, as_json) -> int:
    import os
    from autogk_git.loop.iterate import iterate as run_loop

    if backend:
        os.environ["AUTOGK_BENCH_BACKEND"] = backend
    if merge_untimed:
        os.environ["AUTOGK_BENCH_UNTIMED"] = "merge"
    project = Project.find()
    say = (lambda s: click.echo(s, err=True)) if as_json else click.echo
    if max_iterations is not None:
        n = max_iterations
    report = run_loop(project, target, n, agent, say, max_time_s=max_time, budget_usd=budget_usd,
                      parallel=parallel)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=1))
        return 1 if report.failed else 0
    kept = sum(e["decision"] == "keep" for e in report.experiments)
    repeats = sum(e["decision"] == "repeat" for e in report.experiments)
    held = sum(e["decision"] == "untimed" for e in report.experiments)
    reverted = len(report.experiments) - kept - repeats - held
    extra = f", {repeats} discarded as repeats" if repeats else ""
    extra += f", {held} held untimed (correct but not timed, not merged: see `autogk log`)" if held else ""
    cost = (f"; LLM: {report.usage.get('tokens', 0)} tokens, ${report.cost_usd:.4f}"
            if report.usage.get("requests") else "")
    plans = f"; {len(report.research)} research plan(s)" if report.research else ""
    click.echo(f"\ndone: {len(report.experiments)} experiment(s), {kept} kept, {reverted} reverted{extra}{cost}"
               f"{plans}\nstopped: {report.stop_reason}")
    click.echo(f"look at: autogk log  |  git log --first-parent {project.trunk}  |  autogk show N  |  "
               f"mlflow ui --backend-store-uri {project.tracking_uri()}")
    return 1 if report.failed else 0
