"""A kernel's own process: imports one kernel and runs it on what the judge sends. Of the judge it
imports only `calls` (with the timer, hygiene, stats and statuses it needs), `seal` and `sandbox` (and, on
the CPU, `interp`: Triton's interpreter set up once a launch).

    launch.command("kernel_process", [FD, KERNEL_DIR, ALIAS, DEVICE, MEM_LIMIT_BYTES, WARM_PROFILER, TIMER])

FD is this end of a socket pair the judge holds the other end of (a multiprocessing Connection,
so torch's reductions share tensors: shared memory on CPU, CUDA IPC on a GPU). The judge owns the
buffers: it makes the inputs and the poisoned outputs, sends them, and reads the outputs back
itself; reference outputs and the progress record never come here. What this process sends back is
only "done" (or the kernel's error) and, when timed, its timings.

Before any of the kernel's code runs: this process dies with the judge, is capped in memory
(RLIMIT_AS, CPU only: a CUDA context reserves more address space than any sensible cap), has
imported the judge's helpers and timers and made its device timer, and has sealed them (`Seal`): a
kernel that replaces one of their functions, constants or the timer's state, or a library function
the timer calls, adds a name to a sealed class, or leaves a Python thread running, fails every request
from then on with TAMPERED. Then, CUDA started, it enters its sandbox (`sandbox.restrict`) and imports
the kernel.
Requests:
    ("call", inputs, outputs)                         -> ("ok",) | ("not_dps", what) | ("error", status, message)
    ("time", sets, outs, snaps, warm, warm_outs, method, settings, witness)
                                                      -> ("ok", timing) | ("timer_error", msg) | ("error", ...)
        with `witness` (the judge's own clock, witness.py), inside the request, right before the first
        timed call: -> ("armed",), then <- ("go",); right after the snapshot is queued: -> ("closed",).
        On a GPU, witness holds the judge's two inter-process events: the timed calls wait on its gate,
        and its end is recorded on the caller's stream after the snapshot. With settings["null_window"]
        the same request runs the timer's whole sequence (warm-up, flushes, snapshot, gate and end mark)
        with a call that does nothing in the kernel's place, and Python's garbage collector off: the
        judge's measure of this process's fixed cost per window (label_window.null_window), where none of
        the kernel's code is called.
    ("exit",)
"""
from __future__ import annotations

import os
import resource
import signal
import sys
import time
from gc import disable as _gc_off, enable as _gc_on, isenabled as _gc_is_on  # bound: this module is sealed, gc's is not
from pathlib import Path

from . import calls, hygiene, sandbox
from .calls import KernelFailure
from .profiling import profiled
from .seal import seal_process
from .status import Status


def _on(stream):
    """Run the block with `stream` as the current CUDA stream (no stream on CPU: nothing to do)."""
    import contextlib

    import torch
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


_OPENED: dict = {}  # the judge's inter-process events, opened once each in this process


def _nothing(*args) -> None:
    """The call of a null window (settings["null_window"]): the kernel's place, empty."""


def _witness_hooks(conn, witness, device: str):
    """The two hooks of the judge's clock (witness.py) for one timed request, or (None, None).

    Nothing here is trusted: a kernel may patch these hooks like anything else in its process. The
    judge does not need them to be honest: skipping the gate runs the calls on inputs the judge has
    not written yet, and an early or missing end mark leaves the judge's copy of the outputs short."""
    if not witness:
        return None, None
    gate_ev = done_ev = None
    lib = None
    if device.startswith("cuda"):
        import ctypes

        import torch

        from . import l2
        lib = l2.cudart()
        for h in witness:
            if h not in _OPENED:
                _OPENED[h] = torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), h)
        gate_ev, done_ev = (ctypes.c_void_p(_OPENED[h].cuda_event) for h in witness)

    def stream():
        import ctypes

        import torch
        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def gate() -> None:
        conn.send(("armed",))
        conn.recv()  # ("go",): the judge has queued its start mark, the inputs and the gate
        if lib is not None:
            lib.cudaStreamWaitEvent(stream(), gate_ev, 0)

    def close() -> None:
        if lib is not None:
            lib.cudaEventRecord(done_ev, stream())
        conn.send(("closed",))

    return gate, close


