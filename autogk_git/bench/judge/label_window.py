"""One label timed on one round's input sets (rounds.py runs the pairs): its window, through the judge's
clock where the kernel has a process of its own, then the check of what the timed calls wrote: no poison
left, nothing changed after the window, a sample of the calls against the reference. Also the same window
again with nothing in the kernel's place (the null window), and whose failure an exception raised in a
window is."""
from __future__ import annotations

import random
import time

import torch

from .calls import KernelFailure, classify, die_if_context_lost, short_tb, sync, time_batch
from .checks import alloc_outputs, bits, check_inputs, check_outputs, read_flags, relabel, same_bits_flag
from .inputs import HarnessFailure, reference_outputs, resolve_axes
from .kernels import RemoteKernel, others_stopped
from .phases import phase
from .status import Status
from .witness import blank_like

class TimedKernel:
    """One label's way to be called on an input set: a DPS kernel, or the value-returning reference."""

    def __init__(self, label: str, fn, dps: bool) -> None:
        self.label, self.fn, self.dps = label, fn, dps


def witnessed(tk: TimedKernel, settings: dict) -> bool:
    """Whether the judge's own clock (witness.py) times this label: every kernel in its own process."""
    return isinstance(tk.fn, RemoteKernel) and bool(settings.get("witness", True))


def time_label(tk: TimedKernel, sets: list, warm_set: list, job: dict, wl: dict, reference,
               device: str, rng: random.Random, method_timer, checked: list[int] | None = None,
               ref_cache: dict | None = None, longest_s: float | None = None) -> tuple[dict, list | None]:
    """Time one label on this round's input sets, then check (here, in the judge) what the timed calls wrote.

    checked: which sets' outputs are compared with the reference's (both labels of a round get the
    same ones, so `ref_cache` computes each reference output once); None: `verify_sets` at random.
    With the judge's clock (witnessed), the kernel's process gets blank input buffers that the judge
    fills inside the window, and what is checked is the judge's own copy of the outputs; `longest_s`
    (the longest request seen on this workload) bounds how long the judge waits for the window's end."""
    definition = job["definition"]
    settings = job.get("settings", {})
    axes = resolve_axes(definition, wl)
    tolerances = settings.get("tolerances", {})
    warmup = int(settings.get("warmup", 5))
    if not tk.dps:  # the reference, timed here: it is trusted code, timed with every kernel's process stopped
        with others_stopped():
            for _ in range(max(1, warmup)):
                tk.fn(*warm_set)
            sync(device)
            t = method_timer.time_calls([lambda a=a: tk.fn(*a) for a in sets])
            t["host_us"] = method_timer.sync_latency(lambda: tk.fn(*sets[0]), int(settings.get("host_calls", 10)))
        return t, None
    warm_outs = alloc_outputs(definition, axes, device, 0)
    outs = [alloc_outputs(definition, axes, device, k) for k in range(len(sets))]
    snaps = [alloc_outputs(definition, axes, device, k) for k in range(len(sets))]  # poisoned until written
    ref_cache = {} if ref_cache is None else ref_cache
    # The values each timed call must find unchanged after it. With the judge's clock the real sets
    # never leave the judge (the kernel's process gets copies inside the window): no copy needed.
    keep = (lambda x: bits(x)) if witnessed(tk, settings) else (lambda x: bits(x).clone())
    saved = [[keep(x) if isinstance(x, torch.Tensor) else x for x in s] for s in sets]
    t0 = time.perf_counter()
    given, seen = sets, snaps  # the inputs the kernel's process held, the outputs the judge checks
    if witnessed(tk, settings):
        given = blank_like(sets)
        seen = [alloc_outputs(definition, axes, device, k) for k in range(len(sets))]
        t = tk.fn.time(given, outs, snaps, warm_set, warm_outs, method_timer.method, settings,
                       witness=(wl["uuid"], sets, seen, longest_s))
        if settings.get("clock_null_window") and t.get("witness"):
            t["witness"]["null_us"] = null_window(tk, given, sets, outs, warm_set, warm_outs, definition, axes,
                                                  device, method_timer.method, settings, wl["uuid"], longest_s)
    elif isinstance(tk.fn, RemoteKernel):
        t = tk.fn.time(sets, outs, snaps, warm_set, warm_outs, method_timer.method, settings)
    else:
        t = time_batch(tk.fn, sets, outs, warm_set, warm_outs, settings, method_timer, device, snaps)
    sync(device)
    t0 = phase("timed", t0)
    # What the timed calls wrote by the end of the window is what counts (the snapshots): a call that
    # skipped its work leaves poison behind, and work that landed later changed the outputs since.
    where = "in the timed calls"
    pairs = [(k, name, y) for k, snap in enumerate(seen) for name, y in zip(definition["outputs"], snap)]
    nan = [torch.isnan(y).any() if y.dtype.is_floating_point else torch.zeros((), dtype=torch.bool, device=y.device)
           for _, _, y in pairs]
    same = [same_bits_flag(x, y) for o, snap in zip(outs, seen) for x, y in zip(o, snap)]
    flags = read_flags(nan + same)  # one synchronization for every call's checks
    for i, (k, name, _) in enumerate(pairs):
        if flags[i]:
            raise KernelFailure(Status.INCORRECT_NUMERICAL,
                                f"{where}: output {name} of timed call {k} still held the poison when the "
                                "timed window ended (the call skipped its work, or left it to land later)")
        if not flags[len(pairs) + i]:
            raise KernelFailure(Status.STREAM_ORDER,
                                f"{where}: output {name} of timed call {k} changed after the timed window "
                                "ended: work left to land after the calls (a later call, a thread, another "
                                "stream) is not counted in their time")
    if checked is None:
        checked = rng.sample(range(len(sets)), min(int(settings.get("verify_sets", 2)), len(sets)))
    for k in checked:
        try:
            check_inputs(definition, given[k], saved[k])
            if k not in ref_cache:
                ref_cache[k] = reference_outputs(reference, sets[k])
            check_outputs(definition, seen[k], ref_cache[k], tolerances, sets[k], axes)
        except KernelFailure as e:
            raise relabel(e, where) from None
    phase("verify", t0)
    return t, seen  # every timed call's outputs as the judge holds them: cross_check reads the rest


