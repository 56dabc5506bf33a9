"""The worker's timed path and anti-gaming checks, on CPU.

Planted Triton kernels run under the interpreter in a real worker subprocess; the timed rounds run
in-process with pure-torch kernels and the worker's host-clock timer (the local backend never uses
that timer; here it stands in for the GPU's so the rounds, the schema and the stopping are tested)."""
from __future__ import annotations

import inspect
import json
import re
import os
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from autogk_git.bench import runner  # noqa: E402
from autogk_git.bench.judge import calls, process, rounds  # noqa: E402
from autogk_git.bench.judge import inputs as jinputs

DATA = Path(__file__).resolve().parent / "data"
DEF = json.loads((DATA / "scale" / "definition.json").read_text())
WLS = [json.loads(l)["workload"] for l in (DATA / "scale" / "workloads.jsonl").read_text().splitlines()]


def honest(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)


def slow(x, bias, scale, out):
    time.sleep(0.002)
    torch.add(x * scale, bias, out=out)


def lazy_after(n):
    calls = [0]

    def run(x, bias, scale, out):
        calls[0] += 1
        if calls[0] <= n:
            torch.add(x * scale, bias, out=out)
    return run


def job(stage, workloads=None, **settings):
    s = {"device": "cpu", "timed": True, "trials": 2, "reps": 4, "warmup": 1, "min_rounds": 3, "max_rounds": 8,
         "min_effect": 0.01, "confidence": 0.95}
    s.update(settings)
    return {"version": 1, "stage": stage, "definition": DEF, "workloads": workloads or WLS[:2], "sources": {},
            "generator": None, "blob_root": ".", "settings": s, "seed": 11}


def run_inprocess(j, kernels):
    recs, summary, at = {}, {}, []

    def emit(**r):
        ev = r.pop("event")
        if ev == "done":
            recs[f"{r['label']}:{r['uuid']}"] = r
        elif ev in ("ab", "timing"):
            summary.update(r)
        elif ev == "at":
            at.append((r["label"], r["uuid"]))

    process.run_timed(j, {k: (v, None) for k, v in kernels.items()}, jinputs.Inputs(j, "cpu", None),
                jinputs.load_reference(DEF), "cpu", None, emit)
    return recs, summary, at


def test_the_judge_sends_its_quiet_flush_figure_with_every_time_request(monkeypatch):
    """Each kernel process measures one L2 flush before its kernel is imported, but beside the other label's
    process starting on the same GPU: 78.8 us against 32.6 us for every flush of the honest window after it
    (an H100, 2026-12-06), and an honest A/A candidate was TAMPERED by the flush floor. The judge measures
    the flush itself, every kernel process stopped, and sends that figure with every time request
    (timer.DeviceTimer.floor_reference takes the lower). On the CPU a host timer with a flush figure stands
    for the judge's device timer; on the old code no request carried one."""
    from autogk_git.bench.judge import label_window
    asked = []

    class Quiet(calls.HostTimer):
        def quiet_flush_us(self):
            asked.append(1)
            return 32.6
    monkeypatch.setattr(rounds, "HostTimer", Quiet)
    sent, real = [], label_window.time_batch

    def time_batch(fn, sets, outs, warm_set, warm_outs, settings, *a, **k):
        sent.append(settings.get("quiet_flush_us"))
        return real(fn, sets, outs, warm_set, warm_outs, settings, *a, **k)
    monkeypatch.setattr(label_window, "time_batch", time_batch)
    recs, s, _ = run_inprocess(job("ab", min_rounds=2, max_rounds=2), {"parent": honest, "candidate": honest})
    assert {r["status"] for r in recs.values()} == {"PASSED"}, recs
    assert asked == [1] and len(sent) >= 8 and set(sent) == {32.6}, (asked, sent)


def test_planted_cheats_are_rejected_with_a_status_that_says_why():
    names = ["honest", "cache_by_pointer", "partial_write", "changes_input", "early_return_seen"]
    j = {"version": 1, "stage": "quick", "definition": DEF, "workloads": WLS[:1], "generator": None,
         "blob_root": ".", "seed": 3, "settings": {"trials": 2, "device": "cpu"},
         "sources": {n: {"kernel.py": (DATA / "cheats" / f"{n}.py").read_text()} for n in names}}
    out = runner.run_worker(j, dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES=""), 300)
    got = {label: next(iter(w.values())) for label, w in out["labels"].items()}
    assert got["honest"]["status"] == "PASSED"
    assert got["cache_by_pointer"]["status"] == "INCORRECT_NUMERICAL"
    assert "new values in the same input and output buffers" in got["cache_by_pointer"]["message"]
    assert got["partial_write"]["status"] == "INCORRECT_NUMERICAL"
    assert re.search("NaN|still held the random values", got["partial_write"]["message"]), got["partial_write"]
    assert got["changes_input"]["status"] == "INPUT_MODIFIED" and "input x" in got["changes_input"]["message"]
    assert got["early_return_seen"]["status"] == "INCORRECT_NUMERICAL"
    assert "already seen" in got["early_return_seen"]["message"]


def test_ab_rounds_record_paired_samples_and_an_interval():
    recs, s, at = run_inprocess(job("ab"), {"parent": honest, "candidate": honest})
    assert s["baseline"] == "parent" and s["timer"] == "host" and 3 <= s["rounds"] <= 8
    assert s["ci_low"] <= s["ratio"] <= s["ci_high"] and len(s["round_log_ratios"]) == s["rounds"]
    for u in (WLS[0]["uuid"], WLS[1]["uuid"]):
        c, p = recs[f"candidate:{u}"], recs[f"parent:{u}"]
        assert c["status"] == p["status"] == "PASSED"
        assert len(c["samples_us"]) == len(p["samples_us"]) == s["rounds"]
        assert c["latency_us"] > 0 and c["host_latency_us"] > 0 and c["ratio_vs_parent"] > 0
        assert c["ratio_ci"][0] <= c["ratio_vs_parent"] <= c["ratio_ci"][1]
        assert c["calls_per_round"] == 4 and c["method"] == "host"
    # Both orders happen: the label timed first alternates at random across rounds and workloads.
    firsts = {at[i][0] for i in range(0, len(at), 2)}
    assert firsts == {"parent", "candidate"}


def test_a_clear_regression_stops_at_the_first_look():
    recs, s, _ = run_inprocess(job("ab", workloads=WLS[:1]), {"parent": honest, "candidate": slow})
    # Either rule may end it at that look, both a revert: the geomean's two-sided interval past 1 (regression),
    # or, where the host clock's noise on a loaded machine leaves that interval short of clear at 3 rounds, the
    # workload's one-sided bound past 1 + guard (guard: stats.Rounds.after_round; seen once in CI, 2026-12-07).
    assert s["rounds"] == 3 and s["stopped"] in ("regression", "guard"), s
    assert s["outcome"] == "regression" or s["stopped"] == "guard", s
    assert recs[f"candidate:{WLS[0]['uuid']}"]["ratio_vs_parent"] > 1.5


