"""Paired timing rounds: per round, every workload, both labels in random order, back to back; then the
judge checks what the timed calls wrote.

Against the reference (the stride stage) both labels run on the same fresh input sets. Against a parent
(the ab stage: a kernel of the trunk, in a process of its own, as untrusted as the candidate) the
candidate never gets inputs the parent has seen: each round it gets fresh sets, and the parent is timed
on the candidate's sets of the round before (its first round on sets the candidate never gets), so a
trunk kernel cannot leave its outputs somewhere (a buffer shared through /dev/shm) for a candidate to
copy instead of computing. The parent's outputs on those sets are then what the candidate's unsampled
calls are compared with (cross_check), a round late; after the last round the parent runs once more,
on the candidate's last sets, for that comparison alone (`settle_pending`). The sets of both labels
are made before the round's windows and out of the L2 when they open (`evict`): neither label's copy
into its process reads them warmer than the other's."""
from __future__ import annotations

import math
import random
import time

import torch

from .calls import (
    HostTimer,
    KernelFailure,
    classify,
    device_timer,
    die_if_context_lost,
    short_tb,
    sync,
    time_batch,
)
from .checks import (alloc_outputs, bits, check_inputs, check_outputs, read_flags, relabel, same_bits_flag,
                     stress_a_timed_set)
from .clock import EARLY_TRIES, clock_failure, early_failure, interference_failure, paired_figures
from .inputs import (
    HarnessFailure,
    Inputs,
    make_inputs,
    reference_outputs,
    resolve_axes,
)
from .kernels import LIMITS, RemoteKernel, arm, others_stopped
from .sampling import calls_per_round, cross_check, verify_plan
from .status import Status
from .tenants import Watch, name_strangers
from .witness import Early, blank_like

PHASES: dict[str, float] = {}
"""Wall seconds by phase of this job (start, check, inputs, timed, verify): the ab summary's `phases`,
so a slow experiment says where its time went."""


def phase(name: str, since: float) -> float:
    now = time.perf_counter()
    PHASES[name] = PHASES.get(name, 0.0) + now - since
    return now


class TimedKernel:
    """One label's way to be called on an input set: a DPS kernel, or the value-returning reference."""

    def __init__(self, label: str, fn, dps: bool) -> None:
        self.label, self.fn, self.dps = label, fn, dps


def witnessed(tk: TimedKernel, settings: dict) -> bool:
    """Whether the judge's own clock (witness.py) times this label: every kernel in its own process."""
    return isinstance(tk.fn, RemoteKernel) and bool(settings.get("witness", True))


