"""`autogk iterate`: resume whatever a stopped loop left, then run experiments one at a time."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from autogk_git.record import refs
from autogk_git.agents import get_agent, resolve_kind
from autogk_git.agents.base import Context
from autogk_git.agents.pricing import add_usage
from autogk_git.errors import AgentError, AutogkError
from autogk_git.git import repo
from autogk_git.loop import experiment as ex
from autogk_git.loop.lock import RepoLock
from autogk_git.loop.parallel import refresh_if_stale
from autogk_git.project import Project, Target, require_input_data


@dataclass
class LoopReport:
    target: str
    experiments: list[dict[str, Any]] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    stop_reason: str = ""
    usage: dict[str, Any] = field(default_factory=dict)    # the loop run's LLM usage and cost, summed
    research: list[dict[str, Any]] = field(default_factory=list)  # plans written during the run
    failed: bool = False                                   # stopped by an agent error, not a budget

    @property
    def cost_usd(self) -> float:
        return float(self.usage.get("cost_usd", 0.0))

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "experiments": self.experiments, "resumed": self.resumed,
                "stop_reason": self.stop_reason, "usage": self.usage, "cost_usd": round(self.cost_usd, 6),
                "research": self.research, "failed": self.failed}


def bench_in_progress(project: Project, sha: str) -> int | None:
    """pid of a live background benchmark of sha (started by the hook), if any."""
    from autogk_git.loop.background import running_bench_pid
    return running_bench_pid(project.state_dir, sha)


def resume(project: Project, target: str, say: ex.Say) -> list[str]:
    """Finish or discard every experiment a stopped loop (or a hand commit) left open."""
    done = []
    trunk = repo.rev(project.root, refs.branch(project.trunk))
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
        tip, result = refresh_if_stale(project, target, number, e.branch, tip, result, say)
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


def staged_tree(wt, rel: str) -> str | None:
    """The tree the target's folder would have if the worktree were committed now."""
    from autogk_git.git.run import git
    git("add", "-A", "--", rel, cwd=wt)
    try:
        return git("write-tree", f"--prefix={rel}/", cwd=wt).strip() or None
    except AutogkError:
        return None


def tried_trees(project: Project, rel: str, history: list[dict[str, Any]]) -> dict[str, int]:
    """{tree of the target folder: experiment number} for every kernel measured so far, parents included."""
    from autogk_git.git.run import git
    specs: dict[str, int] = {}  # parents repeat (one per trunk tip): ask git once per commit
    for r in history:
        for key in ("commit", "parent"):
            if r.get(key):
                specs.setdefault(f"{r[key]}:{rel}", r.get("experiment") or 0)
    if not specs:
        return {}
    out = git("cat-file", "--batch-check", cwd=project.root, input="\n".join(specs) + "\n")
    trees: dict[str, int] = {}
    for line, n in zip(out.splitlines(), specs.values()):
        parts = line.split()
        if len(parts) >= 2 and parts[1] == "tree":
            trees.setdefault(parts[0], n)
    return trees


def run_one(project: Project, target: Target, agent, say: ex.Say, plan=None) -> dict[str, Any] | None:
    """One experiment from the trunk tip; None when the agent has nothing left to try.

    A proposal that repeats a kernel already measured is discarded unbenchmarked: the result then has
    decision "repeat" and no commit."""
    from autogk_git.agents import workload_view as inspect
    base = ex.ensure_trunk(project, say)
    number = ex.next_number(project, target.name)
    wt, branch = ex.open_worktree(project, target.name, number, base)
    say(f"#{number:04d}: {agent.name} agent proposing a change (worktree {wt})")
    history = ex.results(project, target.name)
    wt_target = target.at(wt)
    adir = project.artifact_dir(target.name)
    artifacts = {"workloads": adir / "workloads.md", "profile": adir / "profile.md"}
    ctx = Context(worktree=wt, target=wt_target, number=number, history=history, config=project.config,
                  plan=plan.text if plan else None, plan_id=plan.commit if plan else None,
                  artifacts=artifacts, say=say)
    wip = refs.ExperimentRef(target.name, number, "wip")
    proposal = ex.propose(project, agent, ctx, wip, say)
    if proposal is None:
        return None
    tree = staged_tree(wt, target.rel)
    seen = tried_trees(project, target.rel, history).get(tree or "")
    if seen is not None and not proposal.invalid:
        ex.close_branch(project, wip, say)
        say(f"#{number:04d}: '{proposal.hypothesis}' repeats the kernel of #{seen:04d}; discarded unbenchmarked")
        return {"number": number, "commit": None, "hypothesis": proposal.hypothesis, "decision": "repeat",
                "reason": f"repeats the kernel of #{seen:04d}", "outcome": "discarded", "usage": proposal.usage}
    extra = {"Autogk-Plan": plan.commit} if plan else None
    try:
        sha, branch = ex.commit_change(project, wt, ctx.target, number, branch, proposal.hypothesis,
                                       proposal.rationale, agent.name, base, extra_trailers=extra,
                                       invalid=proposal.invalid)
    except AutogkError:
        ex.close_branch(project, wip, say)
        raise
    ex.write_plan(project, sha, proposal.rationale)
    say(f"#{number:04d}: committed {sha[:10]} on {branch}: {proposal.hypothesis}")
    result = ex.evaluate(project, target.name, number, sha, branch, say, agent=agent.name, usage=proposal.usage)
    sha, result = refresh_if_stale(project, target.name, number, branch, sha, result, say)  # a person moved the trunk
    outcome = ex.conclude(project, refs.ExperimentRef.parse(branch)[1], sha, result, say)
    return {"number": number, "commit": sha, "hypothesis": proposal.hypothesis,
            "decision": result["verdict"]["decision"], "reason": result["verdict"]["reason"], "outcome": outcome,
            "usage": proposal.usage}


