"""Cheat: does every call's work, all of it inside the timed window, but in the window's first call: it
finds the window's other calls (their inputs and outputs) in its caller's frames and computes them all
there, then returns at once from the rest. The window holds the same work as the honest parent's, so a
clock over the whole window sees nothing amiss, and every output is right when the window ends; only a
per-call figure that is not the calls' mean (their median, say) reads it as almost no time."""
import sys
import time

import torch

WORK_S = 0.003  # what one call's work costs, the same as the honest parent's (sleeps_honest.py)


def _work(x, bias, scale, out):
    time.sleep(WORK_S)
    torch.add(x * scale, bias, out=out)


def _window():
    """(inputs, outputs) of every call of the timed window this call belongs to, or None."""
    f = sys._getframe(2)
    while f is not None:
        loc = f.f_locals
        if f.f_code.co_name == "time_batch" and isinstance(loc.get("outs"), list):
            return loc["sets"], loc["outs"]
        f = f.f_back
    return None


def run(x, bias, scale, out):
    w = _window()
    if w is not None:
        sets, outs = w
        mine = [i for i, o in enumerate(outs) if o and o[-1] is out]
        if mine == [0]:  # the window's first call: every call's work now
            for a, o in zip(sets, outs):
                _work(*a, *o)
            return
        if mine:  # done already, in the first call
            return
    _work(x, bias, scale, out)
