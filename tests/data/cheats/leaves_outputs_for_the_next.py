"""Honest, but it records every input it is given in /dev/shm (which a kernel's sandbox leaves writable:
CUDA needs /dev): a trunk kernel that leaves what it computed for the next candidate to find. The file's
name comes from AUTOGK_TEST_PAIR, set by the test; a real one would agree it with its partner in code."""
import hashlib
import os

import torch

PATH = f"/dev/shm/autogk_pair_{os.environ.get('AUTOGK_TEST_PAIR', 'none')}"


def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
    with open(PATH + ".seen", "a") as f:
        f.write(hashlib.sha1(x.contiguous().numpy().tobytes()).hexdigest() + "\n")