def _check_budget_is_priced(cfg, kind: str, budget: float) -> None:
    if not budget or kind != "anthropic":
        return
    from autogk_git.agents.pricing import price_of
    models = {cfg.agent.model, cfg.research.model or cfg.agent.model}
    unpriced = [m for m in models if price_of(m, dict(cfg.agent.prices)) is None]
    if unpriced:
        from autogk_git.errors import ConfigError
        raise ConfigError(f"--budget-usd needs a price for {', '.join(unpriced)}, which the built-in table lacks",
                          f'add it to .autogk.toml: [agent] prices = {{"{unpriced[0]}" = [input, output]}} '
                          "(USD per million tokens)")


def research_now(project: Project, target: Target, trigger: str, say: ex.Say, report: LoopReport):
    """Write a plan (LLM or offline, per [research] agent); its cost counts toward the loop's budget."""
    from autogk_git.agents import research
    try:
        plan, usage = research.research(project, target, trigger, say)
    except AgentError as e:
        add_usage(report.usage, getattr(e, "usage", {}) or {})
        say(f"research failed ({e.message}); going on without a plan")
        return None
    add_usage(report.usage, usage)
    report.research.append({"commit": plan.commit, "trigger": trigger, "after": plan.after,
                            "agent": plan.meta.get("agent"), "cost_usd": usage.get("cost_usd", 0.0)})
    return plan


def iterate(project: Project, target_name: str | None, n: int, agent_kind: str | None,
            say: ex.Say, max_time_s: float = 0.0, budget_usd: float | None = None,
            parallel: int = 1) -> LoopReport:
    """Run experiments until -n, --max-time, --budget-usd, or the agent stops; resumable at any point."""
    from autogk_git.agents import workload_view as inspect
    from autogk_git.agents import research

    target = project.target(target_name)
    require_input_data(target)
    cfg = project.config
    kind = resolve_kind(agent_kind or cfg.agent.kind)
    budget = cfg.agent.budget_usd if budget_usd is None else budget_usd
    _check_budget_is_priced(cfg, kind, budget)
    agent = get_agent(kind, cfg)
    report = LoopReport(target.name)
    started = time.time()
    lock = RepoLock(project.state_dir)
    with lock:
        if lock.recovered:
            say(f"recovered a stale lock from pid {lock.recovered.get('pid')} (that loop is gone)")
        report.resumed = resume(project, target.name, say)
        inspect.write_artifact(project, target)
        limit = n if n > 0 else (cfg.agent.max_iterations or 0)
        if parallel > 1:
            from autogk_git.loop.parallel import run_parallel
            run_parallel(project, target, agent, parallel, limit, max_time_s, say, report, budget)
            return report
        t0 = time.monotonic()
        i = repeats = 0
        trigger: str | None = None
        research_failed_at = -1  # a failed research call is not retried before a new experiment
        while True:
            if limit and i >= limit:
                report.stop_reason = f"ran {i} experiment(s) (limit {limit})"
                break
            if max_time_s and time.monotonic() - t0 >= max_time_s:
                report.stop_reason = f"time limit of {max_time_s:.0f} s reached after {i} experiment(s)"
                break
            if budget and report.cost_usd >= budget:
                report.stop_reason = f"budget of ${budget:.2f} spent (${report.cost_usd:.4f}) after {i} experiment(s)"
                break
            history = ex.results(project, target.name)
            plans = research.plans(project.root, target.name)
            trigger = trigger or research.due(history, cfg, since=plans[-1].after if plans else 0)
            trigger_fired = bool(trigger and research_failed_at != len(history))
            if trigger_fired:
                say(f"research trigger: {trigger}")
                if research_now(project, target, trigger, say, report) is None:
                    research_failed_at = len(history)
                history = ex.results(project, target.name)
            trigger = None
            plan = research.pending(project.root, target.name, history, cfg.research.follow,
                                    research.plans(project.root, target.name) if trigger_fired else plans)
            if plan:
                say(f"following the research plan on {plan.commit[:10]} ({plan.trigger})")
            try:
                res = run_one(project, target, agent, say, plan)
            except AgentError as e:
                add_usage(report.usage, getattr(e, "usage", {}) or {})
                report.stop_reason = f"the {agent.name} agent stopped: {e.message}" + (
                    f" ({e.hint})" if e.hint else "")
                report.failed = True
                break
            if res is None:
                report.stop_reason = f"the {agent.name} agent has nothing left to try"
                break
            add_usage(report.usage, res.pop("usage", None) or {})
            report.experiments.append(res)
            i += 1
            if res["decision"] == "repeat":
                repeats += 1
                if cfg.research.repeat:
                    trigger = f"repeat: experiment #{res['number']:04d} {res['reason']}"
                if repeats >= 3:
                    report.stop_reason = "the agent repeated tried kernels 3 times in a row"
                    break
            else:
                repeats = 0
    if cfg.tracking.enabled and (report.experiments or report.usage or report.research):
        try:
            from autogk_git.tracking.mlflow_store import log_loop
            log_loop(project, report.as_dict(), started, agent.name)
        except Exception as e:  # noqa: BLE001 - the notes hold every experiment; the loop total is a summary
            say(f"warning: MLflow could not log the loop's totals ({type(e).__name__}: {str(e)[:200]})")
    return report
