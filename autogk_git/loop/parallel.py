"""`autogk iterate --parallel K`: K experiments at once, each in its own worktree, on its own GPU or container.

Only benchmarks run concurrently (threads waiting on worker subprocesses or Modal calls; they
read git but never write it). Everything that writes — proposals (agents need not be thread-safe),
commits, notes, verdicts, merges, MLflow — happens in the calling thread, one at a time, so
verdicts and merges are serialized by construction.

All K experiments branch from the trunk tip of their time. When a keep arrives after the trunk has
moved (another keep merged meanwhile), its change is replayed onto the new tip and measured again
against that new parent before anything merges: nothing merges on stale numbers
(`refresh_if_stale`, also used by resume after a crash). State lives in refs and notes only, as in
the serial loop, so `loop/iterate.py:resume` finishes whatever a killed parallel loop left.
"""
from __future__ import annotations

import copy
import os
import re
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from autogk_git import config as config_mod
from autogk_git import tunables
from autogk_git.record import refs
from autogk_git.agents.base import Context
from autogk_git.errors import AutogkError, GitError
from autogk_git.git import repo
from autogk_git.git.run import git, identity_env
from autogk_git.loop import experiment as ex
from autogk_git.loop.background import LOOP_ENV
from autogk_git.project import Project, Target

GPU_ENV = "AUTOGK_BENCH_GPU"  # the [bench] gpu override a slot's config carries


@dataclass
class Slot:
    """One lane of benchmarks: a GPU index (local backend) or one Modal container at a time."""

    index: int
    device: str | None
    project: Project          # the project with this slot's config ([bench] gpu = device)


@dataclass
class Running:
    number: int
    sha: str
    branch: str
    base: str
    hypothesis: str
    agent: str
    usage: dict[str, Any]
    tunables: dict[str, Any]
    slot: Slot
    started: float = field(default_factory=time.time)


# ------------------------------------------------------------------------------------------------
# Slots
# ------------------------------------------------------------------------------------------------

def gpu_indices(config) -> list[str]:
    """CUDA devices to spread over: [bench] gpu when set, else every GPU nvidia-smi lists."""
    if config.bench.gpu.strip():
        return [g.strip() for g in config.bench.gpu.split(",") if g.strip()]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:  # [bench] gpu indices count within what this process may see, as CUDA counts them
        return [str(i) for i, g in enumerate(g for g in visible.split(",") if g.strip())]
    import shutil
    import subprocess
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(l for l in out.splitlines() if l.startswith("GPU "))]


def with_gpu(project: Project, device: str) -> Project:
    """A view of the project whose config pins [bench] gpu to one device."""
    view = copy.copy(project)
    cfg = config_mod.parse(project.config.as_dict(), where=f"{GPU_ENV}={device}",
                           environ={**os.environ, GPU_ENV: device})
    cfg.path = project.config.path
    view.config = cfg
    return view


def make_slots(project: Project, k: int, say: ex.Say) -> list[Slot]:
    from autogk_git.bench.backends import resolve_name
    backend = resolve_name(project.config.bench.backend)
    if backend != "local":
        where = {"modal": f"its own Modal container ({project.config.modal.gpu})",
                 "interpret": "its own CPU interpreter process"}.get(backend, backend)
        say(f"parallel: {k} experiments at once, each benchmarked in {where}")
        return [Slot(i, None, project) for i in range(k)]
    devices = gpu_indices(project.config)
    if not devices:
        raise AutogkError("--parallel with the local backend found no CUDA GPU",
                          "set [bench] gpu (e.g. \"0,1\"), or use --backend modal / interpret")
    slots = [Slot(i, devices[i % len(devices)], with_gpu(project, devices[i % len(devices)])) for i in range(k)]
    shared = k > len(devices)
    say(f"parallel: {k} experiments on GPU(s) {', '.join(devices)}" +
        (f"; {k} > {len(devices)} GPU(s), so benchmarks sharing a GPU take turns (the GPU lock)" if shared else ""))
    return slots


# ------------------------------------------------------------------------------------------------
# Rebase and measure again
# ------------------------------------------------------------------------------------------------

def kernel_trees(project: Project, target: str, shas: dict[int, str]) -> dict[str, int]:
    """The target folder's tree hash at each experiment's commit -> its number (one git process)."""
    if not shas:
        return {}
    rel = project.target(target).rel
    nums = list(shas)
    out = git("rev-parse", *[f"{shas[n]}:{rel}" for n in nums], cwd=project.root, check=False).split()
    return {tree: n for n, tree in zip(nums, out) if len(tree) == 40}


