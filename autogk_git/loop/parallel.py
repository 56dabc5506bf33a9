"""`autogk iterate --parallel K`: K experiments at once, each in its own worktree, on its own GPU or container.

Benchmarks run concurrently (threads waiting on worker subprocesses or Modal calls; they read git
but never write it), and so do the proposals of an agent that allows it (`concurrent_proposals`:
each conversation writes only its own worktree). Everything that writes git — worktrees, commits,
notes, verdicts, replays, merges — happens in the calling thread, one at a time, so verdicts and
merges are serialized by construction; MLflow logs on a thread of its own (loop/step.py `Tracking`).

All K experiments branch from the trunk tip of their time. When a keep arrives after the trunk has
moved (another keep merged meanwhile), its change is replayed onto the new tip (in the calling
thread) and measured again against that new parent on its own slot, as a benchmark like any other,
before anything merges: nothing merges on stale numbers (loop/replay.py), and the other slots are
not held up while it is measured. Each experiment's report row carries `phases`: where its time
went (proposing, benchmarks, waiting for this thread, concluding).
The step, the stop conditions and the research triggers are the serial loop's (loop/step.py,
loop/triggers.py). State lives in refs and notes only, as in the serial loop, so
`loop/iterate.py:resume` finishes whatever a killed parallel loop left.
"""
from __future__ import annotations

import copy
import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace

from autogk_git import config as config_mod
from autogk_git import env
from autogk_git.agents.pricing import add_usage
from autogk_git.errors import AgentError, AutogkError
from autogk_git.loop import experiment as ex
from autogk_git.loop.replay import MAX_MOVES, Remeasure, stale_step, still_stale
from autogk_git.loop.step import (Asked, Limits, LoopReport, Opened, Phases, Tracking, begin_experiment,
                                  end_experiment, open_experiment, settle)
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

@dataclass
class Flight:
    """An experiment on a slot: its first benchmark, or a stale keep's re-measurement after a replay."""

    run: Opened
    slot: Slot
    sha: str                            # the commit being measured (the replay's, once replayed)
    phases: Phases
    again: Remeasure | None = None      # set while a re-measurement is in flight
    moves: int = 0                      # re-measurements so far (replay.MAX_MOVES at most)
    submitted: float = 0.0              # when its benchmark now in flight was handed to the pool

    def in_flight(self) -> Opened:
        """The experiment as others must see it while it is measured: with the kernel being measured now."""
        return replace(self.run, sha=self.sha)


def _measured(fn, *args, **kwargs):
    """Run a benchmark on a pool thread; (its result, when it ended) for the scheduler's phases."""
    return fn(*args, **kwargs), time.monotonic()


def run_parallel(project: Project, target: Target, agent, k: int, limits: Limits, research: Research,
                 say: ex.Say, report: LoopReport, start: str | None = None,
                 tracking: Tracking | None = None) -> None:
    """Keep k experiments in flight until a limit is reached or the agent's ideas run out.

    A stale keep's replay (git) happens in this thread; its re-measurement runs on its slot like any
    benchmark, so the loop goes on proposing and concluding meanwhile. An agent whose proposals may run
    side by side (`concurrent_proposals`: the anthropic agent, each conversation in its own worktree)
    is asked on a thread of its own for each free slot; the loop's thread opens the worktree before and
    commits after, so git is still written here only. Other agents (the tuner: instant; a command
    agent: its confinement compares the whole repository before and after it) are asked here, one at
    a time."""
    _Scheduler(project, target, agent, k, limits, research, say, report, start, tracking).run()


class _Done:
    """An agent whose proposal has come (or failed) on its thread: ex.propose handles it as it comes."""

    def __init__(self, agent, fut: Future) -> None:
        self.name, self.fut = agent.name, fut

    def propose(self, ctx):
        return self.fut.result()


def _on_daemon_thread(fn, *args) -> Future:
    """fn(*args) on a daemon thread: an agent's request that Ctrl-C left does not hold the process's exit."""
    fut: Future = Future()

    def run() -> None:
        if not fut.set_running_or_notify_cancel():
            return
        try:
            fut.set_result(fn(*args))
        except BaseException as e:  # noqa: BLE001 - handed to the loop's thread, which decides
            fut.set_exception(e)
    threading.Thread(target=run, daemon=True, name="autogk-agent").start()
    return fut


