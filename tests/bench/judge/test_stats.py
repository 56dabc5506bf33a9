"""The ab statistics on synthetic rounds with a known truth: quantiles, coverage, error rates, power."""
from __future__ import annotations

import math
import random

import pytest

from autogk_git.bench.judge import stats


@pytest.mark.parametrize("p,df,want", [(0.975, 1, 12.7062), (0.975, 4, 2.7764), (0.995, 10, 3.1693),
                                       (0.95, 30, 1.6973), (0.999, 7, 4.7853), (0.5, 3, 0.0)])
def test_t_quantile_matches_tables(p, df, want):
    assert stats.t_quantile(p, df) == pytest.approx(want, abs=2e-4)
    assert stats.t_quantile(1 - p, df) == pytest.approx(-want, abs=2e-4)


def test_look_schedule_is_geometric_and_ends_at_the_budget():
    assert stats.look_schedule(5, 40) == [5, 8, 12, 18, 27, 40]
    assert stats.look_schedule(3, 3) == [3]
    assert stats.look_schedule(1, 4) == [2, 3, 4]


def simulate(true_ratio: float, sd: float, seed: int, min_rounds=5, max_rounds=40, min_effect=0.01):
    rng = random.Random(seed)
    seq = stats.Sequential(min_rounds, max_rounds, 0.95, min_effect)
    while True:
        # Three workloads per round, each a paired log ratio with noise, plus round-level drift that
        # pairing must cancel (it hits parent and candidate alike).
        drift = rng.gauss(0, 0.05)
        pairs = []
        for _ in range(3):
            p = math.exp(drift + rng.gauss(0, sd))
            pairs.append((p, p * true_ratio * math.exp(rng.gauss(0, sd))))
        if seq.add(stats.round_log_ratios([pairs])[0]):
            return seq.summary()


def test_fixed_n_interval_covers_the_truth_at_its_level():
    rng = random.Random(1)
    hits = 0
    n_sim = 2000
    for _ in range(n_sim):
        xs = [rng.gauss(0.0, 1.0) for _ in range(6)]
        _, lo, hi = stats.mean_interval(xs, 0.95)
        hits += lo <= 0.0 <= hi
    assert 0.93 <= hits / n_sim <= 0.97


def test_a_against_a_is_rarely_kept_or_called_a_regression():
    outcomes = [simulate(1.0, 0.02, seed)["outcome"] for seed in range(1500)]
    assert outcomes.count("keep") / len(outcomes) <= 0.01
    assert outcomes.count("regression") / len(outcomes) <= 0.01


def test_a_five_percent_gain_is_kept_and_a_loss_is_a_regression():
    faster = [simulate(0.95, 0.02, seed) for seed in range(300)]
    slower = [simulate(1.05, 0.02, seed) for seed in range(300)]
    assert sum(s["outcome"] == "keep" for s in faster) / 300 >= 0.95
    assert sum(s["outcome"] == "regression" for s in slower) / 300 >= 0.95
    # Decisive runs stop early: most at the first or second look.
    assert sorted(s["rounds"] for s in faster)[150] <= 8


def test_sequential_stops_only_on_looks_and_says_why():
    seq = stats.Sequential(5, 40, 0.95, 0.01)
    for i in range(4):
        assert seq.add(-0.2 + 0.001 * i) is None  # before min_rounds: no decision, however clear
    assert seq.add(-0.2) == "keep"
    s = seq.summary()
    assert s["rounds"] == 5 and s["looks"] == [5] and s["ci_high"] < 0.99 and s["outcome"] == "keep"


def test_futility_and_budget_stops():
    seq = stats.Sequential(5, 40, 0.95, 0.05)
    why = None
    for i in range(40):
        why = seq.add(0.001 * (-1) ** i)  # ratio ~1, tight: a 5% gain is out of reach
        if why:
            break
    assert why == "futile" and seq.summary()["outcome"] == "inconclusive"
    seq = stats.Sequential(2, 4, 0.95, 0.01)
    rng = random.Random(3)
    for _ in range(4):
        why = seq.add(rng.gauss(0, 0.5))
    assert why == "budget" and seq.summary()["rounds"] == 4


def test_classify_is_the_verdict_rule():
    assert stats.classify(0.90, 0.985, 0.01) == "keep"
    assert stats.classify(0.90, 0.995, 0.01) == "inconclusive"
    assert stats.classify(1.001, 1.05, 0.01) == "regression"
    assert stats.classify(0.99, 1.01, 0.01) == "inconclusive"


