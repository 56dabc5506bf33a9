"""Remotes and the config keys that describe them: names, URLs, refspecs, and what goes up and down."""
from __future__ import annotations

from pathlib import Path

from autogk_git.git.run import git, git_proc


def names(root: Path) -> list[str]:
    return [r for r in git("remote", cwd=root).splitlines() if r]


def url(root: Path, remote: str) -> str | None:
    """The remote's fetch URL, or None when there is no such remote."""
    out = git_proc("remote", "get-url", remote, cwd=root)
    return out.stdout.strip() if out.returncode == 0 else None


def add(root: Path, remote: str, where: str) -> None:
    git("remote", "add", remote, where, cwd=root)


def has_refs(root: Path, remote: str, pattern: str) -> bool:
    """True when the remote holds refs matching pattern (False, too, when it cannot be asked)."""
    out = git_proc("ls-remote", remote, pattern, cwd=root)
    return out.returncode == 0 and bool(out.stdout.strip())


def fetch(root: Path, remote: str, specs: list[str]) -> None:
    git("fetch", "--quiet", remote, *specs, cwd=root)


def push(root: Path, remote: str, specs: list[str]) -> None:
    git("push", "--quiet", remote, *specs, cwd=root)
