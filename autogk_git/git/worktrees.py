"""Worktrees and the git directory they share: list, add, remove, and which one has a branch checked out."""
from __future__ import annotations

import shutil
from pathlib import Path

from autogk_git.git.run import git, git_proc


def worktrees(root: Path) -> list[dict[str, str]]:
    """`git worktree list --porcelain` as dicts (worktree, HEAD, branch)."""
    out = git("worktree", "list", "--porcelain", cwd=root)
    items, cur = [], {}
    for line in out.splitlines():
        if not line:
            if cur:
                items.append(cur)
            cur = {}
            continue
        k, _, v = line.partition(" ")
        cur[k] = v
    if cur:
        items.append(cur)
    return items


def checked_out(root: Path, besides: Path | None = None) -> dict[str, Path]:
    """{branch ref: worktree} for every checked-out branch, leaving out the worktree `besides`."""
    skip = besides.resolve() if besides is not None else None
    out: dict[str, Path] = {}
    for wt in worktrees(root):
        if "branch" in wt and (skip is None or Path(wt["worktree"]).resolve() != skip):
            out.setdefault(wt["branch"], Path(wt["worktree"]))
    return out


def worktree_of(root: Path, branch_ref: str) -> Path | None:
    """The worktree where branch_ref (refs/heads/...) is checked out, or None."""
    return checked_out(root).get(branch_ref)


def common_dir(cwd: Path) -> Path:
    """The git directory every worktree of the repository shares (absolute, symlinks resolved by git)."""
    return Path(git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=cwd).strip())


def git_path(root: Path, name: str) -> Path:
    """A path inside root's git directory as git resolves it (`index`, `hooks`: per worktree or shared)."""
    p = Path(git("rev-parse", "--git-path", name, cwd=root).strip())
    return p if p.is_absolute() else (root / p).resolve()


def hooks_dir(root: Path) -> Path:
    """The folder git runs root's hooks from (`core.hooksPath` when set), as git names it."""
    p = Path(git("rev-parse", "--git-path", "hooks", cwd=root).strip())
    return p if p.is_absolute() else (root / p).resolve()


def add_worktree(root: Path, path: Path, rev: str, detach: bool = False, new_branch: str | None = None) -> None:
    """A new worktree at path with rev checked out (a branch name, or any commit with detach); with
    new_branch, on a new branch of that name made at rev."""
    git("worktree", "add", "--quiet", *(["--detach"] if detach else []), *(["-b", new_branch] if new_branch else []),
        str(path), rev, cwd=root)


def remove_worktree(root: Path, path: Path) -> None:
    """Remove a throwaway worktree, changes and all; a failure to remove leaves it for `prune`."""
    git_proc("worktree", "remove", "--force", str(path), cwd=root)
    git("worktree", "prune", cwd=root)


def discard_worktree(root: Path, path: Path) -> None:
    """Remove the worktree at path whatever state a kill left it in: its folder gone, and git's record of it.

    Asked of git even when the folder is gone, and with --force twice: a kill that cut `git worktree add`
    short leaves the worktree registered and locked ("initializing"), perhaps without its folder;
    `prune` keeps locked ones, and the next `worktree add` of this path would fail forever. The prune
    comes after the folder is deleted, so a registration whose removal failed goes with it."""
    git_proc("worktree", "remove", "--force", "--force", str(path), cwd=root)
    shutil.rmtree(path, ignore_errors=True)
    git("worktree", "prune", cwd=root)


def switch(cwd: Path, branch: str) -> None:
    """Check out branch in the worktree cwd (fails rather than overwrite a local change)."""
    git("checkout", "-q", branch, cwd=cwd)
