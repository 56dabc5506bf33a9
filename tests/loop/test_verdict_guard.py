"""A keep needs evidence that no workload got slower, and a parent that fails is never excused.

The simulations run the judge's own sequential stopping (bench/judge/stats.py `Sequential`, as the worker
runs it on the per-round geomean) over simulated paired rounds, then the loop's verdict rule on the
result they build, in the shape the worker reports (per-workload `log_ratios`, per-label `samples_us`).
"""
from __future__ import annotations

import math
import random
import re

import pytest

from autogk_git import config as config_mod
from autogk_git.bench.judge import stats
from autogk_git.loop.verdict import PairedRatioRule

N_WL = 11
IDS = [f"{i:08x}-0000" for i in range(N_WL)]
AXES = {u: {"batch_size": 2 ** i} for i, u in enumerate(IDS)}
# Per-label, per-round jitter of the device time (log scale), smallest workload to largest. With the
# calls' own jitter below, a kernel's round figure varies by 0.5-1 % from round to round: the cupti
# timer's CV on the H200 was 0.4-0.9 % on rmsnorm h4096 (benchmarks/results/gpu.md), and the model's
# per-round geomean spread (0.28 %) matches the H200 A/A runs' (about 0.3 %, results/aa_h200_2).
ROUND_SD = [0.008, 0.007, 0.006, 0.005, 0.004, 0.004, 0.004, 0.005, 0.006, 0.007, 0.008]
CALL_SD = 0.01  # each timed call's own jitter; a round's figure is the median of its calls, as in the worker
# Timed calls per round: 30 (`reps`), fewer on the largest workloads (the worker's 1 GiB input budget:
# rmsnorm b=15000 h4096 bf16 is ~250 MB a set, so 4 calls).
CALLS = [30] * 8 + [16, 8, 4]


def cfg(**bench_keys):
    return config_mod.parse({"bench": bench_keys})


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def simulate(call_ratio, seed: int, config, round_sd: list[float] | None = None) -> dict:
    """One experiment's ab stage. call_ratio(w, rng): candidate/parent time of one timed call on workload w.

    Per round and workload both labels time CALLS[w] calls; each call's time carries the round's drift
    (shared by both labels: same GPU, back to back), the label's round jitter and the call's own jitter;
    the round's figure is the median of its calls. The judge's own stopping (stats.Rounds) decides
    when the rounds end and which workloads a round times."""
    rng = random.Random(seed)
    b = config.bench
    sd = round_sd or ROUND_SD
    seq = stats.Rounds(b.min_rounds, b.max_rounds, b.confidence, b.min_effect, b.guard, b.wide_rounds)
    samples = {label: {u: [] for u in IDS} for label in ("parent", "candidate")}
    lrs = {u: [] for u in IDS}
    base_us = [2.5 * 1.6 ** i for i in range(N_WL)]
    for _ in range(seq.last_round):
        drift = rng.gauss(0, 0.01)
        timed = []
        for w, u in enumerate(IDS):
            if not seq.times(u):
                continue
            got = {}
            for label in ("parent", "candidate"):
                jitter = rng.gauss(0, sd[w])
                calls = [base_us[w] * math.exp(drift + jitter + rng.gauss(0, CALL_SD))
                         * (call_ratio(w, rng) if label == "candidate" else 1.0) for _ in range(CALLS[w])]
                got[label] = _median(calls)
                samples[label][u].append(round(got[label], 4))
            lrs[u].append(math.log(got["candidate"] / got["parent"]))
            timed.append(lrs[u][-1])
        if seq.after_round(math.fsum(timed) / len(timed) if seq.wide is None else None, lrs):
            break
    summary = seq.summary()
    ok = {"status": "PASSED"}
    wls = [{"uuid": u, "latency_us": _median(samples["candidate"][u]), "base_latency_us": _median(samples["parent"][u]),
            "log_ratios": [round(x, 6) for x in lrs[u]]} for u in IDS]
    stage = {"workloads": {label: {u: dict(ok, samples_us=samples[label][u]) for u in IDS}
                           for label in ("parent", "candidate")},
             "ab": {**summary, "timer": "cupti", "workloads": wls}}
    cov = {"total": N_WL, "runnable": N_WL, "checked": N_WL, "unchecked": [], "timed": N_WL, "untimed": []}
    return {"backend": "local", "timing": True, "stages": {"ab": stage}, "correct": True,
            "cost": {"gpu_s": 3.0}, "coverage": cov, "workload_axes": AXES}


