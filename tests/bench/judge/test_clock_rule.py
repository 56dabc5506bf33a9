"""The judge's clock rule (clock.clock_failure) on synthetic figures.

A cheat that under-reports its time and adds idle GPU time to some of its own windows widens the t
bound on the mean gap until it says nothing, while its claim stays steady: the sign test's bound on the
median and the spread of its windows still condemn it. Honest pairs, noisy as the H200's windows are
(0.3-0.8 us a call per round for each label), are not condemned."""
from __future__ import annotations

import random

from autogk_git.bench.judge import clock
from autogk_git.bench.judge.status import Status


def figures(rng: random.Random, n_rounds: int, parent_us: float, claim_us: float, hidden_us: float,
            sd_base: float, sd_cand: float, idle=None) -> dict:
    """One workload's witness figures as clock.paired_figures builds them. Each label's window per call
    is its own timer's figure plus an excess (flushes, the bracket: ~30 us a call) with its own round
    noise; the candidate's excess also holds the time it hides from its timer, and `idle(rng)`, time
    it adds to its own windows in some rounds."""
    w = {"parent": [], "claimed": [], "seen": [], "excess": {"base": [], "cand": []}}
    for _ in range(n_rounds):
        p = parent_us * (1 + rng.gauss(0, 0.005))
        c = claim_us * (1 + rng.gauss(0, 0.005))
        eb = 30.0 + rng.gauss(0, sd_base)
        ec = 30.0 + hidden_us + rng.gauss(0, sd_cand) + (idle(rng) if idle else 0.0)
        w["parent"].append(p)
        w["claimed"].append(c)
        w["seen"].append(p + (c + ec) - (p + eb))  # the parent's figure plus the windows' difference
        w["excess"]["base"].append(eb)
        w["excess"]["cand"].append(ec)
    return {"witness": w}


def condemned(n: int, seed: int, **kw) -> float:
    rng = random.Random(seed)
    hits = 0
    for _ in range(n):
        f = figures(rng, sd_base=rng.uniform(0.3, 0.8), sd_cand=rng.uniform(0.3, 0.8), **kw)
        hits += clock.clock_failure(f, "cuda") is not None
    return hits / n


def test_idle_time_added_to_one_window_does_not_hide_a_steady_under_report():
    # Claims 2 us a call where it takes 6; in one round of five it adds 300 us a call of idle GPU.
    rng = random.Random(3)
    f = figures(rng, 5, 2.0, 2.0, 4.0, 0.3, 0.3, idle=lambda g, k=iter([0, 0, 300.0, 0, 0]): next(k))
    bad = clock.clock_failure(f, "cuda")
    assert bad is not None and bad.status == Status.TAMPERED, f
    assert "every round" in str(bad), str(bad)


def test_idle_time_from_fewer_rounds_than_the_sign_test_needs_is_caught_by_the_spread():
    rng = random.Random(4)
    f = figures(rng, 3, 2.0, 2.0, 4.0, 0.3, 0.3, idle=lambda g, k=iter([0, 100.0, 0]): next(k))
    bad = clock.clock_failure(f, "cuda")
    assert bad is not None and bad.status == Status.TAMPERED and "varied" in str(bad), str(bad)


def test_a_cheat_with_heavy_tailed_idle_time_is_condemned_at_the_loops_rounds():
    # 300 us a call of idle in a random 30 % of its windows, hiding 2 us a call (the limit is 1.2 us).
    idle = lambda g: 300.0 if g.random() < 0.3 else 0.0  # noqa: E731
    for n_rounds, least in ((5, 0.85), (8, 0.95)):
        got = condemned(400, 7, n_rounds=n_rounds, parent_us=2.0, claim_us=2.0, hidden_us=2.0, idle=idle)
        assert got >= least, (n_rounds, got)


