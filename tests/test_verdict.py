"""The verdict: keep only when correct on every workload, faster by the declared objective over all of
them (the whole interval clears the minimum effect), and no workload slower than its parent beyond the guard."""
from __future__ import annotations

import math
import random
import re

import pytest

from autogk_git import config as config_mod
from autogk_git.bench.stages import summarize
from autogk_git.loop.verdict import (CorrectnessOnly, PairedRatioRule, first_failure, objective_rounds, rule_for)
from autogk_git.tracking.mlflow_store import metrics_of

U1, U2 = "11111111-aaaa", "22222222-bbbb"


def full_coverage(n, timed=True):
    cov = {"total": n, "runnable": n, "checked": n, "unchecked": []}
    if timed:
        cov.update(timed=n, untimed=[])
    return cov


def bench(lo, hi, ratio=None, status="PASSED", ab=True, gpu_s=12.5):
    """A timed result whose ab stage reports only its geomean summary (no per-round, per-workload data)."""
    ok = {"status": "PASSED", "latency_us": 10.0}
    cand = {U1: dict(ok, status=status, message="why" if status != "PASSED" else ""), U2: dict(ok)}
    stages = {"quick": {"workloads": {"candidate": {U1: {"status": "PASSED"}}}},
              "stride": {"workloads": {"candidate": cand}}}
    cov = full_coverage(2)
    if ab:
        stages["ab"] = {"workloads": {"parent": {U1: ok, U2: ok}, "candidate": {
            U1: dict(ok, ratio_vs_parent=ratio or (lo + hi) / 2), U2: dict(ok, ratio_vs_parent=ratio or (lo + hi) / 2)}},
            "ab": {"ratio": ratio or (lo + hi) / 2, "ci_low": lo, "ci_high": hi, "rounds": 12, "level": 0.99,
                   "stopped": "keep", "timer": "cupti", "workloads": [{"uuid": U1}, {"uuid": U2}]}}
    else:
        cov.update(timed=0, untimed=[{"uuid": u, "reason": "no ab stage"} for u in (U1, U2)])
    return {"backend": "local", "timing": True, "stages": stages, "correct": status == "PASSED",
            "cost": {"gpu_s": gpu_s}, "coverage": cov}


def paired_bench(ratios: dict[str, float], rounds=8, noise=0.004, parent_us=None, seed=1, axes=None,
                 reference_us=None):
    """A timed result with per-round paired log ratios per workload, as the worker's ab summary reports them."""
    rng = random.Random(seed)
    parent_us = parent_us or {u: 10.0 for u in ratios}
    wls = []
    for u, r in ratios.items():
        lrs = [math.log(r) + rng.gauss(0, noise) for _ in range(rounds)]
        wls.append({"uuid": u, "latency_us": parent_us[u] * r, "base_latency_us": parent_us[u], "log_ratios": lrs})
    ok = {"status": "PASSED"}
    stages = {"quick": {"workloads": {"candidate": {u: ok for u in list(ratios)[:1]}}},
              "ab": {"workloads": {"parent": {u: ok for u in ratios}, "candidate": {u: ok for u in ratios}},
                     "ab": {"ratio": 1.0, "ci_low": 0.0, "ci_high": 2.0, "rounds": rounds, "stopped": "keep",
                            "timer": "cupti", "workloads": wls}}}
    if reference_us:
        stages["stride"] = {"workloads": {"candidate": {u: dict(ok, reference_latency_us=reference_us[u])
                                                        for u in ratios}}}
    return {"backend": "local", "timing": True, "stages": stages, "correct": True, "cost": {"gpu_s": 3.0},
            "coverage": full_coverage(len(ratios)), "workload_axes": axes or {}}


def cfg(**bench_keys):
    return config_mod.parse({"bench": bench_keys})


def test_rule_for_picks_the_paired_rule_when_timed():
    assert isinstance(rule_for({"timing": True}), PairedRatioRule)
    assert isinstance(rule_for({"timing": False}), CorrectnessOnly)


