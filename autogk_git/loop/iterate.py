"""`autogk iterate`: resume whatever a stopped loop left, then run experiments one at a time."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from autogk_git import refs
from autogk_git.agents import get_agent, resolve_kind
from autogk_git.agents.base import Context
from autogk_git.errors import AutogkError
from autogk_git.git import repo
from autogk_git.loop import experiment as ex
from autogk_git.loop.lock import RepoLock
from autogk_git.project import Project, Target, require_input_data


@dataclass
class LoopReport:
    target: str
    experiments: list[dict[str, Any]] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    stop_reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "experiments": self.experiments, "resumed": self.resumed,
                "stop_reason": self.stop_reason}


def bench_in_progress(project: Project, sha: str) -> int | None:
    """pid of a live background benchmark of sha (started by the hook), if any."""
    from autogk_git.hook import running_bench_pid
    return running_bench_pid(project.state_dir, sha)


def resume(project: Project, target: str, say: ex.Say) -> list[str]:
    """Finish or discard every experiment a stopped loop (or a hand commit) left open."""
    done = []
    trunk = repo.rev(project.root, f"refs/heads/{project.trunk}")
    for number, e in sorted(ex.scan(project, target).items()):
        if e.branch is None:
            continue
        ref = refs.ExperimentRef.parse(e.branch)[1]
        tip = repo.rev(project.root, ref.branch_ref)
        if e.state != "open":
            result = ex.load_result(project, e.sha)
            if result and e.state == "kept":
                ex.conclude(project, ref, e.sha, result, say)
            else:
                ex.close_branch(project, ref, say)
            done.append(f"#{number:04d}: finished concluding ({e.state})")
            continue
        if trunk and repo.is_ancestor(project.root, tip, trunk):
            say(f"#{number:04d}: stopped before its commit; discarding the empty branch {e.branch}")
            ex.close_branch(project, ref, say)
            done.append(f"#{number:04d}: discarded (no commit)")
            continue
        pid = bench_in_progress(project, tip)
        if pid:
            say(f"#{number:04d}: being benchmarked in the background (pid {pid}); leaving it")
            continue
        result = ex.load_result(project, tip)
        if result is None:
            say(f"#{number:04d}: committed but not benchmarked; benchmarking {tip[:10]} now")
            result = ex.evaluate(project, target, number, tip, e.branch, say)
        ex.conclude(project, ref, tip, result, say)
        done.append(f"#{number:04d}: {result['verdict']['decision']}")
    # Worktrees whose branch is gone (a kill between the two deletions).
    wt_dir = project.state_dir / "worktrees"
    if wt_dir.is_dir():
        live = {p.get("worktree") for p in repo.worktrees(project.root)}
        for p in wt_dir.iterdir():
            if p.name.startswith(target + "-") and (str(p) not in live or not (p / ".git").exists()):
                ex.remove_worktree(project, p)
    return done


def run_one(project: Project, target: Target, agent, say: ex.Say) -> dict[str, Any] | None:
    """One experiment from the trunk tip; None when the agent has nothing left to try."""
    base = ex.ensure_trunk(project, say)
    number = ex.next_number(project, target.name)
    wt, branch = ex.open_worktree(project, target.name, number, base)
    say(f"#{number:04d}: {agent.name} agent proposing a change (worktree {wt})")
    ctx = Context(worktree=wt, target=Target(target.name, wt / target.rel, target.editable), number=number,
                  history=ex.history(project, target.name), config=project.config)
    try:
        proposal = agent.propose(ctx)
    except BaseException:
        ex.close_branch(project, refs.ExperimentRef(target.name, number, "wip"), say)
        raise
    if not proposal.changed:
        ex.close_branch(project, refs.ExperimentRef(target.name, number, "wip"), say)
        say(f"{agent.name} agent: {proposal.hypothesis}: {proposal.rationale.strip()}")
        return None
    try:
        sha, branch = ex.commit_change(project, wt, ctx.target, number, branch, proposal.hypothesis,
                                       proposal.rationale, agent.name, base)
    except AutogkError:
        ex.close_branch(project, refs.ExperimentRef(target.name, number, "wip"), say)
        raise
    ex.write_plan(project, sha, proposal.rationale)
    say(f"#{number:04d}: committed {sha[:10]} on {branch}: {proposal.hypothesis}")
    result = ex.evaluate(project, target.name, number, sha, branch, say, agent=agent.name, usage=proposal.usage)
    outcome = ex.conclude(project, refs.ExperimentRef.parse(branch)[1], sha, result, say)
    return {"number": number, "commit": sha, "hypothesis": proposal.hypothesis,
            "decision": result["verdict"]["decision"], "reason": result["verdict"]["reason"], "outcome": outcome}


def iterate(project: Project, target_name: str | None, n: int, agent_kind: str | None,
            say: ex.Say, max_time_s: float = 0.0) -> LoopReport:
    target = project.target(target_name)
    require_input_data(target)
    cfg = project.config
    kind = resolve_kind(agent_kind or cfg.agent.kind)
    agent = get_agent(kind, cfg)
    report = LoopReport(target.name)
    lock = RepoLock(project.state_dir)
    with lock:
        if lock.recovered:
            say(f"recovered a stale lock from pid {lock.recovered.get('pid')} (that loop is gone)")
        report.resumed = resume(project, target.name, say)
        limit = n if n > 0 else (cfg.agent.max_iterations or 0)
        t0 = time.monotonic()
        i = 0
        while True:
            if limit and i >= limit:
                report.stop_reason = f"ran {i} experiment(s) (-n {limit})"
                break
            if max_time_s and time.monotonic() - t0 >= max_time_s:
                report.stop_reason = f"time limit of {max_time_s:.0f} s reached"
                break
            res = run_one(project, target, agent, say)
            if res is None:
                report.stop_reason = f"the {agent.name} agent has nothing left to try"
                break
            report.experiments.append(res)
            i += 1
    return report
