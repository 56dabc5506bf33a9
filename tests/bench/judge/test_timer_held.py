"""The timer's own objects held through a timed window (bench/judge/held.py, which timer.py calls):
the kernel's code runs below the timer's frame and can reach the profiler and the CUDA events through the
frames. On the CPU with torch's profiler on CPU activity (the same Python objects as under CUDA), in a
process of its own (a profiler run in pytest's process left Triton's interpreter failing in later tests).
The GPU cases: tests/test_witness_gpu.py::test_the_timers_own_objects_changed_inside_the_window_are_tampering."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO

CHANGES = {
    "events on the profiler": "real = type(prof).events\n"
                              "prof.events = lambda: [e for e in real(prof) if 'flush' in e.name]",
    "a method on the inner profiler": "prof.profiler._parse_kineto_results = lambda *a: None",
    "the inner profiler swapped": "prof.profiler = type(prof.profiler)()",
    "an item swapped in a container": "d = next(v for v in vars(prof).values() if isinstance(v, (list, dict)) and v)\n"
                                      "if isinstance(d, list): d[0] = object()\n"
                                      "else: d[next(iter(d))] = object()",
    "the class swapped": "prof.__class__ = type('Fake', (type(prof),), {})",
}

SCRIPT = r"""
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from torch.profiler import ProfilerActivity, profile
from autogk_git.bench.judge import held as seal
changes = json.loads(sys.argv[2])
out = {}
for name, code in [("honest", None), *changes.items()]:
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            watched = (prof, getattr(prof, "profiler", None))
            held = seal.held_state(watched)
            for i in range(3):
                torch.ones(64).add_(1.0)
                if code and i == 0:
                    exec(code, {"prof": prof})
            seal.held_unchanged(watched, held, "profiler")
        out[name] = "ok " + str(sum("add_" in e.name for e in prof.events()))
    except seal.TimerTampered as e:
        out[name] = "tampered: " + str(e)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def outcomes() -> dict:
    p = subprocess.run([sys.executable, "-c", SCRIPT, str(REPO), json.dumps(CHANGES)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_an_honest_window_leaves_the_profiler_as_it_was(outcomes):
    assert outcomes["honest"].startswith("ok ") and outcomes["honest"] != "ok 0", outcomes


@pytest.mark.parametrize("how", list(CHANGES))
def test_an_attribute_set_or_swapped_on_the_profiler_inside_the_window_is_tampering(outcomes, how):
    assert outcomes[how].startswith("tampered:") and "what times it" in outcomes[how], outcomes[how]


def test_a_flush_under_the_floor_of_the_timers_own_is_named():
    from autogk_git.bench.judge import held
    assert held.flush_floor([23.0, 24.1, 22.8], 25.0) == ""
    got = held.flush_floor([23.0, 1.9, 12.1, 22.8], 25.0)  # cut to a twelfth, and to just under half
    assert got.startswith("2 of 4 flushes under 50 %") and "1.90 us" in got, got
    # Under CUDA graphs: against the flush-only graph's own, and as many as were made.
    assert held.flush_floor([23.0, 24.0], 24.0, held.GRAPH_FLUSH_FLOOR, expected=2) == ""
    assert "under 75 %" in held.flush_floor([23.0, 16.0], 24.0, held.GRAPH_FLUSH_FLOOR, expected=2)
    assert held.flush_floor([23.0], 24.0, held.GRAPH_FLUSH_FLOOR, expected=2) == "1 flushes seen where 2 were made"


def test_a_value_set_in_a_flushs_closure_changes_its_cells():
    from autogk_git.bench.judge import held

    def bound(buf, n):
        return lambda: (buf, n)
    flush = bound(object(), 1 << 20)
    before = held.cells(flush)
    cell = dict(zip(flush.__code__.co_freevars, flush.__closure__))["n"]
    cell.cell_contents = 1
    assert held.cells(flush) != before
    cell.cell_contents = 1 << 20  # put back: equal again, which is why the timers check between calls
    assert held.cells(flush) == before


def test_an_attribute_added_to_what_a_flush_launches_changes_its_names_not_a_cache_entry():
    from autogk_git.bench.judge import held

    class Launched:
        def __init__(self):
            self.cache = {}
    fn = Launched()
    before = held.held_names([fn])
    fn.cache["sig"] = object()  # its library's own cache: allowed
    assert held.held_names([fn]) == before
    fn.run = lambda *a, **k: None  # an instance attribute over a method: a patch
    assert held.held_names([fn]) != before


FLUSH_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from autogk_git.bench.judge import timer
t = timer.DeviceTimer.__new__(timer.DeviceTimer)  # no GPU here: the state __init__ would make, by hand
t.method, t.profile_graphs, t.l2_bytes = "cupti", False, 1 << 20
t._flush_buf, t._flush_n, t._bandwidth, t._flush_us = torch.empty(1 << 10, dtype=torch.int32), 1 << 10, None, 20.0
flush = t._flusher()  # Triton's own launcher object, not launched
held = t._held_flush(flush)
out = {"again": t._held_flush(flush) == held, "rebound": t._held_flush(t._flusher()) == held}
cells = dict(zip(flush.__code__.co_freevars, flush.__closure__))
cells["n"].cell_contents = 1
out["n shrunk"] = t._held_flush(flush) == held
cells["n"].cell_contents = 1 << 10
out["n put back"] = t._held_flush(flush) == held
launch = cells["launch"].cell_contents
inner = [c.cell_contents for c in (launch.__closure__ or ())]
jit = next(x for x in inner if hasattr(x, "run"))
jit.run = lambda *a, **k: None
out["run on the Triton function"] = t._held_flush(flush) == held
del jit.run
t._flush_n = 1
out["the timer's length"] = t._held_flush(flush) == held
print(json.dumps(out))
"""


def test_the_timers_bound_flush_is_held_the_same_until_it_is_changed():
    # DeviceTimer._held_flush on Triton's real launcher (made, not launched: no GPU here), as the timers
    # compare it between calls: equal on an honest window, unequal when its length, the Triton function
    # it launches or the timer's own attributes change. (The honest side is what keeps a kernel from being
    # refused for nothing.)
    p = subprocess.run([sys.executable, "-c", FLUSH_SCRIPT, str(REPO)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out == {"again": True, "rebound": False, "n shrunk": False, "n put back": True,
                   "run on the Triton function": False, "the timer's length": False}, out


SEAL_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from autogk_git.bench.judge import held, kernel_process, seal, timer
s = seal.seal_process(kernel_process, timer)
out = {"honest": s.check()}
held._contents = lambda v: None  # container items no longer compared: a swapped list item unseen
out["patched"] = s.check()
print(json.dumps(out))
"""


def test_the_module_that_holds_the_timers_objects_is_sealed():
    # The timer checks its objects with held.py's functions, which look up their helpers in held's own
    # namespace: a kernel that patched one of them (held._contents, say) inside its window would turn the
    # check off. On the code before, held.py was imported by the timer but in none of the seal's lists: the
    # patch went unseen. In a process of its own: the seal installs an audit hook there for good.
    p = subprocess.run([sys.executable, "-c", SEAL_SCRIPT, str(REPO)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["honest"] == "" and "held" in out["patched"], out
