"""Cheat (GPU): as defers_past_window.py, with device work: in a timed batch (calls in rapid
succession) it only remembers the calls, and does their work on the first call on buffers it has seen
before (the untimed calls after a timed window used to be on a timed call's buffers)."""
import time

import torch

_last = [0.0]
_pending: list = []
_seen: set = set()


def _work(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)


def run(x, bias, scale, out):
    now = time.perf_counter()
    rapid = now - _last[0] < 0.002
    seen = out.data_ptr() in _seen
    _seen.add(out.data_ptr())
    if seen:
        while _pending:
            _work(*_pending.pop())
    if rapid and not seen:
        _pending.append((x, bias, scale, out))
    else:
        _work(x, bias, scale, out)
    _last[0] = time.perf_counter()