def test_the_rounds_stop_on_a_keep_only_when_every_workload_is_within_the_guard():
    steady = [math.log(0.9) + 0.002 * (-1) ** k for k in range(5)]
    wide = [math.log(0.9) + 0.4 * (-1) ** k for k in range(5)]
    slower = [math.log(1.2) + 0.002 * (-1) ** k for k in range(5)]
    assert stats.workload_bounds({"a": steady, "b": steady}, 0.95, 6, 0.02) == "within"
    assert stats.workload_bounds({"a": steady, "b": wide}, 0.95, 6, 0.02) == "wide"
    assert stats.workload_bounds({"a": steady, "b": steady[:1]}, 0.95, 6, 0.02) == "wide"  # one round bounds nothing
    assert stats.workload_bounds({"a": wide, "b": slower}, 0.95, 6, 0.02) == "slower"  # the guard reverts anyway


def test_the_workloads_bounds_are_looked_at_on_a_schedule_fixed_in_advance():
    assert stats.bound_schedule(5, 40, 200) == [5, 8, 12, 18, 27, 40, 60, 90, 135, 200]
    assert stats.bound_schedule(5, 40, 40) == stats.bound_schedule(5, 40, 0) == stats.look_schedule(5, 40)
    assert stats.bound_schedule(2, 3, 200)[-1] == 15  # at most 5x max_rounds


def test_rounds_past_the_budget_time_only_the_workloads_still_too_wide_to_call():
    r = stats.Rounds(2, 4, 0.95, 0.01, 0.02, wide_rounds=40)
    fast, wide = [-0.3, -0.31, -0.29, -0.3], [0.05, -0.05, 0.04, -0.04]
    series = {"a": [], "b": []}
    for k in range(4):
        series["a"].append(fast[k])
        series["b"].append(wide[k])
        why = r.after_round((fast[k] + wide[k]) / 2, series)
    # The geomean says keep at its last look; "b" is too wide to say it is no slower: it alone goes on.
    assert why is None and r.wide == {"b"} and r.times("b") and not r.times("a")
    for k in range(36):
        series["b"].append(0.001 * (-1) ** k)
        why = r.after_round(None, series)
        if why:
            break
    assert why == stats.KEEP and len(series["b"]) in r.bound_looks, (why, len(series["b"]))
    assert r.summary()["wide_workloads"] == ["b"] and r.summary()["rounds"] == 4
    # A workload shown slower while it goes on stops the rounds for the guard.
    r = stats.Rounds(2, 4, 0.95, 0.01, 0.02, wide_rounds=40)
    series = {"a": [], "b": []}
    for k in range(4):
        series["a"].append(fast[k])
        series["b"].append(wide[k])
        r.after_round((fast[k] + wide[k]) / 2, series)
    for k in range(36):
        series["b"].append(0.3 + 0.001 * (-1) ** k)
        why = r.after_round(None, series)
        if why:
            break
    assert why == "guard", why


def run_rounds(amplitude: dict[str, tuple[float, float]]) -> tuple[stats.Rounds, str | None, dict[str, int]]:
    """The judge's stopping on workloads whose log ratio alternates: centre +- spread, round after round;
    returns the Rounds, why it stopped, and how many rounds timed each workload."""
    r = stats.Rounds(5, 40, 0.95, 0.01, 0.02, wide_rounds=200)
    series: dict[str, list[float]] = {u: [] for u in amplitude}
    why, k = None, 0
    while why is None and k < 400:
        now = [u for u in series if r.times(u)]
        lrs = {u: amplitude[u][0] + amplitude[u][1] * (-1) ** k for u in now}
        for u in now:
            series[u].append(lrs[u])
        why = r.after_round(None if r.wide is not None else sum(lrs.values()) / len(now), series)
        k += 1
    return r, why, {u: len(v) for u, v in series.items()}


def test_a_keep_on_the_geomean_times_on_only_the_wide_workloads_from_its_first_look():
    # The indexer's 0.84x keep (H200, 2026-12-02) timed all 24 workloads for 40 rounds (145 s) because 2
    # of them were still too wide to call: the geomean had said keep at its first look, and the other 22
    # were within by then. Only the wide ones go on from the look where the geomean says keep.
    r, why, timed = run_rounds({"a": (-0.3, 0.001), "b": (-0.3, 0.002), "c": (0.0, 0.06)})
    assert why == stats.KEEP, why
    assert r.summary()["rounds"] == r.seq.looks[0] == 5 and r.summary()["wide_workloads"] == ["c"]
    assert timed["a"] == timed["b"] == 5 and timed["c"] > 40, timed
    assert timed["c"] in r.bound_looks


def test_a_wide_workload_settled_at_a_look_is_timed_no_more():
    # On the H200 (2026-12-02) the indexer's 11 wide workloads were all timed on for 70 rounds, as long
    # as any one of them was still too wide: the set never shrank as workloads settled.
    r, why, timed = run_rounds({"a": (-0.3, 0.001), "quiet": (0.0, 0.03), "loud": (0.0, 0.08)})
    assert why == stats.KEEP, why
    assert r.summary()["wide_workloads"] == ["loud", "quiet"] and r.wide == {"loud"}
    assert 5 < timed["quiet"] < timed["loud"] and timed["quiet"] in r.bound_looks, timed
