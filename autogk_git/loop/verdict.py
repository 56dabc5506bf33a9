"""Verdict rules, chosen by what the backend measured. A rule reads the bench result, returns a decision.

Decisions:
  keep     merge into the trunk: correct on every runnable workload and, where timed, faster by the
           declared objective (`[bench] objective`) over all of them, with every workload shown to be no
           slower than its parent beyond the guard (`[bench] guard`; see loop/guard.py) and the parent
           passing on every one;
  revert   archive: incorrect anywhere, a harness error, slower, inconclusive, or not judged on all;
  untimed  correct, but the backend measures no time (the CPU interpreter): a correct candidate is not a
           faster one, so it is held under refs/autogk/untimed/ instead of drifting the trunk;
           `[bench] untimed = "merge"` (or `autogk iterate --merge-untimed`) merges it on correctness.
"""
from __future__ import annotations

import math
from typing import Any, Protocol

from autogk_git.bench.judge import stats
from autogk_git.bench.judge.status import Status
from autogk_git.bench.job import EXTRA_KEY, workload_label
from autogk_git.bench.stages import is_harness
from autogk_git.loop import guard

KEEP, REVERT, UNTIMED = "keep", "revert", "untimed"

OBJECTIVES = {
    "geomean": "geometric mean of the candidate/parent ratios",
    "total": "summed latency, candidate over parent",
    "contest": "FlashInfer-Bench score (mean speedup over the reference), parent's over candidate's",
}


class VerdictRule(Protocol):
    name: str

    def decide(self, bench: dict[str, Any], config) -> dict[str, Any]:
        """{decision: keep|revert|untimed, reason, rule, figures, coverage, ...}"""


def first_failure(bench: dict[str, Any]) -> tuple[str, str, str] | None:
    """(stage, workload uuid, why) of the first workload the candidate did not pass, if any.

    Anything but PASSED fails: a harness status (the reference or the inputs could not be made) is
    not the kernel's fault, but a kernel nobody could check is not a correct one. Its `why` starts
    with "harness error: "."""
    not_run = None
    for stage, res in bench.get("stages", {}).items():
        for uuid, w in (res.get("workloads", {}).get("candidate") or {}).items():
            status = w.get("status", "")
            if status == Status.NOT_RUN.value:  # stopped by a failure found elsewhere: that one is the reason
                not_run = not_run or (stage, uuid, f"{status}: {w.get('message', '')}")
            elif status != Status.PASSED.value:
                why = f"{status}: {w.get('message', '')}"
                return stage, uuid, (f"harness error: {why}" if is_harness(status) else why)
    return not_run  # never run and nothing else failed: still not a correct kernel


def _failure_verdict(fail: tuple[str, str, str], axes: dict[str, dict] | None) -> tuple[str, str]:
    """(outcome, reason) of a failed check."""
    stage, uuid, why = fail
    name = workload_name(uuid, axes)
    if why.startswith("harness error: "):
        return "harness_error", f"{why[:300]} (in {stage} on workload {name}): nothing checked it, so not kept"
    return "incorrect", f"incorrect in {stage} on workload {name}: {why[:300]}"


# ------------------------------------------------------------------------------------------------
# Coverage: which workloads the verdict rests on
# ------------------------------------------------------------------------------------------------

def short_reason(reason: str) -> str:
    """A skip reason as one group: every workload over the CPU limit reads the same."""
    if "cpu_max_numel" in reason:
        return "over [bench] cpu_max_numel"
    return reason


def coverage(bench: dict[str, Any], correct: bool) -> dict[str, Any]:
    """The bench result's coverage, with `complete`: judged (checked, and timed where timed) on every workload."""
    cov = dict(bench.get("coverage") or {})
    if not cov:  # a result from before coverage was recorded: rebuild what it can say
        checked = len(bench.get("checked_workloads", []))
        skipped = list(bench.get("skipped", []))
        cov = {"total": checked + len(skipped), "runnable": checked, "checked": checked, "unchecked": skipped}
        if bench.get("timing"):
            ab = ((bench.get("stages") or {}).get("ab") or {}).get("ab") or {}
            cov.update(timed=len(ab.get("workloads", [])), untimed=[], legacy=True)
    # A workload the parent failed on is not excused: the verdict reports it as a harness error.
    untimed = list(cov.get("untimed", []))
    timed_ok = not bench.get("timing") or (not untimed and not cov.get("legacy")
                                           and cov.get("timed", 0) + len(cov.get("untimed", [])) >= cov["total"])
    cov["complete"] = bool(correct and cov["checked"] >= cov["total"] and not cov["unchecked"] and timed_ok)
    weak = clock_weak(bench)
    if weak:
        cov["clock_weak"] = weak
    return cov


