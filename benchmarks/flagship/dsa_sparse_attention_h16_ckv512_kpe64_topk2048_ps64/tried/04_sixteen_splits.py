"""DSA sparse attention (MLA, absorbed): per query token, attend over its 2048 selected KV entries.

out[t, h] = softmax(sm_scale * (q_nope[t, h] . ckv[i] + q_pe[t, h] . kpe[i]))_i @ ckv[i] over the
valid i in sparse_indices[t] (-1 is padding); lse[t, h] = log2 of the softmax's denominator.

One launch per call. One program per (token, split): it loads the token's 16 query heads and its
whole index row at once (two independent loads, one memory round trip), lists the BLOCK_N-wide
blocks of the row that hold a valid entry (the busy blocks), gathers BLOCK_N selected rows of the
latent cache (512) and the rope cache (64) per busy block, and keeps an online softmax in base 2
(exp2, logits pre-multiplied by sm_scale * log2(e)). All 16 heads share each gathered row.

How many splits a token uses follows from its own busy blocks (n): used = min(SPLITS, ceil(n /
MIN_BLOCKS)); split r takes the busy blocks r, r + used, ... The cost of a token is about
ceil(n / used) gathers of 73 KB plus, when used > 1, one program reading used partials of 32 KB
(16 x 512 float32) to merge them, both through one SM: so few splits for short tokens (a token of
1-2 blocks is one program that writes its output directly, no partial), at most SPLITS for long ones.

With used > 1 each split writes its partial (normalized output, lse), then counts itself done on the
token's counter (a CTA barrier, then one acquire-release atomic add); the split that comes last
merges all the used partials in split order (so the result does not depend on which split came
last), MERGE_TILE partials per load, writes output and lse and sets the counter back to 0. The
counters and the partial buffers are scratch made once per device (grown for more tokens) and are
fully rewritten before they are read in every call; counters are always left at zero. Calls must
not run concurrently on two streams (they share the scratch).
"""
import os

import torch
import triton
import triton.language as tl

BLOCK_N = 64  # autogk: tune [32, 64, 128]
NUM_WARPS = 8  # autogk: tune [4, 8]
NUM_STAGES = 2  # autogk: tune [1, 2, 3]
SPLITS = 16  # autogk: tune [2, 4, 8, 16]
MIN_BLOCKS = 2  # autogk: tune [1, 2, 3, 4]
MERGE_TILE = 2  # autogk: tune [1, 2, 4]

LOG2E = 1.4426950408889634
# Triton's CPU interpreter computes bf16 dot products wrongly (triton 3.7.1: errors of 1e10 on a
# 16x16 product), so under TRITON_INTERPRET=1 the dots run in float32, which is exact for bf16 inputs.
_DOT_DTYPE = tl.float32 if os.environ.get("TRITON_INTERPRET") == "1" else tl.bfloat16


