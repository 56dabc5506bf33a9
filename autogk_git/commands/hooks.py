"""`autogk hooks install|uninstall|status`."""
from __future__ import annotations

import json

import click

from autogk_git.git import hooks as hooks_mod
from autogk_git.project import find_root
from autogk_git.record import refs


@click.group("hooks", help="Install or remove autogk's git hooks.")
def hooks() -> None:
    pass


def _say(lines: list[str], root, as_json: bool) -> None:
    if as_json:  # what was done, and each hook's state after it
        click.echo(json.dumps({"done": lines, "hooks": hooks_mod.status(root)}, indent=1))
    else:
        for line in lines:
            click.echo(line)


@hooks.command("install", help="Install the hook shims (an existing hook is chained, not replaced).")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def install(as_json) -> int:
    root = find_root()
    _say(hooks_mod.install(root, refs.NOTES_GLOB), root, as_json)
    return 0


@hooks.command("uninstall", help="Remove the shims and restore any chained hook.")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def uninstall(as_json) -> int:
    root = find_root()
    _say(hooks_mod.uninstall(root), root, as_json)
    return 0