CLOCK_WEAK_SHARE = 0.5
"""A timed workload whose judge's-clock limit (bench/judge/clock.py: clock_limit_us, the smallest
under-report of its own time a candidate can be caught at) is this share of the parent's time or more: the
clock could not have caught a figure halved there, and the seal alone stands between a patched timer and
it. Said in the verdict's line, never a verdict by itself (benchmarks/clock_resolution.py: on the
contest-shaped sparse attention, 2 calls a window, the limit is 12.5 us a call against 9-14 us kernels)."""


def clock_weak(bench: dict[str, Any]) -> list[str]:
    """The timed workloads (uuids) of the ab stage where the judge's clock could not have caught the
    candidate's figure under-reported by half (CLOCK_WEAK_SHARE)."""
    recs = ((((bench.get("stages") or {}).get("ab") or {}).get("workloads") or {}).get("candidate") or {})
    out = []
    for uuid, rec in recs.items():
        limit, parent = rec.get("clock_limit_us"), (rec.get("clock") or {}).get("parent")
        if isinstance(limit, (int, float)) and parent and limit >= CLOCK_WEAK_SHARE * stats.median(parent):
            out.append(uuid)
    return out


def coverage_line(cov: dict[str, Any], axes: dict[str, dict] | None = None) -> str:
    """`6 of 11 workloads checked; not checked: 5 over [bench] cpu_max_numel (ab12cd34, ...)`."""
    line = f"{cov['checked']} of {cov['total']} workloads checked"
    if cov.get("light"):
        line += f" ({len(cov['light'])} on one input set only, over {EXTRA_KEY})"
    if "timed" in cov:
        line += f", {cov['timed']} of {cov['total']} timed against the parent"
    if cov.get("clock_weak"):
        line += (f"; on {len(cov['clock_weak'])} the judge's own clock could not have caught a figure under-reported "
                 "by half (windows of few calls: only the seal checks those figures)")
    groups: dict[str, list[str]] = {}
    for u in cov.get("unchecked", []):
        groups.setdefault(short_reason(u["reason"]), []).append(u["uuid"])
    for u in cov.get("untimed", []):
        if not any(x["uuid"] == u["uuid"] for x in cov.get("unchecked", [])):
            groups.setdefault("not timed: " + u["reason"], []).append(u["uuid"])
    if groups:
        parts = []
        for why, ids in groups.items():
            names = ", ".join(workload_name(i, axes) for i in ids[:4]) + (", ..." if len(ids) > 4 else "")
            parts.append(f"{len(ids)} {why} ({names})")
        line += "; not judged: " + "; ".join(parts)
    return line


def workload_name(uuid: str, axes: dict[str, dict] | None = None) -> str:
    """`batch_size=8192`: the workload's axes when known (bench/job.py's one naming), else the uuid's head."""
    return workload_label(uuid, axes)


class CorrectnessOnly:
    """No timing on this backend: revert an incorrect candidate; hold (or, if asked, merge) a correct one."""

    name = "correctness-only"

    def decide(self, bench: dict[str, Any], config) -> dict[str, Any]:
        fail = first_failure(bench)
        cov = coverage(bench, correct=not fail and not bench.get("error") and bool(bench.get("correct", True)))
        line = coverage_line(cov, bench.get("workload_axes"))
        base = {"rule": self.name, "coverage": cov, "checked": cov["checked"], "workloads": cov["total"]}
        if bench.get("error"):
            return {**base, "decision": REVERT, "outcome": "error", "reason": bench["error"], "figures": line}
        if fail:
            outcome, reason = _failure_verdict(fail, bench.get("workload_axes"))
            return {**base, "decision": REVERT, "outcome": outcome, "reason": reason, "figures": line}
        n, backend = cov["checked"], bench.get("backend", "?")
        figures = f"correct {n}/{n} ({n} of {cov['total']} workloads checked), untimed"
        if getattr(config.bench, "untimed", "hold") == "merge":
            return {**base, "decision": KEEP, "outcome": "untimed",
                    "reason": f"correct; {line}; no timing on the {backend} backend, merged on correctness alone "
                              "because [bench] untimed = merge", "figures": figures}
        return {**base, "decision": UNTIMED, "outcome": "untimed",
                "reason": f"correct; {line}; no timing on the {backend} backend, and a correct candidate is not a "
                          "faster one: held (not merged) until a timed backend judges it "
                          "(or merge such candidates with `autogk iterate --merge-untimed`)",
                "figures": figures}