class _Scheduler:
    def __init__(self, project, target, agent, k, limits, research, say, report, start, tracking) -> None:
        self.project, self.target, self.agent, self.limits = project, target, agent, limits
        self.research, self.say, self.report, self.start, self.tracking = research, say, report, start, tracking
        self.concurrent = bool(getattr(agent, "concurrent_proposals", False))
        self.free = make_slots(project, k, say)
        self.running: dict[Future, Flight] = {}
        self.asking: dict[Future, tuple[Asked, Slot, float]] = {}   # proposals on their threads
        self.started = self.repeats = 0
        self.stop = ""
        self.error: BaseException | None = None
        self.idle = False  # the agent had nothing to try: ask again only once something has concluded
        self.pool = ThreadPoolExecutor(max_workers=k, thread_name_prefix="autogk-bench")

    def run(self) -> None:
        from autogk_git.bench.backends import stop as bench_stop
        bench_stop.clear()
        try:
            while True:
                self.fill()
                if not self.running and not self.asking:
                    break
                done, _ = wait([*self.running, *self.asking], return_when=FIRST_COMPLETED)
                for fut in [f for f in done if f in self.asking]:
                    self.proposed(fut)
                for fut in sorted((f for f in done if f in self.running), key=lambda f: self.running[f].run.number):
                    self.measured(fut)
                self.free.sort(key=lambda s: s.index)
                if self.error and not self.running and not self.asking:
                    break
        except BaseException:
            # Ctrl-C or a failed conclusion: measurements write nothing, so whatever is left open is
            # measured again by the next `autogk iterate` (resume); a proposal cut off leaves an empty branch.
            bench_stop.request()  # benchmarks waiting on remote jobs (slurm) cancel them and return
            self.pool.shutdown(wait=False, cancel_futures=True)
            raise
        self.pool.shutdown(wait=True)
        self.report.stop_reason = self.stop or "done"
        if self.error is not None:
            raise self.error

    # -- asking -----------------------------------------------------------------------------------

    def fill(self) -> None:
        """Ask the agent for a change for each free slot, while no limit is reached."""
        while self.free and not self.stop and not self.idle:
            self.stop = self.limits.reached(self.started + len(self.asking), self.report.cost_usd) or ""
            if self.stop:
                return
            slot = self.free.pop(0)
            flying = [f.in_flight() for f in self.running.values()]
            plan = self.research.next_plan([o.in_flight() for o in flying])
            where = f", slot {slot.index}" + (f", GPU {slot.device}" if slot.device is not None else "")
            t0 = time.monotonic()
            if self.concurrent:
                asked = begin_experiment(self.project, self.target, self.agent, self.say, plan, flying, where,
                                         start=self.start)
                self.asking[_on_daemon_thread(self.agent.propose, asked.ctx)] = (asked, slot, t0)
                continue
            try:
                run = open_experiment(self.project, self.target, self.agent, self.say, plan, flying, where,
                                      start=self.start)
            except AgentError as e:
                self.agent_stopped(e, slot)
                return
            self.opened(run, slot, t0)

    def proposed(self, fut: Future) -> None:
        """A proposal came back from its thread: commit it and send it to its slot (the loop's thread)."""
        asked, slot, t0 = self.asking.pop(fut)
        try:
            proposal = ex.propose(self.project, _Done(self.agent, fut), asked.ctx, asked.wip, self.say)
        except AgentError as e:
            self.agent_stopped(e, slot)
            return
        except Exception as e:  # noqa: BLE001 - as a failed benchmark: finish the others, then raise
            self.free.append(slot)
            self.error = self.error or e
            self.stop = self.stop or "a proposal failed"
            return
        flying = [f.in_flight() for f in self.running.values()]
        # Others may have concluded (or committed) while this one was proposed: repeats are judged as of now.
        run = end_experiment(self.project, self.target, self.agent, self.say, asked, proposal, flying,
                             history=ex.results(self.project, self.target.name, own_only=True))
        self.opened(run, slot, t0, beside=True)

    def agent_stopped(self, e: AgentError, slot: Slot) -> None:
        """Finish what is in flight, then stop."""
        add_usage(self.report.usage, getattr(e, "usage", {}) or {})
        self.free.insert(0, slot)
        self.stop = self.stop or f"the {self.agent.name} agent stopped: {e.message}"
        self.report.failed = True

    def opened(self, run: Opened | None, slot: Slot, t0: float, beside: bool = False) -> None:
        """What an asked agent made: nothing, a repeat (discarded), or a commit to measure on `slot`."""
        if run is None:
            self.free.insert(0, slot)
            if not self.running and not self.asking:
                self.stop = self.stop or f"the {self.agent.name} agent has nothing left to try"
                self.report.nothing_to_try = not self.report.experiments
            self.idle = True  # a result still to come may move the trunk and give it new ideas
            return
        add_usage(self.report.usage, run.usage or {})
        self.started += 1
        if run.repeat_of is not None:
            self.free.insert(0, slot)
            outcome = run.repeat_outcome()
            self.report.experiments.append(outcome)
            self.research.after(outcome)
            self.repeats += 1
            if self.repeats >= 3:
                self.stop = self.stop or "the agent repeated tried kernels 3 times in a row"
            return
        self.repeats = 0
        flight = Flight(run, slot, run.sha, Phases(open=time.monotonic() - t0, beside=beside))
        self.submit(flight, ex.assess, slot.project, self.target.name, run.number, run.sha, run.branch,
                    _prefixed(self.say, run.number), run.agent, run.usage)

    # -- measuring --------------------------------------------------------------------------------

    def submit(self, flight: Flight, fn, *args, **kwargs) -> None:
        flight.phases.benchmarks += 1
        flight.submitted = time.monotonic()
        self.running[self.pool.submit(_measured, fn, *args, **kwargs)] = flight

    def measured(self, fut: Future) -> None:
        """A benchmark ended: conclude its experiment, or send a stale keep back to its slot."""
        flight = self.running.pop(fut)
        run, slot = flight.run, flight.slot
        try:
            result, ended = fut.result()
        except Exception as e:  # noqa: BLE001 - infrastructure: finish the others, then raise
            self.free.append(slot)
            self.say(f"#{run.number:04d}: benchmark failed ({e}); left open for the next `autogk iterate`")
            self.error = self.error or e
            self.stop = self.stop or "a benchmark failed"
            return
        t_taken = time.monotonic()
        flight.phases.bench += ended - flight.submitted
        flight.phases.wait += t_taken - ended
        outcome = _conclude_or_measure_again(self.project, self.target, flight, result, self.say, self.running,
                                             self.submit, self.tracking)
        flight.phases.conclude += time.monotonic() - t_taken
        if outcome is None:  # measured again on its slot: still in flight
            return
        self.free.append(slot)
        self.idle = False
        outcome.update(slot=slot.index, device=slot.device, phases=flight.phases.as_dict())
        self.report.experiments.append(outcome)
        self.research.after(outcome)


