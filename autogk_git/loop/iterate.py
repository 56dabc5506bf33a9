"""`autogk iterate`: resume whatever a stopped loop (or a hand commit) left, then run experiments one at a time.

The step itself (open, propose, commit, benchmark, finish) is loop/step.py's, shared with the
parallel scheduler (loop/parallel.py); so are the stop conditions (`Limits`) and the research
triggers (loop/triggers.py).
"""
from __future__ import annotations

import time
from typing import Any

from autogk_git.agents import get_agent, resolve_kind
from autogk_git.agents.pricing import add_usage
from autogk_git.errors import AgentError, AutogkError
from autogk_git.git import repo, worktrees
from autogk_git.loop import experiment as ex
from autogk_git.loop.background import running_bench_pid
from autogk_git.loop.check import check_reference, trunk_target
from autogk_git.loop.lock import RepoLock
from autogk_git.loop.replay import refresh_if_stale, trunk_moved
from autogk_git.loop.step import Limits, LoopReport, Phases, Tracking, finish, open_experiment
from autogk_git.loop.triggers import Research
from autogk_git.project import Project, Target, require_input_data
from autogk_git.record import refs

__all__ = ["LoopReport", "iterate", "resume", "run_one"]

WAIT_SAY_EVERY_S = 30.0   # how often a wait for a background benchmark says it is still waiting


def wait_for_background(project: Project, number: int, sha: str, say: ex.Say,
                        poll_s: float = 0.5) -> None:
    """Wait while the hook's background benchmark of sha runs: its result note is the one to conclude."""
    pid = running_bench_pid(project.state_dir, sha)
    if not pid:
        return
    say(f"#{number:04d}: being benchmarked in the background (pid {pid}); waiting for its result "
        f"(Ctrl-C leaves it running; `autogk iterate` concludes it later)")
    t0 = last = time.monotonic()
    while running_bench_pid(project.state_dir, sha):
        time.sleep(poll_s)
        if time.monotonic() - last >= WAIT_SAY_EVERY_S:
            last = time.monotonic()
            say(f"#{number:04d}: still waiting for the background benchmark ({last - t0:.0f} s)")


def left_open(project: Project, target: str) -> list[tuple[int, str]]:
    """(number, branch) of every experiment of target with a branch still open: what `conclude` would finish."""
    return [(n, e.branch) for n, e in sorted(ex.scan(project, target).items()) if e.branch is not None]


def _verdict_here(project: Project, number: int, sha: str, say: ex.Say) -> dict[str, Any] | None:
    """sha's result note when this clone wrote it; None when there is none, or it came from elsewhere (a
    fetch, a hand-added note), which concludes nothing: the commit is benchmarked here first."""
    result = ex.load_result(project, sha)
    if result is not None and not ex.judged_here(project, sha):
        say(f"#{number:04d}: the result note of {sha[:10]} was not written by this clone (fetched from a "
            "remote?): it is not taken as this loop's verdict")
        return None
    return result