def test_a_kernel_that_skips_work_once_timed_fails_in_the_timed_calls():
    recs, s, _ = run_inprocess(job("ab", workloads=WLS[:1]), {"parent": honest, "candidate": lazy_after(9)})
    c = recs[f"candidate:{WLS[0]['uuid']}"]
    assert c["status"] == "INCORRECT_NUMERICAL" and "timed call" in c["message"] and "poison" in c["message"]
    assert s["rounds"] == 0 and s["outcome"] == "inconclusive"


def test_stride_times_the_reference_for_a_speedup():
    recs, s, _ = run_inprocess(job("stride", workloads=WLS[3:4]), {"candidate": honest})
    c = recs[f"candidate:{WLS[3]['uuid']}"]
    assert s["baseline"] == "reference" and c["rounds"] == 3
    assert c["speedup_vs_reference"] == pytest.approx(c["reference_latency_us"] / c["latency_us"])


def test_a_latency_below_the_byte_floor_is_flagged(monkeypatch):
    monkeypatch.setattr(calls.HostTimer, "bandwidth", lambda self: 1e3)  # 1 kB/s: every timing is "too fast"
    recs, _, _ = run_inprocess(job("stride", workloads=WLS[3:4]), {"candidate": honest})
    c = recs[f"candidate:{WLS[3]['uuid']}"]
    assert c["status"] == "BELOW_FLOOR" and "physical floor" in c["message"]
    assert c["floor_us"] == pytest.approx(4096 * 4 * 3 / 1e3 * 1e6)


def test_floor_bytes_counts_outputs_and_inputs_or_only_integers_when_gathering():
    assert jinputs.floor_bytes(DEF, {"n": 10}) == (120, "outputs + inputs, each once")
    gather = {"inputs": {"table": {"shape": ["n", "d"], "dtype": "float32"}, "idx": {"shape": ["k"], "dtype": "int32"}},
              "outputs": {"out": {"shape": ["k", "d"], "dtype": "float32"}}}
    nb, rule = jinputs.floor_bytes(gather, {"n": 1000, "d": 4, "k": 2})
    assert nb == 2 * 4 * 4 + 2 * 4 and "integer" in rule


