"""DSA sparse attention (MLA, absorbed): per query token, attend over its 2048 selected KV entries.

out[t, h] = softmax(sm_scale * (q_nope[t, h] . ckv[i] + q_pe[t, h] . kpe[i]))_i @ ckv[i] over the
valid i in sparse_indices[t] (-1 is padding); lse[t, h] = log2 of the softmax's denominator.

One program per (token, split): it loads the token's 16 query heads once, gathers BLOCK_N selected
rows of the latent cache (512) and the rope cache (64) at a time, and keeps an online softmax in
base 2 (exp2, logits pre-multiplied by sm_scale * log2(e)). All 16 heads share each gathered row, so
the cache is read once per token.

Work goes only where there are valid entries. In decode most of a token's 2048 slots are padding
(-1), so every program first reads the token's whole index row (8 KB) and lists the BLOCK_N-wide
blocks that hold at least one valid entry; the split of rank r takes the listed blocks r, r + SPLITS,
r + 2 SPLITS, ... A token whose valid entries fit in one block is finished by split 0 alone, which
writes the output directly; otherwise each busy split writes a partial result and a second kernel
merges the busy splits' partials by their lse (one program per token and MERGE_BLOCK_D latent dims;
it reads the token's busy-block count, which split 0 wrote, and does nothing for a one-block token).
SPLITS is chosen so that about TARGET_PROGRAMS programs run.
"""
import os

import torch
import triton
import triton.language as tl

BLOCK_N = 64  # autogk: tune [16, 32, 64, 128]
NUM_WARPS = 8  # autogk: tune [4, 8]
NUM_STAGES = 2  # autogk: tune [1, 2, 3]
TARGET_PROGRAMS = 132  # autogk: tune [0, 66, 132, 264]
MAX_SPLITS = 16  # autogk: tune [4, 8, 16, 32]
COMBINE_WARPS = 4  # autogk: tune [1, 2, 4, 8]
MERGE_BLOCK_D = 128  # autogk: tune [32, 64, 128, 256, 512]

LOG2E = 1.4426950408889634
# Triton's CPU interpreter computes bf16 dot products wrongly (triton 3.7.1: errors of 1e10 on a
# 16x16 product), so under TRITON_INTERPRET=1 the dots run in float32, which is exact for bf16 inputs.
_DOT_DTYPE = tl.float32 if os.environ.get("TRITON_INTERPRET") == "1" else tl.bfloat16


@triton.jit
def _busy_blocks(idx_ptr, tok64, TOPK: tl.constexpr, BLOCK_N: tl.constexpr):
    """Per BLOCK_N-wide block of the token's index row: 1 if it holds a valid entry; and each block's
    rank among those that do."""
    NB: tl.constexpr = TOPK // BLOCK_N
    idx_all = tl.load(idx_ptr + tok64 * TOPK + tl.arange(0, TOPK))
    busy = tl.max(tl.reshape((idx_all >= 0).to(tl.int32), [NB, BLOCK_N]), axis=1)
    rank = tl.cumsum(busy, axis=0) - busy
    return busy, rank


