"""Honest (GPU, plain torch): out = x * scale + bias on the caller's stream."""
import torch


def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
