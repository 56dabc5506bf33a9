"""Per-workload evidence a keep needs: every workload shown to be no slower than its parent, and every
workload's parent run passed.

Absence of evidence is not evidence. The guard in verdict.py reverts when it is *confident* a workload
is slower; a noisy workload (a kernel 3x slower on a random half of its calls) widens its own interval
until the guard cannot be confident of anything, while the other workloads carry the geomean. So a
keep also needs, on every workload, the upper bound of the interval on t_candidate / t_parent within
1 + guard. That is an intersection-union test: a keep needs every workload's own test to pass, so a
single bad workload is kept with chance at most one test's error, whatever the number of workloads,
and no correction over workloads is needed (one over the looks is: see `bound_level`).

Unstable: a candidate whose per-round time on a workload varies SPREAD_RATIO times as much as the
parent's (the parent, timed in the same rounds, shows what the machine's own noise is) is not a kernel
with a speed, and its interval says little. The parent's spread is taken as the larger of its spread on
that workload and its median spread over all workloads: one workload's spread from 5 rounds has only 4
degrees of freedom (the ratio of two such spreads, squared, follows F(4, 4), over 8x squared 0.07 % of
the time, and in a simulation a lucky-steady parent made an honest candidate "unstable"), the median
over the workloads does not swing so. Why 8x: the H200's round-to-round spread differs between
workloads by up to about 3x (cupti CVs 0.36-2.4 %, benchmarks/results/gpu.md), so 8x leaves a margin of
more than 2x above what honest kernels show, while a kernel 3x slower on a random half of its calls
shows 30-100x. The floor (the candidate's own spread must exceed log(1 + guard)) keeps a very steady
machine from making an ordinary candidate "unstable": a spread under the guard itself cannot hide a
slowdown past it. Nor can noise hide one where the upper bound lies more than SPREAD_RATIO of the
candidate's own spreads below 1 + guard: a kernel many times faster (on the H200, a top-k indexer from
~40 us to ~2 us) has the relative spread of a 2 us kernel, 3.8 % against its parent's 0.2 %, and a
bound of 0.06x, which no noise of that size carries past the guard; the old rule called it unstable.
Nor where the candidate was faster than its parent in every one of at least SIGN_ROUNDS paired rounds
(fresh inputs each round): if its typical round were not faster, that would happen with chance at most
1/32; noise made to hide a slowdown must put some rounds above the parent, and those keep it unstable.
On the H200 an honest top-k with a radix select whose time depends on its data (spread 9 % against its
parent's 1 %, every bound at or below 0.81x) was reverted as unstable by the spread rule alone.
"""
from __future__ import annotations

import math
from typing import Any

from autogk_git.bench.judge import stats

SPREAD_RATIO = 8.0
SIGN_ROUNDS = 5  # every one of at least this many paired rounds faster: a sign test at 1/32
UNBOUNDED = 1e9  # an upper bound no data limits (one round)


def bound_level(confidence: float, looks: int) -> float:
    """Two-sided level of the interval whose upper bound a workload must keep within 1 + guard.

    The claim is one-sided ("not slower than 1 + guard"), made at `confidence` over the whole run:
    Bonferroni over the looks (the judge chose when to stop by looking), so each look's upper bound is
    one-sided at 1 - (1 - confidence) / looks, the upper end of a two-sided interval at twice that error."""
    return max(0.0, 1.0 - 2.0 * (1.0 - confidence) / max(1, looks))


def upper_bounds(series: dict[str, list[float]], level: float) -> dict[str, float]:
    """{workload: upper bound on t_candidate / t_parent}; UNBOUNDED where fewer than two rounds."""
    out = {}
    for u, lrs in series.items():
        _, _, hi = stats.mean_interval(lrs, level)
        out[u] = min(math.exp(min(hi, 700.0)), UNBOUNDED)  # finite: the bound is written to the JSON note
    return out