def steady(r: float):
    return lambda w, rng: r


def noisy_slow(w: int, rng: random.Random) -> float:
    """0.8x everywhere, but on the largest workload 3x slower than the parent on a random half of its calls."""
    return (3.0 if rng.random() < 0.5 else 0.8) if w == N_WL - 1 else 0.8


def decisions(call_ratio, runs: int, config, seed0: int = 0) -> list[dict]:
    return [PairedRatioRule().decide(simulate(call_ratio, seed0 + k, config), config) for k in range(runs)]


def test_noisy_slow_kernel_on_one_workload_is_not_kept():
    c = cfg()
    vs = decisions(noisy_slow, 40, c)
    kept = [v for v in vs if v["decision"] == "keep"]
    # The geomean alone would keep nearly all of them: the other ten workloads carry it.
    assert sum(v["ci_high"] < 1 - c.bench.min_effect for v in vs) >= 36
    assert len(kept) <= 1, f"kept {len(kept)}/40: {kept[0]['reason']}"
    blocked = [v for v in vs if v["decision"] != "keep"]
    assert all("batch_size=1024" in v["reason"] for v in blocked), blocked[0]["reason"]
    assert {v["outcome"] for v in blocked} <= {"unstable", "workload_inconclusive", "guard"}


def test_a_steady_three_percent_gain_on_every_workload_still_keeps():
    vs = decisions(steady(0.97), 100, cfg(), seed0=1000)
    kept = sum(v["decision"] == "keep" for v in vs)
    assert kept >= 95, [v["reason"] for v in vs if v["decision"] != "keep"][:3]


def test_a_steady_three_percent_gain_under_twice_the_noise_still_keeps():
    # The judge does not stop on the geomean while a workload's bound is still too wide (stats.Rounds).
    vs = [PairedRatioRule().decide(simulate(steady(0.97), 1000 + k, cfg(), [2 * x for x in ROUND_SD]), cfg())
          for k in range(100)]
    kept = sum(v["decision"] == "keep" for v in vs)
    assert kept >= 95, [v["reason"] for v in vs if v["decision"] != "keep"][:3]


def test_a_kernel_against_itself_is_kept_at_most_one_time_in_a_hundred():
    vs = decisions(steady(1.0), 200, cfg(), seed0=5000)
    kept = sum(v["decision"] == "keep" for v in vs)
    assert kept <= 2, kept


def test_the_verdict_reports_each_workloads_upper_bound_and_what_blocked_the_keep():
    c = cfg()
    v = PairedRatioRule().decide(simulate(noisy_slow, 3, c), c)
    assert v["decision"] == "revert" and v["blocked"] and v["blocked"][0]["uuid"] == IDS[-1]
    rows = {r["uuid"]: r for r in v["per_workload"]}
    assert rows[IDS[-1]]["upper"] > 1.02 and all(rows[u]["upper"] < 1.0 for u in IDS[:-1])
    if v["outcome"] == "unstable":
        assert re.search(r"unstable on workload batch_size=1024: the candidate's time varies \d+x", v["reason"])
    # A steady gain: every workload's bound is within the guard, nothing blocks.
    v = PairedRatioRule().decide(simulate(steady(0.97), 7, c), c)
    assert v["decision"] == "keep" and v["blocked"] == [] and "no workload is slower" in v["reason"]


def test_a_kernel_many_times_faster_with_a_small_kernels_noise_is_kept_not_unstable():
    # Seen on the H200: a top-k indexer from ~40 us to ~2 us on most workloads, whose round-to-round spread
    # there (a 2 us kernel's, 3-4 %) was 18x its parent's (0.2 %): the old rule reverted it as unstable
    # although every bound was far below 1. Noise of 4 % cannot carry a 0.06x bound past the guard.
    def much_faster(w: int, rng: random.Random) -> float:
        return 0.06 * math.exp(rng.gauss(0, 0.3)) if w < 8 else 0.97  # a round: the median of 30 such calls
    c = cfg()
    v = PairedRatioRule().decide(simulate(much_faster, 5, c), c)
    assert v["decision"] == "keep" and v["outcome"] == "keep", v["reason"]
    # The noisy-slow kernel is still blocked: its bound is near 1, within reach of its own noise.
    v = PairedRatioRule().decide(simulate(noisy_slow, 3, c), c)
    assert v["decision"] == "revert"


