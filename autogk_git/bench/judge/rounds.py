"""Paired timing rounds: per round, every workload, both labels in random order on the same fresh
input sets; then the judge checks what the timed calls wrote."""
from __future__ import annotations

import math
import random
import statistics
import time

import torch

from . import stats
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
from .checks import alloc_outputs, bits, check_inputs, check_outputs, relabel
from .inputs import (
    HarnessFailure,
    Inputs,
    make_inputs,
    reference_outputs,
    resolve_axes,
    tensor_bytes,
)
from .kernels import LIMITS, RemoteKernel, arm
from .status import Status
from .witness import SLEEP_MAX_S, Early, blank_like

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
               ref_cache: dict | None = None, longest_s: float | None = None) -> dict:
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
    if not tk.dps:  # the reference, timed here: it is trusted code
        for _ in range(max(1, warmup)):
            tk.fn(*warm_set)
        sync(device)
        t = method_timer.time_calls([lambda a=a: tk.fn(*a) for a in sets])
        t["host_us"] = method_timer.sync_latency(lambda: tk.fn(*sets[0]), int(settings.get("host_calls", 10)))
        return t
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
    elif isinstance(tk.fn, RemoteKernel):
        t = tk.fn.time(sets, outs, snaps, warm_set, warm_outs, method_timer.method, settings)
    else:
        t = time_batch(tk.fn, sets, outs, warm_set, warm_outs, settings, method_timer, device, snaps)
    sync(device)
    t0 = phase("timed", t0)
    # What the timed calls wrote by the end of the window is what counts (the snapshots): a call that
    # skipped its work leaves poison behind, and work that landed later changed the outputs since.
    where = "in the timed calls"
    for k, (o, snap) in enumerate(zip(outs, seen)):
        for (name, spec), x, y in zip(definition["outputs"].items(), o, snap):
            if y.dtype.is_floating_point and torch.isnan(y).any():
                raise KernelFailure(Status.INCORRECT_NUMERICAL,
                                    f"{where}: output {name} of timed call {k} still held the poison when the "
                                    "timed window ended (the call skipped its work, or left it to land later)")
            if not torch.equal(bits(x), bits(y)):
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
    return t


CUDAGRAPH_PASSES = 3  # the cudagraph timer replays its graph of the calls this many times (timer.py)
EARLY_TRIES = 6
"""Tries of one round on one workload whose gate opened before a label's calls were queued (witness.Early),
each with a longer sleep, before the workload fails (early_failure)."""
INTERFERED_WINDOWS = 2
"""Windows of one label, on one workload, in which the judge saw another context use the GPU just
before the window opened, from which the other label is blamed (witness.py: interference)."""