def main(argv: list[str]) -> int:
    fd, kdir, alias, device = int(argv[0]), Path(argv[1]), argv[2], argv[3]
    mem = int(argv[4]) if len(argv) > 4 else 0
    warm_profiler = len(argv) > 5 and argv[5] == "1"
    timer_method = argv[6] if len(argv) > 6 else ""
    hygiene.die_with_parent(signal.SIGKILL)
    if mem > 0 and not device.startswith("cuda"):
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    from multiprocessing.connection import Connection
    steps: dict[str, float] = {}  # this process's start, step by step: sent with "ready" (the job's record)
    t = time.perf_counter()

    def step(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        steps[name] = round(now - t, 3)
        t = now

    import torch
    import torch.multiprocessing as tmp
    tmp.set_sharing_strategy("file_system")  # tensors by shm name: no fd passing between unrelated processes
    timing = None
    if device.startswith("cuda"):
        from . import l2
        from . import timer as timing
    step("torch")
    if os.environ.get("TRITON_INTERPRET") == "1":  # the CPU backend: Triton's interpreter, set up once a launch
        from . import interp
        interp.patch_once()
    # The judge's own Triton kernel (the timer's L2 flush) is compiled or loaded from the judge's cache,
    # which the sandbox below keeps out of the kernel's reach; the kernel's own cache from then on.
    own_cache, judge_cache = os.environ.get("TRITON_CACHE_DIR"), os.environ.pop("AUTOGK_JUDGE_TRITON_CACHE", "")
    judge_cache = judge_cache if timing is not None else ""  # on CPU no Triton kernel of the judge's runs here
    if judge_cache:
        os.environ["TRITON_CACHE_DIR"] = judge_cache
        try:
            l2.load_flush()
        except Exception:  # noqa: BLE001 - the timer, made next or at the first time request, says why
            pass
    if timing is not None and warm_profiler:
        calls.warm_profiler()  # its first start costs seconds: pay it now, beside the other label's process
        step("profiler")
    if timing is not None and timer_method:
        try:
            calls.device_timer(timer_method)  # made, and sealed, before the kernel's code runs
        except Exception:  # noqa: BLE001 - a timer that cannot be made says so in the time request
            pass
        step("timer")
    if judge_cache:
        if own_cache is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = own_cache
    seal = seal_process(sys.modules[__name__], timing)
    marks, n_marks = seal.marks, len(seal.marks)  # held here too: a kernel that empties the seal is caught
    # The check itself, held here: a kernel that replaced it in its class (`Seal.check = ...`) was never
    # checked again; the check held sees that change like any other. Still in reach: code that rewrites
    # the function's own code object, which only the judge's clock (witness.py) stands against.
    check = type(seal).check

    def tampered() -> str:
        if seal.marks is not marks or len(marks) != n_marks:
            seal.tampered = seal.tampered or "the kernel changed the seal's own records in its process"
        return check(seal)

    def window_checked() -> None:
        """Right before and right after a timed window: a patch made during the warm-up or the window."""
        if tampered():
            raise KernelFailure(Status.TAMPERED, f"while timed: {tampered()}")

    conn = Connection(fd)
    if device.startswith("cuda"):  # CUDA's own start-up, before the sandbox: on the H200 a context made
        torch.zeros(1, device=device)  # inside it failed ("invalid argument to exchangeDevice")
        torch.cuda.synchronize()
        step("cuda")
    # From here on the process reads only libraries, its own folder, /dev, /proc and /sys, and writes
    # only its folder, caches and /dev: the job, the judge's record and the repository are out of reach.
    # And root's powers go (a judge run as root): no GPU clocks, power limits or priorities to set.
    confined = sandbox.restrict(*sandbox.kernel_paths(kdir)) + sandbox.drop_powers() \
        if os.environ.get("AUTOGK_SANDBOX", "1") != "0" else "none: AUTOGK_SANDBOX=0"
    step("sandbox")
    try:
        mod = calls.load_module(alias, kdir, "kernel.py")
        run = getattr(mod, "run", None)
        if not callable(run):
            raise KernelFailure(Status.COMPILE_ERROR, "kernel.py defines no run() function")
        if tampered():
            raise KernelFailure(Status.TAMPERED, f"on import: {tampered()}")
    except KernelFailure as e:
        conn.send(("load_error", e.status, str(e)))
        return 0
    except BaseException as e:  # noqa: BLE001 - any import failure is the kernel's
        # a hook the seal refused raised here: tampering, not a failed import
        conn.send(("load_error", Status.TAMPERED, f"on import: {tampered()}") if tampered() else
                  ("load_error", Status.COMPILE_ERROR, calls.short_tb(e)))
        return 0
    step("kernel_import")
    conn.send(("ready", confined, steps))
    # The caller's stream for correctness calls: one of torch's pool streams, not the legacy default
    # stream, which orders itself after every blocking stream (torch's pool streams are blocking) and
    # so waited for work the kernel left on a side stream (H200, torch 2.11: benchmarks/stream_diag.py).
    caller = torch.cuda.Stream(device) if device.startswith("cuda") else None
    if caller is not None:  # load the snapshot's kernel now, not during a kernel's first call
        with _on(caller):
            calls.snapshot([torch.zeros(4, device=device)], [torch.ones(4, device=device)])
        caller.synchronize()
    held = None  # the last call's tensors: kept alive so the same judge buffers keep the same address here
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return 0
        op = msg[0]
        if op == "exit":
            return 0
        if tampered():  # what was patched stays patched: every later request fails too
            conn.send(("error", Status.TAMPERED, tampered()))
            continue
        if op == "call":
            _, inputs, outs, snaps = msg
            held = (inputs, outs, snaps)  # noqa: F841 - kept alive on purpose
            try:
                with _on(caller):
                    if caller is not None:
                        caller.wait_stream(torch.cuda.default_stream(device))  # inputs and poison written
                    ret = run(*inputs, *outs)
                    if snaps is not None:  # what a consumer on the caller's stream reads, in that stream's order
                        calls.snapshot(snaps, outs)
                    calls.stream_wait(device)
            except BaseException as e:  # noqa: BLE001 - the kernel's failure, reported as data
                conn.send(("error", Status.TAMPERED, tampered()) if tampered() else
                          ("error", calls.classify(e), calls.short_tb(e)))
                calls.die_if_context_lost(e, device)
                continue
            if tampered():
                conn.send(("error", Status.TAMPERED, tampered()))
                continue
            if not calls.is_dps_return(ret, outs):
                conn.send(("not_dps", type(ret).__name__))
                continue
            conn.send(("ok",))
        elif op == "time":
            _, sets, outs, snaps, warm, warm_outs, method, settings, witness = msg
            held = (sets, outs, snaps, warm, warm_outs)  # noqa: F841 - kept alive on purpose
            spent: list = []  # the figures the kernel's code could reach (calls.time_batch): freed after the reply
            gc_was = _gc_is_on()
            gate, close = _witness_hooks(conn, witness, device)
            lost = None
            try:
                known = set(calls._DEVICE_TIMERS)
                timer = calls.device_timer(method) if timing is not None else calls.HostTimer()
                # A timer made now (another method than the one made at start), by sealed code: sealed too.
                if set(calls._DEVICE_TIMERS) - known:
                    seal.mapping("calls._DEVICE_TIMERS", calls._DEVICE_TIMERS, set(calls._DEVICE_TIMERS) - known)
                    n_marks = len(marks)
                # Python's collector off for the whole request (and again before the reply, should the
                # kernel's code have turned it on): no finalizer of the kernel's runs while the figures
                # exist, and none inside a null window, where none of its code is called.
                _gc_off()
                # Timed on the default stream, where the caller-stream events of the cupti timer were
                # seen to catch work left on a side stream (H200, 2026-11-30); on a pool stream the
                # same cross-check passed such a kernel.
                t = calls.time_batch(_nothing if settings.get("null_window") else run, sets, outs, warm, warm_outs,
                                     settings, timer, device, snaps, check=window_checked, gate=gate, close=close,
                                     spent=spent)
                _gc_off()
                # the figures just made went through what was patched: not sent
                reply = ("error", Status.TAMPERED, f"while timed: {tampered()}") if tampered() else ("ok", t)
            except KernelFailure as e:
                reply = ("error", e.status, str(e))
            except BaseException as e:  # noqa: BLE001
                if timing is not None and isinstance(e, timing.TimerTampered):
                    reply = ("error", Status.TAMPERED, f"while timed: {e}")
                elif tampered():  # a hook the seal refused raised inside the window
                    reply = ("error", Status.TAMPERED, f"while timed: {tampered()}")
                elif timing is not None and isinstance(e, timing.TimerError):
                    reply = ("timer_error", f"{type(e).__name__}: {e}")
                else:
                    reply, lost = ("error", calls.classify(e), f"while timed: {calls.short_tb(e)}"), e
            try:
                conn.send(reply)
            finally:
                del spent, reply
                if gc_was:
                    _gc_on()
            if lost is not None:
                calls.die_if_context_lost(lost, device)


def entry(argv: list[str]) -> int:
    os.environ.pop("PYTHONSTARTUP", None)
    return profiled(main, argv, "kernel")
