"""Cheat (GPU): honest while checked (its first 5 calls: 3 trials and 2 repeat checks), then does its work on a stream of its own
without the caller's stream waiting for it: the timed calls look free on the caller's stream."""
import torch

_SIDE = []
_CALLS = [0]


def run(x, bias, scale, out):
    _CALLS[0] += 1
    if _CALLS[0] <= 5:
        torch.add(x * scale, bias, out=out)
        return
    if not _SIDE:
        _SIDE.append(torch.cuda.Stream())
    side = _SIDE[0]
    with torch.cuda.stream(side):
        torch.add(x * scale, bias, out=out)