def time_label(tk: TimedKernel, sets: list, warm_set: list, job: dict, wl: dict, reference,
               device: str, rng: random.Random, method_timer, checked: list[int] | None = None,
               ref_cache: dict | None = None, longest_s: float | None = None) -> tuple[dict, list | None]:
    """Time one label on this round's input sets, then check (here, in the judge) what the timed calls wrote.

    checked: which sets' outputs are compared with the reference's (both labels of a round get the
    same ones, so `ref_cache` computes each reference output once); None: `verify_sets` at random.
    With the judge's clock (witnessed), the kernel's process gets blank input buffers that the judge
    fills inside the window, and what is checked is the judge's own copy of the outputs; `longest_s`
    (the longest request seen on this workload) bounds how long the judge waits for the window's end."""
    definition = job["definition"]
    settings = job.get("settings", {})
    axes = resolve_axes(definition, wl)
    tolerances = settings.get("tolerances", {})
    warmup = int(settings.get("warmup", 5))
    if not tk.dps:  # the reference, timed here: it is trusted code, timed with every kernel's process stopped
        with others_stopped():
            for _ in range(max(1, warmup)):
                tk.fn(*warm_set)
            sync(device)
            t = method_timer.time_calls([lambda a=a: tk.fn(*a) for a in sets])
            t["host_us"] = method_timer.sync_latency(lambda: tk.fn(*sets[0]), int(settings.get("host_calls", 10)))
        return t, None
    warm_outs = alloc_outputs(definition, axes, device, 0)
    outs = [alloc_outputs(definition, axes, device, k) for k in range(len(sets))]
    snaps = [alloc_outputs(definition, axes, device, k) for k in range(len(sets))]  # poisoned until written
    ref_cache = {} if ref_cache is None else ref_cache
    # The values each timed call must find unchanged after it. With the judge's clock the real sets
    # never leave the judge (the kernel's process gets copies inside the window): no copy needed.
    keep = (lambda x: bits(x)) if witnessed(tk, settings) else (lambda x: bits(x).clone())
    saved = [[keep(x) if isinstance(x, torch.Tensor) else x for x in s] for s in sets]
    t0 = time.perf_counter()
    given, seen = sets, snaps  # the inputs the kernel's process held, the outputs the judge checks
    if witnessed(tk, settings):
        given = blank_like(sets)
        seen = [alloc_outputs(definition, axes, device, k) for k in range(len(sets))]
        t = tk.fn.time(given, outs, snaps, warm_set, warm_outs, method_timer.method, settings,
                       witness=(wl["uuid"], sets, seen, longest_s))
        if settings.get("clock_null_window") and t.get("witness"):
            t["witness"]["null_us"] = null_window(tk, given, sets, outs, warm_set, warm_outs, definition, axes,
                                                  device, method_timer.method, settings, wl["uuid"], longest_s)
    elif isinstance(tk.fn, RemoteKernel):
        t = tk.fn.time(sets, outs, snaps, warm_set, warm_outs, method_timer.method, settings)
    else:
        t = time_batch(tk.fn, sets, outs, warm_set, warm_outs, settings, method_timer, device, snaps)
    sync(device)
    t0 = phase("timed", t0)
    # What the timed calls wrote by the end of the window is what counts (the snapshots): a call that
    # skipped its work leaves poison behind, and work that landed later changed the outputs since.
    where = "in the timed calls"
    pairs = [(k, name, y) for k, snap in enumerate(seen) for name, y in zip(definition["outputs"], snap)]
    nan = [torch.isnan(y).any() if y.dtype.is_floating_point else torch.zeros((), dtype=torch.bool, device=y.device)
           for _, _, y in pairs]
    same = [same_bits_flag(x, y) for o, snap in zip(outs, seen) for x, y in zip(o, snap)]
    flags = read_flags(nan + same)  # one synchronization for every call's checks
    for i, (k, name, _) in enumerate(pairs):
        if flags[i]:
            raise KernelFailure(Status.INCORRECT_NUMERICAL,
                                f"{where}: output {name} of timed call {k} still held the poison when the "
                                "timed window ended (the call skipped its work, or left it to land later)")
        if not flags[len(pairs) + i]:
            raise KernelFailure(Status.STREAM_ORDER,
                                f"{where}: output {name} of timed call {k} changed after the timed window "
                                "ended: work left to land after the calls (a later call, a thread, another "
                                "stream) is not counted in their time")
    if checked is None:
        checked = rng.sample(range(len(sets)), min(int(settings.get("verify_sets", 2)), len(sets)))
    for k in checked:
        try:
            check_inputs(definition, given[k], saved[k])
            if k not in ref_cache:
                ref_cache[k] = reference_outputs(reference, sets[k])
            check_outputs(definition, seen[k], ref_cache[k], tolerances, sets[k], axes)
        except KernelFailure as e:
            raise relabel(e, where) from None
    phase("verify", t0)
    return t, seen  # every timed call's outputs as the judge holds them: cross_check reads the rest


def null_window(tk: TimedKernel, given: list, sets: list, outs: list, warm_set: list, warm_outs: list,
                definition: dict, axes: dict, device: str, method: str, settings: dict, uuid: str,
                longest_s: float | None) -> float:
    """The same label's window again, right after its timed one, with nothing in the kernel's place
    (kernel_process: settings["null_window"]): the same real inputs written into the same buffers, the same
    flushes, snapshot and marks, in the same process. Its length is that process's fixed cost per window,
    which two honest labels' windows differ by whatever the rounds (clock.CLOCK_WINDOW_US); the judge's
    clock can take it out of the pair's difference (clock.paired_figures: `seen_null`). Only a setting
    (`clock_null_window`, off by default) turns it on: a measurement until the GPU's figures say what limit
    it allows. Its outputs are not read: the calls wrote nothing. Not yet a verdict's figure for one more
    reason: GPU work the kernel left running on a stream of its own would lengthen its null window (and so
    shorten its figure), which the judge's sleep sees only when it is long."""
    junk = [alloc_outputs(definition, axes, device, k) for k in range(len(sets))]
    copies = [alloc_outputs(definition, axes, device, k) for k in range(len(sets))]
    t = tk.fn.time(given, outs, junk, warm_set, warm_outs, method, {**settings, "null_window": True},
                   witness=(uuid + ":null", sets, copies, longest_s))
    return float(t["witness"]["window_us"])


