"""How the CUPTI timer reads a window (bench/judge/l2.py `buckets`), and how a window's figure is made
from its calls (`stats.window_mean`): on CPU, with the profiler's kernels written by hand."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")


def test_work_started_before_the_windows_first_flush_is_the_first_calls():
    # A kernel that queued its work on a stream of its own waiting only for the judge's gate starts it
    # beside (or before) the first flush; on the code before, a kernel that started before the first flush
    # was no call's and the window's figure never counted it (three calls of 1 us claimed, 40 us of work).
    from autogk_git.bench.judge import l2
    F = l2.FLUSH_KERNEL
    kernels = [(0, "hidden_work", 40.0), (1, F, 30.0), (2, "doorbell", 1.0), (3, F, 30.0), (4, "doorbell", 1.0),
               (5, F, 30.0), (6, "doorbell", 1.0), (7, F, 30.0), (8, "snapshot", 2.0)]
    per_call, counts, flushes = l2.buckets(kernels)
    assert per_call == [41.0, 1.0, 1.0, 2.0] and counts == [2, 1, 1, 1] and flushes == 120.0


def test_an_honest_windows_buckets_are_its_calls():
    from autogk_git.bench.judge import l2
    F = l2.FLUSH_KERNEL
    kernels = [(1, F, 30.0), (2, "a", 3.0), (3, "b", 2.0), (4, F, 31.0), (5, "a", 3.5), (6, F, 29.0)]
    assert l2.buckets(kernels) == ([5.0, 3.5, 0.0], [2, 1, 0], 90.0)


def test_a_windows_figure_is_its_calls_mean_whatever_their_spread():
    # Six calls light and one heavy, or the reverse: the same whole time, the same figure. A median would
    # read 0.7 for the first (the calls' work moved into the last) and 1.0 for an honest window.
    from autogk_git.bench.judge.stats import window_mean
    assert window_mean([0.7] * 6 + [1.0] * 3 + [2.8]) == pytest.approx(1.0)
    assert window_mean([1.0] * 10) == pytest.approx(1.0)


def test_a_flush_figure_measured_beside_the_other_labels_start_is_lowered_by_the_judges_quiet_one():
    # An H100, 2026-12-06: a kernel process's own flush figure 78.8 us, every flush of the honest window
    # after it 32.55-33 us: under half, so TAMPERED. The judge's figure, measured with every kernel process
    # stopped, lowers the reference; it never raises it, and one implausibly low (the settings pass through
    # the kernel's process) is not believed.
    from autogk_git.bench.judge import held, timer
    t = object.__new__(timer.DeviceTimer)
    t._flush_us = 78.8
    window = [32.55] + [33.0] * 30
    assert held.flush_floor(window, t.floor_reference(None))  # the old reference: TAMPERED
    assert t.floor_reference(32.6) == 32.6 and held.flush_floor(window, t.floor_reference(32.6)) == ""
    assert t.floor_reference(90.0) == 78.8
    assert t.floor_reference(78.8 / timer.MAX_QUIET_GAIN - 1) == 78.8
    assert t.floor_reference(0.0) == 78.8 and t.floor_reference(float("nan")) == 78.8
    assert held.flush_floor([14.0] * 31, t.floor_reference(32.6))  # a flush cut to under half: still caught
