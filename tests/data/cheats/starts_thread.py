"""Cheat: starts a thread at import that can act between the judge's own steps (here it only sleeps)."""
import threading
import time

import torch

threading.Thread(target=lambda: time.sleep(3600), daemon=True).start()


def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