def label_failure(tk: TimedKernel, cand: TimedKernel, e: Exception, device: str) -> tuple[str, KernelFailure]:
    """(label blamed, failure) for an exception raised while one label was timed: its own KernelFailure,
    a harness failure (the experiment cannot be judged: the candidate's record carries it), or anything
    else the kernel raised (a lost CUDA context ends the judge here)."""
    if isinstance(e, KernelFailure):
        return tk.label, e
    if isinstance(e, HarnessFailure):
        return cand.label, KernelFailure(Status.HARNESS_ERROR, str(e))
    die_if_context_lost(e, device)
    return tk.label, KernelFailure(classify(e), f"while timed: {short_tb(e)}")


def evict(timer) -> None:
    """Out of the L2 with the input sets just made (a GPU timer's flush; nothing on the host clock): the
    judge copies each label's sets into its process inside the window, and sets made a round earlier
    (the parent's) would otherwise be read colder than the candidate's fresh ones."""
    flush = getattr(timer, "flush", None)
    if flush is not None:
        flush()


def cross_check_pending(job: dict, wl: dict, prev: dict | None, parent_seen: list | None,
                        reference) -> KernelFailure | None:
    """The candidate's outputs on its sets of the round before (`prev`), against the parent's on the same
    sets now (cross_check); None where there is nothing to compare (the parent's first sets)."""
    if prev is None or prev.get("seen") is None or parent_seen is None:
        return None
    t_x = time.perf_counter()
    try:
        bad = cross_check(job["definition"], parent_seen, prev["seen"], prev["sets"], prev["checked"], prev["ref"],
                          reference, job.get("settings", {}).get("tolerances", {}), resolve_axes(job["definition"], wl))
    except HarnessFailure as e:
        bad = KernelFailure(Status.HARNESS_ERROR, str(e))
    phase("verify", t_x)
    return bad


def timer_errors(device: str) -> tuple:
    """What a device timer raises when it cannot time a label's calls (timer.TimerError): the judge then
    times that workload with the other device timer. Nothing on the host clock."""
    if not device.startswith("cuda"):
        return ()
    from . import timer as timing  # triton's GPU driver: only where a device timer is used
    return (timing.TimerError,)


def cupti_refused(e: BaseException) -> str:
    return (f"could not be timed by CUPTI, which timed its parent here ({e}): a kernel is not moved to a "
            "weaker timer on its own account (work overlapped with the timer's flushes, or skipped in a CUDA "
            "graph's later replays, is counted under CUPTI alone)")


def other_timer(u: str, method: dict, tried: dict, timers: dict) -> bool:
    """Workload u's timer failed: its method becomes the device timer not yet tried there (made once);
    False when both have failed."""
    tried.setdefault(u, set()).add(method[u])
    other = [m for m in ("cupti", "cudagraph") if m not in tried[u]]
    if not other:
        return False
    method[u] = other[0]
    if method[u] not in timers:
        timers[method[u]] = device_timer(method[u])
    return True


