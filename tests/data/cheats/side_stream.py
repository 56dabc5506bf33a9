"""Cheat (GPU): does its work on a stream of its own, after a delay, and returns without the caller's
stream waiting for it: a consumer on the caller's stream reads the outputs before they are written."""
import torch

_SIDE = []


def run(x, bias, scale, out):
    if not _SIDE:
        _SIDE.append(torch.cuda.Stream())
    side = _SIDE[0]
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)  # ~10 ms of spinning first: the caller's read comes before the write
        torch.add(x * scale, bias, out=out)
