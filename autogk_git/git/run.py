"""The one place that starts git processes: `git()` for commands whose output we want, `git_proc()` for
the few callers that need git's exit code and both streams. An architecture test keeps it the only one."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from autogk_git.errors import GitError

# Hooks run with GIT_DIR, GIT_INDEX_FILE and friends set for the repository that called them; a git
# command aimed at another worktree or repository must not inherit them.
_STRIP = ("GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE", "GIT_PREFIX", "GIT_OBJECT_DIRECTORY",
          "GIT_COMMON_DIR", "GIT_EDITOR_EXIT_CODE", "GIT_REFLOG_ACTION", "GIT_QUARANTINE_PATH")


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _STRIP}
    # autogk reads the objects a commit names: a replace ref (refs/replace/) would show the judge one
    # kernel while the commit, once its replace ref is gone, holds another.
    env["GIT_NO_REPLACE_OBJECTS"] = "1"
    # autogk's own ref updates: the reference-transaction hook (resources/ref_hook.sh) refuses any other
    # command that moves an experiment ref (a plain `git fetch` of a remote's).
    env["AUTOGK_REF_WRITER"] = "1"
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
        err = proc.stderr.decode(errors="replace").strip()
        raise GitError(
            f"git command failed: {' '.join(cmd)}\n  exit code: {proc.returncode}\n"
            f"  stdout: {proc.stdout.decode(errors='replace').strip()}\n"
            f"  stderr: {err}", lock_hint(err))
    return proc.stdout if binary else proc.stdout.decode(errors="replace")


_LOCK = re.compile(r"Unable to create '([^']+\.lock)': File exists")


def lock_hint(stderr: str) -> str | None:
    """The fix when git found its own lock file taken. Git never removes one it did not create: a git
    command killed with `kill -9` (with the loop that ran it, say) leaves it for good."""
    m = _LOCK.search(stderr)
    if not m:
        return None
    return (f"a git lock file is in the way: {m.group(1)}. If no git command is running in this repository "
            f"(one killed mid-way leaves it behind), remove it: rm '{m.group(1)}'; then run the command again")


def git_ok(*args: str, cwd: str | Path) -> bool:
    """True when `git args` exits 0."""
    return git_proc(*args, cwd=cwd).returncode == 0


def git_proc(*args: str, cwd: str | Path | None = None, input: str | None = None,
             env: dict[str, str] | None = None, inherit: bool = False) -> subprocess.CompletedProcess[str]:
    """Run `git args` and return the finished process (text), whatever its exit code.

    inherit keeps the caller's GIT_* variables: only a hook asking about the very commit that runs it
    wants them (GIT_INDEX_FILE names the index being committed, which `commit -a` makes temporary).
    """
    full = {**os.environ, **(env or {})} if inherit else git_env(env)
    return subprocess.run(["git", *args], cwd=None if cwd is None else str(cwd), input=input,
                          capture_output=True, text=True, env=full)


def identity_env(root: Path) -> dict[str, str]:
    """Author/committer for autogk's commits when the repository has no identity configured."""
    if git("config", "user.email", cwd=root, check=False).strip():
        return {}
    return {"GIT_AUTHOR_NAME": "autogk", "GIT_AUTHOR_EMAIL": "autogk@localhost",
            "GIT_COMMITTER_NAME": "autogk", "GIT_COMMITTER_EMAIL": "autogk@localhost"}
