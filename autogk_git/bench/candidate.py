"""The candidate's process: imports one kernel and runs it on what the judge sends. It ships beside
the worker (the judge) and needs the standard library, torch and triton only.

    python candidate.py FD KERNEL_DIR ALIAS DEVICE MEM_LIMIT_BYTES [WARM_PROFILER [TIMER]]

FD is this end of a socket pair the judge holds the other end of (a multiprocessing Connection,
so torch's reductions share tensors: shared memory on CPU, CUDA IPC on a GPU). The judge owns the
buffers: it makes the inputs and the poisoned outputs, sends them, and reads the outputs back
itself; reference outputs and the progress record never come here. What this process sends back is
only "done" (or the kernel's error) and, when timed, its timings.

Before any of the kernel's code runs: this process dies with the judge, is capped in memory
(RLIMIT_AS, CPU only: a CUDA context reserves more address space than any sensible cap), has
imported the judge's helpers and timers and made its device timer, and has sealed them (`Seal`): a
kernel that replaces one of their functions, constants or the timer's state, or a library function
the timer calls, fails every request from then on with TAMPERED.
Requests:
    ("call", inputs, outputs)                         -> ("ok",) | ("not_dps", what) | ("error", status, message)
    ("time", sets, outs, warm, warm_outs, method, settings) -> ("ok", timing) | ("timer_error", msg) | ("error", ...)
    ("exit",)
"""
from __future__ import annotations

import importlib
import os
import resource
import signal
import sys
from pathlib import Path


def _sibling(name: str):
    """A judge file shipped beside this one (autogk_<name>.py or <name>.py), else the package's."""
    for mod in (f"autogk_{name}", name):
        try:
            return importlib.import_module(mod)
        except ImportError:
            continue
    return importlib.import_module(f"autogk_git.bench.{name}")


def snapshot(snaps: list, outs: list) -> None:
    """Copy each output's bytes with an elementwise kernel on the current stream. On the H200 (torch
    2.11) the judge still passed a side-stream kernel when this was `copy_` on the same pool stream;
    with this kernel, loaded at start, it was caught (benchmarks/results/h200_verdicts.md). Which of
    the two changes made the difference was not isolated."""
    import torch
    for s, o in zip(snaps, outs):
        src = o.reshape(-1).view(torch.uint8)
        torch.bitwise_or(src, 0, out=s.reshape(-1).view(torch.uint8))


class Seal:
    """What this process calls and times the kernel with, fingerprinted before the kernel's code runs.

    The timings are made here, in the kernel's process: a kernel rewarded for speed could scale its
    own figures by replacing the timer (a method, a module constant such as the side-stream ratio,
    the flush buffer) or a library call it makes (torch.profiler's event times, CUDA events, the
    clock, the reply's pickler). Every value of the judge's own modules and classes, every callable of
    the watched library modules and classes, and the timers' state are held by identity here and
    compared after the import and around every request. Not a wall against code that writes memory
    through ctypes: a check that turns the obvious patch into a failure with a message."""

    def __init__(self) -> None:
        self.marks: dict[str, tuple] = {}  # name -> (how it is read, container, key, the value held)
        self.tampered = ""

    @staticmethod
    def _callable(v) -> bool:
        return callable(v) or isinstance(v, (staticmethod, classmethod, property))

    def _hold(self, name: str, owner, attr: str, value) -> None:
        self.marks[name] = ("vars", owner, attr, value)
        code = getattr(value, "__code__", None)
        if code is not None:  # a function whose body or defaults were swapped keeps its identity
            for part in ("__code__", "__defaults__", "__kwdefaults__"):
                self.marks[f"{name}.{part}"] = ("attr", value, part, getattr(value, part))

    def own(self, name: str, ns) -> None:
        """Every attribute of one of the judge's modules or classes (functions, constants, classes)."""
        for attr, v in list(vars(ns).items()):
            if attr in ("__dict__", "__weakref__", "__doc__"):
                continue
            self._hold(f"{name}.{attr}", ns, attr, v)
            if isinstance(v, type) and getattr(v, "__module__", None) == getattr(ns, "__name__", None):
                self.own(f"{name}.{attr}", v)

    def library(self, name: str, ns) -> None:
        """The callables of a library module or class (its other state may change as it runs)."""
        for attr, v in list(vars(ns).items()):
            if self._callable(v) and not attr.startswith("__"):
                self._hold(f"{name}.{attr}", ns, attr, v)

    def state(self, name: str, obj) -> None:
        """An object's attributes (the timer's flush buffer, its method name); a tensor also by where
        it lives and how large it is (a buffer shrunk in place keeps its identity)."""
        for attr, v in list(vars(obj).items()):
            self._hold(f"{name}.{attr}", obj, attr, v)
            if hasattr(v, "data_ptr") and hasattr(v, "numel"):
                self.marks[f"{name}.{attr}:storage"] = ("storage", v, (v.data_ptr(), v.numel(), str(v.dtype)), None)

    def mapping(self, name: str, d: dict, keys=None) -> None:
        """A dict's entries (all, or `keys`) by identity, and each value's state (the per-method timers)."""
        for k in list(d if keys is None else keys):
            self.marks[f"{name}[{k!r}]"] = ("item", d, k, d[k])
            self.state(f"{name}[{k!r}]", d[k])

    def check(self) -> str:
        """'' while every held value is still in place, else what changed (then always that)."""
        if self.tampered:
            return self.tampered
        missing = object()
        for name, (how, owner, key, value) in self.marks.items():
            if how == "vars":
                same = vars(owner).get(key, missing) is value
            elif how == "attr":
                same = getattr(owner, key, missing) is value
            elif how == "item":
                same = owner.get(key, missing) is value
            else:  # a tensor's storage, as sealed
                same = (owner.data_ptr(), owner.numel(), str(owner.dtype)) == key
            if not same:
                self.tampered = (f"the kernel changed {name} in its process (the judge's helpers, timers or a "
                                 "library call the timer makes): a kernel may not patch what calls or times it")
                return self.tampered
        return ""


