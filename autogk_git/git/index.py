"""A checkout's index and files as git sees them: what changed, what is staged, and putting them back."""
from __future__ import annotations

from pathlib import Path

from autogk_git.git.run import git, git_proc


def changes_z(cwd: Path, renames: bool = True) -> str:
    """`status --porcelain -z` with every untracked file listed (ignored ones are not)."""
    return git("status", "--porcelain", "--untracked-files=all", *([] if renames else ["--no-renames"]), "-z",
               cwd=cwd)


def has_changes(cwd: Path, *paths: str) -> bool:
    """True when anything under paths differs from HEAD, untracked files included."""
    return bool(git("status", "--porcelain", "--", *paths, cwd=cwd).strip())


def index_entries(cwd: Path, *paths: str, check: bool = True) -> str:
    """`ls-files -s -z`: mode, blob and path of every index entry (or those under paths)."""
    return git("ls-files", "-s", "-z", *(["--", *paths] if paths else []), cwd=cwd, check=check)


def load_index_entries(cwd: Path, entries: str) -> None:
    """Write entries in `ls-files -s -z` form back into the index."""
    git("update-index", "-z", "--index-info", cwd=cwd, input=entries)


def is_tracked(cwd: Path, path: str) -> bool:
    return bool(git("ls-files", "--error-unmatch", "--", path, cwd=cwd, check=False).strip())


def staged_names(cwd: Path | None, inherit: bool = False) -> list[str]:
    """Paths whose index entry differs from HEAD. inherit: the index git named for the commit a hook
    runs in (GIT_INDEX_FILE), read whatever git's exit code."""
    if inherit:
        out = git_proc("diff", "--cached", "--name-only", cwd=cwd, inherit=True).stdout
    else:
        out = git("diff", "--cached", "--name-only", cwd=cwd)  # type: ignore[arg-type]
    return [p for p in out.splitlines() if p]


def status_lines(cwd: Path) -> list[str]:
    """`status --porcelain` lines ("XY path"), untracked files as git's default shows them."""
    return [p for p in git("status", "--porcelain", cwd=cwd).splitlines() if p]


def discard_changes(cwd: Path) -> None:
    """Files and index back to HEAD, untracked files and folders deleted (ignored ones are kept)."""
    git("reset", "-q", "--hard", "HEAD", cwd=cwd)
    git("clean", "-qfd", cwd=cwd)


def unmerged_names(cwd: Path) -> list[str]:
    """Paths left in conflict by a merge or cherry-pick."""
    return [p for p in git("diff", "--name-only", "--diff-filter=U", cwd=cwd).splitlines() if p]


def stage(cwd: Path, *paths: str) -> None:
    git("add", "--", *paths, cwd=cwd)


def stage_all(cwd: Path, *paths: str) -> None:
    """Stage every change under paths, deletions and new files included."""
    git("add", "-A", "--", *paths, cwd=cwd)


def unstage(cwd: Path, *paths: str) -> None:
    """The index back to HEAD (for paths, or all of it); the files are left as they are."""
    git("reset", "-q", *(["HEAD", "--", *paths] if paths else []), cwd=cwd)


def read_tree(cwd: Path, rev: str = "HEAD", env: dict[str, str] | None = None) -> None:
    """The index set to rev's tree; the files are left as they are."""
    git("read-tree", rev, cwd=cwd, env=env)


def refresh(cwd: Path, env: dict[str, str] | None = None) -> None:
    """Update the index's file stats, so unchanged files read as unchanged (never fails)."""
    git("update-index", "-q", "--refresh", cwd=cwd, env=env, check=False)


def write_tree(cwd: Path, prefix: str | None = None) -> str:
    """The tree id of the index (of the folder prefix only, when given), written to the object store."""
    return git("write-tree", *([f"--prefix={prefix}"] if prefix else []), cwd=cwd).strip()


def restore_from_index(cwd: Path, *paths: str) -> None:
    git("checkout", "-q", "--", *paths, cwd=cwd)


def restore_from_head(cwd: Path, *paths: str) -> None:
    git("checkout", "-q", "HEAD", "--", *paths, cwd=cwd)