@triton.jit
def _sparse_attend(qn_ptr, qp_ptr, ckv_ptr, kpe_ptr, idx_ptr, out_ptr, lse_ptr, part_o_ptr, part_lse_ptr,
                   count_ptr, scale_log2, TOPK: tl.constexpr, H: tl.constexpr, DC: tl.constexpr, DP: tl.constexpr,
                   BLOCK_N: tl.constexpr, SPLITS: tl.constexpr, DOT_DTYPE: tl.constexpr):
    tok = tl.program_id(0)
    split = tl.program_id(1)
    NB: tl.constexpr = TOPK // BLOCK_N
    offs_h = tl.arange(0, H)
    offs_c = tl.arange(0, DC)
    offs_p = tl.arange(0, DP)
    offs_b = tl.arange(0, NB)
    tok64 = tok.to(tl.int64)
    busy, rank = _busy_blocks(idx_ptr, tok64, TOPK, BLOCK_N)
    n_busy = tl.sum(busy, axis=0)
    mine = (busy > 0) & (rank % SPLITS == split)
    n_mine = tl.sum(mine.to(tl.int32), axis=0)

    m_i = tl.full([H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([H], dtype=tl.float32)
    acc = tl.zeros([H, DC], dtype=tl.float32)
    if n_mine > 0:
        qn = tl.load(qn_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_c[None, :]).to(DOT_DTYPE)
        qp = tl.load(qp_ptr + tok64 * H * DP + offs_h[:, None] * DP + offs_p[None, :]).to(DOT_DTYPE)
        for k in range(0, n_mine):
            want = split + k * SPLITS
            blk = tl.sum(tl.where((busy > 0) & (rank == want), offs_b, 0), axis=0)
            offs_n = blk * BLOCK_N + tl.arange(0, BLOCK_N)
            idx = tl.load(idx_ptr + tok64 * TOPK + offs_n)
            valid = idx >= 0
            row = tl.where(valid, idx, 0).to(tl.int64)
            kc = tl.load(ckv_ptr + row[:, None] * DC + offs_c[None, :], mask=valid[:, None], other=0.0).to(DOT_DTYPE)
            kp = tl.load(kpe_ptr + row[:, None] * DP + offs_p[None, :], mask=valid[:, None], other=0.0).to(DOT_DTYPE)
            s = tl.dot(qn, tl.trans(kc)) + tl.dot(qp, tl.trans(kp))
            s = tl.where(valid[None, :], s * scale_log2, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # no valid entry seen yet
            alpha = tl.exp2(m_i - m_safe)
            p = tl.exp2(s - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            # p in two bf16 parts (high, then the rest): one bf16 p is off by up to 2^-9 of itself,
            # which a row of large values of mixed sign turns into 2-4 bf16 ulps of a small output,
            # outside FlashInfer-Bench's max(1e-2, 1e-2 |ref|) band (seen on the H200).
            p_hi = p.to(DOT_DTYPE)
            p_lo = (p - p_hi.to(tl.float32)).to(DOT_DTYPE)
            acc = acc * alpha[:, None] + tl.dot(p_hi, kc) + tl.dot(p_lo, kc)
            m_i = m_new

    if split == 0:  # the merge reads the token's busy-block count here, not the 8 KB index row again
        tl.store(count_ptr + tok64, n_busy)
    has = l_i > 0.0
    o = acc / tl.where(has, l_i, 1.0)[:, None]
    lse = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))
    if n_busy <= 1:  # the whole token in one block (or none): split 0 writes the result itself
        if split == 0:
            tl.store(out_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_c[None, :], o.to(out_ptr.dtype.element_ty))
            tl.store(lse_ptr + tok64 * H + offs_h, lse)
    elif n_mine > 0:
        part = tok64 * SPLITS + split
        tl.store(part_o_ptr + part * H * DC + offs_h[:, None] * DC + offs_c[None, :], o)
        tl.store(part_lse_ptr + part * H + offs_h, lse)


@triton.jit
def _merge_splits(count_ptr, part_o_ptr, part_lse_ptr, out_ptr, lse_ptr, H: tl.constexpr, DC: tl.constexpr,
                  SPLITS: tl.constexpr, BLOCK_D: tl.constexpr):
    tok = tl.program_id(0).to(tl.int64)
    n_busy = tl.load(count_ptr + tok)
    if n_busy > 1:
        used = tl.minimum(n_busy, SPLITS)  # splits 0 .. used-1 each had a block and wrote a partial
        d0 = tl.program_id(1) * BLOCK_D
        offs_h = tl.arange(0, H)
        offs_d = d0 + tl.arange(0, BLOCK_D)
        offs_s = tl.arange(0, SPLITS)
        lses = tl.load(part_lse_ptr + (tok * SPLITS + offs_s[:, None]) * H + offs_h[None, :],
                       mask=offs_s[:, None] < used, other=float("-inf"))  # [SPLITS, H]
        m = tl.max(lses, axis=0)
        m_safe = tl.where(m == float("-inf"), 0.0, m)
        total = tl.sum(tl.exp2(lses - m_safe[None, :]), axis=0)
        has = total > 0.0
        lse = tl.where(has, m_safe + tl.log2(tl.where(has, total, 1.0)), float("-inf"))
        lse_safe = tl.where(has, lse, 0.0)
        acc = tl.zeros([H, BLOCK_D], dtype=tl.float32)
        for s in range(0, used):
            ls = tl.load(part_lse_ptr + (tok * SPLITS + s) * H + offs_h)
            w = tl.where(has, tl.exp2(ls - lse_safe), 0.0)
            o = tl.load(part_o_ptr + (tok * SPLITS + s) * H * DC + offs_h[:, None] * DC + offs_d[None, :])
            acc += w[:, None] * o
        tl.store(out_ptr + tok * H * DC + offs_h[:, None] * DC + offs_d[None, :], acc.to(out_ptr.dtype.element_ty))
        if d0 == 0:
            tl.store(lse_ptr + tok * H + offs_h, lse)


def _splits(num_tokens: int, topk: int) -> int:
    most = max(1, min(MAX_SPLITS, topk // BLOCK_N))
    want = -(-TARGET_PROGRAMS // max(1, num_tokens)) if TARGET_PROGRAMS else 1
    return min(triton.next_power_of_2(most), triton.next_power_of_2(max(1, want)))


def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale, output, lse):
    num_tokens, heads, dc = q_nope.shape
    dp = q_pe.shape[-1]
    topk = sparse_indices.shape[-1]
    assert ckv_cache.shape[-1] == dc and kpe_cache.shape[-1] == dp and topk % BLOCK_N == 0
    assert all(x.is_contiguous() for x in (q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, output, lse))
    if num_tokens == 0:
        return
    splits = _splits(num_tokens, topk)
    part_o = torch.empty((num_tokens, splits, heads, dc), dtype=torch.float32, device=q_nope.device)
    part_lse = torch.empty((num_tokens, splits, heads), dtype=torch.float32, device=q_nope.device)
    count = torch.empty((num_tokens,), dtype=torch.int32, device=q_nope.device)  # written by each token's split 0
    _sparse_attend[(num_tokens, splits)](
        q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, output, lse, part_o, part_lse, count,
        float(sm_scale) * LOG2E, TOPK=topk, H=heads, DC=dc, DP=dp, BLOCK_N=BLOCK_N, SPLITS=splits,
        DOT_DTYPE=_DOT_DTYPE, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    _merge_splits[(num_tokens, dc // MERGE_BLOCK_D)](count, part_o, part_lse, output, lse, H=heads, DC=dc,
                                                      SPLITS=splits, BLOCK_D=MERGE_BLOCK_D, num_warps=COMBINE_WARPS)