def seal_process(W, timing, hygiene) -> Seal:
    """The seal of this process: the judge's modules and this one, the library calls the timing path
    makes, and the timers made so far."""
    import builtins
    import math
    import multiprocessing.connection as mpc
    import multiprocessing.reduction as mpr
    import time

    import torch
    seal = Seal()
    for name, mod in (("candidate", sys.modules[__name__]), ("worker", W), ("timing", timing),
                      ("hygiene", hygiene), ("rules", getattr(W, "rules", None)),
                      ("status", sys.modules.get(W.Status.__module__))):
        if mod is not None:
            seal.own(name, mod)
    # torch's own namespace only for what this path calls: torch._dynamo's import (torch.compile in a
    # kernel) rewraps some of its functions, which is no tampering.
    for attr in ("bitwise_or", "empty", "empty_like", "zeros"):
        seal._hold(f"torch.{attr}", torch, attr, getattr(torch, attr))
    libs = [("builtins", builtins), ("math", math), ("time", time), ("torch.cuda", torch.cuda),
            ("Connection", mpc.Connection), ("ForkingPickler", mpr.ForkingPickler), ("torch.Tensor", torch.Tensor)]
    if timing is not None:
        import torch.autograd.profiler as ap
        import torch.autograd.profiler_util as apu
        import torch.profiler as tp
        libs += [("torch.cuda.Event", torch.cuda.Event), ("torch.cuda.Stream", torch.cuda.Stream),
                 ("torch.cuda.CUDAGraph", torch.cuda.CUDAGraph), ("torch.cuda.graph", torch.cuda.graph),
                 ("torch.profiler", tp), ("torch.profiler.profile", tp.profile),
                 ("torch.autograd.profiler", ap), ("torch.autograd.profiler.profile", ap.profile),
                 ("torch.autograd.profiler_util", apu)]
        libs += [(f"torch.autograd.profiler_util.{c}", getattr(apu, c)) for c in
                 ("FunctionEvent", "FunctionEventAvg", "EventList", "Interval", "Kernel") if hasattr(apu, c)]
    for name, ns in libs:
        seal.library(name, ns)
    seal.mapping("worker._DEVICE_TIMERS", W._DEVICE_TIMERS)
    return seal


