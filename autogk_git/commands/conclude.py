"""`autogk conclude [N]`: apply the verdict of open or hand-made experiments; start nothing, move no checkout."""
from __future__ import annotations

import json

import click

from autogk_git.errors import AutogkError
from autogk_git.project import Project


@click.command("conclude", help="Conclude open or hand-made experiments (benchmark if needed); start none.")
@click.argument("number", type=int, required=False)
@click.option("--target", "-t", help="target name (default: [project] target, or the only one)")
@click.option("--json", "as_json", is_flag=True, help="print what was concluded as JSON")
def conclude(number, target, as_json) -> int:
    from autogk_git.loop.iterate import left_open, resume
    from autogk_git.loop.lock import RepoLock
    from autogk_git.record.tally import Tally

    project = Project.find()
    name = project.target(target).name
    say = (lambda s: click.echo(s, err=True)) if as_json else click.echo
    if number is not None and number not in {n for n, _ in left_open(project, name)}:
        raise AutogkError(f"experiment #{number} of {name} is not open (it has no experiment branch)",
                          "list the open ones with `autogk log --state open`")
    with RepoLock(project.state_dir):
        done = resume(project, name, say, only=number, stay=True)
    if as_json:
        click.echo(json.dumps({"target": name, "concluded": done}, indent=1))
        return 0
    if not done:
        click.echo(f"nothing to conclude: no open experiment of {name}")
        return 0
    fresh = [e for e in done if e.get("decision") not in ("finished", "discarded")]
    finished = [e for e in done if e.get("decision") == "finished"]
    discarded = [e for e in done if e.get("decision") == "discarded"]
    if fresh:
        click.echo(f"concluded {Tally.of(e['decision'] for e in fresh).words()}")
    for e in finished:  # a branch left checked out: its verdict was applied before
        click.echo(f"#{e['number']:04d} was concluded already ({e['outcome'].split('(', 1)[-1].rstrip(')')})")
    if discarded:
        click.echo(f"{len(discarded)} empty experiment branch(es) discarded")
    return 0
