"""Honest, with a fixed cost: out = x * scale + bias after the same sleep defers_past_window.py pays."""
import time

import torch


def run(x, bias, scale, out):
    time.sleep(0.003)
    torch.add(x * scale, bias, out=out)
