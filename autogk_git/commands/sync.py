"""`autogk sync`: log to MLflow every result note it does not have yet (after a clone, or an outage)."""
from __future__ import annotations

import json

import click

from autogk_git import refs
from autogk_git.git import repo
from autogk_git.notes import parse_result
from autogk_git.project import Project


def sync_project(project: Project, say, full: bool = False) -> dict[str, int]:
    from autogk_git.tracking import mlflow_store

    texts = repo.read_notes(project.root, refs.NOTES_RESULTS)
    results = [r for r in (parse_result(t, c) for c, t in texts.items()) if r and "target" in r]
    by_target: dict[str, list] = {}
    for r in results:
        by_target.setdefault(r["target"], []).append(r)
    logged = skipped = 0
    for target, items in sorted(by_target.items()):
        have = set() if full else mlflow_store.synced_commits(project, target)
        todo = [r for r in sorted(items, key=lambda r: r.get("experiment", 0)) if r["commit"] not in have]
        skipped += len(items) - len(todo)
        for i, r in enumerate(todo, 1):
            mlflow_store.log_result(project, r)
            logged += 1
            say(f"{target}: logged #{r.get('experiment', 0):04d} ({i}/{len(todo)})")
    return {"notes": len(results), "logged": logged, "already_logged": skipped}


@click.command("sync", help="Log result notes that MLflow does not have yet.")
@click.option("--full", is_flag=True, help="re-log every note (updates the runs in place)")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def sync(full, as_json) -> int:
    project = Project.find()
    say = (lambda s: click.echo(s, err=True)) if as_json else click.echo
    out = sync_project(project, say, full)
    click.echo(json.dumps(out) if as_json else
               f"{out['notes']} result note(s): {out['logged']} logged, {out['already_logged']} already in MLflow")
    return 0