def _conclude_or_measure_again(project: Project, target: Target, flight: Flight, result: dict, say: ex.Say,
                               running: dict[Future, Flight], submit, tracking: Tracking | None) -> dict | None:
    """A benchmark's result, in the loop's thread: record it; a keep whose trunk moved meanwhile is
    replayed and sent back to its slot to be measured again (None); anything else is settled (its outcome)."""
    run = flight.run
    if flight.again is not None:
        result = flight.again.annotate(result)
        flight.again = None
    ex.record(project, result, say, track=False)
    sha = flight.sha
    if flight.moves < MAX_MOVES:
        others = {f.run.number: f.sha for f in running.values()}
        sha, result, again = stale_step(project, target.name, run.number, run.branch, flight.sha, result, say,
                                        track=False, in_flight=others)
        if again is not None:
            flight.sha, flight.again, flight.moves = again.sha, again, flight.moves + 1
            submit(flight, again.measure, flight.slot.project, target.name, run.number, run.branch,
                   result.get("agent"), say)
            return None
    else:  # other slots' keeps may move the trunk while it is measured again: never merge it stale
        result = still_stale(project, run.number, sha, result, say, track=False)
    return settle(project, target.name, run, sha, result, say, busy=bool(running), tracking=tracking)


def _prefixed(say: ex.Say, number: int) -> ex.Say:
    return lambda s: say(f"#{number:04d} {s}")