def resume(project: Project, target: str, say: ex.Say, only: int | None = None,
           stay: bool = False) -> list[dict[str, Any]]:
    """Finish or discard every experiment a stopped loop (or a hand commit) left open (only: that number).

    A hand-made experiment still benchmarking in the background is waited for, then concluded. stay: a
    person's checkout on an experiment branch is left where it is."""
    done: list[dict[str, Any]] = []
    trunk = repo.rev(project.root, refs.branch(project.trunk))
    found = ex.scan(project, target)
    for number, e in sorted(found.items()):
        if e.branch is None or (only is not None and number != only):
            continue
        ref = refs.ExperimentRef.parse(e.branch)[1]
        tip = repo.rev(project.root, ref.branch_ref)
        entry = {"number": number, "commit": tip}
        if e.state != "open":
            result = _verdict_here(project, number, e.sha, say)
            if result:
                ex.log_if_missing(project, result, say)
            merged = bool(trunk) and repo.is_ancestor(project.root, e.sha, trunk)
            if e.state == "kept" and not merged and (result is None or trunk_moved(project, result)):
                # A kept ref whose merge never happened (a kill, or a merge refused by a dirty checkout) and
                # the trunk moved since its verdict, or a verdict not written here: measured again first.
                repo.delete_ref(project.root, ref.kept_ref)
                if result is None:
                    say(f"#{number:04d}: benchmarking {e.sha[:10]} here before anything is merged")
                    result = ex.evaluate(project, target, number, e.sha, e.branch, say)
                sha, result = refresh_if_stale(project, target, number, e.branch, e.sha, result, say)
                outcome = ex.conclude(project, ref, sha, result, say, stay)
                done.append({**entry, "commit": sha, "decision": result["verdict"]["decision"],
                             "reason": result["verdict"].get("reason", ""), "outcome": outcome})
                continue
            if result and e.state == "kept":
                ex.conclude(project, ref, e.sha, result, say, stay)
            else:
                ex.close_branch(project, ref, say, stay)
            done.append({**entry, "commit": e.sha, "decision": "finished",
                         "outcome": f"finished concluding ({e.state})"})
            continue
        # No commit of its own: still at the trunk, or at the search node it branched from (loop/search.py).
        nodes = {o.sha for n, o in found.items() if n != number and o.state != "open"}
        if (trunk and repo.is_ancestor(project.root, tip, trunk)) or tip in nodes:
            say(f"#{number:04d}: stopped before its commit; discarding the empty branch {e.branch}")
            ex.close_branch(project, ref, say, stay)
            done.append({**entry, "decision": "discarded", "outcome": "discarded (no commit)"})
            continue
        wait_for_background(project, number, tip, say)
        result = _verdict_here(project, number, tip, say)
        if result is None:
            say(f"#{number:04d}: committed but not benchmarked; benchmarking {tip[:10]} now")
            result = ex.evaluate(project, target, number, tip, e.branch, say)
        else:
            ex.log_if_missing(project, result, say)
        tip, result = refresh_if_stale(project, target, number, e.branch, tip, result, say)
        outcome = ex.conclude(project, ref, tip, result, say, stay)
        done.append({**entry, "commit": tip, "hypothesis": result.get("hypothesis", ""),
                     "agent": result.get("agent", ""), "decision": result["verdict"]["decision"],
                     "reason": result["verdict"].get("reason", ""), "outcome": outcome})
    # Worktrees whose branch is gone (a kill between the two deletions).
    wt_dir = project.state_dir / "worktrees"
    if wt_dir.is_dir():
        live = {p.get("worktree") for p in worktrees.worktrees(project.root)}
        for p in wt_dir.iterdir():
            if p.name.startswith(target + "-") and (str(p) not in live or not (p / ".git").exists()):
                ex.remove_worktree(project, p)
    return done


def run_one(project: Project, target: Target, agent, say: ex.Say, plan=None,
            report: LoopReport | None = None, start: str | None = None,
            tracking: Tracking | None = None) -> dict[str, Any] | None:
    """One experiment from the search's next node (start: --from); None when the agent has nothing left to try.

    A proposal that repeats a kernel already measured is discarded unbenchmarked: the outcome then
    has decision "repeat" and no commit. The agent's usage is added to the report at once."""
    t0 = time.monotonic()
    opened = open_experiment(project, target, agent, say, plan, start=start)
    if opened is None:
        return None
    if report is not None:
        add_usage(report.usage, opened.usage or {})
    if opened.repeat_of is not None:
        return opened.repeat_outcome()
    t1 = time.monotonic()
    result = ex.assess(project, target.name, opened.number, opened.sha, opened.branch, say,
                       agent=agent.name, usage=opened.usage)
    t2 = time.monotonic()
    outcome = finish(project, target.name, opened, result, say, tracking=tracking)
    # One at a time: a stale keep's re-measurement (a person moved the trunk) counts as concluding here.
    outcome["phases"] = Phases(open=t1 - t0, bench=t2 - t1, conclude=time.monotonic() - t2, benchmarks=1).as_dict()
    return outcome


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