def wrong_on_big(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
    if x.numel() >= 4096:  # the largest workload only
        out.mul_(1.5)


def counting(fn):
    calls = [0]

    def run(*a):
        calls[0] += 1
        fn(*a)
    run.calls = calls
    return run


def test_an_ab_job_screens_the_candidate_first_and_stops_there_when_it_fails():
    big = max(WLS, key=lambda w: w["axes"]["n"])
    small = min(WLS, key=lambda w: w["axes"]["n"])
    parent = counting(honest)
    j = job("ab", workloads=WLS, screen=[small["uuid"], big["uuid"]], parent_light=True)
    recs, s, _ = run_inprocess(j, {"parent": parent, "candidate": wrong_on_big})
    assert recs[f"candidate:{big['uuid']}"]["status"] == "INCORRECT_NUMERICAL"
    assert recs[f"candidate:{small['uuid']}"]["status"] == "PASSED"
    rest = [k for k in recs if k not in (f"candidate:{big['uuid']}", f"candidate:{small['uuid']}")]
    assert len(rest) == 2 * len(WLS) - 2 and {recs[k]["status"] for k in rest} == {"NOT_RUN"}
    assert all("failed the screen" in recs[k]["message"] for k in rest)
    assert parent.calls[0] == 0 and s["rounds"] == 0 and s["stopped"] == "screen failed"


def test_a_screened_ab_job_checks_every_workload_and_the_parent_on_one_input_set():
    parent, cand = counting(honest), counting(honest)
    j = job("ab", workloads=WLS[:2], screen=[WLS[0]["uuid"]], parent_light=True, min_rounds=2, max_rounds=2)
    recs, s, _ = run_inprocess(j, {"parent": parent, "candidate": cand})
    assert {r["status"] for r in recs.values()} == {"PASSED"} and len(recs) == 4 and s["rounds"] == 2
    # timed calls: warm-up + reps + host-latency calls per round, the same for both labels; the
    # correctness calls differ: the parent is called once per workload, the candidate trials + 2 times,
    # then on the stress sets (scaled_rows, outliers and shifted_rows: the inputs are vectors; other_scalars:
    # scale) and one unlisted shape;
    # after the last round the parent is timed once more, on the candidate's last sets (rounds.py:
    # settle_pending), for the comparison of its outputs there: one warm-up, the reps and one host call.
    assert cand.calls[0] - parent.calls[0] == 2 * ((2 + 2 + 4 + 1) - 1) - 2 * (1 + 4 + 1)


def test_reference_calls_an_ab_job_makes():
    """The timed calls' outputs are read on `verify_sets` sets over the first min_rounds rounds (then one a
    round): with a reference that loops in Python, these calls were most of a DSA experiment's time. The
    parent's one check set is its own (never one of the candidate's), so it costs a reference call."""
    base = jinputs.load_reference(DEF)

    def ref(*a):
        ref.calls[0] += 1
        return base(*a)
    ref.calls = [0]
    j = job("ab", workloads=WLS[:2], parent_light=True, trials=2, min_rounds=3, max_rounds=3, verify_sets=2,
            timed_stress=False)
    recs, _, _ = W_run_with_reference(j, {"parent": honest, "candidate": honest}, ref)
    assert {r["status"] for r in recs.values()} == {"PASSED"}
    # per workload: the candidate's 2 sets + the parent's own one + the set refilled in the same buffers
    # + 2 verified timed calls + 4 stress sets and 1 unlisted shape.
    assert ref.calls[0] == 2 * (2 + 1 + 1 + 2 + 5)
    # With a stress set in each window (the default): one reference call more a round and workload, where
    # the stressed set was not in the sample already (its reference outputs come with it).
    ref.calls = [0]
    j["settings"]["timed_stress"] = True
    recs, _, _ = W_run_with_reference(j, {"parent": honest, "candidate": honest}, ref)
    assert {r["status"] for r in recs.values()} == {"PASSED"}
    assert 2 * (2 + 1 + 1 + 5) + 2 * 3 <= ref.calls[0] <= 2 * (2 + 1 + 1 + 2 + 5) + 2 * 3, ref.calls[0]


def W_run_with_reference(j, kernels, reference):
    recs = {}

    def emit(**r):
        if r.pop("event") == "done":
            recs[f"{r['label']}:{r['uuid']}"] = r
    process.run_timed(j, {k: (v, None) for k, v in kernels.items()}, jinputs.Inputs(j, "cpu", None), reference, "cpu", None, emit)
    return recs, None, None


def test_the_verify_plan_reads_some_early_rounds_at_random_and_every_later_one():
    import random
    plans = [rounds.verify_plan({"min_rounds": 5, "verify_sets": 3}, ["a", "b"], random.Random(s)) for s in range(40)]
    for p in plans:
        assert p["early"] == 5
        for u in ("a", "b"):
            assert sum(p[u].values()) == 3 and set(p[u]) <= set(range(5))
    # the rounds vary, so a kernel cannot know which of its timed calls are read
    assert len({tuple(sorted(p["a"].items())) for p in plans}) > 5
    # rounds after the early ones: one verified call each (timed_rounds' default for a missing round)
    assert all(5 not in p["a"] for p in plans)


def wrong_late(n):
    """Right for its first n calls, then wrong (zeros: not NaN, so the poison check cannot see it)."""
    calls = [0]

    def run(x, bias, scale, out):
        calls[0] += 1
        torch.add(x * scale, bias, out=out)
        if calls[0] > n:
            out.zero_()
    return run


def test_a_kernel_wrong_only_after_the_early_rounds_is_caught(monkeypatch):
    """Right for every correctness call and the early rounds' timed calls, then wrong (not NaN, so the
    poison check cannot see it): a later round's verified call catches it."""
    plan = rounds.verify_plan
    # one early round, and it reads nothing: only the later rounds' one-a-round reads can catch it
    monkeypatch.setattr(rounds, "verify_plan", lambda s, u, rng: {**plan({**s, "min_rounds": 1}, u, rng),
                                                            **{x: {} for x in u}})
    j = job("ab", workloads=WLS[:1], trials=2, min_rounds=4, max_rounds=4)
    # correctness: 2 trials + 2 repeats + 2 stress sets + 1 unlisted shape = 7 calls; a round: 1 warm-up
    # + 4 reps + 10 host calls = 15
    recs, s, _ = run_inprocess(j, {"parent": honest, "candidate": wrong_late(7 + 2 * 15)})
    c = recs[f"candidate:{WLS[0]['uuid']}"]
    assert c["status"] == "INCORRECT_NUMERICAL" and "timed call" in c["message"]
    # and with no reference read at all, every timed call is still compared with the parent's (cross_check)
    monkeypatch.setattr(rounds, "verify_plan", lambda s, u, rng: {"early": 10, **{x: {} for x in u}})
    j["settings"]["timed_stress"] = False  # nor the stress set's call, which is always read
    recs, s, _ = run_inprocess(j, {"parent": honest, "candidate": wrong_late(7 + 2 * 15)})
    c = recs[f"candidate:{WLS[0]['uuid']}"]
    assert c["status"] == "INCORRECT_NUMERICAL" and "the sample did not read" in c["message"]


def test_a_kernel_wrong_only_in_the_last_round_is_compared_with_the_parent_on_the_same_sets(monkeypatch):
    """The parent is timed on the candidate's sets of the round before, so the candidate's outputs of the
    last round meet the parent's only when the parent runs once more after it (settle_pending): a kernel
    right until then, with no reference read at all, is still caught there."""
    monkeypatch.setattr(rounds, "verify_plan", lambda s, u, rng: {"early": 10, **{x: {} for x in u}})
    j = job("ab", workloads=WLS[:1], trials=2, min_rounds=4, max_rounds=4, timed_stress=False)
    # correctness 7 calls, then 15 a round (see the test above): wrong from the fourth round's first call on
    recs, s, _ = run_inprocess(j, {"parent": honest, "candidate": wrong_late(7 + 3 * 15)})
    c = recs[f"candidate:{WLS[0]['uuid']}"]
    assert s["rounds"] == 4 and c["status"] == "INCORRECT_NUMERICAL" and "the sample did not read" in c["message"], c


def test_a_parent_that_fails_in_its_window_after_the_last_round_blocks_the_comparison():
    """The parent's extra window (settle_pending) is a parent's run like any other: a parent that raises
    there is the parent's failure, recorded as such, and the candidate is not timed on that workload."""
    calls = [0]

    def parent(x, bias, scale, out):
        calls[0] += 1
        if calls[0] > 7 + 2 * 15:  # correctness 7, two rounds of 15: its first call after the last round
            raise RuntimeError("the parent fails on the candidate's last sets")
        torch.add(x * scale, bias, out=out)
    j = job("ab", workloads=WLS[:1], min_rounds=2, max_rounds=2)
    recs, s, _ = run_inprocess(j, {"parent": parent, "candidate": honest})
    u = WLS[0]["uuid"]
    assert recs[f"parent:{u}"]["status"] == "RUNTIME_ERROR" and "last sets" in recs[f"parent:{u}"]["message"]
    assert "not timed: the parent failed here" in recs[f"candidate:{u}"]["message"], recs[f"candidate:{u}"]


def test_a_parent_window_after_the_last_round_that_never_opens_in_time_judges_nothing(monkeypatch):
    """That window is the only comparison of the candidate's last outputs: where the judge's gate opens too
    early in every try (witness.Early), the workload is a harness error, never a pass without it."""
    real, windows = rounds.time_label, []

    def time_label(tk, *a, **k):
        if tk.label == "parent":
            windows.append(1)
            if len(windows) > 2:  # two rounds, then the window after the last one
                raise rounds.Early("the gate opened before the calls were queued")
        return real(tk, *a, **k)
    monkeypatch.setattr(rounds, "time_label", time_label)
    j = job("ab", workloads=WLS[:1], min_rounds=2, max_rounds=2)
    recs, s, _ = run_inprocess(j, {"parent": honest, "candidate": honest})
    c = recs[f"candidate:{WLS[0]['uuid']}"]
    assert c["status"] == "HARNESS_ERROR" and "could not hold the gate" in c["message"], c
    assert len(windows) == 2 + rounds.EARLY_TRIES


class _TimerFailed(Exception):
    """Stands for timer.TimerError (a device timer that cannot time these calls) on the CPU."""


def _timer_failing_in_the_window_after_the_last_round(monkeypatch, failing: set):
    """Rounds whose device timers are host clocks named after the GPU's, the parent's window after the last
    of two rounds failing on every timer named in `failing`; returns the timers that window was tried with."""
    class Named(calls.HostTimer):
        def __init__(self, method):
            self.method = method
    monkeypatch.setattr(rounds, "timer_errors", lambda device: (_TimerFailed,), raising=False)
    monkeypatch.setattr(rounds, "device_timer", Named, raising=False)
    real, windows, tried = rounds.time_label, [], []

    def time_label(tk, sets, warm, job, wl, reference, device, rng, method_timer, *a, **k):
        if tk.label == "parent":
            windows.append(1)
            if len(windows) > 2:  # two rounds, then the window after the last one
                tried.append(method_timer.method)
                if method_timer.method in failing:
                    raise _TimerFailed(f"{method_timer.method}: the profiler missed a flush")
        return real(tk, sets, warm, job, wl, reference, device, rng, method_timer, *a, **k)
    monkeypatch.setattr(rounds, "time_label", time_label)
    return tried


def test_a_timer_failing_in_the_parents_window_after_the_last_round_is_not_the_parents_fault(monkeypatch):
    """A device timer that cannot time the parent's extra window (CUPTI missing a flush) says nothing of the
    parent: the window is made again with the other timer (its figures are not used) and the candidate's
    last outputs are compared as ever. Before, the judge blamed the parent, which blocked the keep."""
    tried = _timer_failing_in_the_window_after_the_last_round(monkeypatch, {"host"})
    j = job("ab", workloads=WLS[:1], min_rounds=2, max_rounds=2)
    recs, s, _ = run_inprocess(j, {"parent": honest, "candidate": honest})
    u = WLS[0]["uuid"]
    assert recs[f"parent:{u}"]["status"] == "PASSED", recs[f"parent:{u}"]
    assert recs[f"candidate:{u}"]["status"] == "PASSED", recs[f"candidate:{u}"]
    assert tried == ["host", "cupti"]


def test_a_window_after_the_last_round_that_no_timer_can_time_judges_nothing(monkeypatch):
    """Where neither device timer can time that window, the candidate's last outputs are not compared: a
    harness error on the candidate's record (nothing judged there), not a parent failure and not a pass."""
    tried = _timer_failing_in_the_window_after_the_last_round(monkeypatch, {"host", "cupti", "cudagraph"})
    j = job("ab", workloads=WLS[:1], min_rounds=2, max_rounds=2)
    recs, s, _ = run_inprocess(j, {"parent": honest, "candidate": honest})
    u = WLS[0]["uuid"]
    c = recs[f"candidate:{u}"]
    assert c["status"] == "HARNESS_ERROR" and "either device timer" in c["message"], c
    assert recs[f"parent:{u}"]["status"] == "PASSED", recs[f"parent:{u}"]
    assert tried == ["host", "cupti", "cudagraph"]


def _cupti_failing_for(monkeypatch, labels: set):
    """Rounds whose main timer is a host clock named "cupti" (the fallback one named "cudagraph"), whose
    "cupti" windows fail for the labels named; returns (label, timer) of every window tried."""
    class Named(calls.HostTimer):
        def __init__(self, method):
            self.method = method
    monkeypatch.setattr(rounds, "timer_errors", lambda device: (_TimerFailed,), raising=False)
    monkeypatch.setattr(rounds, "device_timer", Named, raising=False)
    monkeypatch.setattr(rounds, "HostTimer", lambda: Named("cupti"), raising=False)
    real, tried = rounds.time_label, []

    def time_label(tk, sets, warm, job, wl, reference, device, rng, method_timer, *a, **k):
        tried.append((tk.label, method_timer.method))
        if tk.label in labels and method_timer.method == "cupti":
            raise _TimerFailed("cupti timer: saw 11 flushes for 10 calls")
        return real(tk, sets, warm, job, wl, reference, device, rng, method_timer, *a, **k)
    monkeypatch.setattr(rounds, "time_label", time_label)
    return tried


def test_a_candidate_that_cupti_cannot_time_where_its_parent_can_is_not_moved_to_another_timer(monkeypatch):
    """A kernel can make CUPTI fail (a kernel of its own named like the flush); the fallback (CUDA graphs) is
    the weaker timer (work overlapped with its flushes, skipped in its later replays). On the old code every
    such failure moved both labels to it; now, where CUPTI times the parent, the candidate fails."""
    tried = _cupti_failing_for(monkeypatch, {"candidate"})
    j = job("ab", workloads=WLS[:1], min_rounds=2, max_rounds=2)
    recs, s, _ = run_inprocess(j, {"parent": honest, "candidate": honest})
    c = recs[f"candidate:{WLS[0]['uuid']}"]
    assert c["status"] == "RUNTIME_ERROR" and "could not be timed by CUPTI, which timed its parent" in c["message"], c
    assert ("candidate", "cudagraph") not in tried and ("parent", "cupti") in tried, tried


def test_where_cupti_times_neither_label_both_move_to_the_other_timer(monkeypatch):
    # The machine's CUPTI, not the candidate: the parent is timed first to tell, then both labels move.
    tried = _cupti_failing_for(monkeypatch, {"candidate", "parent"})
    j = job("ab", workloads=WLS[:1], min_rounds=2, max_rounds=2)
    recs, s, _ = run_inprocess(j, {"parent": honest, "candidate": honest})
    u = WLS[0]["uuid"]
    assert recs[f"candidate:{u}"]["status"] == "PASSED", recs[f"candidate:{u}"]
    assert ("candidate", "cudagraph") in tried and ("parent", "cudagraph") in tried, tried


def test_the_candidate_is_never_timed_on_inputs_the_parent_has_seen():
    """A trunk kernel made to leave its outputs for the next candidate (a buffer shared through /dev/shm)
    is useless if the candidate never gets inputs the parent has had first: the parent records every input
    it sees, the candidate counts those it is given again; in the correctness checks too (the parent's
    check sets are its own: tests/bench/judge/test_checks.py). On the old code 104 of 194 were."""
    seen = {}

    def key(x) -> bytes:
        return x.contiguous().numpy().tobytes()

    def parent(x, bias, scale, out):
        seen[key(x)] = True
        torch.add(x * scale, bias, out=out)

    def cand(x, bias, scale, out):
        cand.again += key(x) in seen
        cand.calls += 1
        torch.add(x * scale, bias, out=out)
    cand.again = cand.calls = 0
    j = job("ab", workloads=WLS[3:5], min_rounds=6, max_rounds=6)
    recs, s, _ = run_inprocess(j, {"parent": parent, "candidate": cand})
    assert {r["status"] for r in recs.values()} == {"PASSED"} and s["rounds"] == 6
    assert cand.calls > 100 and cand.again == 0, (cand.again, cand.calls)


def _cheat(name: str) -> dict:
    return {"kernel.py": (DATA / "cheats" / f"{name}.py").read_text()}


def test_a_kernel_that_patches_what_calls_or_times_it_fails_with_tampered():
    # The timings are made in the kernel's own process: a kernel can reach the judge's timer through
    # sys.modules. Patched at import, or later during a call, it fails with TAMPERED; an honest kernel
    # that imports torch._dynamo (which rewraps some torch functions) is no tampering.
    names = ["torch_honest", "imports_dynamo", "patches_timer", "replaces_time_batch", "slows_clock_when_timed"]
    # No stress sets: slows_clock_when_timed counts its calls, and this test is about the seal.
    j = {"version": 1, "stage": "quick", "definition": DEF, "workloads": WLS[:2], "generator": None,
         "blob_root": ".", "seed": 3, "settings": {"trials": 3, "device": "cpu", "stress": False},
         "sources": {n: _cheat(n) for n in names}}
    out = runner.run_worker(j, dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES=""), 300)
    got = {label: list(w.values()) for label, w in out["labels"].items()}
    assert {r["status"] for r in got["torch_honest"]} == {"PASSED"}
    assert {r["status"] for r in got["imports_dynamo"]} == {"PASSED"}, got["imports_dynamo"]
    for name, what in (("patches_timer", "calls.HostTimer.time_calls"), ("replaces_time_batch", "calls.time_batch")):
        assert {r["status"] for r in got[name]} == {"TAMPERED"}, (name, got[name])
        assert all(what in r["message"] and "may not patch" in r["message"] and "on import" in r["message"]
                   for r in got[name]), got[name]
    # Patched during its 8th call (the second workload's checks): that workload fails, and so would
    # every later request of the process.
    late = [out["labels"]["slows_clock_when_timed"][w["uuid"]] for w in WLS[:2]]
    assert [r["status"] for r in late] == ["PASSED", "TAMPERED"], late
    assert "time.perf_counter" in late[1]["message"] and "on import" not in late[1]["message"]


