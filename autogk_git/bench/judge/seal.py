"""The seal of a kernel's process: what calls and times the kernel, fingerprinted before the kernel's
code runs and compared after the import, around every request and right after each timed window."""
from __future__ import annotations

import _signal
import _thread
import gc
import signal
import sys
import threading

# What the hooks are read through, bound here, before any kernel's code runs in the process: a kernel that
# installed a signal handler (no audit event says so) and then made signal.getsignal, or the `_signal` it
# calls, answer the old handler, or rebound gc.callbacks to an empty list (the interpreter calls the list it
# holds), hid its hook from the names looked up at each check (tests/bench/judge/test_seal.py).
_GETSIGNAL, _VALID_SIGNALS = _signal.getsignal, _signal.valid_signals
_GETPROFILE, _GETTRACE = sys.getprofile, sys.gettrace
_GC_CALLBACKS = gc.callbacks  # the interpreter's own list
# sys.monitoring (3.12+): its readers, which a kernel can replace in the module to answer "no tool"
_MONITORING = getattr(sys, "monitoring", None)
_READ_TOOLS = (_MONITORING.get_tool, _MONITORING.get_events) if _MONITORING is not None else None
# Threads: threading's count (bound here: a kernel's own `threading.active_count` could answer the old
# number) and _thread's (a thread started through _thread.start_new_thread is never in threading's).
# Not seen: a native thread that calls into Python (a C callback on a thread of a library's own).
_ACTIVE_COUNT, _THREAD_COUNT = threading.active_count, getattr(_thread, "_count", lambda: 0)


def python_threads() -> tuple[int, int]:
    """(threading's count of live threads, _thread's count of threads it started that still run)."""
    return _ACTIVE_COUNT(), _THREAD_COUNT()


# Names a namespace gains by itself as it runs: warnings' per-module registry.
IGNORED_NAMES = frozenset({"__warningregistry__"})

HOOK_EVENTS = frozenset({"sys.setprofile", "sys.settrace", "sys._setprofileallthreads", "sys._settraceallthreads",
                         "sys.monitoring.register_callback", "sys.addaudithook"})
"""Audit events of the calls that install an interpreter hook: code of the kernel's that the interpreter
runs at points of its own choosing (a function's return, a line), outside the kernel's calls."""
_HEARD: list[str] = []  # the HOOK_EVENTS heard since the seal was made, in this process
_AUDITING = False  # whether _audit is installed in this process


def _audit(event: str, args) -> None:  # noqa: ARG001 - the audit hook's signature
    """The seal's audit hook (one per process, it cannot be removed): each call of HOOK_EVENTS is heard, and
    one that would install a hook is refused (the RuntimeError raised here stops it), so none is in place
    even between two checks; what was heard makes the kernel TAMPERED. Heard alone, a hook set and removed
    inside one window went unseen once the kernel emptied `_HEARD`, a list it reaches by name."""
    if event in HOOK_EVENTS:
        _HEARD.append(event)
        if _installs(event, args):
            raise RuntimeError(f"the judge's seal refuses {event} in a kernel's process: an interpreter hook "
                               "runs the kernel's code outside its calls")


def _installs(event: str, args) -> bool:
    """Whether the audited call would put a hook where there is none. Removing or replacing one already in
    place is only heard (TAMPERED all the same): the judge's own profiler, when a person profiles a job
    (AUTOGK_PROFILE_DIR), is set before the seal and removed at the process's end."""
    if event == "sys.monitoring.register_callback":
        return bool(args) and args[0] is not None
    if event in ("sys.setprofile", "sys._setprofileallthreads"):
        return _GETPROFILE() is None
    if event in ("sys.settrace", "sys._settraceallthreads"):
        return _GETTRACE() is None
    return True  # another audit hook


