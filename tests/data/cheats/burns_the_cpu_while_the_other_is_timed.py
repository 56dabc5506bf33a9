"""Cheat: exactly its parent's work a call (busy_honest.py), but at import it forks burners, four a core,
that spin whenever this kernel has not been called for 5 ms: the other label's timed windows then share
the cores with them and come out slower, its own do not. DETACH = True makes each burner a daemon (a
double fork and setsid): the judge, the subreaper, adopts it. RENAME = True gives each burner the name
torch's shared-memory manager shows in /proc (prctl), a helper the judge leaves running. With
AUTOGK_TEST_BURN_LOG set (the tests' own), each burst of spinning appends when it started (CLOCK_MONOTONIC)."""
import mmap
import os
import struct
import time

import torch

STEPS = 60_000
DETACH = False
RENAME = False
LOG = os.environ.get("AUTOGK_TEST_BURN_LOG")
_LAST = mmap.mmap(-1, 8)  # shared with the burners: when run() was last called
_LAST[:8] = struct.pack("d", time.monotonic())


def spend(steps: int = STEPS) -> int:
    acc = 0
    for i in range(steps):
        acc += i & 7
    return acc


def _burn() -> None:
    log = open(LOG, "a", buffering=1) if LOG else None
    while True:
        now = time.monotonic()
        if now - struct.unpack("d", _LAST[:8])[0] > 0.005:
            if log is not None:
                log.write(f"{now}\n")
            spend(2_000)
        else:
            time.sleep(0.002)


for _ in range(4 * (os.cpu_count() or 2)):
    if os.fork() == 0:
        try:
            if DETACH:
                os.setsid()
                if os.fork():
                    os._exit(0)
            if RENAME:
                import ctypes
                ctypes.CDLL(None).prctl(15, b"torch_shm_manag", 0, 0, 0)  # PR_SET_NAME
            _burn()
        finally:
            os._exit(0)
    elif DETACH:
        os.wait()


def run(x, bias, scale, out):
    _LAST[:8] = struct.pack("d", time.monotonic())
    spend()
    torch.add(x * scale, bias, out=out)
