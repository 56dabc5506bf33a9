"""One experiment step, the same for the serial and the parallel scheduler.

    open_experiment   branch from the trunk tip, let the agent change the kernel, refuse a kernel
                      already measured (or in flight), commit, write the plan note
    (ex.assess)       benchmark and decide: the scheduler runs it inline or on a thread
    finish            write the result note, replay a keep whose trunk moved and measure it again
                      (inline; the parallel scheduler measures it on its slot: replay.stale_step), then
    settle            merge or archive, log

`Limits` holds the stop conditions both schedulers check before opening an experiment, and
`LoopReport` what a run did, for the end-of-run summary.
"""
from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from autogk_git import tunables
from autogk_git.agents.base import Context
from autogk_git.errors import AutogkError
from autogk_git.git import index
from autogk_git.loop import experiment as ex
from autogk_git.loop import search
from autogk_git.loop.replay import refresh_if_stale
from autogk_git.project import Project, Target
from autogk_git.record import artifacts, kernels, refs


@dataclass
class LoopReport:
    target: str
    experiments: list[dict[str, Any]] = field(default_factory=list)   # opened and concluded by this run
    resumed: list[dict[str, Any]] = field(default_factory=list)       # left open before (a crash, a hand commit)
    stop_reason: str = ""
    usage: dict[str, Any] = field(default_factory=dict)    # the loop run's LLM usage and cost, summed
    research: list[dict[str, Any]] = field(default_factory=list)  # plans written during the run
    failed: bool = False                                   # stopped by an agent error, not a budget
    nothing_to_try: bool = False                           # the agent proposed nothing at all this run

    @property
    def gpu_usd(self) -> float:
        """GPU time priced by [bench] usd_per_gpu_hour, over the experiments this run concluded."""
        return math.fsum(float(e.get("gpu_usd") or 0.0) for e in self.experiments)

    @property
    def cost_usd(self) -> float:
        """What the run spent: the LLM's tokens and the GPU's time."""
        return float(self.usage.get("cost_usd", 0.0)) + self.gpu_usd

    @property
    def concluded(self) -> list[dict[str, Any]]:
        """Every experiment this run concluded: resumed ones (hand-made too) and its own."""
        return [e for e in self.resumed if e.get("decision") in ("keep", "revert", "untimed", "invalid")] + self.experiments

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "experiments": self.experiments, "resumed": self.resumed,
                "stop_reason": self.stop_reason, "usage": self.usage, "cost_usd": round(self.cost_usd, 6),
                "gpu_usd": round(self.gpu_usd, 6), "phases": phase_totals(self.experiments),
                "research": self.research, "failed": self.failed, "nothing_to_try": self.nothing_to_try}


PHASES = ("open_s", "bench_s", "wait_s", "conclude_s")


def phase_totals(experiments: list[dict[str, Any]]) -> dict[str, Any]:
    """The experiments' `phases` summed (seconds; `benchmarks` counted); {} when none has any."""
    ph = [e["phases"] for e in experiments if e.get("phases")]
    if not ph:
        return {}
    tot: dict[str, Any] = {k: round(sum(p.get(k, 0.0) for p in ph), 3) for k in PHASES}
    tot["benchmarks"] = sum(p.get("benchmarks", 0) for p in ph)
    tot["open_alone_s"] = round(sum(p.get("open_s", 0.0) for p in ph if not p.get("proposed_beside")), 3)
    return tot


@dataclass
class Limits:
    """The stop conditions of a run: -n, --max-time, --budget-usd (0: none)."""

    n: int = 0
    max_time_s: float = 0.0
    budget_usd: float = 0.0
    t0: float = field(default_factory=time.monotonic)
    near_floor: Callable[[], str | None] | None = None   # [search] floor_share: loop/search.floor_reached

    def reached(self, started: int, cost_usd: float) -> str | None:
        """Why no further experiment may start, or None."""
        if self.n and started >= self.n:
            return f"ran {started} experiment(s) (limit {self.n})"
        if self.max_time_s and time.monotonic() - self.t0 >= self.max_time_s:
            return f"time limit of {self.max_time_s:.0f} s reached after {started} experiment(s)"
        if self.budget_usd and cost_usd >= self.budget_usd:
            return f"budget of ${self.budget_usd:.2f} spent (${cost_usd:.4f}) after {started} experiment(s)"
        return self.near_floor() if self.near_floor else None


@dataclass
class Opened:
    """An experiment the agent proposed: committed (sha set), or refused as a repeat (repeat_of set)."""

    number: int
    sha: str | None
    branch: str | None
    base: str
    hypothesis: str
    agent: str
    usage: dict[str, Any]
    tunables: dict[str, Any] = field(default_factory=dict)
    repeat_of: int | None = None
    started: float = field(default_factory=time.time)
    kernel: str | None = None   # kernel.py as committed at sha, read once here and logged as the run's artifact

    def in_flight(self) -> dict[str, Any]:
        """What an agent (and the plan counter) may know of it while it is measured."""
        return {"experiment": self.number, "commit": self.sha, "hypothesis": self.hypothesis,
                "tunables": self.tunables}

    def repeat_outcome(self) -> dict[str, Any]:
        return {"number": self.number, "commit": None, "hypothesis": self.hypothesis, "decision": "repeat",
                "reason": f"repeats the kernel of #{self.repeat_of:04d}", "outcome": "discarded"}