def test_a_kernel_that_slows_the_clock_once_timed_is_not_faster_but_tampered():
    # The same kernel in an ab job: honest through the checks, then from its 8th call on it divides
    # the clock the host timer reads by 3 (a "3x speedup"). The seal sees the patch after that
    # request, so no figure it made is sent.
    j = job("ab", workloads=WLS[3:4], min_rounds=3, max_rounds=3)
    j["sources"] = {"parent": _cheat("torch_honest"), "candidate": _cheat("slows_clock_when_timed")}
    out = runner.run_worker(j, dict(os.environ, CUDA_VISIBLE_DEVICES=""), 300)
    c = out["labels"]["candidate"][WLS[3]["uuid"]]
    assert c["status"] == "TAMPERED" and "time.perf_counter" in c["message"], c
    assert c.get("ratio_vs_parent") is None
    p = out["labels"]["parent"][WLS[3]["uuid"]]
    assert p["status"] == "PASSED"


def against_sleeps_honest(candidate: str, reps: int = 6) -> tuple[dict, dict]:
    """An ab job on one small workload: the planted kernel against the honest one that does its work
    (`reps` timed calls a round, 2 warm-up calls); (the result, the candidate's record)."""
    j = job("ab", workloads=WLS[4:5], min_rounds=3, max_rounds=3, reps=reps, warmup=2)
    j["sources"] = {"parent": _cheat("sleeps_honest"), "candidate": _cheat(candidate)}
    out = runner.run_worker(j, dict(os.environ, CUDA_VISIBLE_DEVICES=""), 300)
    return out, out["labels"]["candidate"][WLS[4]["uuid"]]


