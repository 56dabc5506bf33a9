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
        raise AutogkError(f"experiment #{number} of {name} is not open (no branch autogk/{name}/{number:04d}-...)",
                          "list the open ones with `autogk log --state open`")
    with RepoLock(project.state_dir):
        done = resume(project, name, say, only=number, stay=True)
    if as_json:
        click.echo(json.dumps({"target": name, "concluded": done}, indent=1))
        return 0
    if not done:
        click.echo(f"nothing to conclude: no open experiment of {name}")
        return 0
    click.echo(f"concluded {Tally.of(e['decision'] for e in done if e.get('decision') not in ('finished', 'discarded')).words()}"
               + (f"; {sum(e['decision'] == 'discarded' for e in done)} empty branch(es) discarded"
                  if any(e["decision"] == "discarded" for e in done) else ""))
    return 0