CLOCK_SLACK = {"cuda": (0.10, 1.0), "cpu": (0.25, 1000.0)}
"""How much slower than it claims the judge's clock may see a candidate, per call: (share of the
parent's time, microseconds). On the H200 (benchmarks/results/witness_h200/, witness_diag.py) an
honest pair's per-round difference has a spread of 0.3-0.8 us a call at 20 calls a window (the
windows hold the flushes, ~1.4 ms, and each process's flush runs at its own pace), and a call of two
kernels leaves ~0.6 us of idle GPU between them that CUPTI does not count but the window does. On CPU
(tests only: the local backend never times there) the judge's host clock holds two pipe messages a
window, whose wake-ups take milliseconds on a loaded machine."""
CLOCK_WINDOW_US = {"cuda": 25.0, "cpu": 0.0}
"""What the judge's clock cannot resolve per window: two honest labels' windows differ by a fixed amount
per process, of either sign, that more rounds do not average out (on the H200, A/A torch pairs: 15.3 us
a window at 2M elements, 11.2 at 16M, -8.2 for a Triton pair; 2026-12-01 gpu_tests_4.log and
clock_h200/witness_diag.json); 25 us is the largest seen with a margin of 1.6x. Per call that is this
over the window's calls, and a gap below it is no evidence: the limit is at least CLOCK_WINDOW_US /
calls. With the loop's 30 calls a window that is under the 1.0 us of CLOCK_SLACK, so only windows of few
calls on small kernels (a test's 10 calls of 1.3 us: 2.5 us) get more room; the memory-capped windows
of large kernels (4 calls of 60 us: 6.25 against 7.0) are ruled by the 10 %."""
CLOCK_CONFIDENCE = 0.95
"""On a GPU a candidate is TAMPERED by the clock only with evidence: the median round's gap beyond the
slack, and one of three kinds of evidence that it is no accident of the windows' noise (clock_failure).
On CPU (tests only) the same, less the spread: there a window's noise is the host's scheduler (a process
put off for a time slice, milliseconds, in one round of a loaded machine), which no kernel's spread can be
told from. On a loaded 2-core machine the median round alone condemned an honest candidate (2.3 ms a
call more in the median of 2 rounds: tests/loop/test_verdict_guard.py, 2026-12-01 CI)."""
CLOCK_SPREAD_RATIO = 8.0
"""A candidate whose windows, net of its own timer's figure, vary from round to round more than this
many times as much as the parent's (per call; each label's `excess`) shows the judge's clock time its
own timer does not see, and noise of its own making is no excuse for the gap (clock_failure). Why 8:
an honest pair's per-round gap on the H200 has a spread of 0.3-0.8 us a call, so two honest labels'
spreads differ by under 3x; from 5 rounds the ratio of two sample spreads, squared, follows F(4, 4)
and passes (8 / 2.7)^2 ~ 9 about 3 % of the time, and the median gap must be beyond the slack too
(tests/bench/judge/test_clock_rule.py simulates both). guard.py's SPREAD_RATIO is 8 for the same
reason."""
CLOCK_SPREAD_FLOOR = {"cuda": 0.25, "cpu": 250.0}
"""The smallest per-call spread (us) a label's windows are taken to have: a parent that happened to be
very steady in a few rounds does not make an ordinary candidate's spread look many times larger."""


def paired_figures(f: dict, got: dict, base: str, cand: str, n: int) -> dict:
    """One round's figure per label, in microseconds per call: each label's own timer's (CUPTI on a GPU:
    the least noisy, so the rounds stop soon). With the judge's clock on both labels, the candidate's
    figure as the judge saw it is kept beside it: the parent's time plus the difference of the two
    windows, per call (`witnessed`); `clock_failure` compares the two."""
    wb, wc = got[base].get("witness"), got[cand].get("witness")
    own = {base: got[base]["us"], cand: got[cand]["us"]}
    if not (wb and wc):
        return own
    parent = math.fsum(got[base]["samples"]) / len(got[base]["samples"])
    claimed = math.fsum(got[cand]["samples"]) / len(got[cand]["samples"])
    passes = CUDAGRAPH_PASSES if got[cand].get("method") == "cudagraph" else 1  # replays in one window
    seen = parent + (wc["window_us"] - wb["window_us"]) / (n * passes)
    f.setdefault("witness", {"parent": [], "claimed": [], "seen": [], "window_us": {base: [], cand: []},
                             "excess": {"base": [], "cand": []}})
    w = f["witness"]
    w["parent"].append(parent)
    w["claimed"].append(claimed)
    w["seen"].append(seen)
    # Each label's window per call beyond its own timer's figure (the flushes, the bracket, idle GPU):
    # what its windows vary by that its timer does not see (clock_failure compares the two spreads).
    w["excess"]["base"].append(wb["window_us"] / (n * passes) - parent)
    w["excess"]["cand"].append(wc["window_us"] / (n * passes) - claimed)
    # Net of each label's flushes (CUPTI, cupti timer only): each process flushes its own buffer at its
    # own pace, and the windows hold n + 1 flushes, so a per-process difference of 1 % of a flush is
    # ~0.3 us a call. Reported beside the raw figure (`net`); never used for a verdict: the flush times
    # come from the candidate's own process, which could report them longer to look faster.
    fb, fc = got[base].get("flush_us"), got[cand].get("flush_us")
    if isinstance(fb, (int, float)) and isinstance(fc, (int, float)) and passes == 1:
        w.setdefault("net", []).append(parent + ((wc["window_us"] - fc) - (wb["window_us"] - fb)) / n)
        w.setdefault("flush_us", {base: [], cand: []})
        w["flush_us"][base].append(round(fb, 3))
        w["flush_us"][cand].append(round(fc, 3))
    w["window_us"][base].append(wb["window_us"])
    w["window_us"][cand].append(wc["window_us"])
    for label, x in ((base, wb), (cand, wc)):
        if x.get("interference"):
            f["interfered_" + label] = f.get("interfered_" + label, 0) + 1
    return own


