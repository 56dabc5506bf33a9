"""Replaying a keep onto a trunk that moved, and measuring it again there: nothing merges on stale numbers.

A keep was measured against the trunk tip of its time. When the trunk has moved since (another keep
merged meanwhile in the parallel loop, or a person's commit), its change is replayed onto the new tip
and measured again against that new parent before anything merges. Used by both schedulers and by
resume after a crash.
"""
from __future__ import annotations

import re
from typing import Any

from autogk_git.errors import GitError
from autogk_git.git import commits, index, merges, repo, worktrees
from autogk_git.git.run import identity_env
from autogk_git.loop import experiment as ex
from autogk_git.loop.background import LOOP_ENV
from autogk_git.project import Project
from autogk_git.record import kernels, refs


def replay_onto(project: Project, target: str, number: int, branch: str, sha: str, tip: str,
                avoid: dict[str, int] | None = None) -> tuple[str | None, str]:
    """Replay the experiment commit's change onto tip; move its branch there.

    Returns (new commit, "") or (None, why) when the change no longer applies, is already in the
    trunk, or gives a kernel already measured or in flight (`avoid`: target tree -> experiment).

    The commit's own hunks win where they overlap the trunk's new ones (a tuner's one-line move onto
    a trunk that moved the same line), and the result is measured again before any verdict, so an
    odd combination is caught there. The branch moves only at the end (compare-and-swap): a crash
    midway leaves the old commit, which resume replays again.
    """
    wt = ex.worktree_path(project, target, number)
    ex.remove_worktree(project, wt)
    worktrees.add_worktree(project.root, wt, tip, detach=True)
    try:
        try:
            merges.apply_change(wt, sha)
        except GitError:
            return None, "the change does not apply there"
        if not index.staged_names(wt):
            return None, "the trunk already holds this change"
        tree = index.write_tree(wt)
        kernel = repo.object_id(wt, f"{tree}:{project.target(target).rel}")
        if avoid and kernel in avoid:
            return None, f"replayed there it is the same kernel as #{avoid[kernel]:04d}, measured already or now"
        message = commits.message(project.root, sha)
        lines = [f"Autogk-Parent: {tip}" if ln.startswith("Autogk-Parent:") else ln
                 for ln in message.rstrip().splitlines()]
        body = message.rstrip().split("\n\n")
        if len(body) == 1 or not all(re.fullmatch(r"[\w-]+: .*", ln) for ln in body[-1].splitlines()):
            lines.append("")  # no trailer paragraph yet (a one-line hand commit): one of their own
        if not any(ln.startswith("Autogk-Parent:") for ln in lines):
            lines.append(f"Autogk-Parent: {tip}")
        lines.append(f"Autogk-Rebased-From: {sha}")  # same trailer block: the last paragraph
        env = {LOOP_ENV: "1", **identity_env(project.root)}
        commits.commit(wt, "\n".join(lines) + "\n", env=env, verify=False)
        new = repo.rev(wt, "HEAD")
        repo.update_ref(project.root, refs.branch(branch), new, "autogk: replay onto the moved trunk", old=sha)
        plan = repo.read_note(project.root, refs.NOTES_PLANS, sha)
        if plan:
            ex.write_plan(project, new, plan)
        return new, ""
    finally:
        merges.abort_cherry_pick(wt)


def refresh_if_stale(project: Project, target: str, number: int, branch: str, sha: str,
                     result: dict[str, Any], say: ex.Say, measure_project: Project | None = None,
                     track: bool = True, in_flight: dict[int, str] | None = None) -> tuple[str, dict[str, Any]]:
    """A keep measured against a parent that is no longer the trunk tip is replayed and measured again.

    Returns (commit, result) to conclude: the same ones when fresh or not a keep; the replayed commit
    and its new result; or the old commit with a revert when the change no longer applies.
    `measure_project` is the project view to benchmark with (a parallel slot's GPU); `in_flight`
    ({number: sha}) the kernels being measured now, which a replay must not duplicate.
    """
    for _ in range(3):  # the trunk only moves under a person's hand here; give up past three moves
        if result["verdict"]["decision"] != "keep":
            return sha, result
        tip = repo.rev(project.root, refs.branch(project.trunk))
        parent = result.get("parent")
        against = result.get("against") or parent
        if not tip or against == tip:
            return sha, result
        if against != parent:  # a tree experiment: measured whole against the tip, so measured again as it is
            say(f"#{number:04d}: kept against {str(against)[:10]}, but {project.trunk} has moved to {tip[:10]}; "
                "measuring it again against the new tip")
            cost = {k: v for k, v in result.get("cost", {}).items() if k != "bench_wall_s"}
            fresh = ex.assess(measure_project or project, target, number, sha, branch,
                              lambda s: say(f"#{number:04d} {s}"), agent=result.get("agent"), usage=cost)
            fresh["remeasured"] = {"from_against": against, "stale_verdict": result["verdict"]}
            ex.record(project, fresh, say, track=track)
            result = fresh
            continue
        say(f"#{number:04d}: kept against {str(parent)[:10]}, but {project.trunk} has moved to {tip[:10]}; "
            "replaying it there and measuring again")
        avoid = kernels.tried(project.root, project.target(target).rel, ex.results(project, target),
                              also=in_flight, exclude=number)
        new, why = replay_onto(project, target, number, branch, sha, tip, avoid=avoid)
        if new is None:
            stale = result["verdict"]
            result = dict(result, stale_verdict=stale, verdict={
                "decision": "revert", "rule": "stale-parent",
                "reason": f"kept against {str(parent)[:10]}, but {project.trunk} moved to {tip[:10]} and {why}; "
                          "not merged on stale numbers",
                "figures": stale.get("figures", "")})
            say(f"#{number:04d}: {why}; reverting")
            ex.record(project, result, say, track=track)
            return sha, result
        cost = {k: v for k, v in result.get("cost", {}).items() if k != "bench_wall_s"}
        fresh = ex.assess(measure_project or project, target, number, new, branch,
                          lambda s: say(f"#{number:04d} {s}"), agent=result.get("agent"), usage=cost)
        fresh["rebased"] = {"from_commit": sha, "from_parent": parent, "stale_verdict": result["verdict"]}
        ex.record(project, fresh, say, track=track)
        sha, result = new, fresh
    return sha, result
