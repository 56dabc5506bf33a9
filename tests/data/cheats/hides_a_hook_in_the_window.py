"""Cheat: does the parent's work (sleeps_honest.py), and inside each timed window installs a profile
hook that, as the timer's `time_calls` returns, scales its figures by 0.75 and removes itself. By the
seal's next check there is no hook left to see, and a 25 % under-report is within the host clock's
slack on CPU (on the old code: PASSED at ~0.75, a false speedup)."""
import sys
import time

import torch

SCALE = 0.75


def _scale(frame, event, arg):
    if event == "return" and frame.f_code.co_name == "time_calls" and isinstance(arg, dict):
        sys.setprofile(None)
        if isinstance(arg.get("us"), (int, float)):
            arg["us"] = arg["us"] * SCALE
        if isinstance(arg.get("samples"), list):
            arg["samples"][:] = [s * SCALE for s in arg["samples"]]


def _in_window() -> bool:
    names, f = set(), sys._getframe(2)
    while f is not None:
        names.add(f.f_code.co_name)
        f = f.f_back
    return "time_calls" in names and "time_batch" in names and "sync_latency" not in names


def run(x, bias, scale, out):
    if _in_window() and sys.getprofile() is None:
        sys.setprofile(_scale)
    time.sleep(0.003)
    torch.add(x * scale, bias, out=out)
