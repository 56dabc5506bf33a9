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


def local_paths(root: Path) -> dict[str, Path]:
    """{remote: its repository's folder} for every remote whose URL or push URL is a path on this machine."""
    out = git("config", "--get-regexp", r"^remote\..*\.(url|pushurl)$", cwd=root, check=False)
    found: dict[str, Path] = {}
    for line in out.splitlines():
        key, _, where = line.partition(" ")
        name = key[len("remote."):key.rfind(".")]
        where = where[len("file://"):] if where.startswith("file://") else where
        p = Path(where) if Path(where).is_absolute() else (root / where)
        if "://" not in where and not where.startswith("git@") and p.is_dir():
            found[f"{name} ({key.rsplit('.', 1)[1]})" if name in found else name] = p.resolve()
    return found


def refs_in(path: Path) -> dict[str, str]:
    """{refname: sha} in the repository at path ({} when it cannot be read)."""
    out = git("for-each-ref", "--format=%(refname) %(objectname)", cwd=path, check=False, env=git_dir_env(path))
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def git_dir_env(path: Path) -> dict[str, str]:
    """GIT_DIR for the repository at path (bare, or a checkout): never a repository above it."""
    return {"GIT_DIR": str(path / ".git" if (path / ".git").exists() else path)}
