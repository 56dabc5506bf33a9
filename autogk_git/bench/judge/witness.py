"""The judge's own clock around a kernel process's timed window (the "witness"). Judge side only: the
kernel's process never imports this file.

Why: every figure a kernel's process reports (CUPTI's, the events', the host clock's) is made where the
kernel's code runs, and a kernel can patch whatever runs there. The witness times the same window from
the judge's process, on the judge's own CUDA stream, which the kernel's process cannot touch:

    judge's stream:   [sleep] T0 [real inputs -> the kernel's buffers] G ........ wait(D) [copy outputs] T1
    kernel's stream:                      wait(G) flush call flush call ... snapshot D

- The timed inputs the kernel's process holds are blank until the judge writes the real values, after
  T0, on its stream: a kernel cannot compute its outputs ahead of the window (during its warm-up, or
  on another stream), and a kernel that skips the gate runs on blank inputs.
- The sleep keeps the gate closed while the kernel's process queues its calls, so the window holds the
  calls back to back on the GPU, not the host's launch path (on the H200, 2026-12-01: the spread of
  the difference between two processes' windows fell from 2.7-4.2 us per call to 0.11-0.27 us with a
  1 ms sleep; benchmarks/witness_probe.py).
- The judge copies the outputs itself after D, on its stream: work a kernel leaves to land after its
  end mark is either inside T1 (it ran before the copy) or missing from the copy (it ran after).
- The two contexts take turns on the GPU: the bracket has a fixed cost (~1 ms per window there, with
  the flushes), the same for both labels, so the judge uses differences: per round, the candidate's
  time per call is the parent's reported time per call plus (W_candidate - W_parent) / calls. No
  figure the candidate's process reports enters its verdict.
- The sleep's own length is measured too (an event before it): a sleep that took much longer than its
  cycles means another context used the GPU before the window ("interference").

On CPU the same protocol runs with the judge's host clock: W is the time from "go" to "closed".

The judge waits for a window's end, and for the request's reply after it, no longer than
`window_limit_s` from opening the gate: a kernel whose window never closes costs that, not the job's
limit.
"""
from __future__ import annotations

import time

import torch

SLEEP_MIN_S, SLEEP_MAX_S, SLEEP_START_S = 1e-3, 0.1, 5e-3
INTERFERENCE_RATIO, INTERFERENCE_SLACK_US = 1.3, 200.0
WINDOW_MIN_S, WINDOW_RATIO = 10.0, 20.0
"""A window's bound: WINDOW_MIN_S plus WINDOW_RATIO times the longest request (gate to reply) the judge
has seen on this workload, from either label (settings `window_min_s`, `window_ratio`). Generous on
purpose: an honest window on a loaded 2-core machine may take several times its usual length, and
hitting the bound fails the kernel."""
STUCK_GRACE_S = 10.0  # after a kill: how long the judge's stream may take to pass the kernel's end mark


def window_limit_s(settings: dict, longest_s: float | None, warm_s: float, calls: int) -> tuple[float, str]:
    """(seconds from the gate's opening, how they were reckoned) the judge waits for a window's end and
    the reply. Before any request on this workload was seen whole (the first label of the first round),
    the expected length is this request's warm-up, per call, times the calls still to come (the timed
    ones and the host-latency ones)."""
    lo, ratio = float(settings.get("window_min_s", WINDOW_MIN_S)), float(settings.get("window_ratio", WINDOW_RATIO))
    if longest_s:
        expected, what = longest_s, "the longest request seen on this workload"
    else:
        per_call = warm_s / max(1, int(settings.get("warmup", 5)))
        expected, what = per_call * (calls + int(settings.get("host_calls", 10))), "its warm-up's pace"
    return lo + ratio * expected, f"{lo:g} s + {ratio:g} x {expected:.3f} s, {what}"


class Early(Exception):
    """The gate opened before the kernel's process had queued its calls: this window's bracket holds
    the host's launch path. The round is timed again with a longer sleep."""


_CYCLES_PER_US: list[float] = []


def cycles_per_us() -> float:
    """The GPU's sleep clock, measured once per judge process (torch.cuda._sleep counts cycles)."""
    if not _CYCLES_PER_US:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        best = 0.0
        for _ in range(3):
            s.record()
            torch.cuda._sleep(2_000_000)
            e.record()
            e.synchronize()
            best = max(best, 2_000_000 / max(s.elapsed_time(e) * 1000.0, 1e-3))
        _CYCLES_PER_US.append(best)
    return _CYCLES_PER_US[0]


