"""Cheat (or a kernel that deadlocks): honest through the checks and the warm-up, then its first timed
call never returns, so the timed window never closes."""
import sys
import time

import torch


def _in_window() -> bool:
    names, f = set(), sys._getframe(2)
    while f is not None:
        names.add(f.f_code.co_name)
        f = f.f_back
    return "time_calls" in names and "time_batch" in names and "sync_latency" not in names


def run(x, bias, scale, out):
    if _in_window():
        time.sleep(3600)
    torch.add(x * scale, bias, out=out)
