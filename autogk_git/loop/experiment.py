"""One experiment's life: branch and worktree, commit, benchmark, result note, verdict, merge or archive.

Every step is idempotent and its state lives in refs and notes, so a loop killed at any point is
finished (or cleanly discarded) by the next run. Order of a conclusion:
    keep:   kept ref -> merge into trunk -> delete branch -> remove worktree
    revert: archive ref -> delete branch -> remove worktree
    untimed (correct, but nothing timed it; loop/verdict.py): untimed ref -> delete branch -> remove worktree
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from autogk_git.record import kernels, notes, refs, summaries, trunk
from autogk_git.record.results import build_result
from autogk_git.errors import AutogkError, GitError
from autogk_git.git import commits, index, merges, repo, worktrees
from autogk_git.git.run import identity_env
from autogk_git.loop.background import LOOP_ENV
from autogk_git.project import Project, Target
from autogk_git.record.experiments import Experiment, ensure_trunk, judged_here, load_result, next_number, results, scan, write_plan  # noqa: F401

Say = Callable[[str], None]


def worktree_path(project: Project, target: str, number: int) -> Path:
    return project.state_dir / "worktrees" / f"{target}-{number:04d}"


# ------------------------------------------------------------------------------------------------
# Opening and committing
# ------------------------------------------------------------------------------------------------

def open_worktree(project: Project, target: str, number: int, base: str) -> tuple[Path, str]:
    """A fresh worktree on a new branch `autogk/<target>/<NNNN>-wip` at base."""
    path = worktree_path(project, target, number)
    path.parent.mkdir(parents=True, exist_ok=True)
    branch = refs.ExperimentRef(target, number, "wip").branch
    remove_worktree(project, path)
    worktrees.add_worktree(project.root, path, base, new_branch=branch)
    return path, branch


def remove_worktree(project: Project, path: Path) -> None:
    """The experiment's worktree gone, even one a kill left half made (worktrees.discard_worktree)."""
    worktrees.discard_worktree(project.root, path)


def propose(project: Project, agent, ctx, wip: refs.ExperimentRef, say: Say):
    """Let the agent change ctx.worktree; the branch is closed when it fails or has nothing to try."""
    try:
        proposal = agent.propose(ctx)
    except BaseException:
        close_branch(project, wip, say)
        raise
    if not proposal.changed:
        close_branch(project, wip, say)
        say(f"{agent.name} agent: {proposal.hypothesis}: {proposal.rationale.strip()}")
        return None
    return proposal


def commit_change(project: Project, wt: Path, target: Target, number: int, branch: str,
                  hypothesis: str, rationale: str, agent: str, parent: str,
                  extra_trailers: dict[str, str] | None = None, invalid: str = "") -> tuple[str, str]:
    """Commit the agent's change (editable files only) and name the branch; returns (sha, branch).

    invalid (the agent reached outside its files) is kept as a trailer: such a commit is recorded, not measured."""
    index.stage_all(wt, target.rel)
    staged = index.staged_names(wt)
    outside = [p for p in index.status_lines(wt) if p[3:] not in staged]
    bad = [p for p in staged if not target.is_editable(p)]
    if bad or outside:
        index.discard_changes(wt)
        paths = ", ".join(bad + [o[3:] for o in outside])
        raise AutogkError(f"the agent changed files it may not edit: {paths}",
                          f"agents may edit only {target.rel}/{{{','.join(target.editable)}}} ([agent] editable)")
    if not staged and not invalid:
        raise AutogkError("the agent made no change", "nothing to benchmark")
    trailers = (f"Autogk-Experiment: {number}\nAutogk-Target: {target.name}\nAutogk-Agent: {agent}\n"
                f"Autogk-Parent: {parent}")
    for k, v in {**(extra_trailers or {}), **({"Autogk-Invalid": invalid} if invalid else {})}.items():
        trailers += f"\n{k}: {v}"
    body = rationale.strip().splitlines()
    summary = "\n".join(body[:40]) if body else ""
    env = {LOOP_ENV: "1", **identity_env(project.root)}
    # Subject, summary and trailers as paragraphs (what `-m` given thrice would make).
    message = "\n\n".join([hypothesis[:200], *([summary] if summary else []), trailers]) + "\n"
    commits.commit(wt, message, env=env, verify=False, allow_empty=True)
    sha = repo.rev(wt, "HEAD")
    final = refs.ExperimentRef(target.name, number, refs.slugify(hypothesis)).branch
    repo.rename_branch(wt, branch, final)
    return sha, final


