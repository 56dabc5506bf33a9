"""Cheat: does the parent's work (sleeps_honest.py), installs nothing, and rewrites the figures of the
window just timed from inside its own later calls: the host-latency calls after the window run under
`time_batch`, whose frame holds the timer's result dict; the cheat walks up to it and divides the
figures by 10 in place. No seal can see this (frames are reachable from any code); only the judge's own
clock, which does not run in this process, can."""
import sys
import time

import torch

SCALE = 0.1  # claims a tenth: on CPU the clock's slack is a quarter of the parent plus 1 ms


def _rewrite() -> None:
    f = sys._getframe(2)
    while f is not None and f.f_code.co_name != "time_batch":
        f = f.f_back
    t = f.f_locals.get("t") if f is not None else None
    if isinstance(t, dict) and not t.get("_rewritten"):
        t["_rewritten"] = True
        t["us"] = t["us"] * SCALE
        t["samples"][:] = [s * SCALE for s in t["samples"]]


def run(x, bias, scale, out):
    _rewrite()
    time.sleep(0.003)
    torch.add(x * scale, bias, out=out)