def test_keep_needs_the_whole_interval_below_one_minus_min_effect():
    v = PairedRatioRule().decide(bench(0.93, 0.985), cfg())
    assert v["decision"] == "keep" and v["outcome"] == "keep"
    assert v["ci_low"] == 0.93 and v["ci_high"] == 0.985 and v["rounds"] == 12 and v["gpu_s"] == 12.5
    assert "12 rounds" in v["figures"] and "12.5 GPU-s" in v["figures"]
    assert "2 of 2 workloads checked" in v["reason"]
    v = PairedRatioRule().decide(bench(0.93, 0.985), cfg(min_effect=0.02))
    assert v["decision"] == "revert" and v["outcome"] == "inconclusive"


def test_regression_and_inconclusive_revert_by_default():
    v = PairedRatioRule().decide(bench(1.01, 1.08), cfg())
    assert v["decision"] == "revert" and v["outcome"] == "regression" and "slower" in v["reason"]
    v = PairedRatioRule().decide(bench(0.97, 1.02), cfg())
    assert v["decision"] == "revert" and v["outcome"] == "inconclusive"
    v = PairedRatioRule().decide(bench(0.97, 1.02), cfg(inconclusive="keep"))
    assert v["decision"] == "keep" and v["outcome"] == "inconclusive"


def test_incorrect_or_implausibly_fast_never_keeps():
    for status in ("INCORRECT_NUMERICAL", "BELOW_FLOOR", "TIMEOUT", "NOT_DESTINATION_PASSING", "STREAM_ORDER",
                   "NOT_RUN"):
        v = PairedRatioRule().decide(bench(0.5, 0.6, status=status), cfg(inconclusive="keep"))
        assert v["decision"] == "revert" and status in v["reason"], status
    # A workload never run, and no paired timing (the ab job stopped early): not a keep either, even
    # where an inconclusive timing would be kept.
    v = PairedRatioRule().decide(bench(0, 0, status="NOT_RUN", ab=False), cfg(inconclusive="keep"))
    assert v["decision"] == "revert" and "NOT_RUN" in v["reason"], v


def test_no_paired_timing_follows_the_inconclusive_policy():
    assert PairedRatioRule().decide(bench(0, 0, ab=False), cfg())["decision"] == "revert"
    assert PairedRatioRule().decide(bench(0, 0, ab=False), cfg(inconclusive="keep"))["decision"] == "keep"


def test_mlflow_metrics_carry_the_interval_rounds_and_gpu_seconds():
    b = bench(0.93, 0.985)
    v = PairedRatioRule().decide(b, cfg())
    m = metrics_of({"correct": True, "stages": b["stages"], "verdict": v, "cost": {"gpu_s": 12.5}})
    for k in ("verdict.ci_low", "verdict.ci_high", "verdict.ratio", "verdict.rounds", "verdict.gpu_s", "cost.gpu_s"):
        assert k in m, k
    assert m["ab.11111111.latency_us"] == 10.0


# --- harness errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("status", ["REFERENCE_ERROR", "HARNESS_ERROR"])
def test_a_harness_error_is_never_a_pass(status):
    wls = {U1: {"status": "PASSED"}, U2: {"status": status, "message": "could not make reference outputs"}}
    s = summarize(wls)
    assert not s["correct"] and s["harness_errors"] == 1 and s["passed"] == 1
    assert summarize({U1: {"status": status}})["correct"] is False
    b = bench(0.5, 0.6)
    b["stages"]["ab"]["workloads"]["candidate"][U2] = {"status": status, "message": "could not make inputs"}
    assert first_failure(b)[2].startswith("harness error: ")
    v = PairedRatioRule().decide(b, cfg(inconclusive="keep"))
    assert v["decision"] == "revert" and v["outcome"] == "harness_error" and v["reason"].startswith("harness error: ")
    untimed = {"backend": "interpret", "timing": False, "correct": True, "coverage": full_coverage(2, timed=False),
               "stages": {"quick": {"workloads": {"candidate": wls}}}}
    v = CorrectnessOnly().decide(untimed, cfg(untimed="merge"))
    assert v["decision"] == "revert" and v["reason"].startswith("harness error: ") and status in v["reason"]


