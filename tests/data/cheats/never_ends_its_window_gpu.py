"""never_ends_its_window.py on a GPU: honest through the checks and the warm-up; its first timed call
queues a spin kernel of ~15 minutes on the caller's stream, so the end mark recorded after it (and the
judge's copy behind that) never comes within any sensible bound."""
import sys

import torch


def _in_window() -> bool:
    names, f = set(), sys._getframe(2)
    while f is not None:
        names.add(f.f_code.co_name)
        f = f.f_back
    return "time_calls" in names and "time_batch" in names and "sync_latency" not in names


def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
    if _in_window():
        torch.cuda._sleep(2_000_000_000_000)