def settle_pending(job: dict, base: TimedKernel, cand: TimedKernel, wl_of: dict, pending: dict, failures: dict,
                   reference, device: str, rng: random.Random, timers: dict, method: dict, longest: dict,
                   emit, tried: dict) -> None:
    """After the last round: the parent once more on each workload's last candidate sets, for the
    comparison of the candidate's outputs there alone (its figures are not used: one warm-up call and one
    host-latency call instead of the job's). A parent that cannot finish it (the job's time limit too) is
    a parent failure, which blocks the keep. A timer that cannot time it is no fault of the parent's: the
    window is made again with the other device timer (its figures are not used, so any timer serves),
    and where neither can, the candidate's last outputs are not compared and nothing is judged there."""
    job = {**job, "settings": {**job.get("settings", {}), "warmup": 1, "host_calls": 1}}
    timer_error = timer_errors(device)
    for u, prev in pending.items():
        if u in failures or prev.get("seen") is None:
            continue
        wl = wl_of[u]
        early = 0
        while True:
            emit(event="at", label=base.label, uuid=u)
            arm(base.fn)
            try:
                _, seen = time_label(base, prev["sets"], prev["warm"], job, wl, reference, device, rng,
                                     timers[method[u]], prev["checked"], prev["ref"], longest.get(u))
            except Early:
                early += 1
                if early < EARLY_TRIES:
                    continue
                # never a window: the candidate's last outputs are not compared, so nothing is judged here
                failures[u] = (cand.label, early_failure({base.label: EARLY_TRIES}, base.label, cand.label,
                                                         EARLY_TRIES))
            except timer_error as e:
                if other_timer(u, method, tried, timers):
                    continue
                failures[u] = (cand.label, KernelFailure(
                    Status.HARNESS_ERROR, f"the parent's window after the last round could not be timed by "
                    f"either device timer ({e}): the candidate's outputs of the last round were not compared "
                    "with the parent's, so this workload is not judged"))
            except Exception as e:  # noqa: BLE001 - the parent raised on the candidate's last sets
                failures[u] = label_failure(base, cand, e, device)
            else:
                bad = cross_check_pending(job, wl, prev, seen, reference)
                if bad is not None:
                    failures[u] = (cand.label, bad)
            break


def gpu_watch(device: str, base: TimedKernel, cand: TimedKernel) -> Watch | None:
    """On a GPU, the judge's watch for processes of the kernels' own that use it (tenants.Watch), started."""
    remote = [k for k in (base, cand) if isinstance(k.fn, RemoteKernel)]
    if not device.startswith("cuda") or not remote:
        return None
    watch = Watch(lambda: {k.fn.proc.pid: k.label for k in remote if k.fn.proc is not None}, cand.label)
    watch.start()
    return watch


def watched_failure(watch: Watch | None, base: TimedKernel, cand: TimedKernel) -> tuple | None:
    """(label, failure) where the watch saw a process of a kernel's own on the GPU: the candidate's first."""
    for tk in (cand, base):
        bad = watch.found(tk.label) if watch is not None else None
        if bad is not None:
            return tk.label, bad
    return None