# ------------------------------------------------------------------------------------------------
# The paired rule
# ------------------------------------------------------------------------------------------------

def paired_series(ab_stage: dict[str, Any]) -> dict[str, list[float]]:
    """{workload uuid: per-round log(t_candidate / t_parent)} from the ab stage.

    Read from the worker's ab summary (`workloads[i].log_ratios`); where a worker did not report it,
    from the per-round samples of both labels (`samples_us`, one per round, paired by index)."""
    out: dict[str, list[float]] = {}
    for w in (ab_stage.get("ab") or {}).get("workloads", []) or []:
        lrs = w.get("log_ratios")
        if lrs:
            out[w["uuid"]] = [float(x) for x in lrs]
    if out:
        return out
    labels = ab_stage.get("workloads") or {}
    for u, c in (labels.get("candidate") or {}).items():
        p = (labels.get("parent") or {}).get(u) or {}
        cs, ps = c.get("samples_us") or [], p.get("samples_us") or []
        if c.get("status") == Status.PASSED.value and cs and len(cs) == len(ps):
            out[u] = [math.log(max(x, 1e-9) / max(y, 1e-9)) for x, y in zip(cs, ps)]
    return out


def parent_latencies(ab_stage: dict[str, Any]) -> dict[str, float]:
    out = {w["uuid"]: float(w["base_latency_us"]) for w in (ab_stage.get("ab") or {}).get("workloads", []) or []
           if isinstance(w.get("base_latency_us"), (int, float))}
    for u, p in ((ab_stage.get("workloads") or {}).get("parent") or {}).items():
        if u not in out and isinstance(p.get("latency_us"), (int, float)):
            out[u] = float(p["latency_us"])
    return out


def reference_latencies(bench: dict[str, Any]) -> dict[str, float]:
    """The reference's latency per workload, timed by the stride stage (every workload under `contest`)."""
    wls = (((bench.get("stages") or {}).get("stride") or {}).get("workloads") or {}).get("candidate") or {}
    return {u: float(w["reference_latency_us"]) for u, w in wls.items()
            if isinstance(w.get("reference_latency_us"), (int, float))}


def objective_rounds(objective: str, series: dict[str, list[float]], parent_us: dict[str, float],
                     reference_us: dict[str, float]) -> list[float]:
    """Per round, the log of the objective's candidate/parent ratio (below 0: the candidate is better).

    geomean  mean_w log r_w                                   (every workload weighs the same)
    total    log(sum_w p_w r_w / sum_w p_w)                   (weighted by the parent's latency)
    contest  -log(sum_w s_w / r_w / sum_w s_w), s_w = ref_w/p_w  (mean speedup over the reference)
    with r_w = t_candidate / t_parent in that round and p_w the parent's median latency."""
    ids = sorted(series)
    n = min(len(series[u]) for u in ids)
    out = []
    for r in range(n):
        lr = {u: series[u][r] for u in ids}
        if objective == "geomean":
            out.append(math.fsum(lr.values()) / len(ids))
        elif objective == "total":
            out.append(math.log(math.fsum(parent_us[u] * math.exp(lr[u]) for u in ids) /
                                math.fsum(parent_us[u] for u in ids)))
        elif objective == "contest":
            s = {u: reference_us[u] / parent_us[u] for u in ids}
            out.append(-math.log(math.fsum(s[u] * math.exp(-lr[u]) for u in ids) / math.fsum(s.values())))
        else:
            raise ValueError(f"unknown objective {objective!r}")
    return out