def test_work_left_past_the_timed_window_is_not_a_speedup():
    # The candidate does the parent's work, but in a timed batch it only remembers the calls and does
    # them in the untimed calls after the window. Its outputs are right by the end of the request;
    # they were not at the end of the window, which is what the judge reads now.
    out, c = against_sleeps_honest("defers_past_window")
    assert c["status"] in ("INCORRECT_NUMERICAL", "STREAM_ORDER"), c
    assert "timed window" in c["message"], c
    assert c.get("ratio_vs_parent") is None
    assert out["labels"]["parent"][WLS[4]["uuid"]]["status"] == "PASSED"


def test_a_kernel_that_does_its_windows_work_in_one_call_is_not_faster():
    # The candidate does the parent's work, all of it inside the window: in the window's first call it
    # finds the other calls in its caller's frames and computes every one of them, then returns at once
    # from the rest. The window is as long as the parent's, so the judge's clock (which compares whole
    # windows) sees nothing; on the old code the window's figure was its calls' median: PASSED at 0.0014x.
    # It is their mean now.
    out, c = against_sleeps_honest("bunches_its_calls", reps=20)
    assert c["status"] in ("PASSED", "TAMPERED"), c
    assert c.get("ratio_vs_parent") is None or c["ratio_vs_parent"] > 0.9, c
    assert out["labels"]["parent"][WLS[4]["uuid"]]["status"] == "PASSED"


@pytest.mark.parametrize("edit", [{}, {"DETACH": True}, {"RENAME": True}], ids=["children", "daemons", "renamed"])
def test_nothing_the_candidate_started_runs_while_its_parent_is_timed(edit, tmp_path):
    # The candidate does its parent's work call for call (fixed Python steps, no sleep), and at import forks
    # burners, four a core, that spin whenever it has not been called for 5 ms: through the parent's
    # windows. On the old code, idle 2-core machine: PASSED at 0.60, 0.67 and 0.81x (printed below under -s),
    # with 2,835-3,313 bursts inside the parent's timed calls (children); now 0.97-1.04x. Every other
    # process of the job's kernels is now stopped while one label is timed, daemons the judge adopted (a
    # double fork and setsid) among them, and burners named as torch's shared-memory manager (a helper of
    # the judge's, told by its program now). A ratio is as noisy as the machine's load, so what is asserted
    # is the mechanism: no burst of spinning starts inside any of the parent's timed calls.
    src = _cheat("burns_the_cpu_while_the_other_is_timed")["kernel.py"]
    for name in edit:
        src = src.replace(f"{name} = False", f"{name} = True", 1)
    src = {"kernel.py": src}
    calls, bursts = tmp_path / "calls.log", tmp_path / "bursts.log"
    j = job("ab", workloads=WLS[4:5], min_rounds=3, max_rounds=3, reps=6, warmup=2)
    j["sources"] = {"parent": _cheat("busy_honest"), "candidate": src}
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", AUTOGK_SANDBOX="0",  # they write where the test reads
               AUTOGK_TEST_CALL_LOG=str(calls), AUTOGK_TEST_BURN_LOG=str(bursts))
    out = runner.run_worker(j, env, 300)
    c = out["labels"]["candidate"][WLS[4]["uuid"]]
    # TAMPERED: the burners, spinning until they see their kernel called, can take the cores from the
    # judge's clock at the start of the candidate's own window (a refusal, as the clock gives)
    assert c["status"] in ("PASSED", "TAMPERED"), c
    print(c["status"], c.get("ratio_vs_parent"), c.get("message", "")[:300])
    assert out["labels"]["parent"][WLS[4]["uuid"]]["status"] == "PASSED"
    timed = [tuple(map(float, line.split())) for line in calls.read_text().split("\n") if line]
    starts = sorted(float(line) for line in bursts.read_text().split("\n") if line)
    assert len(timed) >= 6 and len(starts) > 100, (len(timed), len(starts))  # the parent timed, the burners ran
    inside = [(t, a, b) for a, b in timed for t in starts if a <= t <= b]
    assert not inside, f"{len(inside)} bursts started inside the parent's timed calls, e.g. {inside[:3]}"


# The scale target's reference with a fixed amount of CPU work a call, appending the start and end of each
# call the judge times (its timer's `time_calls` among the callers) where AUTOGK_TEST_CALL_LOG says.
LOGGED_REFERENCE = """import os, sys, time
import torch
LOG = os.environ.get("AUTOGK_TEST_CALL_LOG")
def run(x, bias, scale):
    t0 = time.monotonic()
    acc = 0
    for i in range(60_000):
        acc += i & 7
    out = x * scale + bias
    f = sys._getframe(1)
    while f is not None and f.f_code.co_name != "time_calls":
        f = f.f_back
    if LOG and f is not None:
        with open(LOG, "a") as fh:
            fh.write(f"{t0} {time.monotonic()}\\n")
    return out
"""