class RoundNoise:
    """A candidate whose time on every workload varies from round to round (its data decides its work:
    a radix select), not from call to call: each round draws one factor per workload."""

    def __init__(self, ratio: float, sd: float, seed: int) -> None:
        self.ratio, self.sd, self.rng, self.calls = ratio, sd, random.Random(seed), [0] * N_WL
        self.factor: dict = {}

    def __call__(self, w: int, rng: random.Random) -> float:
        r = self.calls[w] // CALLS[w]
        self.calls[w] += 1
        if (w, r) not in self.factor:
            self.factor[w, r] = self.ratio * math.exp(self.rng.gauss(0, self.sd))
        return self.factor[w, r]


def test_a_kernel_faster_in_every_round_is_kept_though_its_time_varies_with_its_data():
    # Seen on the H200: a top-k whose radix select's time depends on its data, 0.83x on the geomean,
    # spread 9 % a round against its parent's 1 %, every bound at or below 0.81x: "unstable" by the
    # spread rule, though every paired round was faster than the parent.
    c = cfg()
    vs = [PairedRatioRule().decide(simulate(RoundNoise(0.75, 0.07, k), 100 + k, c), c) for k in range(10)]
    kept = [v for v in vs if v["decision"] == "keep"]
    assert len(kept) >= 9, [v["reason"] for v in vs if v["decision"] != "keep"][:2]
    # A kernel as noisy but not faster in every round is still blocked: its noise could hide a slowdown.
    vs = [PairedRatioRule().decide(simulate(RoundNoise(0.97, 0.12, k), 200 + k, c), c) for k in range(10)]
    assert not [v for v in vs if v["decision"] == "keep"], [v["reason"] for v in vs if v["decision"] == "keep"]


def test_an_unchanged_small_kernel_whose_rounds_vary_by_four_percent_does_not_block_a_real_gain():
    # Seen on the H200 (2026-12-02): an indexer attempt at 0.727x on the geomean, its all-short workloads
    # running the parent's own code at ~1.7 us, whose per-round figures (10 cold-L2 calls each) varied by
    # ~4 %: after 40 rounds their bounds stood at 1.022-1.029, above 1 + guard, and the keep was refused.
    # Those workloads alone now go on (up to [bench] wide_rounds), and their bounds come within the guard.
    noisy = [0.045] * 4 + ROUND_SD[4:]

    def gain_elsewhere(w: int, rng: random.Random) -> float:
        return 1.0 if w < 4 else 0.6

    def kept(config, seeds) -> list[dict]:
        return [PairedRatioRule().decide(simulate(gain_elsewhere, k, config, noisy), config) for k in seeds]
    # At least 9 in 10 kept, over 40 seeds (the rest stay at 1.02-1.03 after 200 rounds: a refusal, never
    # a false keep); before the wide workloads were timed on alone, 1 in 10 at most.
    now = kept(cfg(), range(300, 340))
    assert sum(v["decision"] == "keep" for v in now) >= 36, [v["reason"] for v in now if v["decision"] != "keep"][:2]
    before = kept(cfg(wide_rounds=40), range(300, 310))  # the rule before: every workload stops at max_rounds
    assert sum(v["decision"] == "keep" for v in before) <= 1, [v["outcome"] for v in before]
    assert {v["outcome"] for v in before if v["decision"] != "keep"} == {"workload_inconclusive"}
    # The same noise cannot hide a real slowdown there: 4 % slower on those workloads is not kept.
    slower = [PairedRatioRule().decide(simulate(lambda w, rng: 1.04 if w < 4 else 0.6, k, cfg(), noisy), cfg())
              for k in range(320, 330)]
    assert not [v for v in slower if v["decision"] == "keep"], [v["reason"] for v in slower if v["decision"] == "keep"]


# --- a parent failure blocks the keep ------------------------------------------------------------------------

