"""Worktrees and the git directory they share: list, add, remove, and which one has a branch checked out."""
from __future__ import annotations

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


def add_worktree(root: Path, path: Path, rev: str, detach: bool = False) -> None:
    """A new worktree at path with rev checked out (a branch name, or any commit with detach)."""
    git("worktree", "add", "--quiet", *(["--detach"] if detach else []), str(path), rev, cwd=root)


def remove_worktree(root: Path, path: Path) -> None:
    """Remove a throwaway worktree, changes and all; a failure to remove leaves it for `prune`."""
    git_proc("worktree", "remove", "--force", str(path), cwd=root)
    git("worktree", "prune", cwd=root)
