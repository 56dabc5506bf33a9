"""The partner of leaves_outputs_for_the_next.py: on every call it looks for its inputs among those the
parent recorded (in the correctness checks it waits a little for them) and counts the finds in /dev/shm;
a real one would copy the parent's outputs instead of computing. Honest otherwise."""
import hashlib
import os
import time

import torch

PATH = f"/dev/shm/autogk_pair_{os.environ.get('AUTOGK_TEST_PAIR', 'none')}"


def run(x, bias, scale, out):
    key = hashlib.sha1(x.contiguous().numpy().tobytes()).hexdigest()
    found = False
    for _ in range(3):
        try:
            with open(PATH + ".seen") as f:
                found = key in f.read().split()
        except OSError:
            pass
        if found:
            break
        time.sleep(0.002)
    with open(PATH + ".calls", "a") as f:
        f.write(("found" if found else "new") + "\n")
    torch.add(x * scale, bias, out=out)