# --- every workload, the objective, the guard -------------------------------------------------------------

def wl_ids(n):
    return [f"{i:08x}-0000" for i in range(n)]


def test_a_workload_slowdown_hidden_by_the_geomean_reverts_and_names_the_workload():
    ids = wl_ids(11)
    ratios = {u: 0.80 for u in ids[:9]} | {ids[9]: 1.16, ids[10]: 1.18}
    axes = {u: {"batch_size": 2 ** i} for i, u in enumerate(ids)}
    b = paired_bench(ratios, axes=axes)
    v = PairedRatioRule().decide(b, cfg())
    assert v["ratio"] < 0.9 and v["ci_high"] < 0.99  # the geomean alone would keep it
    assert v["decision"] == "revert" and v["outcome"] == "guard"
    assert "0000000a-" not in v["reason"] and "batch_size=1024" in v["reason"]  # the worst one, by name
    assert re.search(r"slower than its parent by 1[78]\.\d%", v["reason"]) and "guard of 2%" in v["reason"] and "1 more workload" in v["reason"]
    assert {g["uuid"] for g in v["guard"]} == {ids[9], ids[10]}
    assert len(v["per_workload"]) == 11 and v["worst_ratio"] > 1.15
    # A generous guard lets the objective decide; the reason names the smallest guard that accepts the trade.
    assert PairedRatioRule().decide(b, cfg(guard=0.5))["decision"] == "keep"
    need = float(re.search(r"`\[bench\] guard` of (\d\.\d+) or more", v["reason"]).group(1))
    assert 0.16 < need < 0.5 and need >= max(g["upper"] for g in v["guard"]) - 1
    assert PairedRatioRule().decide(b, cfg(guard=need))["decision"] == "keep"
    assert PairedRatioRule().decide(b, cfg(guard=need - 0.01))["decision"] == "revert"


def test_no_guard_is_named_where_a_workload_in_the_way_is_unstable_or_too_wide():
    from autogk_git.loop.verdict import _trade
    slower = {"kind": "slower", "upper": 1.125}
    assert "guard` of 0.125 or more" in _trade([slower])
    for kind in ("unstable", "wide"):  # more rounds or a steadier kernel settle these, not a larger guard
        assert _trade([slower, {"kind": kind, "upper": 1.3}]) == ""
        assert _trade([{"kind": kind, "upper": 1.3}], [{"upper": 1.12}]) == ""
    assert _trade([{"kind": "slower", "upper": math.inf}]) == ""


def test_the_guard_does_not_fire_on_noise_or_within_the_margin():
    ids = wl_ids(11)
    for seed in range(30):  # parent-equal on ten workloads, 1 % slower on one: within the 2 % margin
        b = paired_bench({u: 1.0 for u in ids[:10]} | {ids[10]: 1.01}, noise=0.01, seed=seed)
        v = PairedRatioRule().decide(b, cfg())
        assert v["guard"] == [] and v["outcome"] != "guard", seed


