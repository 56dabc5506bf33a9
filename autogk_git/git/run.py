"""The one function through which every git command runs."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from autogk_git.errors import GitError

# Hooks run with GIT_DIR, GIT_INDEX_FILE and friends set for the repository that called them; a git
# command aimed at another worktree or repository must not inherit them.
_STRIP = ("GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE", "GIT_PREFIX", "GIT_OBJECT_DIRECTORY",
          "GIT_COMMON_DIR", "GIT_EDITOR_EXIT_CODE", "GIT_REFLOG_ACTION", "GIT_QUARANTINE_PATH")


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _STRIP}
    if extra:
        env.update(extra)
    return env


def git(*args: str, cwd: str | Path, input: str | bytes | None = None, check: bool = True,
        env: dict[str, str] | None = None, binary: bool = False) -> str | bytes:
    """Run `git args` in cwd and return stdout; raise GitError on failure when check is set."""
    cmd = ["git", *args]
    data = input.encode() if isinstance(input, str) else input
    proc = subprocess.run(cmd, cwd=str(cwd), input=data, capture_output=True, env=git_env(env))
    if check and proc.returncode != 0:
        raise GitError(
            f"git command failed: {' '.join(cmd)}\n  exit code: {proc.returncode}\n"
            f"  stdout: {proc.stdout.decode(errors='replace').strip()}\n"
            f"  stderr: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout if binary else proc.stdout.decode(errors="replace")


def git_ok(*args: str, cwd: str | Path) -> bool:
    """True when `git args` exits 0."""
    return subprocess.run(["git", *args], cwd=str(cwd), capture_output=True,
                          env=git_env()).returncode == 0