def clock_failure(f: dict, device: str) -> KernelFailure | None:
    """The candidate's own figures against the judge's clock: a candidate the judge saw slower than it
    claimed, per call, by more than CLOCK_SLACK, made its figures where it runs (a patched timer,
    figures rewritten on their way out, time its timer does not see).

    TAMPERED needs the median round's gap beyond the slack, and one of:
    - the one-sided lower bound (CLOCK_CONFIDENCE) of the mean gap beyond it (Student t);
    - the sign test's lower bound of the median gap beyond it (stats.median_lower_bound: from 5 rounds,
      every round's gap beyond it). Time a kernel adds to some of its windows (idle GPU between its
      kernels, in a few rounds) widens the t bound until it says nothing, while its claim stays steady;
      it cannot pull the order statistics down;
    - its windows, net of its claim, CLOCK_SPREAD_RATIO times as noisy as the parent's: the same noise
      seen from fewer rounds than the sign test needs (on a GPU only: CLOCK_CONFIDENCE)."""
    w = f.get("witness")
    if not w or len(w["seen"]) < 2:
        return None
    kind = "cuda" if device.startswith("cuda") else "cpu"
    share, slack_us = CLOCK_SLACK[kind]
    gaps = [s - c for s, c in zip(w["seen"], w["claimed"])]
    gap = stats.median(gaps)
    calls = int(f.get("calls") or 0) * (CUDAGRAPH_PASSES if f.get("method") == "cudagraph" else 1)
    limit = max(share * stats.median(w["parent"]) + slack_us, CLOCK_WINDOW_US[kind] / calls if calls else 0.0)
    if not gap > limit:
        return None
    _, low, _ = stats.mean_interval(gaps, 2.0 * CLOCK_CONFIDENCE - 1.0)
    sign_low = stats.median_lower_bound(gaps, CLOCK_CONFIDENCE)
    ex = w.get("excess") or {}
    spread_c = spread_b = None
    if len(ex.get("cand", ())) >= 2 and len(ex.get("base", ())) >= 2:
        spread_c = statistics.stdev(ex["cand"])
        spread_b = max(statistics.stdev(ex["base"]), CLOCK_SPREAD_FLOOR[kind])
    if low > limit:
        why = f"{gap:.3f} us more in the median round, at least {low:.3f} us more at {CLOCK_CONFIDENCE:.0%} confidence"
    elif sign_low is not None and sign_low > limit:
        why = (f"{gap:.3f} us more in the median round and at least {sign_low:.3f} us more in every round "
               f"but the sign test's allowance ({CLOCK_CONFIDENCE:.0%} confidence on the median), though its "
               "windows' noise hides the mean")
    elif kind == "cuda" and spread_c is not None and spread_c > CLOCK_SPREAD_RATIO * spread_b:
        why = (f"{gap:.3f} us more in the median round, and its windows, net of its own figure, varied "
               f"{spread_c:.3f} us a call from round to round against the parent's {spread_b:.3f} "
               f"(over {CLOCK_SPREAD_RATIO:g}x): time its own timer does not see, which noise of its own "
               "making does not excuse")
    else:
        return None
    return KernelFailure(Status.TAMPERED, f"the judge's own clock saw the candidate take "
                         f"{stats.median(w['seen']):.3f} us a call; its process reported "
                         f"{stats.median(w['claimed']):.3f} us ({why}; limit {limit:.3f}): "
                         "figures made where the kernel runs do not count when the judge's clock disagrees "
                         "(an honest kernel meets this only when its calls leave the GPU idle between many "
                         "kernels, which CUPTI does not count: fuse them)")


