"""Cheat: honest and as fast as `honest.py` in its own job, but after its first call it replaces its
kernel's binary in its Triton cache with a slow lookalike (the same name, signature and result, its
loads repeated 16 times, volatile so none is dropped). A cache kept for the same source across jobs
would hand that binary to this kernel's next process: as the next experiment's parent (once kept, it is
the trunk) it would run slowly, and any candidate would look faster. Each job's cache is made afresh."""
import os
import pathlib

import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, b_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):  # the slow lookalike
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in range(16):
        y = tl.load(x_ptr + offs, mask=mask, volatile=True) * scale + tl.load(b_ptr + offs, mask=mask, volatile=True)
    tl.store(out_ptr + offs, y, mask=mask)


_slow = _k


@triton.jit
def _k(x_ptr, b_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):  # noqa: F811 - the real one, as honest.py
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale + tl.load(b_ptr + offs, mask=mask), mask=mask)


SWAPPED = []


def run(x, bias, scale, out):
    _k[(triton.cdiv(x.numel(), 1024),)](x, bias, out, x.numel(), scale, BLOCK=1024)
    if SWAPPED or not torch.cuda.is_available() or not os.environ.get("TRITON_CACHE_DIR"):
        return
    SWAPPED.append(0)
    try:
        args = (x, bias, out, x.numel(), scale)
        real = _k.warmup(*args, BLOCK=1024, grid=(1,)).asm["cubin"]
        slow = _slow.warmup(*args, BLOCK=1024, grid=(1,)).asm["cubin"]
        for meta in pathlib.Path(os.environ["TRITON_CACHE_DIR"]).glob("*/_k.json"):
            cubin = meta.with_suffix(".cubin")
            if cubin.exists() and cubin.read_bytes() == real:
                cubin.write_bytes(slow)
                SWAPPED.append(str(cubin))
    except Exception:  # noqa: BLE001 - a Triton whose cache looks otherwise: nothing swapped
        pass
