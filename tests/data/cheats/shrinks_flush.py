"""Cheat (GPU): shrinks the timer's L2 flush to nothing (its data stays in L2 between timed calls),
reached through the judge's module in sys.modules at import."""
import sys

import torch

for _mod in list(sys.modules.values()):
    _timers = vars(_mod).get("_DEVICE_TIMERS") if hasattr(_mod, "__dict__") else None
    for _timer in list(_timers.values()) if isinstance(_timers, dict) else []:
        if hasattr(_timer, "_flush_n"):
            _timer._flush_n = 1


def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