def measured_kernels(project: Project, target: str, exclude: int, also: dict[int, str] | None = None) -> dict[str, int]:
    """Kernels measured (every experiment's commit) or being measured (`also`), by target tree."""
    shas = {n: e.sha for n, e in ex.scan(project, target).items() if e.sha and n != exclude}
    shas.update({n: s for n, s in (also or {}).items() if n != exclude})
    return kernel_trees(project, target, shas)


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
    git("worktree", "add", "-q", "--detach", str(wt), tip, cwd=project.root)
    try:
        try:
            git("cherry-pick", "--no-commit", "-X", "theirs", sha, cwd=wt)
        except GitError:
            return None, "the change does not apply there"
        if not [p for p in git("diff", "--cached", "--name-only", cwd=wt).splitlines() if p]:
            return None, "the trunk already holds this change"
        tree = git("write-tree", cwd=wt).strip()
        kernel = git("rev-parse", f"{tree}:{project.target(target).rel}", cwd=wt).strip()
        if avoid and kernel in avoid:
            return None, f"replayed there it is the same kernel as #{avoid[kernel]:04d}, measured already or now"
        message = git("log", "-1", "--format=%B", sha, cwd=project.root)
        lines = [f"Autogk-Parent: {tip}" if ln.startswith("Autogk-Parent:") else ln
                 for ln in message.rstrip().splitlines()]
        body = message.rstrip().split("\n\n")
        if len(body) == 1 or not all(re.fullmatch(r"[\w-]+: .*", ln) for ln in body[-1].splitlines()):
            lines.append("")  # no trailer paragraph yet (a one-line hand commit): one of their own
        if not any(ln.startswith("Autogk-Parent:") for ln in lines):
            lines.append(f"Autogk-Parent: {tip}")
        lines.append(f"Autogk-Rebased-From: {sha}")  # same trailer block: the last paragraph
        env = {LOOP_ENV: "1", **identity_env(project.root)}
        git("commit", "-q", "--no-verify", "-F", "-", cwd=wt, input="\n".join(lines) + "\n", env=env)
        new = repo.rev(wt, "HEAD")
        git("update-ref", "-m", "autogk: replay onto the moved trunk", refs.branch(branch), new, sha,
            cwd=project.root)
        plan = repo.read_note(project.root, refs.NOTES_PLANS, sha)
        if plan:
            ex.write_plan(project, new, plan)
        return new, ""
    finally:
        git("cherry-pick", "--abort", cwd=wt, check=False)


def refresh_if_stale(project: Project, target: str, number: int, branch: str, sha: str,
                     result: dict[str, Any], say: ex.Say, measure_project: Project | None = None,
                     track: bool = True, in_flight: dict[int, str] | None = None) -> tuple[str, dict[str, Any]]:
    """A keep measured against a parent that is no longer the trunk tip is replayed and measured again.

    Returns (commit, result) to conclude: the same ones when fresh or not a keep; the replayed commit
    and its new result; or the old commit with a revert when the change no longer applies.
    """
    for _ in range(3):  # the trunk only moves under a person's hand here; give up past three moves
        if result["verdict"]["decision"] != "keep":
            return sha, result
        tip = repo.rev(project.root, refs.branch(project.trunk))
        parent = result.get("parent")
        if not tip or parent == tip:
            return sha, result
        say(f"#{number:04d}: kept against {str(parent)[:10]}, but {project.trunk} has moved to {tip[:10]}; "
            "replaying it there and measuring again")
        new, why = replay_onto(project, target, number, branch, sha, tip,
                               avoid=measured_kernels(project, target, number, in_flight))
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
        fresh = ex.measure(measure_project or project, target, number, new, branch,
                           lambda s: say(f"#{number:04d} {s}"), agent=result.get("agent"), usage=cost)
        fresh["rebased"] = {"from_commit": sha, "from_parent": parent, "stale_verdict": result["verdict"]}
        ex.record(project, fresh, say, track=track)
        sha, result = new, fresh
    return sha, result


# ------------------------------------------------------------------------------------------------
# The loop
# ------------------------------------------------------------------------------------------------

def open_experiment(project: Project, target: Target, agent, in_flight: list[dict[str, Any]],
                    slot: Slot, say: ex.Say) -> Running | None:
    """Branch from the trunk tip, let the agent change it, commit. None when the agent has nothing left."""
    base = ex.ensure_trunk(project, say)
    number = ex.next_number(project, target.name)
    wt, branch = ex.open_worktree(project, target.name, number, base)
    wip = refs.ExperimentRef(target.name, number, "wip")
    say(f"#{number:04d}: {agent.name} agent proposing a change (worktree {wt}, slot {slot.index}"
        f"{', GPU ' + slot.device if slot.device is not None else ''})")
    ctx = Context(worktree=wt, target=target.at(wt), number=number,
                  history=ex.results(project, target.name), config=project.config, in_flight=list(in_flight))
    proposal = ex.propose(project, agent, ctx, wip, say)
    if proposal is None:
        return None
    try:
        sha, branch = ex.commit_change(project, wt, ctx.target, number, branch, proposal.hypothesis,
                                       proposal.rationale, agent.name, base, invalid=proposal.invalid)
    except AutogkError:
        ex.close_branch(project, wip, say)
        raise
    ex.write_plan(project, sha, proposal.rationale)
    say(f"#{number:04d}: committed {sha[:10]} on {branch}: {proposal.hypothesis}")
    src = repo.show_file(project.root, sha, f"{target.rel}/kernel.py") or ""
    return Running(number, sha, branch, base, proposal.hypothesis, agent.name, proposal.usage,
                   tunables.values(src), slot)


