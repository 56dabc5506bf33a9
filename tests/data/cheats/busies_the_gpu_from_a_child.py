"""Cheat: honest work, but at import it starts a child process (its own CUDA context) that keeps the
GPU busy with back-to-back spin kernels for as long as the job runs: the other label's calls share the
GPU with it. The judge's sleep before each window is timed; another context on the GPU lengthens it
(witness.py: interference)."""
import subprocess
import sys

import torch

SPIN = ("import torch\n"
        "torch.zeros(1, device='cuda')\n"
        "while True:\n"
        "    torch.cuda._sleep(20_000_000)\n"  # ~10 ms a kernel on an H200, queued back to back
        "    torch.cuda.synchronize()\n")
_child = subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL) if torch.cuda.is_available() else None


def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
