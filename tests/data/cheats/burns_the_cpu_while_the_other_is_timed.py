"""Cheat: exactly its parent's work a call (busy_honest.py), but at import it forks burners,
two a core, that spin whenever this kernel has not been called for 5 ms: the other label's
timed windows then share the cores with them and come out slower, its own do not."""
import mmap
import os
import struct
import time

import torch

STEPS = 60_000
_LAST = mmap.mmap(-1, 8)  # shared with the burners: when run() was last called (CLOCK_MONOTONIC)
_LAST[:8] = struct.pack("d", time.monotonic())


def spend(steps: int = STEPS) -> int:
    acc = 0
    for i in range(steps):
        acc += i & 7
    return acc


def _burn() -> None:
    while True:
        if time.monotonic() - struct.unpack("d", _LAST[:8])[0] > 0.005:
            spend(20_000)
        else:
            time.sleep(0.002)


for _ in range(2 * (os.cpu_count() or 2)):
    if os.fork() == 0:
        try:
            _burn()
        finally:
            os._exit(0)


def run(x, bias, scale, out):
    _LAST[:8] = struct.pack("d", time.monotonic())
    spend()
    torch.add(x * scale, bias, out=out)