def finish(project: Project, target: str, run: Running, result: dict[str, Any], say: ex.Say,
           others: list[Running] = ()) -> dict[str, Any]:
    """Record, refresh a stale keep, conclude, log. Called in the loop's thread only."""
    ex.record(project, result, say, track=False)
    sha, result = refresh_if_stale(project, target, run.number, run.branch, run.sha, result, say,
                                   measure_project=run.slot.project, track=False,
                                   in_flight={o.number: o.sha for o in others})
    branch = result.get("branch") or run.branch
    outcome = ex.conclude(project, refs.ExperimentRef.parse(branch)[1], sha, result, say)
    ex.log_to_tracking(project, result, say)
    return {"number": run.number, "commit": sha, "hypothesis": run.hypothesis,
            "decision": result["verdict"]["decision"], "reason": result["verdict"]["reason"],
            "outcome": outcome, "slot": run.slot.index, "device": run.slot.device,
            "rebased_from": (result.get("rebased") or {}).get("from_commit"),
            "bench_s": round(time.time() - run.started, 3)}


def run_parallel(project: Project, target: Target, agent, k: int, limit: int, max_time_s: float,
                 say: ex.Say, report, budget_usd: float = 0.0) -> None:
    """Keep k experiments in flight until the limit, the time, the budget or the agent's ideas run out.

    Research triggers and plans are the serial loop's: this loop runs the agent without them."""
    from autogk_git.agents.pricing import add_usage
    from autogk_git.errors import AgentError
    slots = make_slots(project, k, say)
    free = list(slots)
    running: dict[Future, Running] = {}
    t0 = time.monotonic()
    started = 0
    stop = ""
    error: BaseException | None = None
    pool = ThreadPoolExecutor(max_workers=k, thread_name_prefix="autogk-bench")
    try:
        while True:
            idle = False
            while free and not stop and not idle:
                if limit and started >= limit:
                    stop = f"ran {started} experiment(s) (-n {limit})"
                    break
                if max_time_s and time.monotonic() - t0 >= max_time_s:
                    stop = f"time limit of {max_time_s:.0f} s reached"
                    break
                if budget_usd and report.cost_usd >= budget_usd:
                    stop = f"budget of ${budget_usd:.2f} spent (${report.cost_usd:.4f})"
                    break
                slot = free.pop(0)
                in_flight = [{"experiment": r.number, "hypothesis": r.hypothesis, "tunables": r.tunables}
                             for r in running.values()]
                try:
                    run = open_experiment(project, target, agent, in_flight, slot, say)
                except AgentError as e:  # finish what is in flight, then stop
                    add_usage(report.usage, getattr(e, "usage", {}) or {})
                    free.insert(0, slot)
                    stop = f"the {agent.name} agent stopped: {e.message}"
                    report.failed = True
                    break
                if run is not None:
                    add_usage(report.usage, run.usage or {})
                if run is None:
                    free.insert(0, slot)
                    if not running:
                        stop = f"the {agent.name} agent has nothing left to try"
                    idle = True  # a result still to come may move the trunk and give it new ideas
                    break
                fut = pool.submit(ex.measure, slot.project, target.name, run.number, run.sha, run.branch,
                                  _prefixed(say, run.number), run.agent, run.usage)
                running[fut] = run
                started += 1
            if not running:
                break
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: running[f].number):
                run = running.pop(fut)
                free.append(run.slot)
                try:
                    result = fut.result()
                except Exception as e:  # noqa: BLE001 - infrastructure: finish the others, then raise
                    say(f"#{run.number:04d}: benchmark failed ({e}); left open for the next `autogk iterate`")
                    error = error or e
                    stop = stop or "a benchmark failed"
                    continue
                report.experiments.append(finish(project, target.name, run, result, say,
                                                 others=list(running.values())))
            free.sort(key=lambda s: s.index)
            if error and not running:
                break
    except BaseException:
        # Ctrl-C or a failed conclusion: measurements write nothing, so whatever is left open is
        # measured again by the next `autogk iterate` (resume).
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    report.stop_reason = stop or "done"
    if error is not None:
        raise error


def _prefixed(say: ex.Say, number: int) -> ex.Say:
    return lambda s: say(f"#{number:04d} {s}")
