"""Cheat: uses its input as scratch space (writes the result into x as well)."""
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, b_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask) * scale + tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, y, mask=mask)
    tl.store(x_ptr + offs, y, mask=mask)


def run(x, bias, scale, out):
    _k[(triton.cdiv(x.numel(), 1024),)](x, bias, out, x.numel(), scale, BLOCK=1024)