def staged_tree(wt: Path, rel: str) -> str | None:
    """The tree the target's folder would have if the worktree were committed now."""
    index.stage_all(wt, rel)
    try:
        return index.write_tree(wt, prefix=f"{rel}/") or None
    except AutogkError:
        return None


@dataclass
class Asked:
    """An experiment whose agent has been asked for a change: its number, worktree and context. The loop's
    thread makes it (begin_experiment) and commits what the agent made (end_experiment); the agent's
    own work (`agent.propose(ctx)`) may run on another thread in between (loop/parallel.py)."""

    number: int
    wt: Path
    branch: str
    base: str
    ctx: Context
    wip: refs.ExperimentRef
    plan: Any
    history: list[dict[str, Any]]


def begin_experiment(project: Project, target: Target, agent, say: ex.Say, plan=None,
                     in_flight: list[Opened] = (), where: str = "", start: str | None = None) -> Asked:
    """Branch from the search's next node (loop/search.py; `start`: --from) into a worktree of its own,
    and make the agent's context. Git writes: the loop's thread only."""
    tip = ex.ensure_trunk(project, say)
    history = ex.results(project, target.name, own_only=True)
    # An agent that searches the tree by rules of its own (the tuner) narrows the frontier it is offered.
    narrow = getattr(agent, "node_filter", None)
    live = narrow(project.config, kernels.kernel_source(project.root, target, tip), history,
                  [o.in_flight() for o in in_flight]) if narrow and start is None else None
    node, trunk_latency = search.choose(project, target.name, history, tip, [o.base for o in in_flight], start,
                                        live=live)
    base = node.commit
    number = ex.next_number(project, target.name)
    wt, branch = ex.open_worktree(project, target.name, number, base)
    frm = "" if base == tip else f", from {node.name} {base[:10]}"
    say(f"#{number:04d}: {agent.name} agent proposing a change (worktree {wt}{where}{frm})")
    adir = project.artifact_dir(target.name)
    ctx = Context(worktree=wt, target=target.at(wt), number=number, history=history, config=project.config,
                  plan=plan.text if plan else None, plan_id=plan.commit if plan else None,
                  artifacts={"workloads": adir / "workloads.md", "profile": adir / "profile.md"}, say=say,
                  in_flight=[o.in_flight() for o in in_flight],
                  start=None if base == tip else node.as_start(trunk_latency))
    return Asked(number, wt, branch, base, ctx, refs.ExperimentRef(target.name, number, "wip"), plan, history)


def end_experiment(project: Project, target: Target, agent, say: ex.Say, asked: Asked, proposal,
                   in_flight: list[Opened] = (), history: list[dict[str, Any]] | None = None) -> Opened | None:
    """Commit what the agent made in asked's worktree: None when it made nothing (the branch is closed).

    A proposal that repeats a kernel already measured (or being measured: `in_flight`, as it is now;
    `history`, the results as they are now, when the agent worked while others concluded) is discarded
    unbenchmarked: it comes back with `repeat_of` set and no commit. Git writes: the loop's thread only."""
    number, wt, base, plan = asked.number, asked.wt, asked.base, asked.plan
    if proposal is None:
        return None
    tree = staged_tree(wt, target.rel)
    seen = kernels.tried(project.root, target.rel, asked.history if history is None else history,
                         also={o.number: o.sha for o in in_flight if o.sha}).get(tree or "")
    if seen is not None and not proposal.invalid:  # an invalid proposal is recorded, never discarded
        ex.close_branch(project, asked.wip, say)
        say(f"#{number:04d}: '{proposal.hypothesis}' repeats the kernel of #{seen:04d}; discarded unbenchmarked")
        return Opened(number, None, None, base, proposal.hypothesis, agent.name, proposal.usage, repeat_of=seen)
    extra = {"Autogk-Plan": plan.commit} if plan else None
    try:
        sha, branch = ex.commit_change(project, wt, asked.ctx.target, number, asked.branch, proposal.hypothesis,
                                       proposal.rationale, agent.name, base, extra_trailers=extra,
                                       invalid=proposal.invalid)
    except AutogkError:
        ex.close_branch(project, asked.wip, say)
        raise
    ex.write_plan(project, sha, proposal.rationale)
    say(f"#{number:04d}: committed {sha[:10]} on {branch}: {proposal.hypothesis}")
    src = kernels.kernel_source(project.root, target, sha)
    return Opened(number, sha, branch, base, proposal.hypothesis, agent.name, proposal.usage,
                  tunables.values(src), kernel=src or None)  # "" (none, or empty): git says which when logged


