"""git config values: one key's value, a multi-valued key's values, and setting them."""
from __future__ import annotations

import os
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


def origin(root: Path, key: str) -> tuple[str, str] | None:
    """(where it is set, e.g. 'file:/home/me/.gitconfig', value) of the key's winning value, or None."""
    out = git("config", "--show-origin", "--get", key, cwd=root, check=False).rstrip("\n")
    if "\t" not in out:
        return None
    where, val = out.split("\t", 1)
    return where, val


def global_files() -> list[Path]:
    """Where git reads its global (per-user) config from; some may not exist."""
    from autogk_git import env
    return _paths(env.git_global_config_files())


def system_files() -> list[Path]:
    """Where git reads its system config from; it may not exist."""
    from autogk_git import env
    return _paths(env.git_system_config_files())


def global_and_system_files() -> list[Path]:
    return _paths([*global_files(), *system_files()])


def _paths(candidates: list) -> list[Path]:
    out: list[Path] = []
    for p in candidates:
        if p and str(p) != os.devnull and Path(p) not in out:
            out.append(Path(p))
    return out