# ------------------------------------------------------------------------------------------------
# Benchmark and result note
# ------------------------------------------------------------------------------------------------

def experiment_meta(project: Project, sha: str) -> dict[str, Any]:
    info = repo.commit_info(project.root, [sha])[sha]
    tr = repo.trailers(info["body"])
    parents = info["parents"].split()
    # The parent is the commit's own (its first): a message's `Autogk-Parent:` trailer is text anyone can
    # write, and would otherwise pick which trunk commit's target judges it (trunk.judge_for checks it).
    return {"subject": info["subject"], "trailers": tr, "parent": parents[0] if parents else None,
            "date": info["date"]}


def evaluate(project: Project, target_name: str, number: int, sha: str, branch: str | None, say: Say,
             agent: str | None = None, usage: dict[str, Any] | None = None, backend_name: str | None = None,
             track: bool = True) -> dict[str, Any]:
    """Benchmark an experiment commit, decide, write the result note (first), log to MLflow (second)."""
    result = assess(project, target_name, number, sha, branch, say, agent, usage, backend_name)
    record(project, result, say, track)
    return result


def assess(project: Project, target_name: str, number: int, sha: str, branch: str | None, say: Say,
           agent: str | None = None, usage: dict[str, Any] | None = None,
           backend_name: str | None = None) -> dict[str, Any]:
    """Benchmark an experiment commit and decide; writes nothing, so several may run at once."""
    from autogk_git.bench.backends import get_backend
    from autogk_git.bench.stages import benchmark
    from autogk_git.loop import drift
    from autogk_git.loop.verdict import parent_latencies, rule_for

    meta = experiment_meta(project, sha)
    parent = meta["parent"]
    # The target comes from the trunk: definition, workloads, inputs.py and config are the parent's,
    # never the experiment's commit or checkout (record/trunk.py).
    judge = trunk.judge_for(project, target_name, sha, parent, meta["trailers"].get("Autogk-Parent"))
    target, config = judge.target, judge.config
    backend = get_backend(backend_name or config.bench.backend, config)
    t0 = time.time()
    seed = int(sha[:8], 16)
    # git -> record -> loop -> bench: the loop resolves both kernels' files; bench never reads git.
    try:
        cand_src = kernels.sources_at(project.root, target, sha)
    except GitError as e:  # a tree no checkout can hold (a `..` part, a name twice): nothing of it is read
        cand_src = {}
        judge.reason = judge.reason or e.message
    # Measured against the trunk: its parent when that is a trunk commit, else the trunk tip (trunk.baseline).
    against = judge.against or parent
    parent_src = kernels.sources_at(project.root, target, against) if against else None
    invalid = meta["trailers"].get("Autogk-Invalid")
    extra: dict[str, Any] = {}
    if invalid or judge.invalid:  # outside its files: nothing it made is measured or kept
        bench = {"backend": backend.name, "timing": None, "stages": {}, "correct": False}
        verdict = invalid_verdict(invalid, judge)
        extra = {"offending_files": judge.offending} if judge.invalid else {}
    else:
        bench = benchmark(target, backend, cand_src, parent_src, config, seed, progress=say)
        verdict = rule_for(bench).decide(bench, config)
        # A keep also needs the trunk's kernel to run, as the parent, as fast as when it was kept.
        verdict = drift.check(project, against, bench, verdict,
                              parent_latencies((bench.get("stages") or {}).get("ab") or {}),
                              lambda kept: kernels.sources_at(project.root, target, kept) == parent_src,
                              config.bench.parent_drift, config.bench.min_effect)
    if against and parent and against != parent:  # a tree node's child: the judge's "parent" is the trunk
        verdict = dict(verdict, reason=f"{verdict['reason']}; its parent here is the trunk at {against[:10]}, which "
                                       f"it was measured against (it branched from the search node {parent[:10]})")
    result = build_result(target=target_name, experiment=number, commit=sha, parent=parent, branch=branch,
                          hypothesis=meta["subject"], agent=agent or meta["trailers"].get("Autogk-Agent", "human"),
                          bench=bench, verdict=verdict, kernel_src=cand_src.get("kernel.py", ""),
                          parent_src=(parent_src or {}).get("kernel.py", ""), started=t0, usage=usage,
                          against=against, **extra)
    price = float(getattr(project.config.bench, "usd_per_gpu_hour", 0.0) or 0.0)
    if price:  # GPU time priced beside the tokens: the run's cost and --budget-usd count both
        result["cost"]["gpu_usd"] = round(float(result["cost"].get("gpu_s", 0.0)) * price / 3600.0, 6)
    return result


