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
from autogk_git.record.experiments import judged_here
from autogk_git.errors import AutogkError
from autogk_git.git import repo, settings
from autogk_git.project import Project


def default_rev(project: Project, target: str) -> tuple[str, str]:
    """(revision, why) for the best kept kernel, or the trunk's tip when nothing is kept."""
    found = [b for b in ledger.best(project.root, project.trunk, target) if b.target == target]
    for b in found:
        if b.row is not None and b.trunk_commit:
            return b.trunk_commit, f"best kept experiment #{b.row.number:04d} ({b.row.hypothesis})"
    if repo.rev(project.root, refs.branch(project.trunk)):
        # The words of `autogk best`: one source for why nothing is best ("nothing kept" only when so).
        why = found[0].basis if found else f"no experiment yet; run `autogk iterate`"
        return project.trunk, f"the tip of '{project.trunk}', no best kernel: {why}"
    return "HEAD", "HEAD"


def judged_result(project: Project, sha: str) -> tuple[dict | None, str | None]:
    """(result note, commit it judged) for the kernel at sha: its own note, or, for a trunk merge, the
    note of the kept experiment it merged."""
    from autogk_git.record.notes import parse_result
    note = repo.read_note(project.root, refs.NOTES_RESULTS, sha)
    result = parse_result(note, sha) if note else None
    if result:
        return result, sha
    for p in repo.commit_info(project.root, [sha])[sha]["parents"].split()[1:]:
        note = repo.read_note(project.root, refs.NOTES_RESULTS, p)
        result = parse_result(note, p) if note else None
        if result:
            return result, p
    return None, None


def refusal(project: Project, target_rel: str, sha: str, result: dict | None, judged: str | None,
            target_name: str, kernel_text: str = "", definition_name: str = "") -> str | None:
    """Why the kernel at sha is not one autogk vouches for (None: it is): archived, incorrect, held,
    unconfirmed (not judged, or judged on a subset of the workloads), or changed since it was judged."""
    if result is None or judged is None:
        from autogk_git import scaffold
        origin = scaffold.shipped_best(definition_name or target_name, kernel_text)
        if origin:  # `init --start best`: judged where it was found, never here
            return (f"the kernel at {sha[:10]} is the best kernel autogk ships for {target_name}, judged in the run "
                    f"that found it ({origin}), not by a judge of this project")
        return (f"no autogk result judged the kernel at {sha[:10]} (the trunk's starting kernel, or a commit "
                "made outside an experiment)")
    num = f"#{result.get('experiment', 0):04d}"
    if not judged_here(project, judged):
        return (f"the result note of experiment {num} ({judged[:10]}) was not written by this clone: it came "
                "from a remote (a collaborator's run, or a note someone else wrote), and no judge here has "
                "run the kernel; run the experiment's kernel through `autogk bench` here, or pack it anyway "
                "with --force")
    state = next((r.state for r in ledger.rows(project.root, target_name) if r.commit == judged), None)
    v = result.get("verdict") or {}
    if state == "archived":
        return f"experiment {num} was reverted (archived): {v.get('reason', '')[:300]}"
    if state == "held" or v.get("decision") == "untimed":
        return (f"experiment {num} is held untimed: correct where it was checked, but never timed, so "
                "nothing says it is faster")
    if not result.get("correct"):
        return f"experiment {num} is incorrect: {v.get('reason', '')[:300]}"
    if v.get("decision") != "keep":
        return f"experiment {num} was not kept (verdict: {v.get('decision', 'pending')})"
    if not ledger.judged_all(result):
        return f"experiment {num} is unconfirmed: judged on {ledger.coverage_text(result)}, not on every workload"
    here = repo.object_id(project.root, f"{sha}:{target_rel}", check=False)
    then = repo.object_id(project.root, f"{judged}:{target_rel}", check=False)
    if here != then:
        return f"the target's files at {sha[:10]} differ from those experiment {num} judged ({judged[:10]})"
    return None