def interpreter_hooks() -> tuple:
    """The interpreter-level hooks as they are now, each a (name, value): a profile or trace function
    (this thread's, and the one `threading` gives new threads), sys.monitoring's tools and their events
    (3.12+), gc's callbacks, every signal's handler and sys's exception hooks. Each runs code of its own
    at points the kernel does not call: after its last timed call, while the judge's own steps run."""
    out = [("sys.getprofile()", _GETPROFILE()), ("sys.gettrace()", _GETTRACE()),
           ("threading.setprofile", getattr(threading, "_profile_hook", None)),
           ("threading.settrace", getattr(threading, "_trace_hook", None)),
           ("gc.callbacks", tuple(_GC_CALLBACKS)),
           ("sys.excepthook", sys.excepthook), ("sys.unraisablehook", sys.unraisablehook)]
    if _READ_TOOLS is not None:
        tool, events = _READ_TOOLS
        out.append(("sys.monitoring", tuple((tool(i), events(i)) for i in range(6))))
    handlers = []
    for sig in sorted(_VALID_SIGNALS()):
        try:
            handlers.append((int(sig), _GETSIGNAL(sig)))
        except (OSError, ValueError):
            pass
    out.append(("signal handlers", tuple(handlers)))
    return tuple(out)


def _same(a, b) -> bool:
    """Equal for names and numbers, the same object for anything else (a callable's __eq__ is its own)."""
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if a is None or isinstance(a, (str, int)):
        return type(a) is type(b) and a == b
    return a is b


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
        self.threads = python_threads()
        self.hooks = interpreter_hooks()  # as the judge's own start-up left them (cProfile when profiling)
        self.heard = len(_HEARD)

    @staticmethod
    def _callable(v) -> bool:
        return callable(v) or isinstance(v, (staticmethod, classmethod, property))

    def _hold(self, name: str, owner, attr: str, value) -> None:
        self.marks[name] = ("vars", owner, attr, value)
        code = getattr(value, "__code__", None)
        if code is not None:  # a function whose body or defaults were swapped keeps its identity
            for part in ("__code__", "__defaults__", "__kwdefaults__"):
                self.marks[f"{name}.{part}"] = ("attr", value, part, getattr(value, part))

    def _keys(self, name: str, ns) -> None:
        """The names a namespace has now: one added later (an instance attribute that shadows a method,
        a `__getattribute__` given to a class) changes what is called as surely as a replaced one."""
        self.marks[f"{name}:names"] = ("names", ns, frozenset(vars(ns)) - IGNORED_NAMES, None)

    def own(self, name: str, ns) -> None:
        """Every attribute of one of the judge's modules or classes (functions, constants, classes)."""
        self._keys(name, ns)
        for attr, v in list(vars(ns).items()):
            if attr in ("__dict__", "__weakref__", "__doc__"):
                continue
            self._hold(f"{name}.{attr}", ns, attr, v)
            if isinstance(v, type) and getattr(v, "__module__", None) == getattr(ns, "__name__", None):
                self.own(f"{name}.{attr}", v)

    def library(self, name: str, ns) -> None:
        """The callables of a library module or class (its other state may change as it runs); a
        class's names too (a module may gain submodules and caches as it runs)."""
        if isinstance(ns, type):
            self._keys(name, ns)
        for attr, v in list(vars(ns).items()):
            if self._callable(v) and not attr.startswith("__"):
                self._hold(f"{name}.{attr}", ns, attr, v)

    def state(self, name: str, obj) -> None:
        """An object's attributes (the timer's flush buffer, its method name); a tensor also by where
        it lives and how large it is (a buffer shrunk in place keeps its identity)."""
        self._keys(name, obj)
        self.marks[f"{name}:class"] = ("attr", obj, "__class__", type(obj))
        for attr, v in list(vars(obj).items()):
            self._hold(f"{name}.{attr}", obj, attr, v)
            if hasattr(v, "data_ptr") and hasattr(v, "numel"):
                self.marks[f"{name}.{attr}:storage"] = ("storage", v, (v.data_ptr(), v.numel(), str(v.dtype)), None)

    def mapping(self, name: str, d: dict, keys=None) -> None:
        """A dict's entries (all, or `keys`) by identity, and each value's state (the per-method timers)."""
        for k in list(d if keys is None else keys):
            self.marks[f"{name}[{k!r}]"] = ("item", d, k, d[k])
            self.state(f"{name}[{k!r}]", d[k])

    def module(self, mod) -> None:
        """The module `import` finds under this one's name: a function that imports at its call (the
        timer's `from torch.profiler import profile`) reads sys.modules, not the namespace sealed."""
        name = getattr(mod, "__name__", None)
        if name and sys.modules.get(name) is mod:
            self.marks[f"sys.modules[{name!r}]"] = ("item", sys.modules, name, mod)

    def _hooks_changed(self) -> str:
        if len(_HEARD) > self.heard:
            return (f"the kernel called {_HEARD[self.heard]} in its process: an interpreter hook runs code of "
                    "the kernel's outside its calls, where it can rewrite the figures; a kernel may not install one")
        now = interpreter_hooks()
        for (name, held), (_, value) in zip(self.hooks, now):
            if not _same(held, value):
                return (f"the kernel changed {name} in its process: an interpreter hook (a profile or trace "
                        "function, a monitoring tool, a gc callback, a signal handler) runs code of the "
                        "kernel's outside its calls, where it can rewrite the figures; a kernel may not install one")
        return ""

    def check(self) -> str:
        """'' while every held value is still in place, else what changed (then always that)."""
        if self.tampered:
            return self.tampered
        hooked = self._hooks_changed()
        if hooked:
            self.tampered = hooked
            return self.tampered
        more = max(now - then for now, then in zip(python_threads(), self.threads))
        if more > 0:
            # A thread of the kernel's runs between and during the judge's own steps: it can patch the
            # timer for a moment and put it back before any check, or do work after a timed window.
            self.tampered = (f"the kernel left {more} Python thread(s) running "
                             "in its process: a kernel may not run code outside its calls")
            return self.tampered
        missing = object()
        for name, (how, owner, key, value) in self.marks.items():
            if how == "vars":
                same = vars(owner).get(key, missing) is value
            elif how == "attr":
                same = getattr(owner, key, missing) is value
            elif how == "item":
                same = owner.get(key, missing) is value
            elif how == "names":
                same = frozenset(vars(owner)) - IGNORED_NAMES == key
            else:  # a tensor's storage, as sealed
                same = (owner.data_ptr(), owner.numel(), str(owner.dtype)) == key
            if not same:
                self.tampered = (f"the kernel changed {name} in its process (the judge's helpers, timers or a "
                                 "library call the timer makes): a kernel may not patch what calls or times it")
                return self.tampered
        return ""


