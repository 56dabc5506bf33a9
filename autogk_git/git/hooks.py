"""Install and remove autogk's hook shims without clobbering a user's hooks (theirs are chained)."""
from __future__ import annotations

import os
import re
import stat
import sys
from importlib import resources
from pathlib import Path

from autogk_git.errors import AutogkError
from autogk_git.procs import SAFE_BOOT
from autogk_git.git import settings
from autogk_git.git.worktrees import common_dir, hooks_dir
from autogk_git.git.run import git, git_ok

REF_HOOK = "reference-transaction"  # plain sh (resources/ref_hook.sh): git runs it for every ref update
HOOKS = ("post-commit", "pre-commit", REF_HOOK)
REWRITE = ("notes.rewriteRef", "notes.rewrite.amend", "notes.rewrite.rebase")  # what install sets
MARKER = "autogk-hook v1"
CHAINED = ".autogk-chained"


def shim_text(name: str, python: str | None = None) -> str:
    """The hook template for `name`: one for both commit hooks (the shim finds its own name at run time),
    and the reference-transaction hook's, which starts no Python."""
    if name == REF_HOOK:
        return resources.files("autogk_git.resources").joinpath("ref_hook.sh").read_text()
    return (resources.files("autogk_git.resources").joinpath("hook.sh").read_text()
            .replace("@PYTHON@", python or sys.executable).replace("@BOOT@", SAFE_BOOT))


def is_current(path: Path) -> bool:
    """An autogk shim written from today's template (by whichever Python installed it)."""
    text = path.read_text(errors="replace")
    if path.name == REF_HOOK:
        return text == shim_text(REF_HOOK)
    found = re.search(r'exec "([^"]*)"', text)
    return bool(found) and text == shim_text(path.name, found.group(1))


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
    refuse_tracked(root, d)
    d.mkdir(parents=True, exist_ok=True)
    done = []
    for name in HOOKS:
        path = d / name
        note = "installed"
        if path.exists() and not is_ours(path):
            chained = d / (name + CHAINED)
            if chained.exists():
                raise AutogkError(f"{path} is not autogk's, and {chained} (where it would be kept) already exists",
                                  f"move one of them away (mv {chained} {chained}.old), then run "
                                  "`autogk hooks install` again")
            path.rename(chained)
            note = f"installed; your existing {name} hook now runs first, from {chained.name}"
        elif path.exists():
            note = "updated"
        path.write_text(shim_text(name))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        done.append(f"{path}: {note}")
    # Notes follow their commits through amend and rebase.
    settings.set_value(root, "notes.rewriteRef", notes_glob)
    settings.set_value(root, "notes.rewrite.amend", "true")
    settings.set_value(root, "notes.rewrite.rebase", "true")
    return done


def refuse_tracked(root: Path, d: Path) -> None:
    """A hooks folder inside the working tree (husky and the like) is committed: no machine path goes there."""
    real = d.resolve()
    common = common_dir(root).resolve()
    top = Path(git("rev-parse", "--show-toplevel", cwd=root).strip()).resolve()
    if real == common or common in real.parents or top not in real.parents:
        return  # in the git directory or outside the checkout: never committed
    if git_ok("check-ignore", "-q", str(real / HOOKS[0]), cwd=root):  # a file inside: `dir/` patterns match
        return
    raise AutogkError(
        f"core.hooksPath points at {d}, a folder inside the repository (as husky and other hook managers set "
        f"it): autogk's hooks would write this machine's Python ({sys.executable}) into files you commit",
        "call autogk from your hook manager instead, on experiment branches: `python -m autogk_git.hook "
        "pre-commit` in its pre-commit and `python -m autogk_git.hook post-commit` in its post-commit hook "
        "(or `git config --unset core.hooksPath`, then `autogk hooks install`)")


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
    for key in REWRITE:  # what install set, so that uninstall leaves the config as it found it
        if git("config", "--get-all", key, cwd=root, check=False).strip():
            git("config", "--unset-all", key, cwd=root, check=False)
            done.append(f"git config {key}: removed")
    return done


def status(root: Path) -> dict[str, str]:
    """Per hook: installed, outdated (autogk's, from an older template: `autogk hooks install` updates it)
    or missing."""
    d = hooks_dir(root)
    return {name: ("missing" if not is_ours(d / name) else "installed" if is_current(d / name) else "outdated")
            for name in HOOKS}
