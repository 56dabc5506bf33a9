"""Paired timing rounds: per round, every workload, both labels in random order, back to back, each label's
window and the check of what its timed calls wrote made in label_window.py.

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

from .calls import HostTimer, KernelFailure, device_timer
from .checks import stress_a_timed_set
from .clock import EARLY_TRIES, clock_failure, early_failure, interference_failure, paired_figures
from .inputs import HarnessFailure, Inputs, make_inputs, resolve_axes
from .kernels import LIMITS, RemoteKernel, arm, others_stopped
from .label_window import TimedKernel, label_failure, time_label
from .phases import phase
from .sampling import MEM_SHARE, calls_within, cross_check, round_bytes, verify_plan
from .status import Status
from .tenants import Watch, device_uuid, name_strangers
from .witness import Early


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


def free_device_bytes(device: str, before: dict | None = None) -> tuple[int | None, int | None]:
    """(the GPU's free memory in bytes for sampling.calls_within, as it is now); (None, None) off a GPU.

    The first is `before`'s reading for this GPU (tenants.free_memory, read before any kernel's process
    started) where it has one: read now, after the kernels' checks, a kernel that holds memory would cut
    every workload's calls a round to 2, the windows the judge's clock confirms least. Such a kernel now
    leaves the rounds short of memory instead (the judge says so before they start)."""
    if not device.startswith("cuda"):
        return None, None
    try:
        now = int(torch.cuda.mem_get_info(torch.device(device))[0])
    except (RuntimeError, AssertionError):
        return None, None
    gpu = device_uuid(device) if before else ""
    return (before[gpu] if gpu in (before or {}) else now), now


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
    quiet = getattr(timers["main"], "quiet_flush_us", None)
    if quiet is not None:
        # One flush's device time measured here, every kernel process stopped: each kernel process measured
        # its own beside the other label's start, which can make it slow enough that honest flushes look
        # shrunk (timer.DeviceTimer.floor_reference). Sent with every time request.
        with others_stopped():
            job = {**job, "settings": {**settings, "quiet_flush_us": round(quiet(), 3)}}
        settings = job["settings"]
    free, now = free_device_bytes(device, job.get("gpu_free_before"))
    calls = calls_within(job, [wl for _, wl in wls], free)
    fig = {wl["uuid"]: {base.label: [], cand.label: [], "host_" + base.label: [], "host_" + cand.label: [],
                        "log_ratio": [], "calls": calls[wl["uuid"]][0]} for _, wl in wls}
    capped = {u: c for u, c in calls.items() if c[0] < c[1]}
    for u, (n, asked) in capped.items():
        fig[u]["calls_asked"] = asked
    if capped:
        n, asked = min(capped.values())
        emit(event="round", message=f"timed calls a round cut to fit the GPU's free memory on {len(capped)} "
             f"workload(s) (to {n} where timing_mem_mb asks for {asked}): a round holds every workload's "
             "input sets until the next")
    need = round_bytes(job, [wl for _, wl in wls], {u: c[0] for u, c in calls.items()}) if free else 0
    if free and need > MEM_SHARE * free:
        emit(event="round", message=f"a round's input sets need ~{need / 2**30:.1f} GiB at 2 calls a workload, "
             f"over {MEM_SHARE:.0%} of the GPU's {free / 2**30:.1f} GiB free: workloads may fail with CUDA out of "
             "memory (fewer workloads a job, or a larger GPU)")
    elif free and now is not None and need > now:
        emit(event="round", message=f"the GPU's free memory fell from {free / 2**30:.1f} GiB as the judge started to "
             f"{now / 2**30:.1f} GiB (held by the kernels' processes or another process) and a round's input sets "
             f"need ~{need / 2**30:.1f} GiB: workloads may fail with CUDA out of memory")
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