def parent_failed_bench(status: str = "TIMEOUT") -> dict:
    """A fast candidate (0.8x on 10 workloads) whose parent failed on the largest one: 10 of 11 timed."""
    c = cfg()
    b = simulate(steady(0.8), 11, c)
    stage = b["stages"]["ab"]
    u = IDS[-1]
    stage["workloads"]["parent"][u] = {"status": status, "message": "killed at the 60 s limit"}
    stage["workloads"]["candidate"][u] = {"status": "PASSED"}
    stage["ab"]["workloads"] = [w for w in stage["ab"]["workloads"] if w["uuid"] != u]
    b["coverage"].update(timed=N_WL - 1, untimed=[{"uuid": u, "reason": f"the parent is {status} here: nothing to "
                                                   "pair against", "parent_failed": True}])
    return b


@pytest.mark.parametrize("status", ["TIMEOUT", "RUNTIME_ERROR", "HARNESS_ERROR", "NOT_RUN"])
def test_a_workload_the_parent_failed_on_is_a_harness_error_not_an_excuse(status):
    v = PairedRatioRule().decide(parent_failed_bench(status), cfg(inconclusive="keep"))
    assert v["decision"] == "revert" and v["outcome"] == "harness_error", v["reason"]
    assert v["reason"].startswith("harness error: the parent failed on workload batch_size=1024")
    assert status in v["reason"] and "where the candidate passed" in v["reason"]
    assert [p["uuid"] for p in v["parent_failed"]] == [IDS[-1]]
    # The same result's parent record alone (a result without the coverage flag) says the same.
    b = parent_failed_bench(status)
    b["coverage"]["untimed"] = [{k: x for k, x in b["coverage"]["untimed"][0].items() if k != "parent_failed"}]
    assert PairedRatioRule().decide(b, cfg())["outcome"] == "harness_error"


def test_a_parent_failing_where_the_candidate_fails_too_is_the_candidates_failure():
    b = parent_failed_bench()
    b["stages"]["ab"]["workloads"]["candidate"][IDS[-1]] = {"status": "INCORRECT_NUMERICAL", "message": "max err 3"}
    b["correct"] = False
    v = PairedRatioRule().decide(b, cfg())
    assert v["decision"] == "revert" and v["outcome"] == "incorrect" and "batch_size=1024" in v["reason"]


PARENT_FAILS_AT_1000 = "    n = x.numel()\n    if n == 1000:\n        raise RuntimeError('parent breaks here')\n"


def test_a_real_cpu_timed_run_whose_parent_fails_on_one_workload_is_not_kept(project):
    """The worker on CPU (interpreter, host clock): the parent raises on n=1000, the candidate does not."""
    from conftest import git
    from test_gpu_local import bench_of_a_change

    kernel = project / "kernels" / "scale" / "kernel.py"
    kernel.write_text(kernel.read_text().replace("    n = x.numel()\n", PARENT_FAILS_AT_1000))
    git(project, "commit", "-qam", "scale: a parent that fails on n=1000")
    p, t, bench = bench_of_a_change(project, PARENT_FAILS_AT_1000, "    n = x.numel()\n")
    n_of = {w["uuid"]: w["axes"]["n"] for w in t.workloads}
    parent = {n_of[u]: w["status"] for u, w in bench["stages"]["ab"]["workloads"]["parent"].items()}
    cand = {n_of[u]: w["status"] for u, w in bench["stages"]["ab"]["workloads"]["candidate"].items()}
    messages = {n_of[u]: (w["status"], w.get("message", "")[:300])
                for u, w in bench["stages"]["ab"]["workloads"]["candidate"].items() if w["status"] != "PASSED"}
    assert parent[1000] != "PASSED" and cand[1000] == "PASSED" and bench["correct"], messages
    v = PairedRatioRule().decide(bench, cfg(inconclusive="keep", min_effect=0.0, guard=0.9))
    assert v["decision"] == "revert" and v["outcome"] == "harness_error", v
    assert "the parent failed on workload" in v["reason"] and "n=1000" in v["reason"] and parent[1000] in v["reason"]


def test_a_workload_surely_slower_where_the_geomean_keeps_is_named_slower_not_sent_for_more_rounds():
    # Seen on the H200 (sparse attention 06 against 01, 2026-12-02): 0.84x on the whole, one workload
    # ~4.5 % slower with ~3 % round noise. The judge stopped its rounds because that workload was surely
    # slower, recorded the stop as "keep", and the verdict called it inconclusive, advising more
    # wide_rounds, which could never make it a keep.
    c = cfg()
    sd = list(ROUND_SD)
    sd[5] = 0.03
    for seed in range(6):
        bench = simulate(lambda w, rng: 1.045 if w == 5 else 0.84, seed, c, sd)
        v = PairedRatioRule().decide(bench, c)
        assert v["decision"] == "revert" and v["outcome"] == "guard", v["reason"]
        assert bench["stages"]["ab"]["ab"]["stopped"] == "guard"
        assert re.match(r"workload batch_size=32 is slower than its parent by \d\.\d% \(interval \[1\.0[2-9]", v["reason"])
        assert "wide_rounds" not in v["reason"] and v["blocked"][0]["kind"] == "slower"


