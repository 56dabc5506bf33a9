"""Sharing the history through a remote: notes and autogk's refs travel with `git fetch`, and are pushed
on request.

A plain clone brings branches only. autogk adds two fetch refspecs per remote:

    fetch  +refs/notes/autogk/*:refs/notes/remotes/<remote>/autogk/*   remote-tracking copies of the notes
    fetch   refs/autogk/*:refs/autogk/*                                kept and archived experiments

Notes are fetched beside the local ones, like remote-tracking branches, and merged in by `merge_notes`
(a note this clone wrote is never replaced or removed by the remote's, whichever side changed it:
`repo.merge_notes` puts back what git's merge took; a note fetched earlier takes its author's update):
fetching never overwrites a note written here. The experiment refs are fetched without `+`, so a clash of two clones'
experiment numbers is reported by git rather than silently overwritten; git still fast-forwards one,
and `fetch` puts back any ref of this clone's the fetch moved and drops a new one on a number this
clone has an open branch for (`keep_own_refs`).

Pushing is left to the person: any `remote.<name>.push` setting replaces git's own choice of what a
plain `git push` sends, so autogk sets none (and removes the ones older versions set). The notes and
experiment refs go up with `autogk sync --push` (fetch, merge, then push, so the push is a fast-forward)
or by hand with the one-liner `push_command` spells (the README's "Share a run").

A remote added after `init` gets the refspecs at the next `autogk sync`, or at once with
`autogk remote add NAME URL` (git's own `remote add`, then `setup`) or `autogk remote setup NAME`.
"""
from __future__ import annotations

from pathlib import Path

from autogk_git.git import remotes as git_remotes, repo, settings
from autogk_git.git.run import identity_env

from autogk_git.record.refs import (BRANCH_PREFIX, EXPERIMENTS_PREFIX, NOTES_FETCH, PUSH, REFS_FETCH, ExperimentRef,
                                    remote_notes_prefix, NOTES_PREFIX)


# The commands ask these of sharing, where the rest of a remote's story is told.
remotes = git_remotes.names
url = git_remotes.url


def fetch_refspecs(remote: str) -> list[str]:
    return [NOTES_FETCH.format(remote=remote), REFS_FETCH]


def setup(root: Path, remote: str | None = None) -> list[str]:
    """Add autogk's fetch refspecs to one remote (or every remote); idempotent. Returns what was done."""
    names = [remote] if remote else remotes(root)
    done = []
    for name in names:
        added = []
        have = settings.values(root, f"remote.{name}.fetch")
        for spec in fetch_refspecs(name):
            if spec not in have:
                settings.add(root, f"remote.{name}.fetch", spec)
                added.append(f"fetch {spec}")
        if added:
            done.append(f"remote {name}: git fetch now carries autogk's notes and experiment refs "
                        f"({'; '.join(added)})")
        pushes = settings.values(root, f"remote.{name}.push")
        if all(spec in pushes for spec in PUSH[1:]):
            # Set by an earlier autogk: it changed what a plain `git push` sends. Put git's default back.
            mine = [spec for spec in pushes if spec in PUSH]
            for spec in mine:
                settings.unset_value(root, f"remote.{name}.push", spec)
            done.append(f"remote {name}: removed the push settings an earlier autogk added "
                        f"({', '.join(mine)}); a plain `git push` is git's own again. Share notes with: "
                        f"autogk sync --push --remote {name}")
    return done


def add(root: Path, remote: str, where: str) -> list[str]:
    """`git remote add`, then autogk's fetch refspecs on it. Returns what was done."""
    git_remotes.add(root, remote, where)
    return [f"added remote {remote} ({where})", *setup(root, remote)]


def push_command(remote: str) -> str:
    """The one-liner that sends autogk's notes and experiment refs (README: share a run)."""
    return f"git push {remote} " + " ".join(f"'{spec.split(':')[0]}'" for spec in PUSH[1:])


def push(root: Path, remote: str) -> str:
    """Push the notes and experiment refs (fetch and merge first, so the notes push fast-forwards)."""
    git_remotes.push(root, remote, list(PUSH[1:]))
    return f"pushed autogk's notes and experiment refs to {remote}"


