"""git config values: one key's value, a multi-valued key's values, and setting them."""
from __future__ import annotations

from pathlib import Path

from autogk_git.git.run import git


def value(root: Path, key: str) -> str:
    """The key's value, or '' when it is not set."""
    return git("config", key, cwd=root, check=False).strip()


def values(root: Path, key: str) -> list[str]:
    """Every value of a multi-valued key (none when unset)."""
    return [v for v in git("config", "--get-all", key, cwd=root, check=False).splitlines() if v]


def add(root: Path, key: str, value: str) -> None:
    git("config", "--add", key, value, cwd=root)


def unset_value(root: Path, key: str, value: str) -> None:
    """Remove every line of key whose value is exactly value (nothing to remove is no error)."""
    git("config", "--fixed-value", "--unset-all", key, value, cwd=root, check=False)


def set_value(cwd: Path, key: str, value: str, env: dict[str, str] | None = None) -> None:
    git("config", key, value, cwd=cwd, env=env)