def open_experiment(project: Project, target: Target, agent, say: ex.Say, plan=None,
                    in_flight: list[Opened] = (), where: str = "", start: str | None = None) -> Opened | None:
    """Branch from the search's next node, let the agent change it, commit (all in this thread). None when
    the agent has nothing left; `repeat_of` set (no commit) when it repeats a kernel measured or in flight."""
    asked = begin_experiment(project, target, agent, say, plan, in_flight, where, start)
    proposal = ex.propose(project, agent, asked.ctx, asked.wip, say)
    return end_experiment(project, target, agent, say, asked, proposal, in_flight)


class Tracking:
    """MLflow logging off the loop's thread: one thread logs each concluded result in turn while the loop
    goes on proposing and benchmarking; close() waits for what is queued (iterate calls it before it
    returns). The note is written and the experiment merged or archived before its run is queued, so a
    kill loses at most runs that `autogk sync` logs (and `autogk doctor` names), as a kill inside an
    inline log did. With MLflow off it does nothing."""

    def __init__(self, project: Project, say: ex.Say) -> None:
        self.project, self.say = project, say
        self.pool = (ThreadPoolExecutor(max_workers=1, thread_name_prefix="autogk-mlflow")
                     if project.config.tracking.enabled else None)

    def log(self, result: dict[str, Any], files: dict[str, str] | None = None) -> None:
        if self.pool is not None:
            self.pool.submit(ex.log_to_tracking, self.project, result, self.say, files)

    def close(self, wait: bool = True) -> None:
        """Wait for the queued runs (wait=False, on Ctrl-C: drop those not started; sync logs them)."""
        if self.pool is not None:
            self.pool.shutdown(wait=wait, cancel_futures=not wait)


def finish(project: Project, target: str, run: Opened, result: dict[str, Any], say: ex.Say,
           measure_project: Project | None = None, others: list[Opened] = (),
           tracking: Tracking | None = None) -> dict[str, Any]:
    """Record, refresh a stale keep (measured again inline), conclude, log. Called in the loop's thread only.

    The result note is written first (the source of truth); MLflow gets the final result once."""
    ex.record(project, result, say, track=False)
    sha, result = refresh_if_stale(project, target, run.number, run.branch, run.sha, result, say,
                                   measure_project=measure_project, track=False,
                                   in_flight={o.number: o.sha for o in others if o.sha})
    return settle(project, target, run, sha, result, say, busy=bool(others), tracking=tracking)


def settle(project: Project, target: str, run: Opened, sha: str, result: dict[str, Any], say: ex.Say,
           busy: bool = False, tracking: Tracking | None = None) -> dict[str, Any]:
    """Conclude a recorded, fresh result: the profile of a keep, merge or archive, log. The loop's thread only.

    `busy`: other experiments are being measured now (the profile waits for a quiet GPU). `tracking`:
    the loop's MLflow thread (else the run is logged here, before this returns)."""
    from autogk_git.loop import profile
    if profile.after_verdict(project, target, result, say, busy=busy):  # [bench] profile: ncu
        from autogk_git.record import summaries
        summaries.write_result(project.root, result)  # the note again, with its profile (verdict lines said once)
    branch = result.get("branch") or run.branch
    outcome = ex.conclude(project, refs.ExperimentRef.parse(branch)[1], sha, result, say)
    # The kernel the step committed, unless a replay made a new commit; the diff and plan come from git.
    held = {artifacts.KERNEL: run.kernel} if run.kernel is not None and sha == run.sha else None
    if tracking is not None:
        tracking.log(result, held)
    else:
        ex.log_to_tracking(project, result, say, files=held)
    return {"number": run.number, "commit": sha, "hypothesis": run.hypothesis,
            "decision": result["verdict"]["decision"], "reason": result["verdict"]["reason"],
            "outcome": outcome, "rebased_from": (result.get("rebased") or {}).get("from_commit"),
            "bench_s": round(time.time() - run.started, 3),
            "gpu_usd": float((result.get("cost") or {}).get("gpu_usd") or 0.0)}


@dataclass
class Phases:
    """Where one experiment's time went, as its scheduler saw it (seconds; the report's `phases`).

    open: proposing and committing it (in the loop's thread, or on a thread of its own beside the other
    slots' proposals: `proposed_beside`); bench: its benchmarks (a stale keep's
    re-measurements included); wait: its finished benchmarks waiting for the loop's thread; conclude:
    the loop's thread recording, replaying, merging or archiving and logging it."""

    open: float = 0.0
    bench: float = 0.0
    wait: float = 0.0
    conclude: float = 0.0
    benchmarks: int = 0
    beside: bool = False   # proposed on a thread of its own, beside other proposals (not in the loop's thread)

    def as_dict(self) -> dict[str, Any]:
        return {"open_s": round(self.open, 3), "bench_s": round(self.bench, 3), "wait_s": round(self.wait, 3),
                "conclude_s": round(self.conclude, 3), "benchmarks": self.benchmarks, "proposed_beside": self.beside}
