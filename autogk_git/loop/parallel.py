"""`autogk iterate --parallel K`: K experiments at once, each in its own worktree, on its own GPU or container.

Only benchmarks run concurrently (threads waiting on worker subprocesses or Modal calls; they
read git but never write it). Everything that writes — proposals (agents need not be thread-safe),
commits, notes, verdicts, merges, MLflow — happens in the calling thread, one at a time, so
verdicts and merges are serialized by construction.

All K experiments branch from the trunk tip of their time. When a keep arrives after the trunk has
moved (another keep merged meanwhile), its change is replayed onto the new tip and measured again
against that new parent before anything merges: nothing merges on stale numbers (loop/replay.py).
The step, the stop conditions and the research triggers are the serial loop's (loop/step.py,
loop/triggers.py). State lives in refs and notes only, as in the serial loop, so
`loop/iterate.py:resume` finishes whatever a killed parallel loop left.
"""
from __future__ import annotations

import copy
import os
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from autogk_git import config as config_mod
from autogk_git import env
from autogk_git.agents.pricing import add_usage
from autogk_git.errors import AgentError, AutogkError
from autogk_git.loop import experiment as ex
from autogk_git.loop.step import Limits, LoopReport, Opened, finish, open_experiment
from autogk_git.loop.triggers import Research
from autogk_git.project import Project, Target

GPU_ENV = env.BENCH_GPU  # the [bench] gpu override a slot's config carries


@dataclass
class Slot:
    """One lane of benchmarks: a GPU index (local backend) or one Modal container at a time."""

    index: int
    device: str | None
    project: Project          # the project with this slot's config ([bench] gpu = device)


# ------------------------------------------------------------------------------------------------
# Slots
# ------------------------------------------------------------------------------------------------

def gpu_indices(config) -> list[str]:
    """CUDA devices to spread over: [bench] gpu when set, else every GPU this process may see.

    Indices count within what the process may see, as CUDA (and the local backend) count them."""
    if config.bench.gpu.strip():
        return [g.strip() for g in config.bench.gpu.split(",") if g.strip()]
    from autogk_git.bench.backends.local import visible_gpus  # the one nvidia-smi / CUDA_VISIBLE_DEVICES reader
    return [str(i) for i in range(len(visible_gpus()))]


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
                 "interpret": "its own CPU interpreter process",
                 "slurm": f"its own SLURM job (partition {project.config.slurm.partition or 'the default'})",
                 }.get(backend, backend)
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
# The loop
# ------------------------------------------------------------------------------------------------

def run_parallel(project: Project, target: Target, agent, k: int, limits: Limits, research: Research,
                 say: ex.Say, report: LoopReport, start: str | None = None) -> None:
    """Keep k experiments in flight until a limit is reached or the agent's ideas run out."""
    from autogk_git.bench.backends import stop as bench_stop
    slots = make_slots(project, k, say)
    bench_stop.clear()
    free = list(slots)
    running: dict[Future, tuple[Opened, Slot]] = {}
    started = repeats = 0
    stop = ""
    error: BaseException | None = None
    pool = ThreadPoolExecutor(max_workers=k, thread_name_prefix="autogk-bench")
    try:
        while True:
            idle = False
            while free and not stop and not idle:
                stop = limits.reached(started, report.cost_usd) or ""
                if stop:
                    break
                slot = free.pop(0)
                flying = [o for o, _ in running.values()]
                plan = research.next_plan([o.in_flight() for o in flying])
                where = f", slot {slot.index}" + (f", GPU {slot.device}" if slot.device is not None else "")
                try:
                    run = open_experiment(project, target, agent, say, plan, flying, where, start=start)
                except AgentError as e:  # finish what is in flight, then stop
                    add_usage(report.usage, getattr(e, "usage", {}) or {})
                    free.insert(0, slot)
                    stop = f"the {agent.name} agent stopped: {e.message}"
                    report.failed = True
                    break
                if run is None:
                    free.insert(0, slot)
                    if not running:
                        stop = f"the {agent.name} agent has nothing left to try"
                        report.nothing_to_try = not report.experiments
                    idle = True  # a result still to come may move the trunk and give it new ideas
                    break
                add_usage(report.usage, run.usage or {})
                started += 1
                if run.repeat_of is not None:
                    free.insert(0, slot)
                    outcome = run.repeat_outcome()
                    report.experiments.append(outcome)
                    research.after(outcome)
                    repeats += 1
                    if repeats >= 3:
                        stop = "the agent repeated tried kernels 3 times in a row"
                    continue
                repeats = 0
                fut = pool.submit(ex.assess, slot.project, target.name, run.number, run.sha, run.branch,
                                  _prefixed(say, run.number), run.agent, run.usage)
                running[fut] = (run, slot)
            if not running:
                break
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: running[f][0].number):
                run, slot = running.pop(fut)
                free.append(slot)
                try:
                    result = fut.result()
                except Exception as e:  # noqa: BLE001 - infrastructure: finish the others, then raise
                    say(f"#{run.number:04d}: benchmark failed ({e}); left open for the next `autogk iterate`")
                    error = error or e
                    stop = stop or "a benchmark failed"
                    continue
                outcome = finish(project, target.name, run, result, say, measure_project=slot.project,
                                 others=[o for o, _ in running.values()])
                outcome.update(slot=slot.index, device=slot.device)
                report.experiments.append(outcome)
                research.after(outcome)
            free.sort(key=lambda s: s.index)
            if error and not running:
                break
    except BaseException:
        # Ctrl-C or a failed conclusion: measurements write nothing, so whatever is left open is
        # measured again by the next `autogk iterate` (resume).
        bench_stop.request()  # benchmarks waiting on remote jobs (slurm) cancel them and return
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    report.stop_reason = stop or "done"
    if error is not None:
        raise error


def _prefixed(say: ex.Say, number: int) -> ex.Say:
    return lambda s: say(f"#{number:04d} {s}")
