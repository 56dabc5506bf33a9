"""Cheat (GPU): honest work in its own process, but at import it starts a helper process that makes a CUDA
context of its own and waits, idle: the shape of a kernel that has another process compute its outputs
(into the judge's buffers, through their IPC handles) while its own calls claim the time of an empty call,
which no timer of its process sees and the judge's clock sees only past its slack. Idle, it slows nothing;
what gives it away is a context on the GPU that descends from the kernel's process (tenants.Watch)."""
import os
import subprocess
import sys
import time

import torch

IDLE = ("import time, torch\ntorch.zeros(1, device='cuda')\nopen('helper_ready', 'w').close()\n"
        "time.sleep(3600)\n")
_helper = subprocess.Popen([sys.executable, "-c", IDLE], stdin=subprocess.DEVNULL) if torch.cuda.is_available() else None
_ready = []


def run(x, bias, scale, out):
    # As a helper that did the work would be: ready (its context made) before the kernel's first call returns.
    while not _ready and _helper is not None and _helper.poll() is None:
        if os.path.exists("helper_ready"):
            _ready.append(True)
        else:
            time.sleep(0.05)
    torch.add(x * scale, bias, out=out)