def missing_commits(root: Path, commits: list[str]) -> set[str]:
    """The annotated commits this repository does not have (amended, rebased or replayed away, then
    collected; or never pushed): git copies notes onto the new commits but keeps the old ones' notes."""
    if not commits:
        return set()
    return {c for c, (_, kind) in zip(commits, repo.object_kinds(root, commits)) if kind != "commit"}


def empty_history_hint(root: Path) -> str:
    """What to run when no experiment is here: iterate, or (in a clone) fetch the shared ones."""
    names = remotes(root)
    if not names or repo.rev(root, NOTES_PREFIX + "results"):
        return "no experiments yet: run `autogk iterate`"
    return (f"no experiments here yet. A clone has branches only: `autogk sync` fetches the experiments from "
            f"{', '.join(names)}; if they are not there either, push them from the clone that ran them "
            f"(autogk sync --push --remote {names[0]}). Or start here: autogk iterate")


def remote_has_notes(root: Path, remote: str) -> bool:
    """True when the remote holds autogk notes (False, too, when it cannot be asked)."""
    return git_remotes.has_refs(root, remote, NOTES_PREFIX + "*")


def is_setup(root: Path, remote: str) -> bool:
    have = settings.values(root, f"remote.{remote}.fetch")
    return all(spec in have for spec in fetch_refspecs(remote))


def fetch(root: Path, remote: str) -> str:
    """Fetch the remote's notes and experiment refs (works before `setup` too), then merge the notes."""
    before = dict(repo.for_each_ref(root, EXPERIMENTS_PREFIX))
    git_remotes.fetch(root, remote, fetch_refspecs(remote))
    undone = keep_own_refs(root, before)
    merged, kept = merge_notes(root, remote)
    return (f"fetched autogk notes and refs from {remote}" + (f"; merged notes: {', '.join(merged)}" if merged else "")
            + (f"; left out {len(undone)} experiment ref(s) of {remote} that would have moved or taken this "
               f"clone's: {', '.join(undone[:5])}" if undone else "")
            + (f"; kept the note this clone wrote on {len(kept)} commit(s) that {remote} had changed or removed: "
               f"{', '.join(c[:10] for c in kept[:5])}" if kept else ""))


def keep_own_refs(root: Path, before: dict[str, str]) -> list[str]:
    """After a fetch: put back each experiment ref (refs/autogk/...) the fetch moved (without `+`, git still
    fast-forwards one: a collaborator's child commit would become this clone's kept #N), and drop a new one
    on a number this clone has an open branch for (the loop would conclude the collaborator's commit as its
    own experiment and delete the branch). Returns the refs put back or dropped."""
    undone = []
    after = dict(repo.for_each_ref(root, EXPERIMENTS_PREFIX))
    open_numbers = set()
    for name, _ in repo.for_each_ref(root, BRANCH_PREFIX):
        parsed = ExperimentRef.parse(name)
        if parsed and parsed[0] == "branch":
            open_numbers.add((parsed[1].target, parsed[1].number))
    for name, sha in after.items():
        old = before.get(name)
        if old is not None and old != sha:
            repo.update_ref(root, name, old, "autogk sync: keep this clone's experiment ref")
            undone.append(name)
        elif old is None:
            parsed = ExperimentRef.parse(name)
            if parsed and (parsed[1].target, parsed[1].number) in open_numbers:
                repo.delete_ref(root, name)
                undone.append(name)
    return undone


def merge_notes(root: Path, remote: str) -> tuple[list[str], list[str]]:
    """Merge each fetched `refs/notes/remotes/<remote>/autogk/X` into `refs/notes/autogk/X`. Returns the
    merged refs' short names and the commits whose local note the remote had changed or removed (each
    kept as it was here: repo.merge_notes)."""
    prefix = remote_notes_prefix(remote)
    merged, kept = [], []
    for name, sha in repo.for_each_ref(root, prefix):
        local = NOTES_PREFIX + name[len(prefix):]
        have = repo.rev(root, local)
        if have == sha or (have and repo.is_ancestor(root, sha, have)):
            continue
        kept += repo.merge_notes(root, local, name, env=identity_env(root))
        merged.append(local.rsplit("/", 1)[-1])
    return merged, kept
