"""The paired-ratio verdict: keep only when correct and the whole interval clears the minimum effect."""
from __future__ import annotations

from autogk_git import config as config_mod
from autogk_git.loop.verdict import PairedRatioRule
from autogk_git.loop.verdict import CorrectnessOnly, rule_for
from autogk_git.tracking.mlflow_store import metrics_of

U1, U2 = "11111111-aaaa", "22222222-bbbb"


def bench(lo, hi, ratio=None, status="PASSED", ab=True, gpu_s=12.5):
    ok = {"status": "PASSED", "latency_us": 10.0}
    cand = {U1: dict(ok, status=status, message="why" if status != "PASSED" else ""), U2: dict(ok)}
    stages = {"quick": {"workloads": {"candidate": {U1: {"status": "PASSED"}}}},
              "stride": {"workloads": {"candidate": cand}}}
    if ab:
        stages["ab"] = {"workloads": {"parent": {U1: ok, U2: ok}, "candidate": {
            U1: dict(ok, ratio_vs_parent=ratio or (lo + hi) / 2), U2: dict(ok, ratio_vs_parent=ratio or (lo + hi) / 2)}},
            "ab": {"ratio": ratio or (lo + hi) / 2, "ci_low": lo, "ci_high": hi, "rounds": 12, "level": 0.99,
                   "stopped": "keep", "timer": "cupti", "workloads": [{"uuid": U1}, {"uuid": U2}]}}
    return {"backend": "local", "timing": True, "stages": stages, "correct": status == "PASSED",
            "cost": {"gpu_s": gpu_s}}


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
    for status in ("INCORRECT_NUMERICAL", "BELOW_FLOOR", "TIMEOUT"):
        v = PairedRatioRule().decide(bench(0.5, 0.6, status=status), cfg(inconclusive="keep"))
        assert v["decision"] == "revert" and status in v["reason"], status


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
