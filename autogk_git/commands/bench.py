"""`autogk bench`: run the stages on one revision's kernel, outside any experiment."""
from __future__ import annotations

import json

import click

from autogk_git.git import repo
from autogk_git.loop.check import check_kernel, check_reference
from autogk_git.project import Project
from autogk_git.record import refs


@click.command("bench", help="Benchmark a kernel (the trunk's by default) without an experiment.")
@click.option("--target", "-t", help="target name")
@click.option("--rev", default=None, help="revision to benchmark (default: the trunk)")
@click.option("--against", default=None, help="time against this revision too (GPU backends)")
@click.option("--backend", type=click.Choice(["auto", "interpret", "local", "modal"]), help="override [bench] backend")
@click.option("--json", "as_json", is_flag=True, help="print the result JSON")
def bench(target, rev, against, backend, as_json) -> int:
    project = Project.find()
    t = project.target(target)
    say = (lambda s: click.echo(s, err=True)) if as_json else click.echo
    rev = rev or (project.trunk if repo.rev(project.root, refs.branch(project.trunk)) else "HEAD")
    say(check_reference(project, t))  # a broken reference is the target's fault, said before any kernel runs
    res = check_kernel(project, t, rev, say, backend, against)
    if as_json:
        click.echo(json.dumps(res, indent=1, sort_keys=True))
    return 0 if res.get("correct") else 1