def seal_process(process, timing) -> Seal:
    """The seal of this process: the judge's modules and this one, the library calls the timing path
    makes, and the timers made so far."""
    import builtins
    import math
    import multiprocessing.connection as mpc
    import multiprocessing.reduction as mpr
    import time

    import torch
    global _AUDITING
    if not _AUDITING:  # one audit hook per process: they cannot be removed
        sys.addaudithook(_audit)
        _AUDITING = True
    seal = Seal()
    from . import calls, held, hygiene, interp, launch, profiling, stats, status
    l2 = None
    if timing is not None:
        from . import l2  # the timer's flush and L2 carve-out (triton's GPU driver: only beside a device timer)
    for name, mod in (("kernel_process", process), ("seal", sys.modules[__name__]), ("calls", calls),
                      ("timer", timing), ("l2", l2), ("held", held), ("hygiene", hygiene), ("stats", stats),
                      ("status", status), ("launch", launch), ("profiling", profiling), ("interp", interp)):
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
    for mod in (process, sys.modules[__name__], calls, timing, l2, held, hygiene, interp, launch, profiling, stats,
                status, builtins, math, time, mpc, mpr, torch, torch.cuda, sys.modules.get("torch.profiler"),
                sys.modules.get("ctypes"), gc, signal, threading):
        if mod is not None:
            seal.module(mod)
    seal.mapping("calls._DEVICE_TIMERS", calls._DEVICE_TIMERS)
    return seal
