"""Replaying a keep onto a trunk that moved, and measuring it again there: nothing merges on stale numbers.

A keep was measured against the trunk tip of its time. When the trunk has moved since (another keep
merged meanwhile in the parallel loop, or a person's commit), its change is replayed onto the new tip
and measured again against that new parent before anything merges. Used by both schedulers and by
resume after a crash.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
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


@dataclass
class Remeasure:
    """A stale keep's next measurement: its commit (the replay, or the same commit for a tree experiment),
    and what the fresh result must say of the stale one it replaces."""

    sha: str
    mark: str                   # the fresh result's key: "rebased" (replayed) or "remeasured" (measured as it is)
    record: dict[str, Any]
    usage: dict[str, Any]       # the stale result's cost, less its bench wall time: carried into the fresh one

    def measure(self, project: Project, target: str, number: int, branch: str, agent: str | None,
                say: ex.Say) -> dict[str, Any]:
        """Benchmark it (writes nothing, so a scheduler may run it on a thread)."""
        return ex.assess(project, target, number, self.sha, branch, lambda s: say(f"#{number:04d} {s}"),
                         agent=agent, usage=self.usage)

    def annotate(self, fresh: dict[str, Any]) -> dict[str, Any]:
        fresh[self.mark] = self.record
        return fresh


def stale_step(project: Project, target: str, number: int, branch: str, sha: str, result: dict[str, Any],
               say: ex.Say, track: bool = True,
               in_flight: dict[int, str] | None = None) -> tuple[str, dict[str, Any], Remeasure | None]:
    """One step of refreshing a keep whose trunk moved (git and notes only; no benchmark).

    Returns (commit, result, None) to conclude as they are: fresh, not a keep, or reverted because the
    change no longer applies there; or (commit, result, Remeasure) when the keep must be measured again
    against the new tip before anything is concluded. `in_flight` ({number: sha}) are the kernels being
    measured now, which a replay must not duplicate."""
    tip = trunk_moved(project, result)
    if tip is None:
        return sha, result, None
    parent = result.get("parent")
    against = result.get("against") or parent
    cost = {k: v for k, v in result.get("cost", {}).items() if k != "bench_wall_s"}
    if against != parent:  # a tree experiment: measured whole against the tip, so measured again as it is
        say(f"#{number:04d}: kept against {str(against)[:10]}, but {project.trunk} has moved to {tip[:10]}; "
            "measuring it again against the new tip")
        return sha, result, Remeasure(sha, "remeasured", {"from_against": against, "stale_verdict": result["verdict"]},
                                      cost)
    say(f"#{number:04d}: kept against {str(parent)[:10]}, but {project.trunk} has moved to {tip[:10]}; "
        "replaying it there and measuring again")
    avoid = kernels.tried(project.root, project.target(target).rel, ex.results(project, target, own_only=True),
                          also=in_flight, exclude=number)
    new, why = replay_onto(project, target, number, branch, sha, tip, avoid=avoid)
    if new is None:
        result = _reverted(result, f"kept against {str(parent)[:10]}, but {project.trunk} moved to {tip[:10]} and {why}")
        say(f"#{number:04d}: {why}; reverting")
        ex.record(project, result, say, track=track)
        return sha, result, None
    return sha, result, Remeasure(new, "rebased", {"from_commit": sha, "from_parent": parent,
                                                   "stale_verdict": result["verdict"]}, cost)


def trunk_moved(project: Project, result: dict[str, Any]) -> str | None:
    """The trunk's tip when result is a keep measured against another commit (stale); else None."""
    if result["verdict"]["decision"] != "keep":
        return None
    tip = repo.rev(project.root, refs.branch(project.trunk))
    return tip if tip and (result.get("against") or result.get("parent")) != tip else None


def _reverted(result: dict[str, Any], why: str) -> dict[str, Any]:
    """A stale keep's result turned into a revert (rule stale-parent), its keep kept as `stale_verdict`."""
    stale = result["verdict"]
    return dict(result, stale_verdict=stale, verdict={"decision": "revert", "rule": "stale-parent",
                                                      "reason": f"{why}; not merged on stale numbers",
                                                      "figures": stale.get("figures", "")})


MAX_MOVES = 3  # re-measurements of one keep at most: past them a keep still stale is reverted (still_stale)


def still_stale(project: Project, number: int, sha: str, result: dict[str, Any], say: ex.Say,
                track: bool = True) -> dict[str, Any]:
    """After the last re-measurement: a keep whose trunk moved yet again is reverted, never merged on its numbers.

    The trunk moves under a person's hand, or (the parallel loop) under other slots' keeps while this
    one is measured again."""
    tip = trunk_moved(project, result)
    if tip is None:
        return result
    against = result.get("against") or result.get("parent")
    result = _reverted(result, f"kept against {str(against)[:10]}, but {project.trunk} moved to {tip[:10]}, again "
                               f"after {MAX_MOVES} measurements against its new tips")
    say(f"#{number:04d}: {project.trunk} moved again after {MAX_MOVES} measurements; reverting")
    ex.record(project, result, say, track=track)
    return result


def refresh_if_stale(project: Project, target: str, number: int, branch: str, sha: str,
                     result: dict[str, Any], say: ex.Say, measure_project: Project | None = None,
                     track: bool = True, in_flight: dict[int, str] | None = None) -> tuple[str, dict[str, Any]]:
    """A keep measured against a parent that is no longer the trunk tip is replayed and measured again,
    inline (the serial loop and resume; the parallel loop measures on its slots: loop/parallel.py).

    Returns (commit, result) to conclude: the same ones when fresh or not a keep; the replayed commit
    and its new result; or the old commit with a revert when the change no longer applies.
    `measure_project` is the project view to benchmark with (a parallel slot's GPU); `in_flight`
    ({number: sha}) the kernels being measured now, which a replay must not duplicate.
    """
    for _ in range(MAX_MOVES):
        sha, result, again = stale_step(project, target, number, branch, sha, result, say, track, in_flight)
        if again is None:
            return sha, result
        fresh = again.annotate(again.measure(measure_project or project, target, number, branch,
                                             result.get("agent"), say))
        ex.record(project, fresh, say, track=track)
        sha, result = again.sha, fresh
    return sha, still_stale(project, number, sha, result, say, track)