def early_failure(early_by: dict[str, int], base: str, cand: str, tries: int) -> KernelFailure:
    """The judge's gate opened before a label's calls were all queued, in every try (witness.Early). The
    candidate's own windows in most tries: its calls wait on the GPU while being queued, which the judge's
    clock cannot time (and which GPU work it left running would cause). Otherwise the pair cannot be judged."""
    mine = early_by.get(cand, 0)
    if mine * 2 > tries:
        return KernelFailure(Status.TIMEOUT, f"the candidate's calls were not all queued before the judge's gate "
                             f"opened, in {mine} of {tries} tries (the judge waits up to "
                             f"{SLEEP_MAX_S * 1000:.0f} ms): the judge's clock times only calls that queue without "
                             "waiting on the GPU (no synchronize, .item() or host copy inside run(), no GPU work "
                             "left running from earlier calls)")
    return KernelFailure(Status.HARNESS_ERROR, f"the judge's clock could not hold the gate until the calls were "
                         f"queued ({tries} tries; early windows: {early_by.get(base, 0)} of the parent, {mine} of "
                         "the candidate)")


def interference_failure(f: dict, base: str, cand: str) -> KernelFailure | None:
    """Another context on the GPU right before a label's windows, in INTERFERED_WINDOWS of them: the
    candidate's process while the parent was timed (its fault), or the parent's while the candidate was
    (the experiment cannot be judged)."""
    if f.get("interfered_" + base, 0) >= INTERFERED_WINDOWS:
        return KernelFailure(Status.TAMPERED, f"the GPU was busy with another process right before the parent's "
                             f"timed window in {f['interfered_' + base]} rounds: work the candidate's process "
                             "left running slows the kernel it is compared with")
    if f.get("interfered_" + cand, 0) >= INTERFERED_WINDOWS:
        return KernelFailure(Status.HARNESS_ERROR, f"the GPU was busy with another process right before the "
                             f"candidate's timed window in {f['interfered_' + cand]} rounds: the pair cannot be "
                             "compared")
    return None


