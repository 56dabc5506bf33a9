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