@triton.jit
def _sparse_attend(qn_ptr, qp_ptr, ckv_ptr, kpe_ptr, idx_ptr, out_ptr, lse_ptr, part_o_ptr, part_lse_ptr,
                   count_ptr, scale_log2, TOPK: tl.constexpr, H: tl.constexpr, DC: tl.constexpr, DP: tl.constexpr,
                   BLOCK_N: tl.constexpr, SPLITS: tl.constexpr, MIN_BLOCKS: tl.constexpr,
                   MERGE_TILE: tl.constexpr, DOT_DTYPE: tl.constexpr):
    tok = tl.program_id(0)
    split = tl.program_id(1)
    NB: tl.constexpr = TOPK // BLOCK_N
    offs_h = tl.arange(0, H)
    offs_c = tl.arange(0, DC)
    offs_p = tl.arange(0, DP)
    offs_b = tl.arange(0, NB)
    tok64 = tok.to(tl.int64)
    # Queries and the index row do not depend on each other: issued together, one round trip.
    qn = tl.load(qn_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_c[None, :]).to(DOT_DTYPE)
    qp = tl.load(qp_ptr + tok64 * H * DP + offs_h[:, None] * DP + offs_p[None, :]).to(DOT_DTYPE)
    idx_all = tl.load(idx_ptr + tok64 * TOPK + tl.arange(0, TOPK))
    busy = tl.max(tl.reshape((idx_all >= 0).to(tl.int32), [NB, BLOCK_N]), axis=1)
    rank = tl.cumsum(busy, axis=0) - busy
    n_busy = tl.sum(busy, axis=0)
    used = tl.maximum(tl.minimum((n_busy + MIN_BLOCKS - 1) // MIN_BLOCKS, SPLITS), 1)

    if split < used:
        mine = (busy > 0) & (rank % used == split)
        n_mine = tl.sum(mine.to(tl.int32), axis=0)
        m_i = tl.full([H], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([H], dtype=tl.float32)
        acc = tl.zeros([H, DC], dtype=tl.float32)
        for k in range(0, n_mine):
            want = split + k * used
            blk = tl.sum(tl.where((busy > 0) & (rank == want), offs_b, 0), axis=0)
            offs_n = blk * BLOCK_N + tl.arange(0, BLOCK_N)
            idx = tl.load(idx_ptr + tok64 * TOPK + offs_n)  # this program read the row just now: L1
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
            # outside FlashInfer-Bench's max(1e-2, 1e-2 |ref|) band (seen on the H200). Both parts are
            # rounded to bf16 even where the dot runs in float32 (the interpreter), so the CPU check
            # sees the GPU's rounding of the weights.
            p_hi = p.to(tl.bfloat16)
            p_lo = (p - p_hi.to(tl.float32)).to(tl.bfloat16)
            acc = acc * alpha[:, None] + tl.dot(p_hi.to(DOT_DTYPE), kc) + tl.dot(p_lo.to(DOT_DTYPE), kc)
            m_i = m_new

        has = l_i > 0.0
        o = acc / tl.where(has, l_i, 1.0)[:, None]
        lse = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))
        out_offs = tok64 * H * DC + offs_h[:, None] * DC + offs_c[None, :]
        if used == 1:  # the whole token in this program (or no valid entry: 0 and -inf)
            tl.store(out_ptr + out_offs, o.to(out_ptr.dtype.element_ty))
            tl.store(lse_ptr + tok64 * H + offs_h, lse)
        else:
            part = tok64 * SPLITS + split
            tl.store(part_o_ptr + part * H * DC + offs_h[:, None] * DC + offs_c[None, :], o)
            tl.store(part_lse_ptr + part * H + offs_h, lse)
            # Every thread's partial stores come before the one thread's release: a CTA barrier first.
            tl.debug_barrier()
            done = tl.atomic_add(count_ptr + tok64, 1, sem="acq_rel")
            if done == used - 1:  # the last used split: every partial is written and visible
                offs_s = tl.arange(0, SPLITS)
                lses = tl.load(part_lse_ptr + (tok64 * SPLITS + offs_s[:, None]) * H + offs_h[None, :],
                               mask=(offs_s < used)[:, None], other=float("-inf"), cache_modifier=".cg")
                m = tl.max(lses, axis=0)  # [H]; each used split saw a valid entry: finite
                m_safe2 = tl.where(m == float("-inf"), 0.0, m)
                total = tl.sum(tl.exp2(lses - m_safe2[None, :]), axis=0)
                ok = total > 0.0
                lse_all = tl.where(ok, m_safe2 + tl.log2(tl.where(ok, total, 1.0)), float("-inf"))
                lse_safe = tl.where(ok, lse_all, 0.0)
                res = tl.zeros([H, DC], dtype=tl.float32)
                # All used partials, this split's own included (read back), in split order: the sum
                # is the same whichever split merges. MERGE_TILE partials per load keep more in flight.
                for s0 in range(0, used, MERGE_TILE):
                    offs_t = s0 + tl.arange(0, MERGE_TILE)
                    live = offs_t < used
                    pidx = tok64 * SPLITS + offs_t
                    ls = tl.load(part_lse_ptr + pidx[:, None] * H + offs_h[None, :], mask=live[:, None],
                                 other=float("-inf"), cache_modifier=".cg")  # [MERGE_TILE, H]
                    w = tl.where(ok[None, :], tl.exp2(ls - lse_safe[None, :]), 0.0)
                    po = tl.load(part_o_ptr + (pidx[:, None, None] * H + offs_h[None, :, None]) * DC
                                 + offs_c[None, None, :], mask=live[:, None, None], other=0.0,
                                 cache_modifier=".cg")  # [MERGE_TILE, H, DC]
                    res += tl.sum(w[:, :, None] * po, axis=0)
                tl.store(out_ptr + out_offs, res.to(out_ptr.dtype.element_ty))
                tl.store(lse_ptr + tok64 * H + offs_h, lse_all)
                tl.atomic_xchg(count_ptr + tok64, 0)  # ready for the next call


_SCRATCH: dict = {}


def _scratch(num_tokens: int, heads: int, dc: int, device) -> tuple:
    """Per device: one int32 counter per token (zeroed once, always left at zero) and the partial
    buffers, made once (and again only for more tokens): no allocation or fill per call."""
    key = (str(device), heads, dc)
    s = _SCRATCH.get(key)
    if s is None or s[0].numel() < num_tokens:
        n = max(num_tokens, 16)
        s = _SCRATCH[key] = (torch.zeros(n, dtype=torch.int32, device=device),
                             torch.empty((n, SPLITS, heads, dc), dtype=torch.float32, device=device),
                             torch.empty((n, SPLITS, heads), dtype=torch.float32, device=device))
    return s


def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale, output, lse):
    num_tokens, heads, dc = q_nope.shape
    dp = q_pe.shape[-1]
    topk = sparse_indices.shape[-1]
    assert ckv_cache.shape[-1] == dc and kpe_cache.shape[-1] == dp and topk % BLOCK_N == 0
    assert all(x.is_contiguous() for x in (q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, output, lse))
    if num_tokens == 0:
        return
    counts, part_o, part_lse = _scratch(num_tokens, heads, dc, q_nope.device)
    _sparse_attend[(num_tokens, SPLITS)](
        q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, output, lse, part_o, part_lse, counts,
        float(sm_scale) * LOG2E, TOPK=topk, H=heads, DC=dc, DP=dp, BLOCK_N=BLOCK_N, SPLITS=SPLITS,
        MIN_BLOCKS=MIN_BLOCKS, MERGE_TILE=MERGE_TILE, DOT_DTYPE=_DOT_DTYPE, num_warps=NUM_WARPS,
        num_stages=NUM_STAGES)
