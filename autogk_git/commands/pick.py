"""`autogk pick N --onto BRANCH`: cherry-pick an experiment (kept or archived) and benchmark it there.

The cherry-pick runs where BRANCH is checked out when that worktree is clean, otherwise in a
throwaway worktree, so the user's own checkout is never switched. The benchmark compares the picked
commit with BRANCH's previous tip (timed on a GPU backend, correctness on the CPU one) and is written
as a result note on the new commit, marked `"kind": "pick"` with where it came from.
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from autogk_git.record import kernels, ledger, refs, summaries
from autogk_git.record.results import build_result
from autogk_git.errors import AutogkError, GitError
from autogk_git.git import index, merges, repo, worktrees
from autogk_git.git.run import identity_env
from autogk_git.project import Project


def cherry_pick(project: Project, sha: str, branch: str) -> str:
    """Cherry-pick sha onto branch (with -x); returns the new tip. Conflicts raise with the fix."""
    from autogk_git.loop.background import LOOP_ENV
    if not repo.rev(project.root, refs.branch(branch)):
        raise AutogkError(f"no branch '{branch}'", f"create it first: git branch {branch} <start-point>")
    env = {LOOP_ENV: "1", **identity_env(project.root)}
    wt = worktrees.worktree_of(project.root, refs.branch(branch))
    tmp = None
    if wt is not None and not repo.is_clean(wt):
        raise AutogkError(f"branch '{branch}' is checked out in {wt} with uncommitted changes",
                          f"commit or stash them there (git -C {wt} stash), then run the pick again")
    if wt is None:
        tmp = Path(tempfile.mkdtemp(prefix="autogk-pick-"))
        wt = tmp / "wt"
        worktrees.add_worktree(project.root, wt, branch)
    try:
        proc = merges.cherry_pick(wt, sha, env=env)
        if proc.returncode != 0:
            conflicted = index.unmerged_names(wt)
            merges.abort_cherry_pick(wt, env=env)
            if not conflicted:
                why = (proc.stdout + proc.stderr).strip().splitlines()
                empty = any("empty" in ln for ln in why)
                raise AutogkError(f"cannot cherry-pick {sha[:10]} onto '{branch}': "
                                  + ("its change is already there" if empty else (why[-1] if why else "git failed")),
                                  f"look at: git log --oneline {branch} -5")
            go = f"git switch {branch}" if tmp is not None else f"cd {wt}"
            raise AutogkError(
                f"cherry-picking {sha[:10]} onto '{branch}' conflicts in: {', '.join(conflicted)} "
                f"(nothing was changed; '{branch}' is where it was)",
                "resolve it by hand:\n"
                f"  {go}\n  git cherry-pick -x {sha}\n"
                f"  # edit {', '.join(conflicted)}, then\n"
                f"  git add {' '.join(conflicted)} && git cherry-pick --continue\n"
                f"  autogk bench --rev {branch} --against {branch}~1")
        return repo.head_sha(wt)
    finally:
        if tmp is not None:
            worktrees.remove_worktree(project.root, wt)


def benchmark_pick(project: Project, row: ledger.Row, new: str, old_tip: str, branch: str, say,
                   backend_name: str | None = None) -> dict[str, Any]:
    from autogk_git.bench.backends import get_backend
    from autogk_git.bench.stages import benchmark
    from autogk_git.loop.verdict import rule_for

    target = project.target(row.target)
    backend = get_backend(backend_name or project.config.bench.backend, project.config)
    t0 = time.time()
    cand, parent = kernels.sources_at(project.root, target, new), kernels.sources_at(project.root, target, old_tip)
    bench = benchmark(target, backend, cand, parent, project.config, int(new[:8], 16), progress=say)
    verdict = rule_for(bench).decide(bench, project.config)
    result = build_result(
        kind="pick", target=row.target, experiment=row.number, commit=new, parent=old_tip, branch=branch,
        hypothesis=f"pick #{row.number:04d} onto {branch}: {row.hypothesis}", agent="pick", bench=bench,
        verdict=verdict, kernel_src=cand.get("kernel.py", ""), parent_src=parent.get("kernel.py", ""), started=t0,
        picked_from={"commit": row.commit, "experiment": row.number, "state": row.state, "decision": row.decision})
    summaries.write_result(project.root, result)
    from autogk_git.loop.experiment import log_to_tracking
    log_to_tracking(project, result, say)  # its own run in autogk/<target>/picks; the copied run is tagged
    return result


@click.command("pick", help="Cherry-pick an experiment (kept or archived) onto another branch and benchmark it there.")
@click.argument("number", type=int)
@click.option("--onto", required=True, help="the branch to pick it onto")
@click.option("--target", "-t", help="target name, when several have this number")
@click.option("--bench/--no-bench", default=True, show_default=True, help="benchmark the result on BRANCH")
@click.option("--backend", type=click.Choice(["auto", "interpret", "local", "modal"]), help="override [bench] backend")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def pick(number, onto, target, bench, backend, as_json) -> int:
    project = Project.find()
    say = (lambda s: click.echo(s, err=True)) if as_json else click.echo
    row = ledger.find(project.root, number, target)
    old_tip = repo.rev(project.root, refs.branch(onto))
    try:
        new = cherry_pick(project, row.commit, onto)
    except GitError as e:
        raise AutogkError(f"could not pick #{number:04d} onto '{onto}':\n{e}", "see the git output above") from None
    say(f"picked {row.target} #{number:04d} ({row.state}, {row.commit[:10]}) onto {onto} as {new[:10]}")
    out: dict[str, Any] = {"target": row.target, "experiment": number, "from": row.commit, "onto": onto,
                           "commit": new, "previous_tip": old_tip, "result": None}
    if bench:
        result = benchmark_pick(project, row, new, old_tip, onto, say, backend)
        out["result"] = {"correct": result["correct"], "verdict": result["verdict"], "timing": result["timing"]}
        v = result["verdict"]
        from autogk_git.record.notes import fit
        say(fit(f"on {onto}: {'correct' if result['correct'] else 'INCORRECT'}; against {onto}'s previous tip the "
                f"rule says {v['decision'].upper()}: {v.get('reason', '')}", more="--json for the whole verdict"))
        if not result["correct"]:
            say(f"undo it with: git branch -f {onto} {old_tip[:10]}   (or git revert {new[:10]} on {onto})")
    if as_json:
        click.echo(json.dumps(out, indent=1))
    return 0