def iterate(project: Project, target_name: str | None, n: int, agent_kind: str | None,
            say: ex.Say, max_time_s: float = 0.0, budget_usd: float | None = None,
            parallel: int = 1, start: str | None = None) -> LoopReport:
    """Run experiments until -n, --max-time, --budget-usd, or the agent stops; resumable at any point."""
    from autogk_git.agents import workload_view

    target = project.target(target_name)
    require_input_data(target)
    # The trunk's definition is what judges every experiment: a broken reference is said here, once,
    # not blamed on each candidate (checked again only when the definition or workloads change).
    checked = check_reference(project, trunk_target(project, target), cache=True)
    if checked:
        say(checked)
    cfg = project.config
    if cfg.tracking.enabled:  # a dead server is said before the first experiment, in seconds, not minutes later
        from autogk_git.tracking.mlflow_store import probe
        try:
            probe(project.tracking_uri())
        except AutogkError as e:
            say(f"warning: {e.message}; the loop runs on and writes every result note; once the store answers: "
                "autogk sync")
    kind = resolve_kind(agent_kind or cfg.agent.kind)
    budget = cfg.agent.budget_usd if budget_usd is None else budget_usd
    _check_budget_is_priced(cfg, kind, budget)
    agent = get_agent(kind, cfg)
    report = LoopReport(target.name)
    started = time.time()
    # --max-time counts from the command's start: resuming (waiting for a background benchmark) uses it too.
    limits = Limits(n if n > 0 else (cfg.agent.max_iterations or 0), max_time_s, budget or 0.0)
    if cfg.search.floor_share:
        from autogk_git.loop.search import floor_reached
        limits.near_floor = lambda: floor_reached(project, target.name)
    lock = RepoLock(project.state_dir)
    with lock:
        if lock.recovered:
            say(f"recovered a stale lock from pid {lock.recovered.get('pid')} (that loop is gone)")
        report.resumed = resume(project, target.name, say)
        if start is not None:
            from autogk_git.loop.search import resolve_start
            start = resolve_start(project, target.name, start)
        workload_view.write_artifact(project, target)
        research = Research(project, target, say, report)
        tracking = Tracking(project, say)
        try:
            if parallel > 1:
                from autogk_git.loop.parallel import run_parallel
                run_parallel(project, target, agent, parallel, limits, research, say, report, start=start,
                             tracking=tracking)
            else:
                run_serial(project, target, agent, limits, research, say, report, start=start, tracking=tracking)
        except BaseException:
            tracking.close(wait=False)
            raise
        tracking.close()
    if cfg.tracking.enabled and (report.experiments or report.usage or report.research):
        try:
            from autogk_git.tracking.mlflow_store import log_loop
            log_loop(project, report.as_dict(), started, agent.name)
        except Exception as e:  # noqa: BLE001 - the notes hold every experiment; the loop total is a summary
            why = e.message if isinstance(e, AutogkError) else f"{type(e).__name__}: {str(e)[:200]}"
            say(f"warning: MLflow could not log the loop's totals ({why})")
    return report


def run_serial(project: Project, target: Target, agent, limits: Limits, research: Research, say: ex.Say,
               report: LoopReport, start: str | None = None, tracking: Tracking | None = None) -> None:
    """One experiment at a time until a limit is reached or the agent stops."""
    repeats = 0
    while True:
        stop = limits.reached(len(report.experiments), report.cost_usd)
        if stop:
            report.stop_reason = stop
            break
        plan = research.next_plan()
        try:
            res = run_one(project, target, agent, say, plan, report, start=start, tracking=tracking)
        except AgentError as e:
            add_usage(report.usage, getattr(e, "usage", {}) or {})
            report.stop_reason = f"the {agent.name} agent stopped: {e.message}" + (
                f" ({e.hint})" if e.hint else "")
            report.failed = True
            break
        if res is None:
            report.stop_reason = f"the {agent.name} agent has nothing left to try"
            report.nothing_to_try = not report.experiments
            break
        report.experiments.append(res)
        research.after(res)
        repeats = repeats + 1 if res["decision"] == "repeat" else 0
        if repeats >= 3:
            report.stop_reason = "the agent repeated tried kernels 3 times in a row"
            break