def timed_rounds(job: dict, base: TimedKernel, cand: TimedKernel, wls: list[tuple[int, dict]], inputs: Inputs,
                 reference, device: str, emit, seq, rounds: int) -> tuple[dict, dict, float | None]:
    """Paired rounds: per round, every workload, both labels in random order (see the module's doc for
    which input sets each gets).

    Returns (per-workload figures, failures {uuid: (label, KernelFailure)}, memory bandwidth B/s)."""
    settings = job.get("settings", {})
    seed = int(job.get("seed", 0))
    # Which calls are verified, in which rounds, and each round's order of labels: drawn from the
    # system's randomness, which nothing in a kernel's process can replay (the job's seed could be).
    rng = random.SystemRandom()
    timers = {"main": device_timer(settings.get("timer", "cupti")) if device.startswith("cuda") else HostTimer()}
    capture_error = timer_errors(device)
    method = {wl["uuid"]: timers["main"].method for _, wl in wls}
    timers[timers["main"].method] = timers["main"]
    fig = {wl["uuid"]: {base.label: [], cand.label: [], "host_" + base.label: [], "host_" + cand.label: [],
                        "log_ratio": [], "calls": calls_per_round(job, wl)} for _, wl in wls}
    failures: dict[str, tuple[str, KernelFailure]] = {}
    clocked: set[str] = set()  # workloads the judge's clock condemned (tenants.name_strangers)
    tried: dict[str, set] = {}
    timed_by: dict[str, set] = {}  # per workload: (label, timer) pairs that timed a window there
    longest: dict[str, float] = {}  # per workload: the longest witnessed request, gate to reply (seconds)
    verify = verify_plan(settings, [wl["uuid"] for _, wl in wls], rng)
    # An untrusted parent (a kernel process) is timed on the candidate's sets of the round before:
    # per workload, those sets, their warm-up set, the candidate's outputs on them, its sample and the
    # sample's reference outputs, until the parent's outputs on them are compared (cross_check).
    own_sets = base.dps  # a parent, not the reference (a parent in the judge's own process: tests and tools)
    pending: dict[str, dict] = {}
    means: list[float] = []  # each round's mean log ratio over its workloads
    # A daemon thread: stopped after the rounds (a judge that raises out of them ends soon after).
    watch = gpu_watch(device, base, cand)
    t_round = time.monotonic()
    for r in range(rounds):
        now = time.monotonic()
        last_s, t_round = now - t_round, now
        # Rounds past max_rounds (for the workloads still too wide to call) end well before the job's
        # limit: a keep blocked as inconclusive is a verdict, a candidate cut off by the limit is not.
        if seq is not None and seq.wide is not None and now + 3 * last_s + 5 > LIMITS["job_deadline"]:
            emit(event="round", message=f"round {r + 1}: the job's time limit is near; the workloads still "
                 "too wide to call stop here")
            break
        round_logs = []
        for i, wl in wls:
            u = wl["uuid"]
            if u in failures or (seq is not None and not seq.times(u)):
                continue
            seen_gpu = watched_failure(watch, base, cand)
            if seen_gpu is not None:
                failures[u] = seen_gpu
                continue
            n = fig[u]["calls"]
            base_seed = seed * 7919 + i * 104729 + r * 1_000_003
            prev = pending.get(u) if own_sets else None
            try:
                t_in = time.perf_counter()
                sets = [make_inputs(inputs, wl, base_seed + k, on_device=True) for k in range(n)]
                warm = make_inputs(inputs, wl, base_seed + n, on_device=True)
                if own_sets and prev is None:  # the parent's first sets: ones the candidate never gets
                    prev = {"sets": [make_inputs(inputs, wl, base_seed + n + 1 + k, on_device=True)
                                     for k in range(n)],
                            "warm": make_inputs(inputs, wl, base_seed + 2 * n + 1, on_device=True),
                            "seen": None, "checked": [], "ref": {}}  # (read by cross_check from round 2)
                evict(timers["main"])
                phase("inputs", t_in)
            except HarnessFailure as e:
                failures[u] = (cand.label, KernelFailure(Status.HARNESS_ERROR, str(e)))
                continue
            order = [base, cand]
            rng.shuffle(order)
            # Which sets' outputs are compared with the reference's, and in which rounds, is drawn at
            # random (verify_plan), each reference output made once: the parent's sample is the
            # candidate's of the round before, on the same sets (none on its first sets), so it costs
            # no reference call. Every timed call's outputs are checked for the poison.
            checked = rng.sample(range(n), min(verify[u].get(r, 1 if r >= verify["early"] else 0), n))
            ref_cache: dict = {}
            try:  # one call of the window on a stress set, always compared with the reference
                stressed = stress_a_timed_set(job, wl, sets, reference, device, rng, ref_cache)
            except HarnessFailure as e:
                failures[u] = (cand.label, KernelFailure(Status.HARNESS_ERROR, str(e)))
                continue
            if stressed is not None and stressed not in checked:
                checked.append(stressed)
            given = {cand.label: (sets, warm, checked, ref_cache), base.label: (sets, warm, checked, ref_cache)
                     if prev is None else (prev["sets"], prev["warm"], prev["checked"], prev["ref"])}
            early = 0
            early_by: dict[str, int] = {}
            while True:
                got, seen = {}, {}
                failed_by = None  # the label whose window the timer could not time
                try:
                    for tk in order:
                        emit(event="at", label=cand.label if tk.label == "reference" else tk.label, uuid=u)
                        arm(tk.fn)
                        try:
                            t_sets, t_warm, t_checked, t_ref = given[tk.label]
                            got[tk.label], seen[tk.label] = time_label(
                                tk, t_sets, t_warm, job, wl, reference, device, rng, timers[method[u]], t_checked,
                                t_ref, longest.get(u))
                            timed_by.setdefault(u, set()).add((tk.label, method[u]))
                            seen_s = (got[tk.label].get("witness") or {}).get("request_s")
                            if seen_s:
                                longest[u] = max(longest.get(u, 0.0), seen_s)
                        except Early:
                            early_by[tk.label] = early_by.get(tk.label, 0) + 1
                            raise
                        except capture_error:
                            failed_by = tk.label
                            raise
                        except Exception as e:  # noqa: BLE001 - the kernel raised while being timed
                            failures[u] = label_failure(tk, cand, e, device)
                            break
                except Early:
                    early += 1  # both labels again: their two windows must be alike to be compared
                    if early < EARLY_TRIES:
                        continue
                    failures[u] = (cand.label, early_failure(early_by, base.label, cand.label, early))
                except capture_error as e:
                    if failed_by == cand.label and method[u] == "cupti":
                        # CUPTI times the parent but not the candidate: the candidate's doing (a kernel of
                        # its own named like the flush, say), and the fallback's timer is weaker (work
                        # overlapped with the flushes, a graph's later replays): no switch on its account.
                        if (base.label, "cupti") in timed_by.get(u, ()):
                            failures[u] = (cand.label, KernelFailure(Status.RUNTIME_ERROR, cupti_refused(e)))
                            break
                        if order[0] is not base:  # the parent first: the candidate's doing or the machine's
                            order = [base, cand]
                            continue
                    # Both labels, from this round on, with the other timer: the method must be the same.
                    fig[u]["timer_error"] = f"{method[u]}: {e}"
                    if other_timer(u, method, tried, timers):
                        continue
                    failures[u] = (cand.label, KernelFailure(Status.RUNTIME_ERROR, f"could not be timed: {e}"))
                break
            if u in failures:
                continue
            if own_sets:  # the candidate's outputs of the round before, against the parent's on the same sets
                bad = cross_check_pending(job, wl, prev, seen.get(base.label), reference)
                pending[u] = {"sets": sets, "warm": warm, "seen": seen.get(cand.label), "checked": checked,
                              "ref": ref_cache}
                if bad is not None:
                    failures[u] = (cand.label, bad)
                    continue
            del seen, prev
            us = paired_figures(fig[u], got, base.label, cand.label, n)
            for label in (base.label, cand.label):
                fig[u][label].append(us[label])
                fig[u]["host_" + label].append(got[label]["host_us"])
            fig[u]["method"] = got[cand.label]["method"]
            if got[cand.label].get("l2_reset"):
                fig[u]["l2_reset"] = got[cand.label]["l2_reset"]
            lr = math.log(max(us[cand.label], 1e-9) / max(us[base.label], 1e-9))
            bad = interference_failure(fig[u], base.label, cand.label)
            if bad is not None:
                failures[u] = (cand.label, bad)
                clocked.add(u)
                continue
            fig[u]["log_ratio"].append(lr)
            round_logs.append(lr)
            del sets, warm, ref_cache
        extra = seq is not None and seq.wide is not None
        if round_logs and not extra:
            means.append(math.fsum(round_logs) / len(round_logs))
            emit(event="round", message=f"round {r + 1}: {len(round_logs)} workload(s) timed, geomean "
                 f"{cand.label}/{base.label} so far {math.exp(math.fsum(means) / len(means)):.4f}")
        elif round_logs:
            emit(event="round", message=f"round {r + 1}: {len(round_logs)} workload(s) still too wide to call "
                 "timed again (the geomean says keep)")
        if seq is not None:
            mean = means[-1] if round_logs and not extra else None
            if seq.after_round(mean, {u: f["log_ratio"] for u, f in fig.items() if u not in failures}):
                break
    if own_sets:
        settle_pending(job, base, cand, {wl["uuid"]: wl for _, wl in wls}, pending, failures, reference,
                       device, rng, timers, method, longest, emit, tried)
    if watch is not None:  # a look after the last window: no workload's figures stand
        watch.stop()
        seen_gpu = watched_failure(watch, base, cand)
        if seen_gpu is not None:
            for u in fig:
                failures.setdefault(u, seen_gpu)
    for u, f in fig.items():  # every timed workload's own figures, confirmed by the judge's clock
        bad = clock_failure(f, device) if u not in failures else None
        if bad is not None:
            failures[u] = (cand.label, bad)
            clocked.add(u)
    if device.startswith("cuda"):  # a shared GPU reads as the candidate's doing: name who else is there
        name_strangers(failures, clocked, [k.fn.proc.pid for k in (base, cand)
                                           if isinstance(k.fn, RemoteKernel) and k.fn.proc is not None])
    return fig, failures, timers["main"].bandwidth()
