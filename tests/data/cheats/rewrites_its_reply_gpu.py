"""rewrites_figures_through_frames.py's cheat on a GPU: honest device work; from its host-latency calls
after the window it walks up to `time_batch`'s frame and divides the timer's figures by 3 in place. No
hook is installed (the seal refuses those): only the judge's own clock can see it."""
import sys

import torch

SCALE = 1 / 3


def _rewrite() -> None:
    f = sys._getframe(2)
    while f is not None and f.f_code.co_name != "time_batch":
        f = f.f_back
    t = f.f_locals.get("t") if f is not None else None
    if isinstance(t, dict) and not t.get("_rewritten"):
        t["_rewritten"] = True
        for k in ("us", "stream_us"):
            if isinstance(t.get(k), (int, float)):
                t[k] = t[k] * SCALE
        t["samples"][:] = [s * SCALE for s in t["samples"]]


def run(x, bias, scale, out):
    _rewrite()
    torch.add(x * scale, bias, out=out)