def invalid_verdict(trailer: str | None, judge: trunk.Judge) -> dict[str, Any]:
    """The verdict on an experiment that reached outside its files (the agent's trailer, or its diff)."""
    if trailer:
        return {"decision": "invalid", "rule": "confinement", "outcome": "invalid", "reason": trailer, "figures": ""}
    return {"decision": "invalid", "rule": "target-from-trunk", "outcome": "invalid",
            "reason": f"invalid: {judge.reason}", "figures": ""}


def recheck(project: Project, exp_ref: refs.ExperimentRef, sha: str, result: dict[str, Any], say: Say) -> None:
    """A keep or a hold is applied only to a commit that stayed in its editable files on a trunk parent:
    the note may predate the rule, or come from a hook that ran in the experiment's own checkout.

    An invalid one is overruled in place (the caller's dict, so what it reports agrees) and recorded."""
    if result["verdict"]["decision"] not in ("keep", "untimed"):
        return
    # The commit's own parent, not the note's: the note is what is being checked.
    meta = experiment_meta(project, sha)
    judge = trunk.judge_for(project, exp_ref.target, sha, meta["parent"], meta["trailers"].get("Autogk-Parent"))
    if not judge.invalid:
        return
    result.update(verdict=invalid_verdict(None, judge), offending_files=judge.offending,
                  overruled_verdict=result["verdict"])
    say(f"#{exp_ref.number:04d}: {judge.reason}")
    record(project, result, say)


def record(project: Project, result: dict[str, Any], say: Say, track: bool = True) -> None:
    """Write the result note (the source of truth), then log to MLflow."""
    summaries.write_result(project.root, result)
    for line in notes.verdict_lines(result):
        say(line)
    if track:
        log_to_tracking(project, result, say)


def log_to_tracking(project: Project, result: dict[str, Any], say: Say,
                    files: dict[str, str] | None = None) -> str | None:
    """Log the result's run to MLflow; files: artifacts the caller holds (record/artifacts.py), the rest
    read from git. A failure is said, never raised: the note is the source of truth."""
    if not project.config.tracking.enabled:
        return None
    try:
        from autogk_git.tracking.mlflow_store import log_result
        run_id = log_result(project, result, files=files)
        return run_id
    except AutogkError as e:  # an unreachable store: said once per experiment, at once, never a traceback
        say(f"warning: {e.message}; run `autogk sync` to log it later")
        return None
    except Exception as e:  # noqa: BLE001 - the note is the source of truth; MLflow can catch up
        say(f"warning: MLflow logging failed ({type(e).__name__}: {str(e)[:200]}); the result note is written. "
            "Run `autogk sync` to log it later.")
        return None