def judged_text(result: dict | None) -> str:
    """What was judged, for the Solution's description."""
    if not result:
        return "judged: nothing (packed with --force)"
    v = result.get("verdict") or {}
    cov = v.get("coverage") or {}
    env = result.get("environment") or {}
    parts = [f"verdict {v.get('decision', 'pending')} ({v.get('rule', '')})"]
    if cov:
        parts.append(f"correct on {cov.get('checked', 0)} of {cov.get('total', 0)} workloads "
                     "(outputs written in place: destination passing)" if result.get("correct") else
                     f"checked {cov.get('checked', 0)} of {cov.get('total', 0)} workloads")
        if "timed" in cov:
            parts.append(f"timed against its parent on {cov['timed']} of {cov.get('total', 0)} on "
                         f"{env.get('gpu') or result.get('backend', '?')}")
    else:
        parts.append("coverage not recorded")
    if v.get("objective"):
        parts.append(f"objective {v['objective']}")
    if v.get("figures"):
        parts.append(v["figures"])
    return "judged: " + "; ".join(parts)


def pack_rev(project: Project, target_name: str | None, rev: str | None, name: str | None,
             author: str | None, force: bool = False) -> tuple[dict, str, str]:
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
    result, judged = judged_result(project, sha)
    refused = refusal(project, target.rel, sha, result, judged, target.name, sources["kernel.py"], definition["name"])
    if refused and not force:
        raise AutogkError(f"not packing {target.name} at {sha[:10]}: {refused}",
                          "pack a kernel kept on every workload (see `autogk best`), or pass --force to pack "
                          "it anyway (the Solution then says it is unconfirmed)")
    who = author or settings.value(project.root, "user.name") or "autogk"
    desc = f"autogk: {target.name} at {sha[:10]}"
    if result:
        desc += f"; #{result.get('experiment', 0):04d} {result.get('hypothesis', '')}"
    desc += f"; {judged_text(result)}"
    if refused:
        desc += f"; UNCONFIRMED, packed with --force: {refused}"
        why += f"; forced past: {refused}"
    sol_name = name or re.sub(r"[^A-Za-z0-9_.-]+", "_", f"autogk_{target.name}_{sha[:10]}")
    data = fib.pack_solution(definition["name"], sources, sol_name, who, desc.strip("; "))
    return data, sha, why


@click.command("pack", help="Write a FlashInfer-Bench Solution JSON of a kernel (the best kept one by default).")
@click.argument("rev", required=False)
@click.option("--target", "-t", help="target name")
@click.option("--out", "-o", "out",
              help="output file ('-' for stdout; default: mlruns/packs/<name>.json, outside the tracked tree)")
@click.option("--name", help="solution name (default: autogk_<target>_<sha>)")
@click.option("--author", help="author (default: git config user.name)")
@click.option("--force", is_flag=True, help="pack a kernel autogk does not vouch for (archived, incorrect, held "
                                            "untimed, or not judged on every workload); the Solution says so")
@click.option("--json", "as_json", is_flag=True, help="print what was written as JSON (path, commit, why)")
def pack(rev, target, out, name, author, force, as_json) -> int:
    project = Project.find()
    data, sha, why = pack_rev(project, target, rev, name, author, force)
    text = json.dumps(data, indent=2) + "\n"
    if out == "-":
        click.echo(text, nl=False)
        return 0
    # By default next to the MLflow store, which git ignores: packing never leaves the repository dirty.
    path = Path(out) if out else project.main_root / "mlruns" / "packs" / f"{data['name']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if as_json:
        click.echo(json.dumps({"path": str(path), "name": data["name"], "definition": data["definition"],
                               "commit": sha, "sources": len(data["sources"]), "why": why}, indent=1))
        return 0
    click.echo(f"wrote {path} ({len(data['sources'])} source file(s), definition {data['definition']}) "
               f"from {sha[:10]}: {why}; checked by flashinfer-bench's packer and Solution model")
    return 0
