"""`autogk remote add NAME URL | setup [NAME]`: a remote whose `git fetch` carries autogk's notes and
experiment refs.

`init` and `sync` set this up on the remotes they find; a remote added later with git's own
`git remote add` gets it only at the next `autogk sync`. These commands do it at once. Only fetch
refspecs are added: what a plain `git push` sends stays git's own choice (record/sharing.py says why),
so each prints the push that shares the notes.
"""
from __future__ import annotations

import json

import click

from autogk_git.errors import AutogkError
from autogk_git.project import Project
from autogk_git.record import sharing


def _report(project: Project, name: str, done: list[str], added: bool) -> dict:
    root = project.root
    return {"remote": name, "url": sharing.url(root, name), "added": added,
            "fetch": sharing.fetch_refspecs(name), "changes": done,
            "share": f"git push {name} {project.trunk} && autogk sync --push --remote {name}",
            "push_notes": sharing.push_command(name)}


def _say(out: dict) -> None:
    for line in out["changes"] or [f"remote {out['remote']}: git fetch already carries autogk's notes and "
                                    "experiment refs"]:
        click.echo(line)
    click.echo(f"share the run with: {out['share']}")


@click.group("remote", help="Add or set up a remote so git fetch brings autogk's notes and refs.")
def remote() -> None:
    pass


@remote.command("add", help="git remote add NAME URL, then autogk's fetch refspecs on it (a plain push is unchanged).")
@click.argument("name")
@click.argument("url")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def add(name: str, url: str, as_json: bool) -> int:
    project = Project.find()
    root = project.root
    have = sharing.url(root, name)
    if have is not None and have != url:
        raise AutogkError(f"a remote named {name} exists already, with the URL {have}",
                          f"set it up as it is: autogk remote setup {name}; or change its URL first: "
                          f"git remote set-url {name} {url}")
    done = sharing.add(root, name, url) if have is None else sharing.setup(root, name)
    out = _report(project, name, done, added=have is None)
    if as_json:
        click.echo(json.dumps(out))
    else:
        _say(out)
    return 0


@remote.command("setup", help="Add autogk's fetch refspecs to an existing remote (default: every remote).")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def setup(name: str | None, as_json: bool) -> int:
    project = Project.find()
    root = project.root
    names = sharing.remotes(root)
    if name is not None and name not in names:
        known = f" (this repository has: {', '.join(names)})" if names else ""
        raise AutogkError(f"there is no remote named {name}{known}",
                          f"add it with: autogk remote add {name} URL")
    if not names:
        raise AutogkError("this repository has no remote to set up", "add one with: autogk remote add NAME URL")
    outs = [_report(project, n, sharing.setup(root, n), added=False) for n in ([name] if name else names)]
    if as_json:
        click.echo(json.dumps(outs[0] if name else outs))
    else:
        for out in outs:
            _say(out)
    return 0
