"""precomputes_in_warmup.py's cheat on a GPU: on the first warm-up call of a timed request it finds
the request in its process, writes every timed output, and returns at once in the window."""
import sys

import torch

_state = {"req": None, "done": set()}


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
    if req is not None and req is not _state["req"]:
        _state["req"], _state["done"] = req, set()
        for (a, b, s), (o,) in zip(req[1], req[2]):
            torch.add(a * s, b, out=o)
            _state["done"].add(o.data_ptr())
    if req is not None and out.data_ptr() in _state["done"]:
        return
    torch.add(x * scale, bias, out=out)
