"""The judge's own clock, read: how a pair's witnessed windows become per-call figures (paired_figures),
and when they condemn a label (clock_failure: the candidate slower than its own timer claims;
early_failure: its calls not queued before the gate; interference_failure: another context busy on the
GPU before a label's windows). The windows themselves are made in witness.py; rounds.py runs them."""
from __future__ import annotations

import math
import statistics

from . import stats
from .calls import KernelFailure
from .status import Status
from .witness import SLEEP_MAX_S

EARLY_TRIES = 6
"""Tries of one round on one workload whose gate opened before a label's calls were queued (witness.Early),
each with a longer sleep, before the workload fails (early_failure)."""
INTERFERED_WINDOWS = 2
"""Windows of one label, on one workload, in which the judge saw another context use the GPU just
before the window opened, from which the other label is blamed (witness.py: interference)."""


CUDAGRAPH_PASSES = 1
"""The cudagraph timer replays its graph of a window's calls this many times (timer.py: time_calls): once,
since a second replay of the same inputs into the same outputs can skip work and leave the first one's."""


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
    # With null windows (label_window.null_window: the same window in the same process, no call in it), each
    # label's fixed cost per window taken out of the difference: a measurement beside the raw figure,
    # never a verdict's figure until the GPU's figures give it a limit of its own.
    nb, nc = wb.get("null_us"), wc.get("null_us")
    if isinstance(nb, (int, float)) and isinstance(nc, (int, float)):
        w.setdefault("seen_null", []).append(
            parent + ((wc["window_us"] - nc) - (wb["window_us"] - nb)) / (n * passes))
        w.setdefault("null_us", {base: [], cand: []})
        w["null_us"][base].append(round(nb, 3))
        w["null_us"][cand].append(round(nc, 3))
    for label, x in ((base, wb), (cand, wc)):
        if x.get("interference"):
            f["interfered_" + label] = f.get("interfered_" + label, 0) + 1
    return own


def clock_limit_us(f: dict, device: str) -> float | None:
    """The gap (seen - claimed, us a call) beyond which clock_failure condemns this workload's candidate:
    CLOCK_SLACK of the parent's time, and never less than CLOCK_WINDOW_US over a window's calls. It is the
    smallest under-report of its own time a candidate can be caught at; None without the clock's figures."""
    w = f.get("witness")
    if not w or not w.get("parent"):
        return None
    kind = "cuda" if device.startswith("cuda") else "cpu"
    share, slack_us = CLOCK_SLACK[kind]
    calls = int(f.get("calls") or 0) * (CUDAGRAPH_PASSES if f.get("method") == "cudagraph" else 1)
    return max(share * stats.median(w["parent"]) + slack_us, CLOCK_WINDOW_US[kind] / calls if calls else 0.0)


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
    gaps = [s - c for s, c in zip(w["seen"], w["claimed"])]
    gap = stats.median(gaps)
    limit = clock_limit_us(f, device)
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