def guard_check(series: dict[str, list[float]], confidence: float, looks: int, margin: float
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(per-workload figures, violations): a workload violates the guard when its whole interval on
    t_candidate / t_parent lies above 1 + margin. The level is Bonferroni-adjusted over the workloads
    and the looks, so across all of them a parent-equal candidate trips it with chance below 1 - confidence."""
    level = 1.0 - (1.0 - confidence) / max(1, looks * len(series))
    rows, bad = [], []
    for u, lrs in series.items():
        if len(lrs) < 2:
            continue
        m, lo, hi = stats.mean_interval(lrs, level)
        row = {"uuid": u, "ratio": math.exp(m), "ci_low": math.exp(lo),
               "ci_high": math.exp(hi) if hi < 700 else 1e9, "rounds": len(lrs)}
        rows.append(row)
        if row["ci_low"] > 1.0 + margin:
            bad.append(row)
    bad.sort(key=lambda r: -r["ratio"])
    return rows, bad


class PairedRatioRule:
    """The verdict for timed backends: paired candidate/parent ratios from the ab stage, with an interval.

    keep:          correct on every runnable workload, timed against the parent on every one, the
                   interval's upper bound on the objective's candidate/parent ratio below 1 - min_effect,
                   and on every workload the upper bound on candidate/parent within 1 + guard;
    regression:    the interval's lower bound is above 1 (revert);
    guard:         some workload is slower than its parent beyond the guard, with confidence (revert,
                   naming it; see guard_check);
    workload_inconclusive, unstable: the objective would keep, but some workload's bound is above
                   1 + guard, or its spread is many times its parent's (revert; see loop/guard.py);
    harness_error: also when the parent failed on a workload where the candidate passed (revert);
    inconclusive:  anything else; `[bench] inconclusive` says what to do (revert by default).
    The interval comes from bench/judge/stats.py (Student t over rounds, Bonferroni over the looks), recomputed
    here from the per-round, per-workload ratios for the declared objective; the rule re-derives the
    outcome from the bounds rather than trusting the worker's label.
    """

    name = "paired-ratio"

    def decide(self, bench: dict[str, Any], config) -> dict[str, Any]:
        b = config.bench
        objective = getattr(b, "objective", "geomean")
        margin = float(getattr(b, "guard", 0.02))
        gpu_s = float((bench.get("cost") or {}).get("gpu_s", 0.0))
        axes = bench.get("workload_axes")
        fail = first_failure(bench)
        cov = coverage(bench, correct=not fail and not bench.get("error") and bool(bench.get("correct", True)))
        line = coverage_line(cov, axes)
        base = {"rule": self.name, "gpu_s": round(gpu_s, 3), "min_effect": b.min_effect,
                "confidence": b.confidence, "objective": objective, "guard_margin": margin, "coverage": cov,
                "checked": cov["checked"], "workloads": cov["total"], "timed": cov.get("timed", 0)}
        if bench.get("error"):
            return {**base, "decision": REVERT, "outcome": "error", "reason": bench["error"], "figures": line}
        if fail:
            outcome, reason = _failure_verdict(fail, axes)
            return {**base, "decision": REVERT, "outcome": outcome, "reason": reason,
                    "figures": f"{line}; {gpu_s:.1f} GPU-s"}
        parent_bad = guard.parent_failures(bench)
        if parent_bad:
            return {**base, "decision": REVERT, "outcome": "harness_error", "parent_failed": parent_bad,
                    "reason": _parent_failure_reason(parent_bad, axes), "figures": f"{line}; {gpu_s:.1f} GPU-s"}
        ab_stage = (bench.get("stages") or {}).get("ab") or {}
        ab = ab_stage.get("ab")
        if not ab or not ab.get("rounds"):
            decision = b.inconclusive
            return {**base, "decision": decision, "outcome": "inconclusive",
                    "reason": "correct, but no paired timing against a parent (first experiment, or the ab "
                              f"stage did not run); [bench] inconclusive = {b.inconclusive}; {line}",
                    "figures": f"untimed against parent, {gpu_s:.1f} GPU-s; {line}"}
        looks = len(stats.look_schedule(b.min_rounds, b.max_rounds))
        level = 1.0 - (1.0 - b.confidence) / looks
        series = paired_series(ab_stage)
        # The workloads' bounds are looked at on a longer schedule than the geomean (stats.Rounds).
        bound_looks = len(stats.bound_schedule(b.min_rounds, b.max_rounds, b.wide_rounds))
        per_wl, violations = guard_check(series, b.confidence, bound_looks, margin) if series else ([], [])
        bound_level = guard.bound_level(b.confidence, bound_looks)
        blocked = guard.blockers(series, guard.spreads(ab_stage), bound_level, margin) if series else []
        uppers = guard.upper_bounds(series, bound_level)
        for row in per_wl:
            row["upper"] = uppers[row["uuid"]]
        missing_reason = ""
        if series:
            parent_us, ref_us = parent_latencies(ab_stage), reference_latencies(bench)
            need = parent_us if objective != "contest" else {u: 1 for u in parent_us if u in ref_us}
            lacking = [u for u in series if objective != "geomean" and u not in need]
            if lacking:
                missing_reason = (f"the {objective} objective needs the "
                                  f"{'reference' if objective == 'contest' else 'parent'}'s latency on every "
                                  f"workload; missing on {', '.join(workload_name(u, axes) for u in lacking[:4])}")
                rounds_d: list[float] = []
            else:
                # The objective's rounds are those every workload was timed in (the judge's geomean rounds);
                # rounds past them time only the workloads too wide to call, for the per-workload bounds.
                common = int(ab.get("rounds") or 0)
                rounds_d = objective_rounds(objective, {u: lrs[:common] for u, lrs in series.items()} if common
                                            else series, parent_us, ref_us)
            if rounds_d:
                iv = stats.ratio_interval(rounds_d, b.confidence, looks)
                lo, hi, ratio, rounds = iv["ci_low"], iv["ci_high"], iv["ratio"], len(rounds_d)
            else:
                lo, hi, ratio, rounds = 0.0, math.inf, float(ab.get("ratio", 1.0)), int(ab["rounds"])
        elif objective == "geomean":  # an older worker: only its geomean summary
            lo, hi, ratio, rounds = float(ab["ci_low"]), float(ab["ci_high"]), float(ab["ratio"]), int(ab["rounds"])
            level = float(ab.get("level", level))
        else:
            missing_reason = f"the {objective} objective needs per-workload rounds, which this ab stage lacks"
            lo, hi, ratio, rounds = 0.0, math.inf, float(ab.get("ratio", 1.0)), int(ab["rounds"])
        outcome = stats.classify(lo, hi, b.min_effect) if not missing_reason else stats.INCONCLUSIVE
        n_timed = cov.get("timed", len(series))
        worst = max(per_wl, key=lambda r: r["ratio"]) if per_wl else None
        figures = (f"{objective} ratio {ratio:.4f} [{lo:.4f}, {_fmt(hi)}] at {b.confidence:.0%} "
                   f"(per-look {level:.2%}), {rounds} rounds, {n_timed} of {cov['total']} workload(s) timed"
                   + (f", worst workload {worst['ratio']:.3f} ({workload_name(worst['uuid'], axes)})" if worst else "")
                   + f", timer {ab.get('timer')}, {gpu_s:.1f} GPU-s")
        speed = (1 - ratio) * 100
        what = f"{OBJECTIVES.get(objective, objective)} over {n_timed} workload(s)"
        complete = cov["complete"]
        if violations:
            decision, outcome = REVERT, "guard"
            w = violations[0]
            others = f" (and {len(violations) - 1} more workload(s))" if len(violations) > 1 else ""
            reason = (f"workload {workload_name(w['uuid'], axes)} is slower than its parent by "
                      f"{(w['ratio'] - 1) * 100:.1f}% (interval [{w['ci_low']:.4f}, {_fmt(w['ci_high'])}]){others}, "
                      f"beyond the guard of {margin:.0%}; the objective alone said {stats.classify(lo, hi, b.min_effect)} "
                      f"({objective} ratio {ratio:.4f})")
            if stats.classify(lo, hi, b.min_effect) == stats.KEEP and complete and not missing_reason:
                reason += _trade(blocked, violations)
        elif not complete:
            decision, outcome = REVERT, "incomplete"
            reason = f"not judged on every workload, so not kept: {line}"
        elif missing_reason:
            decision = b.inconclusive
            reason = f"inconclusive: {missing_reason}; [bench] inconclusive = {b.inconclusive}"
        elif outcome == stats.KEEP:
            decision = KEEP
            reason = (f"faster than its parent by {speed:.1f}% ({what}); the whole interval is below "
                      f"1 - min_effect = {1 - b.min_effect:.3f}, and no workload is slower than its parent beyond "
                      f"the guard of {margin:.0%}; {line}")
        elif outcome == stats.REGRESSION:
            decision = REVERT
            reason = f"slower than its parent by {-speed:.1f}% ({what}); the whole interval is above 1"
        else:
            decision = b.inconclusive
            reason = (f"inconclusive: {objective} ratio {ratio:.4f}, interval [{lo:.4f}, {_fmt(hi)}] does not clear "
                      f"1 - min_effect = {1 - b.min_effect:.3f} (stopped: {ab.get('stopped')}); "
                      f"[bench] inconclusive = {b.inconclusive}")
        if decision == KEEP and blocked:  # a keep needs evidence on every workload, not the geomean's alone
            decision = REVERT
            outcome, reason = _blocked_reason(blocked, axes, margin, b.wide_rounds,
                                              f"{objective} ratio {ratio:.4f} [{lo:.4f}, {_fmt(hi)}]")
        out = {**base, "decision": decision, "outcome": outcome, "reason": reason, "figures": figures,
               "ratio": ratio, "ci_low": lo, "ci_high": hi if math.isfinite(hi) else 1e9, "rounds": rounds,
               "n_workloads": n_timed, "per_workload": per_wl, "guard": violations, "blocked": blocked}
        if worst:
            out["worst_ratio"] = worst["ratio"]
        return out


def _parent_failure_reason(bad: list[dict[str, Any]], axes: dict[str, dict] | None) -> str:
    w = bad[0]
    others = f" (and on {len(bad) - 1} more workload(s))" if len(bad) > 1 else ""
    return (f"harness error: the parent failed on workload {workload_name(w['uuid'], axes)} "
            f"({w['status']}: {str(w['message'])[:200]}) where the candidate passed{others}: nothing was paired "
            "there, and a parent that fails is the harness's failure or the candidate's doing (a kernel that "
            "breaks its sibling), never an excused workload; not kept. Check the trunk alone with `autogk bench`")


def _blocked_reason(blocked: list[dict[str, Any]], axes: dict[str, dict] | None, margin: float,
                    wide_rounds: int, objective_line: str) -> tuple[str, str]:
    """(outcome, reason) when the objective would keep but some workload is not shown to be no slower."""
    w = blocked[0]
    name = workload_name(w["uuid"], axes)
    others = f" (and {len(blocked) - 1} more workload(s))" if len(blocked) > 1 else ""
    up = f"{w['upper']:.2f}x" if w["upper"] < guard.UNBOUNDED else "unbounded"
    alone = f"; the objective alone would keep it ({objective_line})"
    if w["kind"] == "slower":
        return "guard", (
            f"workload {name} is slower than its parent by {(w['ratio'] - 1) * 100:.1f}% (interval "
            f"[{w['lower']:.4f}, {_fmt(w['upper'])}] after {w['rounds']} rounds){others}, beyond the guard of "
            f"{margin:.0%}: more rounds would not make it a keep, so not kept{alone}{_trade(blocked)}")
    if w["kind"] == "unstable":
        return "unstable", (
            f"unstable on workload {name}: the candidate's time varies {w['spread'] / max(w['parent_spread'], 1e-12):.0f}x "
            f"as much as the parent's from round to round (log-time spread {w['spread']:.1%} vs "
            f"{w['parent_spread']:.1%}, limit {guard.SPREAD_RATIO:.0f}x), interval up to {up}{others}: not shown "
            f"to be no slower than its parent, so not kept{alone}")
    return "workload_inconclusive", (
        f"inconclusive on workload {name}: interval up to {up} after {w['rounds']} rounds, above 1 + guard = "
        f"{1 + margin:.2f}{others}: not shown to be no slower than its parent, so not kept{alone}; more rounds "
        f"can show it (raise [bench] wide_rounds, now {wide_rounds}: the rounds a workload too wide to call "
        "gets once the geomean says keep)")


def _trade(blocked: list[dict[str, Any]], violations: list[dict[str, Any]] = ()) -> str:
    """Where the objective keeps and every workload in the way (`blocked` by its upper bound, or among the
    guard's `violations`) is shown slower, a trade and not noise: the guard a person would set to accept
    it; "" where any is unstable or too wide to call, which no guard settles. An agent cannot set the
    guard: an experiment that changes .autogk.toml is invalid (loop/experiment.py)."""
    if any(b["kind"] != "slower" for b in blocked):
        return ""
    ups = [float(w["upper"]) for w in [*blocked, *violations]]
    if not ups or not all(math.isfinite(u) for u in ups):
        return ""
    need = math.ceil((max(ups) - 1) * 1000) / 1000
    return (f"; a trade: a project that accepts one workload this much slower for the others (its objective "
            f"is a mean over workloads, say) keeps it with `[bench] guard` of {need:.3f} or more in its .autogk.toml")


def _fmt(x: float) -> str:
    return f"{x:.4f}" if math.isfinite(x) else "inf"


def rule_for(bench: dict[str, Any]) -> VerdictRule:
    if bench.get("timing"):
        return PairedRatioRule()
    return CorrectnessOnly()