def null_window(tk: TimedKernel, given: list, sets: list, outs: list, warm_set: list, warm_outs: list,
                definition: dict, axes: dict, device: str, method: str, settings: dict, uuid: str,
                longest_s: float | None) -> float:
    """The same label's window again, right after its timed one, with nothing in the kernel's place
    (kernel_process: settings["null_window"]): the same real inputs written into the same buffers, the same
    flushes, snapshot and marks, in the same process. Its length is that process's fixed cost per window,
    which two honest labels' windows differ by whatever the rounds (clock.CLOCK_WINDOW_US); the judge's
    clock can take it out of the pair's difference (clock.paired_figures: `seen_null`). Only a setting
    (`clock_null_window`, off by default) turns it on: a measurement until the GPU's figures say what limit
    it allows. Its outputs are not read: the calls wrote nothing. Not yet a verdict's figure for one more
    reason: GPU work the kernel left running on a stream of its own would lengthen its null window (and so
    shorten its figure), which the judge's sleep sees only when it is long."""
    junk = [alloc_outputs(definition, axes, device, k) for k in range(len(sets))]
    copies = [alloc_outputs(definition, axes, device, k) for k in range(len(sets))]
    t = tk.fn.time(given, outs, junk, warm_set, warm_outs, method, {**settings, "null_window": True},
                   witness=(uuid + ":null", sets, copies, longest_s))
    return float(t["witness"]["window_us"])


def label_failure(tk: TimedKernel, cand: TimedKernel, e: Exception, device: str) -> tuple[str, KernelFailure]:
    """(label blamed, failure) for an exception raised while one label was timed: its own KernelFailure,
    a harness failure (the experiment cannot be judged: the candidate's record carries it), or anything
    else the kernel raised (a lost CUDA context ends the judge here)."""
    if isinstance(e, KernelFailure):
        return tk.label, e
    if isinstance(e, HarnessFailure):
        return cand.label, KernelFailure(Status.HARNESS_ERROR, str(e))
    die_if_context_lost(e, device)
    return tk.label, KernelFailure(classify(e), f"while timed: {short_tb(e)}")
