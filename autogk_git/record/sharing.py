"""Sharing the history through a remote: notes and autogk's refs travel with `git fetch` / `git push`.

A plain clone brings branches only. autogk adds, per remote:

    fetch  +refs/notes/autogk/*:refs/notes/remotes/<remote>/autogk/*   remote-tracking copies of the notes
    fetch   refs/autogk/*:refs/autogk/*                                kept and archived experiments
    push    HEAD                                                       what a plain `git push` pushed
    push    refs/notes/autogk/*:refs/notes/autogk/*
    push    refs/autogk/*:refs/autogk/*

Notes are fetched beside the local ones, like remote-tracking branches, and merged in by `merge_notes`
(the local note wins where both sides annotated the same commit differently): fetching never
overwrites a note written here. The experiment refs are fetched without `+`, so a clash of two clones'
experiment numbers is reported by git rather than silently overwritten. Setting `remote.<name>.push`
replaces git's default push behaviour, so `HEAD` is listed first to keep `git push` pushing the
current branch.
"""
from __future__ import annotations

from pathlib import Path

from autogk_git.git import repo
from autogk_git.git.run import git, git_ok, identity_env

from autogk_git.record.refs import NOTES_FETCH, PUSH, REFS_FETCH, remote_notes_prefix, NOTES_PREFIX


def remotes(root: Path) -> list[str]:
    return [r for r in git("remote", cwd=root).splitlines() if r]


def _values(root: Path, key: str) -> list[str]:
    out = git("config", "--get-all", key, cwd=root, check=False)
    return [v for v in out.splitlines() if v]


def fetch_refspecs(remote: str) -> list[str]:
    return [NOTES_FETCH.format(remote=remote), REFS_FETCH]


def setup(root: Path, remote: str | None = None) -> list[str]:
    """Add autogk's refspecs to one remote (or every remote); idempotent. Returns what was done."""
    names = [remote] if remote else remotes(root)
    done = []
    for name in names:
        added = []
        have = _values(root, f"remote.{name}.fetch")
        for spec in fetch_refspecs(name):
            if spec not in have:
                git("config", "--add", f"remote.{name}.fetch", spec, cwd=root)
                added.append(f"fetch {spec}")
        have = _values(root, f"remote.{name}.push")
        for spec in PUSH:
            if spec == "HEAD" and have:
                continue  # the user already chose what `git push` pushes; keep their choice
            if spec not in have:
                git("config", "--add", f"remote.{name}.push", spec, cwd=root)
                added.append(f"push {spec}")
        if added:
            done.append(f"remote {name}: git fetch/push now carry autogk's notes and experiment refs "
                        f"({'; '.join(added)})")
    return done


def is_setup(root: Path, remote: str) -> bool:
    have = _values(root, f"remote.{remote}.fetch")
    return all(spec in have for spec in fetch_refspecs(remote))


def fetch(root: Path, remote: str) -> str:
    """Fetch the remote's notes and experiment refs (works before `setup` too), then merge the notes."""
    git("fetch", "--quiet", remote, *fetch_refspecs(remote), cwd=root)
    merged = merge_notes(root, remote)
    return f"fetched autogk notes and refs from {remote}" + (f"; merged notes: {', '.join(merged)}" if merged else "")


def merge_notes(root: Path, remote: str) -> list[str]:
    """Merge each fetched `refs/notes/remotes/<remote>/autogk/X` into `refs/notes/autogk/X`."""
    prefix = remote_notes_prefix(remote)
    merged = []
    for name, sha in repo.for_each_ref(root, prefix):
        local = NOTES_PREFIX + name[len(prefix):]
        have = repo.rev(root, local)
        if have == sha or (have and git_ok("merge-base", "--is-ancestor", sha, have, cwd=root)):
            continue
        git("notes", "--ref", local, "merge", "--quiet", "-s", "ours", name, cwd=root, env=identity_env(root))
        merged.append(local.rsplit("/", 1)[-1])
    return merged
