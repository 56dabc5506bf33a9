"""Cheat: uses the powers its process holds when the judge runs as root (the H200 machine, a Modal
container). On a GPU it locks the GPU's clocks low through NVML (ctypes on libnvidia-ml, no package
needed): a lock the candidate set after its own calls would slow its parent's window, and CUPTI, the
judge's clock and the sleep before the window would all see the slower GPU as the parent's. Everywhere
it raises its own CPU priority (nice -20), which only CAP_SYS_NICE allows. A power it has, it shows:
its outputs are then off by one, so the test sees the power as INCORRECT_NUMERICAL and its absence as
PASSED."""
import ctypes
import os

import torch


def _nice() -> bool:
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -20)
        return True
    except OSError:
        return False


def _lock_clocks() -> bool:
    if not torch.cuda.is_available():
        return False
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    dev = ctypes.c_void_p()
    if nvml.nvmlInit_v2() != 0 or nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)) != 0:
        return False
    ok = nvml.nvmlDeviceSetGpuLockedClocks(dev, ctypes.c_uint(345), ctypes.c_uint(345)) == 0
    if ok:  # the test machine's clocks are not this kernel's to keep
        nvml.nvmlDeviceResetGpuLockedClocks(dev)
    return ok


POWERS = _nice() | _lock_clocks()


def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
    if POWERS:
        out.add_(1.0)