def calls_per_round(job: dict, wl: dict) -> int:
    """Timed calls per round, each on its own input set, within a memory budget."""
    settings = job.get("settings", {})
    axes = resolve_axes(job["definition"], wl)
    nbytes = sum(tensor_bytes(job["definition"], axes, "inputs").values()) + \
        sum(tensor_bytes(job["definition"], axes, "outputs").values())
    budget = int(settings.get("timing_mem_bytes", 1 << 30))
    return max(2, min(int(settings.get("reps", 30)), budget // max(1, nbytes)))


def verify_plan(settings: dict, uuids: list[str], rng: random.Random) -> dict:
    """How many of each round's timed calls have their outputs compared with the reference's, per
    workload: `verify_sets` in all over the first `min_rounds` rounds (rounds and calls drawn at
    random, so a kernel cannot know which of its timed calls are read), then one in every later round
    (a kernel that goes wrong after some number of calls is still read after it). Each verified call
    costs a reference call, which for a reference that loops in Python (the DSA definitions) cost
    more than the timing itself when every round verified two (H200, 2026-11-30)."""
    early = max(1, int(settings.get("min_rounds", 5)))
    plan: dict = {"early": early}
    for u in uuids:
        per_round: dict[int, int] = {}
        for _ in range(max(1, int(settings.get("verify_sets", 2)))):
            r = rng.randrange(early)
            per_round[r] = per_round.get(r, 0) + 1
        plan[u] = per_round
    return plan


def timed_rounds(job: dict, base: TimedKernel, cand: TimedKernel, wls: list[tuple[int, dict]], inputs: Inputs,
                 reference, device: str, emit, seq, rounds: int) -> tuple[dict, dict, float | None]:
    """Paired rounds: per round, every workload, both labels in random order on the same fresh values.

    Returns (per-workload figures, failures {uuid: (label, KernelFailure)}, memory bandwidth B/s)."""
    settings = job.get("settings", {})
    seed = int(job.get("seed", 0))
    # Which calls are verified, in which rounds, and each round's order of labels: drawn from the
    # system's randomness, which nothing in a kernel's process can replay (the job's seed could be).
    rng = random.SystemRandom()
    if device.startswith("cuda"):
        from . import timer as timing
        timers = {"main": device_timer(settings.get("timer", "cupti"))}
        capture_error = timing.TimerError
    else:
        timers = {"main": HostTimer()}
        capture_error = ()
    method = {wl["uuid"]: timers["main"].method for _, wl in wls}
    timers[timers["main"].method] = timers["main"]
    fig = {wl["uuid"]: {base.label: [], cand.label: [], "host_" + base.label: [], "host_" + cand.label: [],
                        "log_ratio": [], "calls": calls_per_round(job, wl)} for _, wl in wls}
    failures: dict[str, tuple[str, KernelFailure]] = {}
    tried: dict[str, set] = {}
    longest: dict[str, float] = {}  # per workload: the longest witnessed request, gate to reply (seconds)
    verify = verify_plan(settings, [wl["uuid"] for _, wl in wls], rng)
    means: list[float] = []  # each round's mean log ratio over its workloads
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
            n = fig[u]["calls"]
            base_seed = seed * 7919 + i * 104729 + r * 1_000_003
            try:
                t_in = time.perf_counter()
                sets = [make_inputs(inputs, wl, base_seed + k, on_device=True) for k in range(n)]
                warm = make_inputs(inputs, wl, base_seed + n, on_device=True)
                phase("inputs", t_in)
            except HarnessFailure as e:
                failures[u] = (cand.label, KernelFailure(Status.HARNESS_ERROR, str(e)))
                continue
            order = [base, cand]
            rng.shuffle(order)
            # The same sets' outputs are compared for both labels, each reference output made once;
            # which sets, and in which rounds, is drawn at random (verify_plan). Every timed call's
            # outputs are checked for the poison.
            checked = rng.sample(range(n), min(verify[u].get(r, 1 if r >= verify["early"] else 0), n))
            ref_cache: dict = {}
            early = 0
            early_by: dict[str, int] = {}
            while True:
                if method[u] not in timers:
                    timers[method[u]] = device_timer(method[u])
                got = {}
                try:
                    for tk in order:
                        emit(event="at", label=cand.label if tk.label == "reference" else tk.label, uuid=u)
                        arm(tk.fn)
                        try:
                            got[tk.label] = time_label(tk, sets, warm, job, wl, reference, device, rng,
                                                       timers[method[u]], checked, ref_cache, longest.get(u))
                            seen_s = (got[tk.label].get("witness") or {}).get("request_s")
                            if seen_s:
                                longest[u] = max(longest.get(u, 0.0), seen_s)
                        except Early:
                            early_by[tk.label] = early_by.get(tk.label, 0) + 1
                            raise
                        except capture_error:
                            raise
                        except KernelFailure as e:
                            failures[u] = (tk.label, e)
                            break
                        except HarnessFailure as e:
                            failures[u] = (cand.label, KernelFailure(Status.HARNESS_ERROR, str(e)))
                            break
                        except Exception as e:  # noqa: BLE001 - the kernel raised while being timed
                            die_if_context_lost(e, device)
                            failures[u] = (tk.label, KernelFailure(classify(e), f"while timed: {short_tb(e)}"))
                            break
                except Early:
                    early += 1  # both labels again: their two windows must be alike to be compared
                    if early < EARLY_TRIES:
                        continue
                    failures[u] = (cand.label, early_failure(early_by, base.label, cand.label, early))
                except capture_error as e:
                    # Both labels, from this round on, with the other timer: the method must be the same.
                    fig[u]["timer_error"] = f"{method[u]}: {e}"
                    tried.setdefault(u, set()).add(method[u])
                    other = [m for m in ("cupti", "cudagraph") if m not in tried[u]]
                    if other:
                        method[u] = other[0]
                        continue
                    failures[u] = (cand.label, KernelFailure(Status.RUNTIME_ERROR, f"could not be timed: {e}"))
                break
            if u in failures:
                continue
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
    for u, f in fig.items():  # every timed workload's own figures, confirmed by the judge's clock
        bad = clock_failure(f, device) if u not in failures else None
        if bad is not None:
            failures[u] = (cand.label, bad)
    return fig, failures, timers["main"].bandwidth()
