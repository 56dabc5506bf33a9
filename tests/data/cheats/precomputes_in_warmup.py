"""Cheat: computes the timed calls' outputs before the timed window. On its first warm-up call of a
timed request it finds the request (its inputs and outputs are objects in its own process: here in
the frame of the loop that received it), does the parent's work on every timed input set and writes
the outputs; in the window it returns at once. The work was done and the outputs are right: only
not while timed."""
import sys
import time

import torch

_state = {"req": None, "done": set()}


def _work(x, bias, scale, out):
    time.sleep(0.003)
    torch.add(x * scale, bias, out=out)


def _request():
    f = sys._getframe(1)
    while f is not None:
        msg = f.f_locals.get("msg")
        if isinstance(msg, tuple) and len(msg) > 3 and msg[0] == "time":
            return msg
        f = f.f_back
    return None


def run(x, bias, scale, out):
    req = _request()
    if req is not None and req is not _state["req"]:  # a new timed request: do all its work now
        _state["req"], _state["done"] = req, set()
        for args, outs in zip(req[1], req[2]):
            _work(*args, *outs)
            _state["done"].add(outs[0].data_ptr())
    if req is not None and out.data_ptr() in _state["done"]:
        return  # a timed call: its output is already there
    _work(x, bias, scale, out)
