"""Install and remove autogk's hook shims without clobbering a user's hooks (theirs are chained)."""
from __future__ import annotations

import os
import stat
import sys
from importlib import resources
from pathlib import Path

from autogk_git.git.run import git

HOOKS = ("post-commit", "pre-commit")
MARKER = "autogk-hook v1"
CHAINED = ".autogk-chained"


def hooks_dir(root: Path) -> Path:
    p = Path(git("rev-parse", "--git-path", "hooks", cwd=root).strip())
    return p if p.is_absolute() else (root / p).resolve()


def shim_text(name: str) -> str:
    """The one hook template, for either hook: the shim finds its own name at run time."""
    return resources.files("autogk_git.resources").joinpath("hook.sh").read_text().replace("@PYTHON@", sys.executable)


def is_ours(path: Path) -> bool:
    try:
        return MARKER in path.read_text(errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        return False


def install(root: Path, notes_glob: str) -> list[str]:
    """Install the shims; notes under notes_glob follow their commits through amend and rebase.

    Returns what was done, one line per hook.
    """
    d = hooks_dir(root)
    d.mkdir(parents=True, exist_ok=True)
    done = []
    for name in HOOKS:
        path = d / name
        note = "installed"
        if path.exists() and not is_ours(path):
            chained = d / (name + CHAINED)
            if chained.exists():
                raise FileExistsError(f"{chained} already exists; move it away and run `autogk hooks install` again")
            path.rename(chained)
            note = f"installed; your existing {name} hook now runs first, from {chained.name}"
        elif path.exists():
            note = "updated"
        path.write_text(shim_text(name))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        done.append(f"{path}: {note}")
    # Notes follow their commits through amend and rebase.
    git("config", "notes.rewriteRef", notes_glob, cwd=root)
    git("config", "notes.rewrite.amend", "true", cwd=root)
    git("config", "notes.rewrite.rebase", "true", cwd=root)
    return done


def uninstall(root: Path) -> list[str]:
    d = hooks_dir(root)
    done = []
    for name in HOOKS:
        path, chained = d / name, d / (name + CHAINED)
        if is_ours(path):
            path.unlink()
            if chained.exists():
                os.replace(chained, path)
                done.append(f"{path}: removed; your previous hook is back in place")
            else:
                done.append(f"{path}: removed")
        elif path.exists():
            done.append(f"{path}: not autogk's, left alone")
    return done


def status(root: Path) -> dict[str, str]:
    d = hooks_dir(root)
    return {name: ("installed" if is_ours(d / name) else "missing") for name in HOOKS}