def log_if_missing(project: Project, result: dict[str, Any], say: Say) -> None:
    """For a resumed experiment: its note was written, but a kill may have come before (or inside)
    its MLflow logging. Logs it now, so the table is whole without waiting for `autogk sync`."""
    if not project.config.tracking.enabled:
        return
    try:
        from autogk_git.tracking.mlflow_store import is_logged
        if is_logged(project, result):
            return
    except Exception:  # noqa: BLE001 - an unusable store: log_to_tracking below says so, once
        pass
    say(f"#{result.get('experiment', 0):04d}: its MLflow run is missing or cut short; logging it")
    log_to_tracking(project, result, say)


def merge_message(result: dict[str, Any]) -> str:
    v = result["verdict"]
    return (f"autogk: keep {result['target']} #{result['experiment']:04d}: {result['hypothesis']}\n\n"
            f"{v.get('reason', '')}\n{v.get('figures', '')}\n\n"
            f"Autogk-Experiment: {result['experiment']}\nAutogk-Target: {result['target']}\n"
            f"Autogk-Verdict: keep\nAutogk-Rule: {v.get('rule', '')}\n")


def merge_into_trunk(project: Project, sha: str, message: str, take: list[str] | None = None) -> str:
    """A --no-ff merge of sha into the trunk; returns the merge commit.

    take (a tree experiment, measured whole against the trunk tip): the merge's tree is the tip's with
    these paths exactly as sha holds them, the kernel that was measured, not a blend of hunks."""
    trunk_ref = refs.branch(project.trunk)
    tip = repo.rev(project.root, trunk_ref)
    if tip and repo.is_ancestor(project.root, sha, tip):
        return tip  # already merged (a resumed conclusion)
    env = {LOOP_ENV: "1", **identity_env(project.root)}
    where = worktrees.worktree_of(project.root, refs.branch(project.trunk))
    if take is not None and tip:
        return _merge_exact(project, sha, tip, take, message, env, where)
    if where is not None:
        try:
            merges.merge_no_ff(where, sha, message, env)
        except GitError as e:
            merges.abort_merge(where)
            fix = e.hint or f"commit or stash your changes in {where}, then run `autogk iterate` again"
            raise AutogkError(f"could not merge the kept experiment into '{project.trunk}' in {where}:\n"
                              f"{e.message}", fix + " (the experiment is kept and will be merged then)") from None
        return repo.rev(project.root, trunk_ref)
    parents = repo.commit_info(project.root, [sha])[sha]["parents"].split()
    if parents and parents[0] == tip:
        tree = repo.tree_of(project.root, sha)
    else:
        merged = merges.merged_tree(project.root, tip, sha)
        if merged is None:
            raise AutogkError(f"the kept experiment {sha[:10]} conflicts with '{project.trunk}'",
                              f"resolve by hand: git checkout {project.trunk} && git merge --no-ff {sha}")
        tree = merged
    merge = merges.commit_merge(project.root, tree, tip, sha, message, env)
    repo.update_ref(project.root, trunk_ref, merge, "autogk: merge kept experiment", old=tip)
    return merge


def _merge_exact(project: Project, sha: str, tip: str, take: list[str], message: str, env: dict[str, str],
                 where: Path | None) -> str:
    if where is not None and not repo.is_clean(where, *take):
        raise AutogkError(f"could not merge the kept experiment into '{project.trunk}' in {where}: "
                          f"{', '.join(take)} have uncommitted changes there",
                          f"commit or stash your changes in {where}, then run `autogk iterate` again "
                          "(the experiment is kept and will be merged then)")
    tree = merges.overlay_tree(project.root, tip, sha, take)
    merge = merges.commit_merge(project.root, tree, tip, sha, message, env)
    repo.update_ref(project.root, refs.branch(project.trunk), merge, "autogk: merge kept experiment", old=tip)
    if where is not None:  # the checkout follows its branch: only the taken paths changed, and they were clean
        merges.advance_checkout(where, tip, merge)
    return merge


