"""`autogk bisect GOOD BAD`: the first trunk commit that made a workload slower or broke correctness."""
from __future__ import annotations

import json

import click

from autogk_git.project import Project


@click.command("bisect", help="Find the trunk commit that made a workload slower or broke correctness.")
@click.argument("good")
@click.argument("bad", required=False)
@click.option("--target", "-t", help="target name")
@click.option("--workload", "-w", help="judge this workload (a uuid or its prefix); default: geomean of all timed")
@click.option("--threshold", type=float, default=None,
              help="percent: slower than GOOD by more than this is bad (default 5; needs timing)")
@click.option("--backend", type=click.Choice(["auto", "interpret", "local", "modal"]),
              help="backend for commits the notes do not cover")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def bisect(good, bad, target, workload, threshold, backend, as_json) -> int:
    from autogk_git.review import bisection as bisect_mod

    project = Project.find()
    t = project.target(target)
    say = (lambda s: click.echo(s, err=True)) if as_json else click.echo
    bad = bad or project.trunk
    out = bisect_mod.run(project, good, bad, t.name, workload, threshold, backend, say)
    if as_json:
        click.echo(json.dumps(out.as_dict(), indent=1))
        return 0
    for s in out.steps:
        how = "benchmarked now" if s.get("benchmarked") else f"from {s.get('source', '')[:80]}"
        click.echo(f"  {s['commit'][:10]} {s['verdict']:<5} {s['why'][:160]}  [{how}]")
    click.echo(f"{out.message}")
    click.echo(f"{len(out.steps)} commit(s) judged: {out.reused} from notes, {out.benchmarked} benchmarked")
    if out.first_bad:
        click.echo(f"see it: git show {out.first_bad[:10]}")
    return 0
