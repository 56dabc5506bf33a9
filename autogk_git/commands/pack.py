"""`autogk pack [REV]`: a FlashInfer-Bench Solution JSON of a target's kernel at REV.

REV defaults to the trunk commit that holds the best kept experiment (see `autogk best`). The
Solution is made by flashinfer-bench's own packer and read back by its own model, so what is written
is what a FlashInfer-Bench dataset or a contest submission accepts.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import click

from autogk_git.record import ledger
from autogk_git.record import refs
from autogk_git.errors import AutogkError
from autogk_git.git import repo
from autogk_git.git.run import git
from autogk_git.project import Project


def default_rev(project: Project, target: str) -> tuple[str, str]:
    """(revision, why) for the best kept kernel, or the trunk's tip when nothing is kept."""
    for b in ledger.best(project.root, project.trunk, target):
        if b.row is not None and b.trunk_commit:
            return b.trunk_commit, f"best kept experiment #{b.row.number:04d} ({b.row.hypothesis})"
    if repo.rev(project.root, refs.branch(project.trunk)):
        return project.trunk, f"the tip of '{project.trunk}' (nothing kept yet)"
    return "HEAD", "HEAD"


def pack_rev(project: Project, target_name: str | None, rev: str | None, name: str | None,
             author: str | None) -> tuple[dict, str, str]:
    from autogk_git import fib
    from autogk_git.record.kernels import sources_at

    target = project.target(target_name)
    why = "given"
    if rev is None:
        rev, why = default_rev(project, target.name)
    sha = repo.rev(project.root, rev)
    if not sha:
        raise AutogkError(f"'{rev}' is not a commit", "pass a branch, tag or sha (default: the best kept one)")
    sources = sources_at(project.root, target, sha)
    nested = [p for p in sources if "/" in p]
    if nested:
        raise AutogkError(f"the kernel has files in subfolders ({', '.join(nested)}); a Solution's sources are flat",
                          f"move them beside kernel.py in {target.rel}/")
    if "kernel.py" not in sources:
        raise AutogkError(f"{target.rel}/kernel.py does not exist at {sha[:10]}", "pass a revision that has it")
    definition = json.loads(repo.show_file(project.root, sha, f"{target.rel}/definition.json")
                            or json.dumps(target.definition))
    who = author or git("config", "user.name", cwd=project.root, check=False).strip() or "autogk"
    from autogk_git.record.notes import parse_result
    note = repo.read_note(project.root, refs.NOTES_RESULTS, sha)
    result = parse_result(note, sha) if note else None
    if result is None:  # a trunk merge: the figures are on the kept experiment it merged
        parents = repo.commit_info(project.root, [sha])[sha]["parents"].split()
        for p in parents[1:]:
            note = repo.read_note(project.root, refs.NOTES_RESULTS, p)
            result = parse_result(note, p) if note else None
            if result:
                break
    desc = f"autogk: {target.name} at {sha[:10]}"
    if result:
        v = result.get("verdict") or {}
        desc += f"; #{result.get('experiment', 0):04d} {result.get('hypothesis', '')}; {v.get('figures', '')}"
    sol_name = name or re.sub(r"[^A-Za-z0-9_.-]+", "_", f"autogk_{target.name}_{sha[:10]}")
    data = fib.pack_solution(definition["name"], sources, sol_name, who, desc.strip("; "))
    return data, sha, why


@click.command("pack", help="Write a FlashInfer-Bench Solution JSON of a kernel (the best kept one by default).")
@click.argument("rev", required=False)
@click.option("--target", "-t", help="target name")
@click.option("--out", "-o", "out", help="output file ('-' for stdout; default: <name>.json here)")
@click.option("--name", help="solution name (default: autogk_<target>_<sha>)")
@click.option("--author", help="author (default: git config user.name)")
def pack(rev, target, out, name, author) -> int:
    project = Project.find()
    data, sha, why = pack_rev(project, target, rev, name, author)
    text = json.dumps(data, indent=2) + "\n"
    if out == "-":
        click.echo(text, nl=False)
        return 0
    path = Path(out or f"{data['name']}.json")
    path.write_text(text)
    click.echo(f"wrote {path} ({len(data['sources'])} source file(s), definition {data['definition']}) "
               f"from {sha[:10]}: {why}; checked by flashinfer-bench's packer and Solution model")
    return 0
