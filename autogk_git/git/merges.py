"""Carrying commits between lines of history: cherry-picks and bisects."""
from __future__ import annotations

import subprocess
from pathlib import Path

from autogk_git.git.run import git, git_proc


def cherry_pick(cwd: Path, sha: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`cherry-pick -x sha` (the message names where it came from); the finished process, whatever its
    exit code, so the caller can tell a conflict from an empty pick."""
    return git_proc("cherry-pick", "-x", sha, cwd=cwd, env=env)


def apply_change(cwd: Path, sha: str) -> None:
    """Stage sha's change onto cwd's HEAD without committing; sha's hunks win where both sides changed a
    line. Raises GitError when it does not apply."""
    git("cherry-pick", "--no-commit", "-X", "theirs", sha, cwd=cwd)


def abort_cherry_pick(cwd: Path, env: dict[str, str] | None = None) -> None:
    """Leave a cherry-pick in progress, if there is one (nothing to abort is no error)."""
    git_proc("cherry-pick", "--abort", cwd=cwd, env=env)


def bisect_first_parent(cwd: Path, bad: str, good: str, *command: str) -> subprocess.CompletedProcess[str]:
    """`git bisect run command` along bad's first-parent line down to good; the finished run (its output
    names the first bad commit). The bisect is reset afterwards, whatever happened."""
    git("bisect", "start", "--first-parent", bad, good, cwd=cwd)
    try:
        return git_proc("bisect", "run", *command, cwd=cwd)
    finally:
        git_proc("bisect", "reset", "--quiet", cwd=cwd)


def merge_no_ff(cwd: Path, rev: str, message: str, env: dict[str, str] | None = None) -> None:
    """Merge rev into the branch checked out in cwd with a merge commit of message, even when a fast-forward
    would do. Raises GitError on a conflict (the merge is left in progress: abort_merge)."""
    git("merge", "-q", "--no-ff", "--no-edit", "-m", message, rev, cwd=cwd, env=env)


def abort_merge(cwd: Path) -> None:
    """Leave a merge in progress, if there is one (nothing to abort is no error)."""
    git_proc("merge", "--abort", cwd=cwd)


def merged_tree(root: Path, a: str, b: str) -> str | None:
    """The tree a three-way merge of a and b gives, written to the object store without touching any
    checkout; None when they conflict."""
    out = git_proc("merge-tree", "--write-tree", a, b, cwd=root)
    return out.stdout.split()[0] if out.returncode == 0 else None


def overlay_tree(root: Path, base: str, other: str, paths: list[str]) -> str:
    """The tree of base with each of paths as other holds it (removed where other has none).

    A tree experiment is measured as a whole kernel against the trunk tip; what merges must be that
    kernel exactly, not a three-way blend of its path's hunks with the trunk's. A temporary index keeps
    the repository's own index and files untouched."""
    import os
    import tempfile

    fd, index = tempfile.mkstemp(prefix="autogk-overlay-", suffix=".index")
    os.close(fd)
    os.unlink(index)  # git makes it: an empty file is not a valid index
    env = {"GIT_INDEX_FILE": index}
    try:
        git("read-tree", base, cwd=root, env=env)
        if paths:
            git("rm", "-q", "--cached", "--ignore-unmatch", "--", *paths, cwd=root, env=env)
            entries = git("ls-tree", "-r", "-z", other, "--", *paths, cwd=root)
            # ls-tree's "mode type blob\tpath" lines, as update-index --index-info reads them.
            info = "".join(f"{e.split(' ')[0]} {e.split(' ')[2]}\0" for e in entries.split("\0") if e)
            if info:
                git("update-index", "-z", "--index-info", cwd=root, env=env, input=info)
        return git("write-tree", cwd=root, env=env).strip()
    finally:
        if os.path.exists(index):
            os.unlink(index)


def advance_checkout(cwd: Path, old: str, new: str) -> None:
    """Move a checkout's index and files from old's tree to new's (its branch was moved from old to
    new underneath it); fails rather than overwrite a local change."""
    git("read-tree", "-m", "-u", old, new, cwd=cwd)


def commit_merge(root: Path, tree: str, first: str, second: str, message: str,
                 env: dict[str, str] | None = None) -> str:
    """A merge commit of tree with parents first and second (no ref moves); returns its sha."""
    return git("commit-tree", tree, "-p", first, "-p", second, "-F", "-", cwd=root, input=message, env=env).strip()
