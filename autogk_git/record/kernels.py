"""A target's kernel as git holds it: its source files at a revision, and the tree hash of its folder.

The tree hash names a kernel by content: two commits with the same tree under the target's folder
measure the same kernel (a trunk merge and its kept experiment, a commit that touched other files
only), so the loop uses it to refuse repeats and bisect uses it to reuse measurements. `bench` never
reads git: the loop resolves sources here and hands them to the benchmark.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from autogk_git.git import repo
from autogk_git.project import Target
from autogk_git.record.results import was_measured


def commit_of(root: Path, rev: str) -> str | None:
    """The commit a revision names (a branch, a tag, a sha), or None."""
    return repo.rev(root, rev)


def sources_at(root: Path, target: Target, rev: str) -> dict[str, str]:
    """The target's Python files at rev: kernel.py and anything it imports beside it."""
    files = repo.tree_files(root, rev, target.rel)
    return {p: t for p, t in files.items() if p.endswith(".py") and p != "inputs.py"}


def kernel_source(root: Path, target: Target, rev: str | None) -> str:
    """kernel.py at rev ("" when rev is None or has no kernel)."""
    return (repo.show_file(root, rev, f"{target.rel}/kernel.py") or "") if rev else ""


def trees(root: Path, commits: list[str], rel: str) -> dict[str, str]:
    """{commit: tree hash of the folder rel at commit} for many commits in one git process.

    Commits without that folder are left out."""
    commits = list(dict.fromkeys(c for c in commits if c))
    if not commits:
        return {}
    kinds = repo.object_kinds(root, [f"{c}:{rel}" for c in commits])
    return {c: sha for c, (sha, kind) in zip(commits, kinds) if kind == "tree"}


def measured(root: Path, rel: str, numbered: dict[int, list[str]]) -> dict[str, int]:
    """{kernel tree: experiment number} for experiments given as {number: [commits]}; the first number wins.

    Pass each experiment's commit and its parent: a parent was measured too (against it)."""
    order = [(n, c) for n in sorted(numbered) for c in numbered[n] if c]
    tmap = trees(root, [c for _, c in order], rel)
    out: dict[str, int] = {}
    for n, c in order:
        if c in tmap:
            out.setdefault(tmap[c], n)
    return out


def tried(root: Path, rel: str, history: list[dict[str, Any]], also: dict[int, str] | None = None,
          exclude: int | None = None) -> dict[str, int]:
    """{kernel tree: experiment number} of every kernel measured so far, and of those being measured now.

    `history` is result notes: each experiment's commit and the parent it was measured against count;
    a result for which no workload could run (results.was_measured) does not. `also` holds commits in
    flight ({number: sha}); `exclude` leaves one experiment out (the one being replayed)."""
    numbered: dict[int, list[str]] = {}
    for r in history:
        n = r.get("experiment") or 0
        if n == exclude or not was_measured(r):
            continue
        numbered.setdefault(n, []).extend(c for c in (r.get("commit"), r.get("parent")) if c)
    for n, sha in (also or {}).items():
        if n != exclude and sha:
            numbered.setdefault(n, []).append(sha)
    return measured(root, rel, numbered)