def log_spread(samples: list[float]) -> float | None:
    """Sample standard deviation of log(time) over rounds (None: fewer than two positive rounds)."""
    logs = [math.log(x) for x in samples if isinstance(x, (int, float)) and x > 0]
    if len(logs) < 2:
        return None
    m = math.fsum(logs) / len(logs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in logs) / (len(logs) - 1))


def spreads(ab_stage: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """{workload: (candidate's, parent's) per-round log-time spread}, from each label's `samples_us`."""
    labels = ab_stage.get("workloads") or {}
    out = {}
    for u, c in (labels.get("candidate") or {}).items():
        p = (labels.get("parent") or {}).get(u) or {}
        sc, sp = log_spread(c.get("samples_us") or []), log_spread(p.get("samples_us") or [])
        if sc is not None and sp is not None:
            out[u] = (sc, sp)
    return out


def blockers(series: dict[str, list[float]], spread: dict[str, tuple[float, float]], level: float,
             margin: float) -> list[dict[str, Any]]:
    """Workloads that block a keep, worst first: {uuid, kind: slower|unstable|wide, upper, rounds[, spread, lower]}.

    slower:   the whole interval lies above 1 + margin (the lower bound past it, at the bounds' level: the
              reading on which the judge stops its rounds for the guard, stats.workload_states), so more
              rounds would not turn it into a keep;
    unstable: the candidate's spread is over SPREAD_RATIO x the parent's (on this workload, or its median
              over the workloads if larger) and over log(1 + margin), and its upper bound is not clear of
              1 + margin by more than SPREAD_RATIO of its spreads (in log);
    wide:     the upper bound on t_candidate / t_parent is above 1 + margin."""
    ups = upper_bounds(series, level)
    floor = math.log1p(margin)
    machine = stats.median([sp for _, sp in spread.values()]) if spread else 0.0
    out = []
    for u, lrs in series.items():
        row: dict[str, Any] = {"uuid": u, "upper": ups[u], "rounds": len(lrs)}
        sc, sp = spread.get(u, (0.0, 0.0))
        sp = max(sp, machine)
        clear = ups[u] < UNBOUNDED and math.log1p(margin) - math.log(max(ups[u], 1e-12)) > SPREAD_RATIO * sc
        clear = clear or (len(lrs) >= SIGN_ROUNDS and max(lrs) < 0.0)
        mean, lo, _ = stats.mean_interval(lrs, level)
        if len(lrs) >= 2 and lo > floor:
            out.append({**row, "kind": "slower", "lower": math.exp(lo), "ratio": math.exp(mean)})
        elif sc > floor and sc > SPREAD_RATIO * sp and not clear:
            out.append({**row, "kind": "unstable", "spread": sc, "parent_spread": sp})
        elif not ups[u] <= 1.0 + margin:
            out.append({**row, "kind": "wide"})
    out.sort(key=lambda r: (("slower", "unstable", "wide").index(r["kind"]), -r["upper"]))
    return out


def parent_failures(bench: dict[str, Any]) -> list[dict[str, Any]]:
    """Workloads where the parent did not pass and the candidate did: [{uuid, stage, status, message}].

    The parent is the trunk's tip, judged in full when it was kept: its failure in this experiment is
    the harness's (or the candidate's doing: a kernel that kills its sibling's process), never a
    reason to leave the workload out."""
    out, seen = [], set()
    for stage, res in (bench.get("stages") or {}).items():
        labels = res.get("workloads") or {}
        cand = labels.get("candidate") or {}
        for u, p in (labels.get("parent") or {}).items():
            if p.get("status", "PASSED") != "PASSED" and (cand.get(u) or {}).get("status") == "PASSED" \
                    and u not in seen:
                seen.add(u)
                out.append({"uuid": u, "stage": stage, "status": p.get("status"), "message": p.get("message", "")})
    for u in (bench.get("coverage") or {}).get("untimed", []):
        if u.get("parent_failed") and u["uuid"] not in seen:
            seen.add(u["uuid"])
            out.append({"uuid": u["uuid"], "stage": "ab", "status": "failed", "message": u.get("reason", "")})
    return out
