"""Cheat (GPU, Triton), for a timer that replays a CUDA graph of the window's calls more than once: each
call takes a counter of its own on the device (a fresh slot of a pool made at import: nothing is allocated
or cleared inside a capture), and from its third execution on, 30 % of its programs return at once. A
graph replays the same inputs into the same outputs, so what the skipped programs would write is still
there from an earlier replay: every output right, and the replays after the first (the warm-up replay runs
on blank inputs, the first timed one on the real ones) 0.7 of the work. With SKIP = 0 it is its own
honest twin (the parent). Its pace is twice the bytes of one pass, so 0.7 of it stays above the byte
floor."""
import itertools

import torch
import triton
import triton.language as tl

SKIP = 0.3
LIGHT_FROM = 2  # executions of a call before it skips: the warm-up replay, the first timed replay
_POOL = torch.zeros(1 << 20, dtype=torch.int32, device="cuda")
_NEXT = itertools.count()


@triton.jit
def _axpb(x_ptr, b_ptr, out_ptr, cnt_ptr, n, scale, light_from, skip_programs, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    go = True
    if pid < skip_programs:
        go = tl.load(cnt_ptr) < light_from
    if go:
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        for _ in range(2):
            x = tl.load(x_ptr + offs, mask=m, other=0.0, cache_modifier=".cg")
            b = tl.load(b_ptr + offs, mask=m, other=0.0, cache_modifier=".cg")
            tl.store(out_ptr + offs, x * scale + b, mask=m)


@triton.jit
def _tick(cnt_ptr):
    tl.store(cnt_ptr, tl.load(cnt_ptr) + 1)


def run(x, bias, scale, out):
    slot = next(_NEXT) % _POOL.numel()
    cnt = _POOL[slot:slot + 1]
    n, block = out.numel(), 1024
    grid = triton.cdiv(n, block)
    _axpb[(grid,)](x, bias, out, cnt, n, float(scale), LIGHT_FROM, int(grid * SKIP), BLOCK=block)
    _tick[(1,)](cnt)
