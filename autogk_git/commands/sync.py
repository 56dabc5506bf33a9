"""`autogk sync`: fetch the shared history, then log to MLflow every result note it does not have yet.

After a clone: the clone has branches only, so sync first adds autogk's fetch refspecs to the remotes,
fetches the notes and experiment refs, merges the notes and creates the local trunk branch; then it
logs the notes (the source of truth) to the fresh MLflow store. After an MLflow outage, or a loop
killed between a note and its run (or inside logging: a run left RUNNING is completed in place): only
the logging part has work to do. Notes whose commit is gone are skipped and counted (`--prune` removes
them); `--push` sends the notes and experiment refs up, which a plain `git push` does not.
"""
from __future__ import annotations

import json

import click

from autogk_git.record import ledger
from autogk_git.record import refs
from autogk_git.errors import AutogkError, GitError
from autogk_git.record import sharing as remote_mod
from autogk_git.git import repo
from autogk_git.git.run import identity_env
from autogk_git.record.notes import parse_result
from autogk_git.project import Project


def fetch_shared(project: Project, say, remote: str | None = None, pushing: bool = False) -> list[str]:
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
        if not pushing and not remote_mod.remote_has_notes(project.root, name):
            say(f"note: {name} holds no autogk notes, so no experiments came from it. If experiments ran "
                f"elsewhere, push them from that clone with: autogk sync --push --remote {name} "
                f"(or {remote_mod.push_command(name)})")
        trunk = project.trunk
        if not repo.rev(project.root, refs.branch(trunk)) and repo.rev(project.root, f"refs/remotes/{name}/{trunk}"):
            repo.create_branch(project.root, trunk, f"refs/remotes/{name}/{trunk}", track=True)
            say(f"created the trunk branch '{trunk}' from {name}/{trunk}")
    return done


def prune_orphans(project: Project, gone: set[str]) -> int:
    """Remove the notes of commits that are gone, in every autogk notes ref."""
    n = 0
    for ref, _ in repo.for_each_ref(project.root, refs.NOTES_PREFIX):
        have = set(repo.notes_map(project.root, ref))
        drop = sorted(gone & have)
        if drop:
            repo.remove_notes(project.root, ref, drop, env=identity_env(project.root))
            n += len(drop)
    return n


def current(project: Project, results: list[dict]) -> list[dict]:
    """One result per (target, experiment number): the one whose commit a ref still reaches, else the newest.

    An amend, rebase or replay leaves the old commit's result beside the new one's."""
    from autogk_git.tracking.mlflow_store import live
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        # A pick's or a bisect's note (`kind`) never stands for the experiment whose number it carries.
        groups.setdefault((r["target"], r.get("kind"), r.get("experiment", 0)), []).append(r)
    out = []
    for items in groups.values():
        if len(items) > 1:
            reached = [r for r in items if live(project.root, r["commit"])]
            if len(reached) > 1:  # two clones' experiments under one number: both are real
                out += reached
                continue
            items = reached or sorted(items, key=lambda r: str(r.get("created", "")))[-1:]
        out += items
    return out


def sync_project(project: Project, say, full: bool = False, fetch: bool = True,
                 remote: str | None = None, push: bool = False, prune: bool = False) -> dict:
    fetched = fetch_shared(project, say, remote, pushing=push) if fetch else []
    texts = repo.read_notes(project.root, refs.NOTES_RESULTS)
    gone = remote_mod.missing_commits(project.root, sorted(texts))
    pruned = 0
    if gone and prune:
        pruned = prune_orphans(project, gone)
        say(f"removed the notes of {len(gone)} commit(s) that are gone ({pruned} note(s))")
    elif gone:
        say(f"skipped {len(gone)} note(s) whose commit is not in this repository (amended, rebased or "
            "replayed away and collected, or never pushed); remove them with: autogk sync --prune")
    pushed = []
    if push:
        for name in [remote] if remote else remote_mod.remotes(project.root):
            say(remote_mod.push(project.root, name))
            pushed.append(name)
    if not project.config.tracking.enabled:
        say("tracking is off ([tracking] enabled = false): fetched only, nothing logged to MLflow")
        return _summary(0, 0, 0, fetched, len(gone), pruned, pushed)
    results = [r for r in (parse_result(t, c) for c, t in texts.items() if c not in gone)
               if r and "target" in r and "commit" in r]
    logged = skipped = 0
    try:
        from autogk_git.tracking import mlflow_store
        mlflow_store.check(project)  # a broken store is reported even with nothing to log
        own = repo.own_noted(project.root, refs.NOTES_RESULTS)  # the rest were judged in another clone
        by_target: dict[str, list] = {}
        for r in current(project, results):
            by_target.setdefault(r["target"], []).append(r)
        for target, items in sorted(by_target.items()):
            have = {} if full else mlflow_store.logged_commits(project, target)
            todo = [r for r in sorted(items, key=lambda r: r.get("experiment", 0)) if not have.get(r["commit"])]
            skipped += len(items) - len(todo)
            # --full, and runs cut short by a kill: update the existing runs in place, one by one.
            in_place = todo if full else [r for r in todo if r["commit"] in have]
            for i, r in enumerate(in_place, 1):
                mlflow_store.log_result(project, r, known_new=False, judged_here=r["commit"] in own)
                say(f"{target}: logged #{r.get('experiment', 0):04d} ({i}/{len(in_place)})")
            logged += len(in_place)
            if not full:
                new = [r for r in todo if r["commit"] not in have]
                logged += mlflow_store.log_results(project, new, progress=lambda i, n, r: say(
                    f"{target}: logged up to #{r.get('experiment', 0):04d} ({i}/{n})"), own=own)
    except AutogkError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of the store: say which store and the fix
        from autogk_git.tracking.mlflow_store import describe_error
        raise describe_error(project, e) from None
    ledger.notes_index(project.root)  # the first `autogk log` after a clone need not parse every note
    return _summary(len(results), logged, skipped, fetched, len(gone), pruned, pushed)


def _summary(n: int, logged: int, skipped: int, fetched: list[str], orphaned: int = 0, pruned: int = 0,
             pushed: list[str] | None = None) -> dict:
    out: dict = {"notes": n, "logged": logged, "already_logged": skipped}
    if orphaned:
        out["orphaned"] = orphaned
    if pruned:
        out["pruned"] = pruned
    if fetched:
        out["fetched_from"] = fetched
    if pushed:
        out["pushed_to"] = pushed
    return out


@click.command("sync", help="Fetch the shared notes and log result notes that MLflow does not have yet.")
@click.option("--full", is_flag=True, help="re-log every note (updates the runs in place)")
@click.option("--fetch/--no-fetch", default=True, show_default=True,
              help="first fetch notes and experiment refs from the remotes")
@click.option("--remote", help="only this remote (default: every remote)")
@click.option("--push", is_flag=True, help="then push the notes and experiment refs to the remote(s)")
@click.option("--prune", is_flag=True, help="remove the notes of commits that no longer exist")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def sync(full, fetch, remote, push, prune, as_json) -> int:
    project = Project.find()
    say = (lambda s: click.echo(s, err=True)) if as_json else click.echo
    out = sync_project(project, say, full, fetch, remote, push, prune)
    click.echo(json.dumps(out) if as_json else
               f"{out['notes']} result note(s): {out['logged']} logged, {out['already_logged']} already in MLflow"
               + (f"; {out['orphaned']} skipped (commit gone)" if out.get("orphaned") and not out.get("pruned") else ""))
    return 0
