"""`autogk log`: one line per experiment."""
from __future__ import annotations

import json

import click

from autogk_git import history
from autogk_git.project import find_root


@click.command("log", help="One line per experiment: number, verdict, hypothesis, figures.")
@click.option("--target", "-t", help="only this target")
@click.option("--verdict", type=click.Choice(["keep", "revert", "pending"]), help="only this verdict")
@click.option("--json", "as_json", is_flag=True, help="print JSON lines' array")
def log(target, verdict, as_json) -> int:
    root = find_root()
    items = [r for r in history.rows(root, target) if not verdict or r.decision == verdict]
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in items], indent=1))
        return 0
    if not items:
        click.echo("no experiments yet: run `autogk iterate`")
        return 0
    for r in items:
        mark = {"keep": "KEEP  ", "revert": "REVERT", "pending": "...   "}[r.decision]
        figs = f"  [{r.figures}]" if r.figures else ""
        click.echo(f"{r.target} #{r.number:04d} {mark} {r.commit[:10]} {r.hypothesis}{figs}")
    return 0
