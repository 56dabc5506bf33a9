"""Cheat: does its work at once when called alone (the correctness checks), but when called in rapid
succession (a timed batch) only remembers the call; the remembered work is done on the first call on
buffers it has seen before, which the untimed calls that follow a timed window used to be. The timed
window never sees the work; the outputs are right by the time the judge used to read them."""
import time

import torch

WORK_S = 0.003  # what the real work costs, the same as the honest parent's
_last = [0.0]
_pending: list = []
_seen: set = set()


def _work(x, bias, scale, out):
    time.sleep(WORK_S)
    torch.add(x * scale, bias, out=out)


def run(x, bias, scale, out):
    now = time.perf_counter()
    rapid = now - _last[0] < 0.001
    _last[0] = now
    seen = out.data_ptr() in _seen
    _seen.add(out.data_ptr())
    if seen:
        while _pending:
            _work(*_pending.pop())
    if rapid and not seen:
        _pending.append((x, bias, scale, out))
        _last[0] = time.perf_counter()
        return
    _work(x, bias, scale, out)
    _last[0] = time.perf_counter()