def test_nothing_the_candidate_started_runs_while_the_judge_times_the_reference(tmp_path):
    # The stride stage times the reference in the judge's own process: the candidate's burners, spinning
    # through it, slowed it (a larger speedup over the reference, and under `contest` heavier weights where
    # they spun); on the old code 1,691 and 2,836 of their bursts started inside its timed calls (two runs).
    calls, bursts = tmp_path / "calls.log", tmp_path / "bursts.log"
    j = job("stride", workloads=WLS[4:5], min_rounds=3, max_rounds=3, reps=6, warmup=2)
    j["definition"] = dict(DEF, reference=LOGGED_REFERENCE)
    j["sources"] = {"candidate": _cheat("burns_the_cpu_while_the_other_is_timed")}
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", AUTOGK_SANDBOX="0",  # they write where the test reads
               AUTOGK_TEST_CALL_LOG=str(calls), AUTOGK_TEST_BURN_LOG=str(bursts))
    out = runner.run_worker(j, env, 300)
    c = out["labels"]["candidate"][WLS[4]["uuid"]]
    assert c["status"] in ("PASSED", "TAMPERED"), c
    timed = [tuple(map(float, line.split())) for line in calls.read_text().split("\n") if line]
    starts = sorted(float(line) for line in bursts.read_text().split("\n") if line)
    assert len(timed) >= 6 and len(starts) > 100, (len(timed), len(starts))
    inside = [(t, a, b) for a, b in timed for t in starts if a <= t <= b]
    assert not inside, f"{len(inside)} bursts started inside the reference's timed calls, e.g. {inside[:3]}"


def test_a_kernel_fitted_to_n01_in_its_timed_calls_alone_is_caught_there():
    # Exact in the checks (the stress sets ran there alone), clamped to [-4, 4] in the timed calls: on the old
    # code every timed set was N(0,1) and it PASSED. One call a window now holds a stress set, compared with
    # the reference (5 rounds: the vector's scaled set crosses 4 in ~92 % of draws, an outlier always,
    # shifted rows in about half).
    j = job("ab", workloads=WLS[4:5], min_rounds=5, max_rounds=5, reps=6, warmup=1)
    j["sources"] = {"parent": _cheat("torch_honest"), "candidate": _cheat("fitted_when_timed")}
    out = runner.run_worker(j, dict(os.environ, CUDA_VISIBLE_DEVICES=""), 300)
    c = out["labels"]["candidate"][WLS[4]["uuid"]]
    assert c["status"] == "INCORRECT_NUMERICAL" and "timed" in c["message"], c
    assert out["labels"]["parent"][WLS[4]["uuid"]]["status"] == "PASSED"


def test_the_judge_draws_inputs_no_kernel_can_replay(tmp_path):
    # The job's seed is readable (a kernel can find the job, or knows its commit); the inputs are drawn
    # from it mixed with a secret of the judge's process, so the same job gives other values each run.
    log = tmp_path / "seen.txt"
    src = ("import torch\n"
           f"LOG = {str(log)!r}\n"
           "def run(x, bias, scale, out):\n"
           "    open(LOG, 'a').write(repr(round(float(x.double().sum()), 6)) + '\\n')\n"
           "    torch.add(x * scale, bias, out=out)\n")
    j = {"version": 1, "stage": "quick", "definition": DEF, "workloads": WLS[:1], "generator": None,
         "blob_root": ".", "seed": 3, "settings": {"trials": 1, "device": "cpu", "repeat_checks": False},
         "sources": {"candidate": {"kernel.py": src}}}
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", AUTOGK_SANDBOX="0")  # the kernel writes where the test reads
    firsts = []
    for _ in range(2):
        before = len(log.read_text().split()) if log.exists() else 0
        assert runner.run_worker(j, env, 300)["labels"]["candidate"][WLS[0]["uuid"]]["status"] == "PASSED"
        firsts.append(log.read_text().split()[before])  # the run's first call: its first input set
    assert firsts[0] != firsts[1]


def test_a_name_added_to_a_sealed_class_or_a_thread_is_tampering():
    # A `__getattribute__` given to the timer's class replaces no value the seal held; a thread can
    # patch and restore between checks. Both fail at import, before any figure is made.
    names = ["torch_honest", "imports_dynamo", "adds_getattribute", "starts_thread"]
    j = {"version": 1, "stage": "quick", "definition": DEF, "workloads": WLS[:1], "generator": None,
         "blob_root": ".", "seed": 3, "settings": {"trials": 1, "device": "cpu"},
         "sources": {n: _cheat(n) for n in names}}
    out = runner.run_worker(j, dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES=""), 300)
    got = {label: list(w.values())[0] for label, w in out["labels"].items()}
    assert got["torch_honest"]["status"] == got["imports_dynamo"]["status"] == "PASSED", got
    assert got["adds_getattribute"]["status"] == "TAMPERED", got["adds_getattribute"]
    assert "calls.HostTimer:names" in got["adds_getattribute"]["message"]
    assert got["starts_thread"]["status"] == "TAMPERED" and "thread" in got["starts_thread"]["message"], got


def test_a_clock_patched_inside_the_timed_window_and_put_back_changes_no_figure():
    # The kernel slows the clock from its first call of a batch and puts it back before the window
    # ends (on the old code: PASSED at 0.33). Patched during the warm-up, the seal's check right before
    # the window sees it (TAMPERED); patched inside the window, the timer reads the clock it bound
    # before the window, so the figure is the honest one. Either way no false speedup comes out.
    _, c = against_sleeps_honest("patches_clock_in_window")
    assert c["status"] in ("TAMPERED", "PASSED"), c
    assert c.get("ratio_vs_parent") is None if c["status"] == "TAMPERED" else c["ratio_vs_parent"] > 0.8, c


