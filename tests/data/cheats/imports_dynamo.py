"""Honest, but imports torch._dynamo (as torch.compile does), which rewraps some of torch's own
functions: no tampering, it must pass."""
import torch
import torch._dynamo  # noqa: F401


def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