def _on(stream):
    """Run the block with `stream` as the current CUDA stream (no stream on CPU: nothing to do)."""
    import contextlib

    import torch
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def main(argv: list[str]) -> int:
    fd, kdir, alias, device = int(argv[0]), Path(argv[1]), argv[2], argv[3]
    mem = int(argv[4]) if len(argv) > 4 else 0
    warm_profiler = len(argv) > 5 and argv[5] == "1"
    timer_method = argv[6] if len(argv) > 6 else ""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    hygiene = _sibling("hygiene")
    hygiene.die_with_parent(signal.SIGKILL)
    if mem > 0 and not device.startswith("cuda"):
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    from multiprocessing.connection import Connection

    import torch
    import torch.multiprocessing as tmp
    tmp.set_sharing_strategy("file_system")  # tensors by shm name: no fd passing between unrelated processes
    W = _sibling("worker")
    timing = _sibling("timing") if device.startswith("cuda") else None
    if timing is not None and warm_profiler:
        W.warm_profiler()  # its first start costs seconds: pay it now, beside the other label's process
    if timing is not None and timer_method:
        try:
            W.device_timer(timer_method)  # made, and sealed, before the kernel's code runs
        except Exception:  # noqa: BLE001 - a timer that cannot be made says so in the time request
            pass
    seal = seal_process(W, timing, hygiene)
    marks, n_marks = seal.marks, len(seal.marks)  # held here too: a kernel that empties the seal is caught

    def tampered() -> str:
        if seal.marks is not marks or len(marks) != n_marks:
            seal.tampered = seal.tampered or "the kernel changed the seal's own records in its process"
        return seal.check()

    conn = Connection(fd)
    try:
        mod = W.load_module(alias, kdir, "kernel.py")
        run = getattr(mod, "run", None)
        if not callable(run):
            raise W.KernelFailure(W.Status.COMPILE_ERROR, "kernel.py defines no run() function")
        if tampered():
            raise W.KernelFailure(W.Status.TAMPERED, f"on import: {tampered()}")
    except W.KernelFailure as e:
        conn.send(("load_error", e.status, str(e)))
        return 0
    except BaseException as e:  # noqa: BLE001 - any import failure is the kernel's
        conn.send(("load_error", W.Status.COMPILE_ERROR, W.short_tb(e)))
        return 0
    conn.send(("ready",))
    # The caller's stream for correctness calls: one of torch's pool streams, not the legacy default
    # stream, which orders itself after every blocking stream (torch's pool streams are blocking) and
    # so waited for work the kernel left on a side stream (H200, torch 2.11: benchmarks/stream_diag.py).
    caller = torch.cuda.Stream(device) if device.startswith("cuda") else None
    if caller is not None:  # load the snapshot's kernel now, not during a kernel's first call
        with _on(caller):
            snapshot([torch.zeros(4, device=device)], [torch.ones(4, device=device)])
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
            conn.send(("error", W.Status.TAMPERED, tampered()))
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
                        snapshot(snaps, outs)
                    W.stream_wait(device)
            except BaseException as e:  # noqa: BLE001 - the kernel's failure, reported as data
                conn.send(("error", W.classify(e), W.short_tb(e)))
                W.die_if_context_lost(e, device)
                continue
            if tampered():
                conn.send(("error", W.Status.TAMPERED, tampered()))
                continue
            if not W.is_dps_return(ret, outs):
                conn.send(("not_dps", type(ret).__name__))
                continue
            conn.send(("ok",))
        elif op == "time":
            _, sets, outs, warm, warm_outs, method, settings = msg
            try:
                known = set(W._DEVICE_TIMERS)
                timer = W.device_timer(method) if timing is not None else W.HostTimer()
                # A timer made now (another method than the one made at start), by sealed code: sealed too.
                if set(W._DEVICE_TIMERS) - known:
                    seal.mapping("worker._DEVICE_TIMERS", W._DEVICE_TIMERS, set(W._DEVICE_TIMERS) - known)
                    n_marks = len(marks)
                # Timed on the default stream, where the caller-stream events of the cupti timer were
                # seen to catch work left on a side stream (H200, 2026-11-30); on a pool stream the
                # same cross-check passed such a kernel.
                t = W.time_batch(run, sets, outs, warm, warm_outs, settings, timer, device)
            except W.KernelFailure as e:
                conn.send(("error", e.status, str(e)))
                continue
            except BaseException as e:  # noqa: BLE001
                if timing is not None and isinstance(e, timing.TimerError):
                    conn.send(("timer_error", f"{type(e).__name__}: {e}"))
                    continue
                conn.send(("error", W.classify(e), f"while timed: {W.short_tb(e)}"))
                W.die_if_context_lost(e, device)
                continue
            if tampered():  # the figures just made went through what was patched: not sent
                conn.send(("error", W.Status.TAMPERED, f"while timed: {tampered()}"))
                continue
            conn.send(("ok", t))


if __name__ == "__main__":
    os.environ.pop("PYTHONSTARTUP", None)
    if os.environ.get("AUTOGK_PROFILE_DIR"):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        sys.exit(_sibling("worker").profiled(main, sys.argv[1:], "kernel"))
    sys.exit(main(sys.argv[1:]))
