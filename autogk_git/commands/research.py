"""`autogk research`: write a research plan for the next experiments, now."""
from __future__ import annotations

import json

import click

from autogk_git.project import Project


@click.command("research", help="Write a research plan for the next experiment.")
@click.option("--target", "-t", help="target name (default: [project] target, or the only one)")
@click.option("--offline", is_flag=True, help="statistics only, no model (the default without ANTHROPIC_API_KEY)")
@click.option("--why", default="on demand", show_default=True, help="the trigger to record in the plan")
@click.option("--show", "show_only", is_flag=True, help="print the pending plan instead of writing one")
@click.option("--json", "as_json", is_flag=True, help="print the plan and its metadata as JSON")
def research(target, offline, why, show_only, as_json) -> int:
    from autogk_git.agents import research as rs
    from autogk_git.loop import experiment as ex

    project = Project.find()
    t = project.target(target)
    say = (lambda s: click.echo(s, err=True))
    if show_only:
        history = ex.results(project, t.name)
        plan = rs.pending(project.root, t.name, history, project.config.research.follow)
        if plan is None:
            say(f"no pending plan for {t.name}; write one with: autogk research")
            return 1
        usage = {}
    else:
        plan, usage = rs.research(project, t, f"demand: {why}", say, mode="offline" if offline else "auto")
    if as_json:
        click.echo(json.dumps({"commit": plan.commit, "target": plan.target, "after": plan.after,
                               "trigger": plan.trigger, "meta": plan.meta, "usage": usage, "text": plan.text},
                              indent=1))
    else:
        click.echo(plan.text.rsplit(rs.MARK, 1)[0].rstrip())
        click.echo(f"\nthe next {project.config.research.follow} experiment(s) follow it: autogk iterate")
    return 0