def test_honest_noisy_pairs_are_not_condemned():
    # A/A, and a candidate whose calls leave 0.7 us of idle GPU between two kernels (which CUPTI does
    # not count): each label's windows with a round-to-round spread of 0.3-0.8 us a call.
    for n_rounds in (3, 5, 8):
        for hidden in (0.0, 0.7):
            got = condemned(1500, 11, n_rounds=n_rounds, parent_us=2.0, claim_us=2.0, hidden_us=hidden)
            assert got <= 0.01, (n_rounds, hidden, got)
    # Larger kernels: the slack grows with the parent's time.
    assert condemned(1500, 12, n_rounds=5, parent_us=11.5, claim_us=11.5, hidden_us=0.7) <= 0.01


def test_an_honest_two_kernel_candidate_in_few_calls_is_not_condemned_by_the_windows_offset():
    # As the seal's GPU test times it: 10 calls a window, 3 rounds, a 1.3 us one-kernel parent against
    # the same op in two torch kernels (0.6 us of idle GPU between them, which CUPTI does not count),
    # whose process's windows run 15 us longer than the parent's (an honest per-process offset seen
    # on the H200). 2.1 us a call of gap, steady: on the old limit (1.13 us) TAMPERED.
    rng = random.Random(5)
    f = figures(rng, 3, 1.3, 2.6, 0.6 + 15.0 / 10, 0.2, 0.2)
    f["calls"] = 10
    assert clock.clock_failure(f, "cuda") is None, f
    # The same gap over 30 calls a window (the loop's reps) is beyond what the windows' offset explains.
    f = figures(rng, 5, 1.3, 2.6, 2.1, 0.2, 0.2)
    f["calls"] = 30
    bad = clock.clock_failure(f, "cuda")
    assert bad is not None and bad.status == Status.TAMPERED


def test_figures_rewritten_to_a_third_stay_tampered():
    # The GPU's rewriting cheat: the clock saw 12.3 us a call where it claimed 3.9 (20 calls a window).
    rng = random.Random(6)
    f = figures(rng, 3, 11.5, 3.9, 12.3 - 3.9, 0.5, 0.5)
    f["calls"] = 20
    bad = clock.clock_failure(f, "cuda")
    assert bad is not None and bad.status == Status.TAMPERED, f


def test_an_honest_candidate_put_off_by_a_loaded_hosts_scheduler_is_not_condemned_on_cpu():
    # On a loaded 2-core machine (CI, 2026-12-01), an honest interpreter kernel's process was put off
    # for a few time slices in one of the two rounds' windows: 2.3 ms a call more than the parent's in
    # the median of two rounds (6 ms in one, 0.1 ms in the other). The median alone condemned it (the
    # old rule on CPU); the figures say nothing steady.
    w = {"parent": [6400.0, 6420.0], "claimed": [6407.0, 6390.0], "seen": [6400.0 + 6000.0, 6420.0 + 80.0],
         "excess": {"base": [900.0, 910.0], "cand": [900.0 + 6000.0, 990.0]}}
    assert clock.clock_failure({"witness": w, "calls": 1}, "cpu") is None
    # A steady under-report on CPU is still caught: a quarter of its time claimed, in three rounds.
    w = {"parent": [10000.0, 10100.0, 9900.0], "claimed": [2500.0, 2520.0, 2480.0],
         "seen": [10000.0, 10300.0, 9800.0], "excess": {"base": [900.0] * 3, "cand": [8400.0, 8700.0, 8200.0]}}
    bad = clock.clock_failure({"witness": w, "calls": 6}, "cpu")
    assert bad is not None and bad.status == Status.TAMPERED, w


def test_the_clock_limit_is_the_windows_floor_over_few_calls():
    # Two calls a window (the contest-shaped sparse attention's memory-capped windows): 25 us / 2 calls is more
    # than a 9 us kernel takes; 30 calls: 10 % of the parent plus 1 us.
    f = {"witness": {"parent": [9.0] * 5}, "calls": 2, "method": "cupti"}
    assert clock.clock_limit_us(f, "cuda") == 12.5
    assert abs(clock.clock_limit_us({**f, "calls": 30}, "cuda") - 1.9) < 1e-9
    assert clock.clock_limit_us({"calls": 2}, "cuda") is None
