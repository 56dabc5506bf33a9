"""Cheat: during a timed batch (calls in rapid succession) the host clock runs at a third of its pace;
it is put back on the batch's last call, before the request ends, so no check between requests finds
anything. The work is the same as the honest parent's (sleeps_honest.py)."""
import time

import torch

REPS = 6  # the timed calls per round of the test's job
_real = time.perf_counter
_state = {"last": 0.0, "rapid": 0}


def run(x, bias, scale, out):
    now = _real()
    rapid = now - _state["last"] < 0.001
    _state["rapid"] = _state["rapid"] + 1 if rapid else 0
    if _state["rapid"] == 1:
        start = _real()
        time.perf_counter = lambda: start + (_real() - start) / 3.0
    elif _state["rapid"] >= REPS + 1:  # the last timed call (the warm-up's second call was the first rapid one)
        time.perf_counter = _real
    time.sleep(0.003)
    torch.add(x * scale, bias, out=out)
    _state["last"] = _real()
