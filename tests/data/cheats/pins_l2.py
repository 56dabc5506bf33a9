"""Cheat (GPU): asks for a persisting-L2 carve-out on every call (so data could stay in L2 across
timed calls), through the CUDA runtime torch loaded."""
import ctypes

import torch

_LIB = []


def _cudart():
    if not _LIB:
        with open("/proc/self/maps") as f:
            path = next(line.split()[-1] for line in f if "libcudart" in line and "/" in line)
        _LIB.append(ctypes.CDLL(path))
    return _LIB[0]


def run(x, bias, scale, out):
    _cudart().cudaDeviceSetLimit(0x06, ctypes.c_size_t(8 << 20))  # cudaLimitPersistingL2CacheSize
    torch.add(x * scale, bias, out=out)
