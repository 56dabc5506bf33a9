"""Cheat: does the honest work, then leaves the GPU busy after each timed request: a profile hook
(sys.setprofile) sees the timer's `time_batch` return, after every synchronize of the request, and
queues ~30 ms of spinning on a stream of its own. Its process answers at once; the spin runs while the
judge times the other kernel, whose calls then share the GPU with it."""
import sys

import torch

_side = []


def _spin(frame, event, arg):
    if event == "return" and frame.f_code.co_name == "time_batch" and torch.cuda.is_available():
        if not _side:
            _side.append(torch.cuda.Stream())
        with torch.cuda.stream(_side[0]):
            torch.cuda._sleep(60_000_000)


sys.setprofile(_spin)


def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