SNOOPS = '''import os, signal, torch
SECRET = {secret!r}
def _can_read(path):
    try:
        open(path).read()
        return True
    except OSError:
        return False
READ = _can_read(SECRET)
KILLED = []
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    try:
        cmd = open(f"/proc/{{pid}}/cmdline", "rb").read()
    except OSError:
        continue
    if b"kernel_process" in cmd:  # the other label's process
        try:
            os.kill(int(pid), signal.SIGKILL)
            KILLED.append(pid)
        except OSError:
            pass
def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
    if READ:
        out.zero_()  # what it read would let it cheat: here it only shows that it could
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock is Linux's")
def test_a_kernel_cannot_read_the_project_or_signal_its_sibling(tmp_path):
    # A file beside the project (as the repository, the job and the judge's record are) is out of the
    # kernel's reach, and so is the other label's process: the candidate that reads the file or kills
    # its parent gets nothing and the parent is judged as usual.
    from autogk_git.bench.judge import sandbox
    if sandbox.abi() < 6:
        pytest.skip("needs Landlock ABI 6 (signal scoping)")
    secret = tmp_path / "trunk_kernel.py"
    secret.write_text("the trunk's kernel")
    j = job("ab", workloads=WLS[4:5], min_rounds=3, max_rounds=3, reps=4, warmup=1)
    j["sources"] = {"parent": _cheat("sleeps_honest"),
                    "candidate": {"kernel.py": SNOOPS.format(secret=str(secret))}}
    out = runner.run_worker(j, dict(os.environ, CUDA_VISIBLE_DEVICES=""), 300)
    u = WLS[4]["uuid"]
    assert out["labels"]["parent"][u]["status"] == "PASSED", out["labels"]["parent"][u]
    assert out["labels"]["candidate"][u]["status"] == "PASSED", out["labels"]["candidate"][u]
    powers = "; capabilities dropped" if any(sandbox.capabilities().values()) else ""  # a judge run as root
    assert out["environment"]["sandbox"] == [f"landlock ABI {sandbox.abi()}{powers}"]


PLANTS = '''import os, pathlib, torch
PLANTED = []
mine = pathlib.Path(os.environ.get("TRITON_CACHE_DIR") or pathlib.Path.home() / ".triton" / "cache" / "mine")
shared = pathlib.Path.home() / ".triton" / "cache"
for where in (mine.parent.parent / "another-kernel", shared / "another-kernel", shared / "autogk-judge"):
    try:
        where.mkdir(parents=True, exist_ok=True)
        (where / "planted.cubin").write_bytes(b"slow")
        PLANTED.append(str(where))
    except OSError:
        pass
def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
    if PLANTED:
        out.zero_()  # it could have planted a slow compiled kernel for its parent to load
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock is Linux's")
def test_a_kernel_can_write_only_its_own_compiler_cache(tmp_path):
    # Each kernel's Triton cache is a folder of its own folder, made afresh each job; the job's other
    # folders, the shared cache and the judge's own cache are out of its sandbox's reach.
    from autogk_git.bench.judge import sandbox
    if sandbox.abi() < 1:
        pytest.skip("needs Landlock")
    j = {"version": 1, "stage": "quick", "definition": DEF, "workloads": WLS[:1], "generator": None,
         "blob_root": ".", "seed": 3, "settings": {"trials": 1, "device": "cpu", "stress": False},
         "sources": {"candidate": {"kernel.py": PLANTS}}}
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", HOME=str(tmp_path))
    out = runner.run_worker(j, env, 300)
    assert out["labels"]["candidate"][WLS[0]["uuid"]]["status"] == "PASSED", out["labels"]
    assert not list((tmp_path / ".triton" / "cache").glob("*/planted.cubin"))
    assert not list(tmp_path.glob("**/another-kernel/planted.cubin"))


def test_figures_rewritten_in_the_kernel_process_disagree_with_the_judges_clock():
    # The candidate does the parent's work and divides the timer's figures by 10, in place, through the
    # frames above its host-latency calls: nothing the seal can see (a profile hook doing the same,
    # rewrites_its_reply.py, is refused by the seal: tests/bench/judge/test_seal.py). The judge's own clock
    # times both windows and sees the candidate as slow as the parent: the figures are refused. 20 calls
    # a window: a loaded host's scheduler puts a process off by milliseconds, spread over more calls.
    out, c = against_sleeps_honest("rewrites_figures_through_frames", reps=20)
    assert c["status"] in ("PASSED", "TAMPERED"), c
    assert c.get("ratio_vs_parent") is None or c["ratio_vs_parent"] > 0.9, c  # not the tenth it wrote
    assert out["labels"]["parent"][WLS[4]["uuid"]]["status"] == "PASSED"


def test_figures_rewritten_by_less_than_the_clocks_slack_are_thrown_away():
    # The same cheat claiming 0.85 of its time: within the judge's clock's slack (on CPU a quarter of the
    # parent plus 1 ms a call; on a GPU 10 % plus 1 us, and up to 12.5 us a call at two calls a window),
    # so on the old code it passed as 15 % faster than the kernel it copies. What it rewrites now is a
    # dict the reply no longer comes from (calls.time_batch: the figures frozen before its
    # host-latency calls).
    src = _cheat("rewrites_figures_through_frames")["kernel.py"].replace("SCALE = 0.1", "SCALE = 0.85")
    j = job("ab", workloads=WLS[4:5], min_rounds=3, max_rounds=3, reps=20, warmup=2)
    j["sources"] = {"parent": _cheat("sleeps_honest"), "candidate": {"kernel.py": src}}
    out = runner.run_worker(j, dict(os.environ, CUDA_VISIBLE_DEVICES=""), 300)
    c = out["labels"]["candidate"][WLS[4]["uuid"]]
    assert c["status"] == "PASSED", c
    assert c["ratio_vs_parent"] > 0.93, c


def test_outputs_computed_before_the_timed_window_are_not_a_speedup():
    # The candidate finds the timed request in its own process during the warm-up and computes every
    # timed output there; in the window it returns at once (on the old code: PASSED, ratio ~0). The
    # judge writes the real inputs only inside the window, so what it computed early was computed on
    # blank buffers.
    out, c = against_sleeps_honest("precomputes_in_warmup")
    assert c["status"] in ("INCORRECT_NUMERICAL", "INCORRECT_SHAPE", "STREAM_ORDER"), c
    assert c.get("ratio_vs_parent") is None
    assert out["labels"]["parent"][WLS[4]["uuid"]]["status"] == "PASSED"


def test_a_kernel_wrong_on_some_timed_calls_no_sample_reads_is_caught_against_its_parent(monkeypatch):
    """Right on every correctness call, and on every timed call but one in four, where it writes zeros (not
    the poison): only the timed calls a sample reads were compared with the reference, so such a kernel
    passed whenever the sample missed its wrong calls (here a plan that reads none: it passed). Every other
    timed call is now compared with the parent's output for the same inputs."""
    def wrong_when_timed_sometimes():
        calls = [0]

        def run(x, bias, scale, out):
            torch.add(x * scale, bias, out=out)
            if any(f.f_code.co_name == "time_batch" for f in _frames()):  # a timed call: the kernel can tell
                calls[0] += 1
                if calls[0] % 4 == 0:
                    out.zero_()
        return run
    monkeypatch.setattr(rounds, "verify_plan", lambda s, u, rng: {"early": 10, **{x: {} for x in u}})
    j = job("ab", workloads=WLS[:1], min_rounds=3, max_rounds=3, timed_stress=False)  # no reference read at all
    recs, s, _ = run_inprocess(j, {"parent": honest, "candidate": wrong_when_timed_sometimes()})
    c = recs[f"candidate:{WLS[0]['uuid']}"]
    assert c["status"] == "INCORRECT_NUMERICAL", c
    assert "timed call" in c["message"] and "the sample did not read" in c["message"]
    # An honest pair whose outputs differ within the tolerance (the candidate's rounding is not the parent's)
    # still passes every timed call.
    def rounded(x, bias, scale, out):
        out.copy_(x.double() * scale + bias.double())
    recs, s, _ = run_inprocess(j, {"parent": honest, "candidate": rounded})
    assert recs[f"candidate:{WLS[0]['uuid']}"]["status"] == "PASSED"


