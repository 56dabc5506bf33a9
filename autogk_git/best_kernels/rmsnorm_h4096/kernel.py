"""RMSNorm, hidden size 4096, bf16 in and out, fp32 accumulation: y = x / sqrt(mean(x^2) + eps) * w.

Destination-passing: run(hidden_states, weight, output) writes `output` in place. One program per
row; the row is read in BLOCK_SIZE chunks (one chunk when BLOCK_SIZE == hidden size), so any
power-of-two BLOCK_SIZE is correct and the tuner only trades registers against passes.
"""
import torch
import triton
import triton.language as tl

EPS = 1e-5
BLOCK_SIZE = 2048  # autogk: tune [256, 512, 1024, 2048, 4096]
NUM_WARPS = 8  # autogk: tune [1, 2, 4, 8, 16]


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, stride_x, stride_y, n_cols, eps,
                    BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        offs = start + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    inv_rms = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        offs = start + tl.arange(0, BLOCK_SIZE)
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + offs, (x * inv_rms * w).to(y_ptr.dtype.element_ty), mask=mask)


def run(hidden_states: torch.Tensor, weight: torch.Tensor, output: torch.Tensor) -> None:
    batch, hidden = hidden_states.shape
    assert weight.shape == (hidden,) and output.shape == hidden_states.shape
    if batch == 0:
        return
    _rmsnorm_kernel[(batch,)](hidden_states, weight, output, hidden_states.stride(0), output.stride(0),
                              hidden, EPS, BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
