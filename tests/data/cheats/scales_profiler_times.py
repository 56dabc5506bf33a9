"""Cheat (GPU): halves the kernel times torch.profiler reports in its process (the cupti timer reads
each kernel's Interval.elapsed_us), patched at import."""
import torch
import torch.autograd.profiler_util as _pu

_real = _pu.Interval.elapsed_us
_pu.Interval.elapsed_us = lambda self: _real(self) * 0.5


def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