def taken_paths(project: Project, target_name: str, sha: str, result: dict[str, Any]) -> list[str] | None:
    """The editable files a tree experiment's merge takes whole (None: an ordinary merge)."""
    against, parent = result.get("against"), result.get("parent")
    if not against or against == parent:
        return None
    target = project.target(target_name)
    tip = repo.rev(project.root, refs.branch(project.trunk)) or against
    files = set(repo.tree_files(project.root, sha, target.rel)) | set(repo.tree_files(project.root, tip, target.rel))
    return sorted(f"{target.rel}/{p}" for p in files if target.is_editable(f"{target.rel}/{p}"))


def conclude(project: Project, exp_ref: refs.ExperimentRef, sha: str, result: dict[str, Any], say: Say,
             stay: bool = False) -> str:
    """Apply the verdict in the result note; safe to repeat. stay: a person's checkout on the branch is left
    where it is (`autogk conclude`), instead of moved to the trunk."""
    recheck(project, exp_ref, sha, result, say)
    decision = result["verdict"]["decision"]
    if decision != "untimed" and repo.rev(project.root, exp_ref.untimed_ref):
        repo.delete_ref(project.root, exp_ref.untimed_ref)  # a held experiment judged since on a timed backend
    if decision == "keep":
        tip = repo.rev(project.root, refs.branch(project.trunk))
        measured = result.get("against") or result.get("parent")
        if tip and measured != tip and not repo.is_ancestor(project.root, sha, tip):
            # The trunk moved between the keep's freshness check and here (a person's commit while the
            # profile ran, say): merging now would put a kernel nobody judged on the trunk.
            raise AutogkError(f"#{exp_ref.number:04d} was kept against {str(measured)[:10]}, but "
                              f"'{project.trunk}' moved to {tip[:10]} before its merge: not merged",
                              "run `autogk iterate` again: it measures the keep against the new tip first")
        repo.update_ref(project.root, exp_ref.kept_ref, sha, "autogk: keep")
        merge = merge_into_trunk(project, sha, merge_message(result),
                                 take=taken_paths(project, exp_ref.target, sha, result))
        outcome = f"kept: merged into {project.trunk} as {merge[:10]}"
    elif decision == "untimed":  # held for a timed backend, not merged: a correct kernel is not a faster one
        repo.update_ref(project.root, exp_ref.untimed_ref, sha, "autogk: hold untimed")
        outcome = f"held untimed (correct, not timed, not merged): {exp_ref.untimed_ref}"
    else:
        repo.update_ref(project.root, exp_ref.archive_ref, sha, "autogk: revert")
        outcome = f"reverted: archived as {exp_ref.archive_ref}"
    close_branch(project, exp_ref, say, stay)
    say(f"#{exp_ref.number:04d} {outcome}")
    return outcome


def close_branch(project: Project, exp_ref: refs.ExperimentRef, say: Say, stay: bool = False) -> None:
    wt = worktree_path(project, exp_ref.target, exp_ref.number)
    remove_worktree(project, wt)
    if not repo.rev(project.root, exp_ref.branch_ref):
        return
    user_wt = worktrees.worktree_of(project.root, exp_ref.branch_ref)
    if user_wt is not None:
        # A person's own checkout (a hand-made experiment): move it to the trunk if that is safe.
        trunk_free = worktrees.worktree_of(project.root, refs.branch(project.trunk)) is None
        if not stay and repo.is_clean(user_wt) and trunk_free:
            worktrees.switch(user_wt, project.trunk)
            say(f"switched {user_wt} from {exp_ref.branch} to {project.trunk}")
        else:
            say(f"left branch {exp_ref.branch} checked out in {user_wt}; its commit is saved, "
                f"delete it with: git checkout {project.trunk} && git branch -D {exp_ref.branch}")
            return
    repo.delete_ref(project.root, exp_ref.branch_ref)