def test_the_objectives_interval_is_read_on_the_rounds_every_workload_was_timed_in():
    # Rounds past the geomean's stop time only the workloads still too wide to call (stats.Rounds); when
    # every workload was, the verdict read the geomean on those extra rounds too: 15 rounds where the
    # judge had decided on 3 (a CPU-timed run, tests/test_gpu_local.py).
    c = cfg()
    bench = simulate(steady(0.97), 7, c)
    ab = bench["stages"]["ab"]["ab"]
    for w in ab["workloads"]:  # as if every workload had been timed on, past the judge's rounds
        w["log_ratios"] = w["log_ratios"] + w["log_ratios"][:3]
    v = PairedRatioRule().decide(bench, c)
    assert v["rounds"] == ab["rounds"], (v["rounds"], ab["rounds"])


class Colluding:
    """A candidate that copies outputs its parent left behind (a buffer of the trunk's kernel, kept earlier,
    shared through `/dev/shm`) in the rounds where the parent was timed first on the same input sets (half
    of them, at random), and computes them itself, at `own` x the parent's time, in the others."""

    def __init__(self, copied: float, own: float, seed: int) -> None:
        self.copied, self.own, self.rng, self.calls, self.factor = copied, own, random.Random(seed), [0] * N_WL, {}

    def __call__(self, w: int, rng: random.Random) -> float:
        r = self.calls[w] // CALLS[w]
        self.calls[w] += 1
        if (w, r) not in self.factor:
            self.factor[w, r] = self.copied if self.rng.random() < 0.5 else self.own
        return self.factor[w, r]


@pytest.mark.parametrize("copied,own", [(0.2, 1.0), (0.2, 1.1), (0.5, 1.05), (0.7, 1.03)])
def test_a_pair_that_shares_outputs_is_refused_unless_the_candidate_is_faster_on_its_own(copied, own):
    # Half its rounds run at the parent's pace or slower: a round where the parent went second reads as
    # no gain (unstable) or a slowdown (the guard), so the copied rounds carry nothing. What is left is a
    # candidate really faster on its own whose figure the copied rounds overstate (the README's threat model).
    c = cfg()
    vs = [PairedRatioRule().decide(simulate(Colluding(copied, own, k), 300 + k, c), c) for k in range(10)]
    assert not [v for v in vs if v["decision"] == "keep"], [v["reason"] for v in vs if v["decision"] == "keep"][:2]
    vs = [PairedRatioRule().decide(simulate(Colluding(0.2, 0.9, k), 400 + k, c), c) for k in range(3)]
    assert all(v["decision"] == "keep" for v in vs)  # really 0.9x, claimed ~0.45x: not caught by the rule


def test_a_verdict_says_on_which_workloads_the_judges_clock_could_not_catch_a_halved_figure():
    # The judge records, per timed workload on a GPU, the smallest under-report its clock can catch
    # (clock_limit_us). Windows of 2 calls of ~9 us kernels (the contest-shaped sparse attention): 12.5 us a
    # call, more than the kernel takes. The verdict's line says so; the decision is the rule's alone.
    b = simulate(steady(0.97), 7, cfg())
    plain = PairedRatioRule().decide(b, cfg())
    assert "judge's own clock" not in plain["figures"] + plain["reason"]
    for i, u in enumerate(IDS):
        b["stages"]["ab"]["workloads"]["candidate"][u].update(
            clock_limit_us=12.5 if i < 2 else 1.9, clock={"parent": [9.0] * 5})
    v = PairedRatioRule().decide(b, cfg())
    assert v["decision"] == plain["decision"]
    assert ("on 2 the judge's own clock could not have caught a figure under-reported by half"
            in v["figures"] + v["reason"]), v
    assert v["coverage"]["clock_weak"] == IDS[:2]