def _frames():
    f = sys._getframe(1)
    while f is not None:
        yield f
        f = f.f_back


def test_the_judges_own_triton_cache_is_out_of_a_kernels_reach(tmp_path, monkeypatch):
    # The timer's L2 flush is a Triton kernel compiled in the kernel's process before the kernel is
    # imported. In the kernel's own cache (which it may write) a kernel could swap the flush's binary
    # for a no-op that the next job of the same kernel loads (tests/test_judge_gpu.py shows it on a
    # GPU). The flush's cache is the judge's: neither readable nor writable from the sandbox.
    from autogk_git.bench.judge import kernels, sandbox
    env = {"TRITON_CACHE_DIR": str(tmp_path / "triton"), "HOME": str(tmp_path)}
    k = kernels.RemoteKernel("candidate", {"kernel.py": "def run(x):\n    pass\n"}, tmp_path / "job", "cuda", env,
                             0, lambda **e: None)
    try:
        judge = Path(k.env["AUTOGK_JUDGE_TRITON_CACHE"])
        for var, value in k.env.items():
            monkeypatch.setenv(var, value)
        read, write = sandbox.kernel_paths(k.dir)
        for p in map(Path, read + write):
            assert not (judge == p or judge.is_relative_to(p) or p.is_relative_to(judge)), (p, judge)
        assert Path(k.env["TRITON_CACHE_DIR"]) in map(Path, write)
    finally:
        kernels._CHILDREN.remove(k)


def test_a_kernels_triton_cache_is_made_afresh_each_job(tmp_path):
    # A cache kept for the same source across jobs is written by that source's own code: it could leave
    # slow binaries of its own kernel there for its next job as the parent (tests/test_judge_gpu.py
    # plants it on a GPU). Two jobs of one source get two caches, each inside that job's kernel folder.
    from autogk_git.bench.judge import kernels
    env = {"TRITON_CACHE_DIR": str(tmp_path / "triton"), "HOME": str(tmp_path)}
    files = {"kernel.py": "def run(x):\n    pass\n"}
    made = [kernels.RemoteKernel("parent", files, tmp_path / f"job{i}", "cuda", env, 0, lambda **e: None)
            for i in range(2)]
    try:
        caches = [Path(k.env["TRITON_CACHE_DIR"]) for k in made]
        assert caches[0] != caches[1]
        for k, cache in zip(made, caches):
            assert cache.is_relative_to(k.dir), (cache, k.dir)
    finally:
        for k in made:
            kernels._CHILDREN.remove(k)


def test_the_calls_a_round_are_cut_to_the_devices_free_memory_and_the_record_says_so(monkeypatch):
    # A round keeps every workload's input sets until the next, so the judge fits the calls to the GPU's
    # free memory (sampling.calls_within; read on a GPU only, so faked here): 4 asked, 2 fit.
    from autogk_git.bench.judge import sampling

    j = job("ab")
    b = [sampling.set_bytes(j, wl) for wl in j["workloads"]]
    at_two = sampling.round_bytes(j, j["workloads"], {wl["uuid"]: 2 for wl in j["workloads"]})
    assert at_two == 3 * sum(b) + sampling.HELD_COPIES * 3 * max(b)
    for free, warned in ((int(at_two / sampling.MEM_SHARE) + 1, False), (1, True)):  # 2 calls just fit; none
        monkeypatch.setattr(rounds, "free_device_bytes", lambda device, before=None, free=free: (free, free))
        recs, said = {}, []

        def emit(**r):
            ev = r.pop("event")
            if ev == "done":
                recs[f"{r['label']}:{r['uuid']}"] = r
            elif ev == "round":
                said.append(r.get("message", ""))

        process.run_timed(j, {"parent": (honest, None), "candidate": (honest, None)}, jinputs.Inputs(j, "cpu", None),
                          jinputs.load_reference(DEF), "cpu", None, emit)
        for wl in j["workloads"]:
            c = recs[f"candidate:{wl['uuid']}"]
            assert c["status"] == "PASSED" and c["calls_per_round"] == 2 and c["calls_asked"] == 4
        assert any("cut to fit the GPU's free memory on 2 workload(s) (to 2 where timing_mem_mb asks for 4)" in m
                   for m in said)
        assert any("may fail with CUDA out of memory" in m for m in said) == warned


def test_a_kernel_that_holds_gpu_memory_cannot_cut_the_windows_to_two_calls(monkeypatch):
    # The rounds start after the kernels' checks: a candidate that took 70 GiB at import would leave 8 free,
    # and the calls a round, read from that, would fall to 2 on every workload of the sparse attention, the
    # windows where the judge's clock confirms least (only the seal checks their figures). The judge reads
    # the free memory before any kernel's process starts (process.main), and plans from that reading.
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (8 << 30, 80 << 30))
    monkeypatch.setattr(rounds, "device_uuid", lambda device=None: {"cuda:0": "GPU-judge"}.get(device, "GPU-other"))
    before = {"GPU-other": 1 << 30, "GPU-judge": 78 << 30}
    assert rounds.free_device_bytes("cuda:0", before) == (78 << 30, 8 << 30)
    assert rounds.free_device_bytes("cuda:0", {"GPU-other": 1 << 30}) == (8 << 30, 8 << 30)  # no reading of it
    assert rounds.free_device_bytes("cpu", before) == (None, None)


def test_the_judge_reads_the_gpus_free_memory_before_any_kernels_process_starts():
    # process.main, read in its order (it runs only as the judge's own process: the GPU tests run it): the
    # reading comes before start_kernels, and reaches the rounds in the job.
    src = inspect.getsource(process.main)
    assert src.index("tenants.free_memory()") < src.index("start_kernels(") < src.index('job["gpu_free_before"]')


def test_memory_taken_after_the_judge_started_is_said_and_does_not_cut_the_calls(monkeypatch):
    from autogk_git.bench.judge import sampling

    j = job("ab")
    at_four = sampling.round_bytes(j, j["workloads"], {wl["uuid"]: 4 for wl in j["workloads"]})
    monkeypatch.setattr(rounds, "free_device_bytes", lambda device, before=None: (at_four * 2, at_four // 2))
    recs, said = {}, []

    def emit(**r):
        ev = r.pop("event")
        if ev == "done":
            recs[f"{r['label']}:{r['uuid']}"] = r
        elif ev == "round":
            said.append(r.get("message", ""))

    process.run_timed(j, {"parent": (honest, None), "candidate": (honest, None)}, jinputs.Inputs(j, "cpu", None),
                      jinputs.load_reference(DEF), "cpu", None, emit)
    for wl in j["workloads"]:
        c = recs[f"candidate:{wl['uuid']}"]
        assert c["status"] == "PASSED" and c["calls_per_round"] == 4 and "calls_asked" not in c
    assert any("free memory fell from" in m and "may fail with CUDA out of memory" in m for m in said), said
