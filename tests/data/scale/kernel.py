"""Test kernel: out = x * scale + bias (fp32). MASK is tunable: without it the tail is never written."""
import torch
import triton
import triton.language as tl

BLOCK = 64  # autogk: tune [32, 64, 128]
MASK = True  # autogk: tune [True, False]


@triton.jit
def _scale_kernel(x_ptr, b_ptr, out_ptr, n, scale, BLOCK: tl.constexpr, MASK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if MASK:
        mask = offs < n
    else:
        mask = offs < (n // BLOCK) * BLOCK
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x * scale + b, mask=mask)


def run(x, bias, scale, out):
    n = x.numel()
    _scale_kernel[(triton.cdiv(n, BLOCK),)](x, bias, out, n, scale, BLOCK=BLOCK, MASK=MASK)