def test_the_objective_is_declared_geomean_total_or_contest():
    ids = wl_ids(11)
    # Ten small workloads 30 % faster, one large one 10 % slower: the geomean keeps, the summed latency does not.
    ratios = {u: 0.70 for u in ids[:10]} | {ids[10]: 1.10}
    parent = {u: 5.0 for u in ids[:10]} | {ids[10]: 1000.0}
    b = paired_bench(ratios, parent_us=parent)
    assert PairedRatioRule().decide(b, cfg(guard=0.5))["decision"] == "keep"
    v = PairedRatioRule().decide(b, cfg(guard=0.5, objective="total"))
    assert v["decision"] == "revert" and v["outcome"] == "regression" and v["objective"] == "total"
    assert v["ratio"] == pytest.approx((10 * 5 * 0.7 + 1000 * 1.1) / 1050, rel=0.01)
    # contest: needs the reference's time on every workload (the stride stage's).
    v = PairedRatioRule().decide(b, cfg(guard=0.5, objective="contest"))
    assert v["decision"] == "revert" and "reference" in v["reason"]
    ref = {u: 50.0 for u in ids[:10]} | {ids[10]: 1200.0}
    v = PairedRatioRule().decide(paired_bench(ratios, parent_us=parent, reference_us=ref), cfg(guard=0.5, objective="contest"))
    parent_score = sum(ref[u] / parent[u] for u in ids) / 11
    cand_score = sum(ref[u] / (parent[u] * ratios[u]) for u in ids) / 11
    assert v["ratio"] == pytest.approx(parent_score / cand_score, rel=0.01) and v["decision"] == "keep"


def test_objective_rounds_match_their_definitions_on_one_round():
    series = {"a": [math.log(0.5)], "b": [math.log(2.0)]}
    parent, ref = {"a": 1.0, "b": 3.0}, {"a": 4.0, "b": 3.0}
    assert objective_rounds("geomean", series, parent, ref)[0] == pytest.approx(0.0)
    assert math.exp(objective_rounds("total", series, parent, ref)[0]) == pytest.approx((0.5 + 6.0) / 4.0)
    # contest score: mean of ref/latency; parent (4 + 1) / 2, candidate (8 + 0.5) / 2
    assert math.exp(objective_rounds("contest", series, parent, ref)[0]) == pytest.approx(5.0 / 8.5)


def test_a_keep_needs_every_runnable_workload_timed():
    ids = wl_ids(5)
    b = paired_bench({u: 0.8 for u in ids})
    assert PairedRatioRule().decide(b, cfg())["decision"] == "keep"
    b["coverage"].update(timed=3, untimed=[{"uuid": u, "reason": "no paired timing"} for u in ids[3:]])
    v = PairedRatioRule().decide(b, cfg(inconclusive="keep"))
    assert v["decision"] == "revert" and v["outcome"] == "incomplete" and "3 of 5" in v["reason"]
    # A workload the parent fails on is not excused: the parent passed there when it was kept, so the
    # harness (or the candidate) broke it; a harness error, never a keep (tests/loop/test_verdict_guard.py).
    b["coverage"]["untimed"] = [dict(u, parent_failed=True) for u in b["coverage"]["untimed"]]
    v = PairedRatioRule().decide(b, cfg())
    assert v["decision"] == "revert" and v["outcome"] == "harness_error" and "the parent failed" in v["reason"]
    # A result from before coverage was recorded cannot show it judged every workload.
    del b["coverage"]
    assert PairedRatioRule().decide(b, cfg())["decision"] == "revert"


def test_untimed_correct_is_held_unless_merging_is_asked_for():
    b = {"backend": "interpret", "timing": False, "correct": True,
         "coverage": {"total": 11, "runnable": 6, "checked": 6, "unchecked": [
             {"uuid": f"{i:08x}-x", "reason": f"{i} input elements exceed ... ([bench] cpu_max_numel = 1048576)"}
             for i in range(5)]},
         "stages": {"quick": {"workloads": {"candidate": {U1: {"status": "PASSED"}}}}}}
    v = CorrectnessOnly().decide(b, cfg())
    assert v["decision"] == "untimed" and "held" in v["reason"]
    assert "6 of 11 workloads checked" in v["reason"] and "5 over [bench] cpu_max_numel" in v["reason"]
    assert not v["coverage"]["complete"]
    v = CorrectnessOnly().decide(b, cfg(untimed="merge"))
    assert v["decision"] == "keep" and "[bench] untimed = merge" in v["reason"]
