"""`autogk sync`: fetch the shared history, then log to MLflow every result note it does not have yet.

After a clone: the clone has branches only, so sync first adds autogk's refspecs to the remotes,
fetches the notes and experiment refs, merges the notes and creates the local trunk branch; then it
logs the notes (the source of truth) to the fresh MLflow store. After an MLflow outage: only the
logging part has work to do.
"""
from __future__ import annotations

import json

import click

from autogk_git.record import ledger
from autogk_git.record import refs
from autogk_git.errors import GitError
from autogk_git.record import sharing as remote_mod
from autogk_git.git import repo
from autogk_git.git.run import git
from autogk_git.record.notes import parse_result
from autogk_git.project import Project


def fetch_shared(project: Project, say, remote: str | None = None) -> list[str]:
    """Refspecs, fetch and note merge for each remote; a failing remote is a warning, not an error."""
    done = []
    for name in [remote] if remote else remote_mod.remotes(project.root):
        for line in remote_mod.setup(project.root, name):
            say(line)
        try:
            line = remote_mod.fetch(project.root, name)
        except GitError as e:
            say(f"warning: could not fetch autogk's history from {name}; syncing what is here.\n"
                f"  {str(e).splitlines()[-1].strip()}\n  retry later with: autogk sync --remote {name}")
            continue
        say(line)
        done.append(name)
        trunk = project.trunk
        if not repo.rev(project.root, refs.branch(trunk)) and repo.rev(project.root, f"refs/remotes/{name}/{trunk}"):
            git("branch", "--quiet", "--track", trunk, f"refs/remotes/{name}/{trunk}", cwd=project.root)
            say(f"created the trunk branch '{trunk}' from {name}/{trunk}")
    return done


def sync_project(project: Project, say, full: bool = False, fetch: bool = True,
                 remote: str | None = None) -> dict:
    from autogk_git.tracking import mlflow_store

    fetched = fetch_shared(project, say, remote) if fetch else []
    if not project.config.tracking.enabled:
        say("tracking is off ([tracking] enabled = false): fetched only, nothing logged to MLflow")
        return _summary(0, 0, 0, fetched)
    texts = repo.read_notes(project.root, refs.NOTES_RESULTS)
    results = [r for r in (parse_result(t, c) for c, t in texts.items()) if r and "target" in r and "commit" in r]
    by_target: dict[str, list] = {}
    for r in results:
        by_target.setdefault(r["target"], []).append(r)
    logged = skipped = 0
    for target, items in sorted(by_target.items()):
        have = set() if full else mlflow_store.synced_commits(project, target)
        todo = [r for r in sorted(items, key=lambda r: r.get("experiment", 0)) if r["commit"] not in have]
        skipped += len(items) - len(todo)
        if full:  # update the existing runs in place, one by one
            for i, r in enumerate(todo, 1):
                mlflow_store.log_result(project, r)
                say(f"{target}: logged #{r.get('experiment', 0):04d} ({i}/{len(todo)})")
            logged += len(todo)
        else:
            logged += mlflow_store.log_results(project, todo, progress=lambda i, n, r: say(
                f"{target}: logged up to #{r.get('experiment', 0):04d} ({i}/{n})"))
    ledger.notes_index(project.root)  # the first `autogk log` after a clone need not parse every note
    return _summary(len(results), logged, skipped, fetched)


def _summary(n: int, logged: int, skipped: int, fetched: list[str]) -> dict:
    out: dict = {"notes": n, "logged": logged, "already_logged": skipped}
    if fetched:
        out["fetched_from"] = fetched
    return out


@click.command("sync", help="Fetch the shared notes and log result notes that MLflow does not have yet.")
@click.option("--full", is_flag=True, help="re-log every note (updates the runs in place)")
@click.option("--fetch/--no-fetch", default=True, show_default=True,
              help="first fetch notes and experiment refs from the remotes")
@click.option("--remote", help="only this remote (default: every remote)")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def sync(full, fetch, remote, as_json) -> int:
    project = Project.find()
    say = (lambda s: click.echo(s, err=True)) if as_json else click.echo
    out = sync_project(project, say, full, fetch, remote)
    click.echo(json.dumps(out) if as_json else
               f"{out['notes']} result note(s): {out['logged']} logged, {out['already_logged']} already in MLflow")
    return 0
