"""Cheat (GPU, plain torch): the parent's work (torch_honest.py), all of it inside the timed window and on
the caller's stream, but not spread as the calls are. It finds the window's calls in its caller's frames;
the first half of them, and one more, compute only the first 70 % of their outputs, and the window's last
call computes the rest of theirs besides its own. Six of ten calls then take 0.7 of the parent's time, the
last 2.8 of it: a window as long as the parent's, so the judge's clock sees nothing amiss, and every output
right when the window ends, but a median of the calls' figures says 0.7x (above the byte floor, which a
median near zero would hit). The calls' mean says 1.0x."""
import sys

import torch

FRACTION = 0.7


def _window():
    """(inputs, outputs) of every call of the timed window this call belongs to, or None."""
    f = sys._getframe(2)
    while f is not None:
        loc = f.f_locals
        if f.f_code.co_name == "time_batch" and isinstance(loc.get("outs"), list):
            return loc["sets"], loc["outs"]
        f = f.f_back
    return None


def _part(x, bias, scale, out, lo, hi):
    torch.add(x[lo:hi] * scale, bias[lo:hi], out=out[lo:hi])


def run(x, bias, scale, out):
    w = _window()
    mine = [i for i, o in enumerate(w[1]) if o and o[-1] is out] if w is not None else []
    if mine and len(w[1]) > 2:
        sets, outs = w
        i, n, cut = mine[0], len(outs), int(out.numel() * FRACTION)
        light = n // 2 + 1
        if i < light:
            _part(x, bias, scale, out, 0, cut)
            return
        if i == n - 1:
            for a, o in zip(sets[:light], outs[:light]):
                _part(a[0], a[1], a[2], o[-1], cut, o[-1].numel())
    torch.add(x * scale, bias, out=out)
