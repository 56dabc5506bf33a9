"""Honest, with a fixed amount of CPU work a call (a loop of Python steps, not a sleep): its time grows when
another process takes the cores it runs on. With AUTOGK_TEST_CALL_LOG set (the tests' own), each call made
inside the judge's timer (`time_batch` among its callers) appends its start and end (CLOCK_MONOTONIC)."""
import os
import sys
import time

import torch

STEPS = 60_000
LOG = os.environ.get("AUTOGK_TEST_CALL_LOG")


def spend(steps: int = STEPS) -> int:
    acc = 0
    for i in range(steps):
        acc += i & 7
    return acc


def _timed() -> bool:
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == "time_batch":
            return True
        f = f.f_back
    return False


def run(x, bias, scale, out):
    t0 = time.monotonic()
    spend()
    torch.add(x * scale, bias, out=out)
    if LOG and _timed():
        with open(LOG, "a") as f:
            f.write(f"{t0} {time.monotonic()}\n")
