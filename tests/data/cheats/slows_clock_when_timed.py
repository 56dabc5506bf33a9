"""Cheat: honest through the correctness checks; from its Nth call on (the timed calls) it slows the
clock the host timer reads, so every timing after that is a third of the truth. No patch at import."""
import time

import torch

AFTER = 8
_calls = [0]


def run(x, bias, scale, out):
    _calls[0] += 1
    if _calls[0] == AFTER:
        real = time.perf_counter
        start = real()
        time.perf_counter = lambda: start + (real() - start) / 3.0
    torch.add(x * scale, bias, out=out)
