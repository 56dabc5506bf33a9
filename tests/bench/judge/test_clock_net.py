"""The judge's clock net of each label's own flushes (clock.paired_figures): a measurement beside the
raw figure, which alone decides a verdict."""
from __future__ import annotations

from autogk_git.bench.judge import clock
from autogk_git.bench.judge.status import Status

N = 20  # timed calls a window; the window holds N + 1 flushes


def got(call_us: float, claim_us: float, flush_us: float, fixed_us: float = 620.0) -> dict:
    """One label's reply: its own (CUPTI) figures, and the window the judge's clock saw."""
    window = fixed_us + N * call_us + (N + 1) * flush_us
    return {"us": claim_us, "samples": [claim_us] * N, "method": "cupti", "flush_us": (N + 1) * flush_us,
            "witness": {"window_us": window}}


def rounds_of(parent: dict, cand: dict, k: int = 6) -> dict:
    f: dict = {}
    for _ in range(k):
        clock.paired_figures(f, {"parent": parent, "candidate": cand}, "parent", "candidate", N)
    return f


def test_a_process_that_flushes_slower_is_seen_slower_raw_and_equal_net():
    # A/A at 11.5 us a call, the candidate's process flushing 0.75 us slower (27 us against 27.75):
    # the raw clock sees 0.79 us a call more (6.8 %, as on the H200 at 12 us); net of the flushes, none.
    f = rounds_of(got(11.5, 11.5, 27.0), got(11.5, 11.5, 27.75))
    w = f["witness"]
    assert abs(w["seen"][0] - (11.5 + 21 * 0.75 / N)) < 1e-9, w["seen"]
    assert abs(w["net"][0] - 11.5) < 1e-9, w["net"]
    assert w["flush_us"]["candidate"][0] == round(21 * 27.75, 3)


def test_flush_times_the_candidate_reports_longer_move_the_net_figure_only():
    # Claims 3.9 us a call and takes 12.3; reports its flushes 9 us longer each than they took, which
    # would net its window down to its claim. The verdict's figure is the raw one: still TAMPERED.
    cheat = got(12.3, 3.9, 27.0)
    cheat["flush_us"] = 21 * (27.0 + 9.0)
    f = rounds_of(got(11.5, 11.5, 27.0), cheat)
    assert f["witness"]["net"][0] < 11.5 - 8.0 + 0.5  # the net figure is fooled ...
    bad = clock.clock_failure(f, "cuda")
    assert bad is not None and bad.status == Status.TAMPERED  # ... the verdict is not


def test_each_processs_fixed_cost_per_window_cancels_with_null_windows_only():
    # A/A at 9 us a call whose candidate process's windows run 24 us longer whatever they hold (the
    # per-process offset of the H100's sparse-attention pairs, benchmarks/clock_resolution.py): the raw
    # clock sees 1.2 us a call more at 20 calls; less each process's null window (its flushes and its
    # fixed cost, no calls), none.
    parent, cand = got(9.0, 9.0, 27.0), got(9.0, 9.0, 27.0, fixed_us=620.0 + 24.0)
    parent["witness"]["null_us"] = 620.0 + (N + 1) * 27.0
    cand["witness"]["null_us"] = 620.0 + 24.0 + (N + 1) * 27.0
    w = rounds_of(parent, cand)["witness"]
    assert abs(w["seen"][0] - (9.0 + 24.0 / N)) < 1e-9, w["seen"]
    assert abs(w["seen_null"][0] - 9.0) < 1e-9, w["seen_null"]
    assert w["null_us"]["candidate"][0] == round(620.0 + 24.0 + 21 * 27.0, 3)
    # Without them (the default), no such figure.
    assert "seen_null" not in rounds_of(got(9.0, 9.0, 27.0), got(9.0, 9.0, 27.0))["witness"]
