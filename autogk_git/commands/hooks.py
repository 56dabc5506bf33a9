"""`autogk hooks install|uninstall|status`."""
from __future__ import annotations

import click

from autogk_git.git import hooks as hooks_mod
from autogk_git.project import find_root
from autogk_git.record import refs


@click.group("hooks", help="Install or remove autogk's git hooks.")
def hooks() -> None:
    pass


@hooks.command("install", help="Install the hook shims (an existing hook is chained, not replaced).")
def install() -> int:
    for line in hooks_mod.install(find_root(), refs.NOTES_GLOB):
        click.echo(line)
    return 0


@hooks.command("uninstall", help="Remove the shims and restore any chained hook.")
def uninstall() -> int:
    for line in hooks_mod.uninstall(find_root()):
        click.echo(line)
    return 0