class Witness:
    """The judge's clock for one kernel process (one label). `handles()` goes in each timed request."""

    def __init__(self, device: str) -> None:
        self.cuda = device.startswith("cuda")
        self.sleep_s: dict[str, float] = {}
        self._t0 = self._t_go = 0.0
        if self.cuda:
            self.stream = torch.cuda.Stream(device)
            self.gate = torch.cuda.Event(interprocess=True)
            self.done = torch.cuda.Event(interprocess=True)
            self.gate.record(self.stream)  # created (and so given a handle) now
            self.done.record(self.stream)
            self.t_sleep, self.t0, self.t1 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            for ev in (self.t_sleep, self.t0, self.t1):
                ev.record(self.stream)
            self.stream.synchronize()
            self._handles = (self.gate.ipc_handle(), self.done.ipc_handle())

    def handles(self):
        return self._handles if self.cuda else True

    def open(self, key: str, real: list, blank: list) -> None:
        """On "armed": the start mark, then the real inputs into the kernel's buffers, then the gate."""
        if not self.cuda:
            copy_sets(real, blank)
            self._t_go = self._t0 = time.perf_counter()
            return
        self.key = key
        sleep = self.sleep_s.get(key, SLEEP_START_S)
        self.nominal_us = sleep * 1e6
        with torch.cuda.stream(self.stream):
            self.t_sleep.record(self.stream)
            torch.cuda._sleep(int(self.nominal_us * cycles_per_us()))
            self.t0.record(self.stream)
            copy_sets(real, blank)
            self.gate.record(self.stream)
        self._t_go = time.perf_counter()

    def close(self, outs: list, copies: list) -> None:
        """On "closed": wait for the kernel's end mark, copy its outputs (the judge's own snapshot), T1."""
        t_closed = time.perf_counter()
        if not self.cuda:
            self._w_us = (t_closed - self._t0) * 1e6
            copy_sets(outs, copies)
            return
        with torch.cuda.stream(self.stream):
            self.stream.wait_event(self.done)
            copy_sets(outs, copies)
            self.t1.record(self.stream)
        queued_s = t_closed - self._t_go
        self._early = queued_s > 0.8 * self.nominal_us / 1e6
        # The next window of this workload sleeps long enough for the calls to be queued first; after an
        # early window, at least twice as long (a host hiccup of the kernel's process, or the judge's own,
        # can last longer than the queuing it interrupted: on the H200 one honest pair in ~90 workloads
        # was early in 4 tries running when the sleep grew by 1.5 x the queuing time only).
        grow = 2.0 * self.nominal_us / 1e6 if self._early else 0.0
        self.sleep_s[self.key] = min(SLEEP_MAX_S, max(SLEEP_MIN_S, 1.5 * queued_s + 5e-4, grow,
                                                      self.sleep_s.get(self.key, SLEEP_MIN_S)))

    def drained(self, until: float) -> bool:
        """Whether the judge's stream has passed the kernel's end mark and its own copy by `until`
        (monotonic seconds): polled, so a kernel whose GPU work never ends cannot hold the judge."""
        if not self.cuda:
            return True
        while not self.t1.query():
            if time.monotonic() >= until:
                return False
            time.sleep(1e-4)
        return True

    def result(self) -> dict:
        """After the request's reply: the window as the judge saw it. Raises Early (see there)."""
        if not self.cuda:
            return {"window_us": self._w_us}
        self.stream.synchronize()  # drained() first: the end mark has passed, this waits for nothing more
        slept = self.t_sleep.elapsed_time(self.t0) * 1000.0
        out = {"window_us": self.t0.elapsed_time(self.t1) * 1000.0, "sleep_us": slept,
               "interference": slept > INTERFERENCE_RATIO * self.nominal_us + INTERFERENCE_SLACK_US}
        if self._early:
            raise Early(f"the gate opened before the calls were queued ({self.nominal_us:.0f} us sleep)")
        return out


def copy_sets(src: list, dst: list) -> None:
    for a, b in zip(src, dst):
        for x, y in zip(a, b):
            if isinstance(x, torch.Tensor) and x.numel():
                y.copy_(x)


def blank_like(sets: list) -> list:
    """The kernel's own buffers for the timed inputs: zeros until the judge writes the real values."""
    return [[torch.zeros_like(x) if isinstance(x, torch.Tensor) else x for x in s] for s in sets]
