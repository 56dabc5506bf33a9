"""DSA sparse attention (MLA, absorbed): per query token, attend over its 2048 selected KV entries.

out[t, h] = softmax(sm_scale * (q_nope[t, h] . ckv[i] + q_pe[t, h] . kpe[i]))_i @ ckv[i] over the
valid i in sparse_indices[t] (-1 is padding); lse[t, h] = log2 of the softmax's denominator.

Two launches, neither with a loop over gathers or partials (one launch with a loop, past LOOP_TOKENS tokens):
- attention: one program per (token, BLOCK_N-wide block of its index row). A program reads its own
  BLOCK_N indices and stops there if none is valid (most of a decode row is padding). Otherwise it
  issues, together, the token's whole index row (to count the token's busy blocks), the token's 16
  query heads and its one gather of BLOCK_N rows of the latent cache (512) and the rope cache (64),
  shared by the 16 heads, and computes that block's softmax in base 2 (logits pre-multiplied by
  sm_scale * log2(e)). It runs 01_busy_blocks's loop body once: the same [16 heads, BLOCK_N rows]
  dots, the form that ran correctly on the H200 (M = 16: mma.sync, no wgmma), and the same cp.async
  staging of the gathered rows into one shared buffer that both dots read. If the token has no other busy block
  the program writes the output and lse itself; else it writes a partial (normalized output, lse)
  into the slot of its block number, so no program needs a rank. The row is loaded with q and the gather
  and reduced only after the dots (attempt 21). The first dot runs as four independent HMMA chains over
  column quarters of the latent (and one for the rope part), summed by fma, not one chain of 36 dependent
  steps (attempt 22); the accumulator and the stores are in the same quarters. The few-token calls run
  the attention at FEW_NUM_WARPS = 4 warps (attempt 23). Whether the token is this block alone is two counts
  of valid ids, the row's and the block's (attempt 24).
- merge: one program per (token, MERGE_HEADS heads, MERGE_BLOCK_D latent dims). It lists the token's
  busy blocks from the index row, loads all their partial lses and outputs at once (masked: idle
  blocks' slots are never read) and combines them by lse. It does nothing for a token of one busy
  block and writes 0 and -inf for a token with none.

A call of at most FEW_TOKENS tokens (decided on the host from the tensor's shape) runs both kernels with
FEW_BLOCK_N-wide blocks instead of BLOCK_N: the same code at another constexpr width, so every bound
below holds for either width.

A call of more than LOOP_TOKENS tokens (a prefill, or a large decode batch; decided on the host) runs
neither: one launch of `_attend_rows`, one program per token, which walks the token's index row BLOCK_N
ids at a time up to its last valid id with one online softmax (the starting kernel's shape, with the
dots, the two-part p and the stores of the block programs) and writes the output and lse itself. There
are enough tokens to fill the GPU, and no partial is written or merged: at 1,024 tokens the block
programs' partials are 1 MB a token, written and read again.

No pointer can leave its tensor, whatever the indices hold: an id is valid only if 0 <= id < the
pool's row count (ids out of the pool count as padding, in both kernels alike), every gather is masked
by that and reads row 0 where it is not valid; every other offset is a program id inside its grid
times a constexpr size. Long batches (over CHUNK_TOKENS tokens) run chunk by chunk, so the partials
stay CHUNK_TOKENS x 1 MB.
"""
import os

import torch
import triton
import triton.language as tl

BLOCK_N = 64  # autogk: tune [32, 64, 128]
# A call of at most FEW_TOKENS tokens runs FEW_BLOCK_N-wide blocks: twice the programs on a one- or
# two-token call, which leaves most of the GPU idle at BLOCK_N (one busy block is one SM's gather and
# dots), against twice the partials to merge, which only the many-token calls with long rows pay for.
FEW_TOKENS = 2  # autogk: tune [0, 1, 2, 4]
FEW_BLOCK_N = 32  # autogk: tune [16, 32, 64]
NUM_WARPS = 8  # autogk: tune [4, 8]
# The few-token calls' attention at FEW_NUM_WARPS: a 32-wide block's [16, 32] logits give 8 warps little to
# share, while every cross-warp reduction and layout change is a CTA barrier among all of them.
FEW_NUM_WARPS = 4  # autogk: tune [4, 8]
NUM_STAGES = 2  # autogk: tune [1, 2, 3]
# Calls of more than LOOP_TOKENS tokens run one program a token over its whole row (`_attend_rows`).
LOOP_TOKENS = 64  # autogk: tune [64, 128, 256, 512]
MERGE_HEADS = 1  # autogk: tune [1, 2, 4, 8, 16]
MERGE_BLOCK_D = 256  # autogk: tune [64, 128, 256, 512]
MERGE_WARPS = 4  # autogk: tune [1, 2, 4, 8]
CHUNK_TOKENS = 256

LOG2E = 1.4426950408889634
# Triton's CPU interpreter computes bf16 dot products wrongly (triton 3.7.1: errors of 1e10 on a
# 16x16 product), so under TRITON_INTERPRET=1 the dots run in float32, which is exact for bf16 inputs.
_DOT_DTYPE = tl.float32 if os.environ.get("TRITON_INTERPRET") == "1" else tl.bfloat16


@triton.jit
def _valid(idx, n_rows):
    """An id names a row of the pool: -1 (padding) and ids past the pool are not gathered."""
    return (idx >= 0) & (idx < n_rows)


@triton.jit
def _busy_blocks(idx_ptr, tok64, n_rows, TOPK: tl.constexpr, BLOCK_N: tl.constexpr):
    """Per BLOCK_N-wide block of the token's index row: 1 if it holds a valid id."""
    NB: tl.constexpr = TOPK // BLOCK_N
    idx_all = tl.load(idx_ptr + tok64 * TOPK + tl.arange(0, TOPK))
    return tl.max(tl.reshape(_valid(idx_all, n_rows).to(tl.int32), [NB, BLOCK_N]), axis=1)


@triton.jit
def _attend_block(qn_ptr, qp_ptr, ckv_ptr, kpe_ptr, idx_ptr, out_ptr, lse_ptr, part_o_ptr, part_lse_ptr,
                  scale_log2, n_rows, TOPK: tl.constexpr, H: tl.constexpr, DC: tl.constexpr,
                  DP: tl.constexpr, BLOCK_N: tl.constexpr, DOT_DTYPE: tl.constexpr):
    tok = tl.program_id(0)  # fastest in launch order: every token's first blocks (its valid ids) go first
    blk = tl.program_id(1)
    NB: tl.constexpr = TOPK // BLOCK_N
    tok64 = tok.to(tl.int64)
    offs_n = blk * BLOCK_N + tl.arange(0, BLOCK_N)  # < TOPK: blk < NB
    idx = tl.load(idx_ptr + tok64 * TOPK + offs_n)
    valid = _valid(idx, n_rows)
    n_mine = tl.max(valid.to(tl.int32), axis=0)  # 1 if the block holds a valid id, else 0
    if n_mine > 0:  # an idle block's program ends after one 256-byte load
        offs_h = tl.arange(0, H)
        offs_p = tl.arange(0, DP)
        # Issued together, none waits for another: the row (for the token's busy count), q, the gather. The
        # row is only loaded here and reduced after the dots: a reduction across warps is a CTA barrier, and
        # one here made every warp wait for the row (a DRAM round trip) before it issued q and the gather.
        row_ids = tl.load(idx_ptr + tok64 * TOPK + tl.arange(0, TOPK))
        # q and the latent rows in four column quarters of DQ = DC / 4: the first dot is four independent
        # HMMA chains of DQ / 16 steps (and the rope part's), not one chain of (DC + DP) / 16 = 36 dependent
        # steps, which Triton makes of a sum of dots (it folds `dot + x` into the dot's accumulator).
        DQ: tl.constexpr = DC // 4
        offs_q = tl.arange(0, DQ)
        q_row = qn_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_q[None, :]
        qn0 = tl.load(q_row).to(DOT_DTYPE)
        qn1 = tl.load(q_row + DQ).to(DOT_DTYPE)
        qn2 = tl.load(q_row + 2 * DQ).to(DOT_DTYPE)
        qn3 = tl.load(q_row + 3 * DQ).to(DOT_DTYPE)
        qp = tl.load(qp_ptr + tok64 * H * DP + offs_h[:, None] * DP + offs_p[None, :]).to(DOT_DTYPE)
        m_i = tl.full([H], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([H], dtype=tl.float32)
        acc0 = tl.zeros([H, DQ], dtype=tl.float32)
        acc1 = tl.zeros([H, DQ], dtype=tl.float32)
        acc2 = tl.zeros([H, DQ], dtype=tl.float32)
        acc3 = tl.zeros([H, DQ], dtype=tl.float32)
        # One trip (n_mine is 1 here), written as 01's loop on purpose: in a loop with NUM_STAGES = 2
        # Triton stages the gather by cp.async straight into shared memory that both dots read, as in 01;
        # straight-line code gathers into registers, then copies the rows into shared memory again.
        for k in range(0, n_mine):
            # This block (k = 0). Clamped into the row even for a k the loop never runs: the pipeliner
            # issues the next trip's loads ahead under a predicate, and the address stays inside anyway.
            offs_k = tl.minimum(blk + k, NB - 1) * BLOCK_N + tl.arange(0, BLOCK_N)
            idx_k = tl.load(idx_ptr + tok64 * TOPK + offs_k)
            valid_k = _valid(idx_k, n_rows)
            row = tl.where(valid_k, idx_k, 0).to(tl.int64)  # 0 <= row < n_rows on every lane
            k_row = ckv_ptr + row[:, None] * DC + offs_q[None, :]
            kc0 = tl.load(k_row, mask=valid_k[:, None], other=0.0).to(DOT_DTYPE)
            kc1 = tl.load(k_row + DQ, mask=valid_k[:, None], other=0.0).to(DOT_DTYPE)
            kc2 = tl.load(k_row + 2 * DQ, mask=valid_k[:, None], other=0.0).to(DOT_DTYPE)
            kc3 = tl.load(k_row + 3 * DQ, mask=valid_k[:, None], other=0.0).to(DOT_DTYPE)
            kp = tl.load(kpe_ptr + row[:, None] * DP + offs_p[None, :], mask=valid_k[:, None], other=0.0).to(DOT_DTYPE)
            # Summed by fma(x, 1, y) (exact: one rounding of x + y, as the sum of dots had), which Triton does
            # not fold into a dot's accumulator: five independent dots, then four adds.
            s01 = tl.fma(tl.dot(qn0, tl.trans(kc0)), 1.0, tl.dot(qn1, tl.trans(kc1)))
            s23 = tl.fma(tl.dot(qn2, tl.trans(kc2)), 1.0, tl.dot(qn3, tl.trans(kc3)))
            s = tl.fma(s01, 1.0, tl.fma(s23, 1.0, tl.dot(qp, tl.trans(kp))))  # [H, BLOCK_N]
            s = tl.where(valid_k[None, :], s * scale_log2, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp2(m_i - m_safe)
            p = tl.exp2(s - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            # p in two bf16 parts (high, then the rest), rounded through bf16 under the interpreter
            # too: one bf16 p is off by up to 2^-9 of itself, which a row of large values of mixed
            # sign turns into 2-4 bf16 ulps of a small output, outside FlashInfer-Bench's band.
            p_hi = p.to(tl.bfloat16).to(DOT_DTYPE)
            p_lo = (p - p.to(tl.bfloat16).to(tl.float32)).to(tl.bfloat16).to(DOT_DTYPE)
            acc0 = acc0 * alpha[:, None] + tl.dot(p_hi, kc0) + tl.dot(p_lo, kc0)
            acc1 = acc1 * alpha[:, None] + tl.dot(p_hi, kc1) + tl.dot(p_lo, kc1)
            acc2 = acc2 * alpha[:, None] + tl.dot(p_hi, kc2) + tl.dot(p_lo, kc2)
            acc3 = acc3 * alpha[:, None] + tl.dot(p_hi, kc3) + tl.dot(p_lo, kc3)
            m_i = m_new
        inv_l = 1.0 / l_i  # l_i > 0: the block holds a valid id
        # The token is this block alone iff every valid id of its row is one of this block's: two plain
        # counts (attempt 24), not the row's [NB, BLOCK_N] view reduced per block (a layout change and two
        # reductions across the CTA). The merge sees the same: one busy block.
        n_row = tl.sum(_valid(row_ids, n_rows).to(tl.int32), axis=0)
        n_blk = tl.sum(valid.to(tl.int32), axis=0)
        lse = m_i + tl.log2(l_i)
        if n_row == n_blk:  # the whole token in this block: write the result, no merge
            o_row = out_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_q[None, :]
            ty = out_ptr.dtype.element_ty
            tl.store(o_row, (acc0 * inv_l[:, None]).to(ty))
            tl.store(o_row + DQ, (acc1 * inv_l[:, None]).to(ty))
            tl.store(o_row + 2 * DQ, (acc2 * inv_l[:, None]).to(ty))
            tl.store(o_row + 3 * DQ, (acc3 * inv_l[:, None]).to(ty))
            tl.store(lse_ptr + tok64 * H + offs_h, lse)
        else:
            part = tok64 * NB + blk  # < tokens x NB: the partial buffers' slots
            p_row = part_o_ptr + part * H * DC + offs_h[:, None] * DC + offs_q[None, :]
            tl.store(p_row, acc0 * inv_l[:, None])
            tl.store(p_row + DQ, acc1 * inv_l[:, None])
            tl.store(p_row + 2 * DQ, acc2 * inv_l[:, None])
            tl.store(p_row + 3 * DQ, acc3 * inv_l[:, None])
            tl.store(part_lse_ptr + part * H + offs_h, lse)


@triton.jit
def _attend_rows(qn_ptr, qp_ptr, ckv_ptr, kpe_ptr, idx_ptr, out_ptr, lse_ptr, scale_log2, n_rows,
                 TOPK: tl.constexpr, H: tl.constexpr, DC: tl.constexpr, DP: tl.constexpr, BLOCK_N: tl.constexpr,
                 DOT_DTYPE: tl.constexpr):
    """One program per token: its row BLOCK_N ids at a time, up to the block of its last valid id."""
    tok64 = tl.program_id(0).to(tl.int64)
    offs_h = tl.arange(0, H)
    offs_p = tl.arange(0, DP)
    # How far the row reaches: the block after the one of its last valid id (0 for padding only). Ids past
    # it are padding, so the walk stops there; valid ids anywhere (a scattered row) walk the whole row.
    offs_all = tl.arange(0, TOPK)
    row_ids = tl.load(idx_ptr + tok64 * TOPK + offs_all)
    last = tl.max(tl.where(_valid(row_ids, n_rows), offs_all, -1), axis=0)
    n_blocks = (last + 1 + BLOCK_N - 1) // BLOCK_N  # <= TOPK // BLOCK_N
    DQ: tl.constexpr = DC // 4
    offs_q = tl.arange(0, DQ)
    q_row = qn_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_q[None, :]
    qn0 = tl.load(q_row).to(DOT_DTYPE)
    qn1 = tl.load(q_row + DQ).to(DOT_DTYPE)
    qn2 = tl.load(q_row + 2 * DQ).to(DOT_DTYPE)
    qn3 = tl.load(q_row + 3 * DQ).to(DOT_DTYPE)
    qp = tl.load(qp_ptr + tok64 * H * DP + offs_h[:, None] * DP + offs_p[None, :]).to(DOT_DTYPE)
    m_i = tl.full([H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([H], dtype=tl.float32)
    acc0 = tl.zeros([H, DQ], dtype=tl.float32)
    acc1 = tl.zeros([H, DQ], dtype=tl.float32)
    acc2 = tl.zeros([H, DQ], dtype=tl.float32)
    acc3 = tl.zeros([H, DQ], dtype=tl.float32)
    for b in range(0, n_blocks):  # no branch inside: the gathers are pipelined (NUM_STAGES)
        offs_k = b * BLOCK_N + tl.arange(0, BLOCK_N)  # < TOPK: b < n_blocks <= TOPK // BLOCK_N
        idx_k = tl.load(idx_ptr + tok64 * TOPK + offs_k)
        valid_k = _valid(idx_k, n_rows)
        row = tl.where(valid_k, idx_k, 0).to(tl.int64)  # 0 <= row < n_rows on every lane
        k_row = ckv_ptr + row[:, None] * DC + offs_q[None, :]
        kc0 = tl.load(k_row, mask=valid_k[:, None], other=0.0).to(DOT_DTYPE)
        kc1 = tl.load(k_row + DQ, mask=valid_k[:, None], other=0.0).to(DOT_DTYPE)
        kc2 = tl.load(k_row + 2 * DQ, mask=valid_k[:, None], other=0.0).to(DOT_DTYPE)
        kc3 = tl.load(k_row + 3 * DQ, mask=valid_k[:, None], other=0.0).to(DOT_DTYPE)
        kp = tl.load(kpe_ptr + row[:, None] * DP + offs_p[None, :], mask=valid_k[:, None], other=0.0).to(DOT_DTYPE)
        s01 = tl.fma(tl.dot(qn0, tl.trans(kc0)), 1.0, tl.dot(qn1, tl.trans(kc1)))
        s23 = tl.fma(tl.dot(qn2, tl.trans(kc2)), 1.0, tl.dot(qn3, tl.trans(kc3)))
        s = tl.fma(s01, 1.0, tl.fma(s23, 1.0, tl.dot(qp, tl.trans(kp))))  # [H, BLOCK_N]
        s = tl.where(valid_k[None, :], s * scale_log2, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a block of padding: nothing moves
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        p_hi = p.to(tl.bfloat16).to(DOT_DTYPE)  # two bf16 parts, as in the block programs
        p_lo = (p - p.to(tl.bfloat16).to(tl.float32)).to(tl.bfloat16).to(DOT_DTYPE)
        acc0 = acc0 * alpha[:, None] + tl.dot(p_hi, kc0) + tl.dot(p_lo, kc0)
        acc1 = acc1 * alpha[:, None] + tl.dot(p_hi, kc1) + tl.dot(p_lo, kc1)
        acc2 = acc2 * alpha[:, None] + tl.dot(p_hi, kc2) + tl.dot(p_lo, kc2)
        acc3 = acc3 * alpha[:, None] + tl.dot(p_hi, kc3) + tl.dot(p_lo, kc3)
        m_i = m_new
    has = l_i > 0  # no valid id at all: output 0, lse -inf
    inv_l = tl.where(has, 1.0 / tl.where(has, l_i, 1.0), 0.0)
    lse = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))
    o_row = out_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_q[None, :]
    ty = out_ptr.dtype.element_ty
    tl.store(o_row, (acc0 * inv_l[:, None]).to(ty))
    tl.store(o_row + DQ, (acc1 * inv_l[:, None]).to(ty))
    tl.store(o_row + 2 * DQ, (acc2 * inv_l[:, None]).to(ty))
    tl.store(o_row + 3 * DQ, (acc3 * inv_l[:, None]).to(ty))
    tl.store(lse_ptr + tok64 * H + offs_h, lse)


@triton.jit
def _merge_blocks(idx_ptr, part_o_ptr, part_lse_ptr, out_ptr, lse_ptr, n_rows, TOPK: tl.constexpr,
                  BLOCK_N: tl.constexpr, H: tl.constexpr, DC: tl.constexpr, HEADS: tl.constexpr,
                  BLOCK_D: tl.constexpr):
    tok64 = tl.program_id(0).to(tl.int64)
    NB: tl.constexpr = TOPK // BLOCK_N
    busy = _busy_blocks(idx_ptr, tok64, n_rows, TOPK, BLOCK_N) > 0  # [NB], as the attention saw it
    if tl.sum(busy.to(tl.int32), axis=0) != 1:  # one busy block: its program wrote the result
        h0 = tl.program_id(1) * HEADS
        d0 = tl.program_id(2) * BLOCK_D
        offs_h = h0 + tl.arange(0, HEADS)  # < H: the grid is H // HEADS
        offs_d = d0 + tl.arange(0, BLOCK_D)  # < DC: the grid is DC // BLOCK_D
        offs_b = tl.arange(0, NB)
        part = tok64 * NB + offs_b  # [NB]
        lses = tl.load(part_lse_ptr + part[:, None] * H + offs_h[None, :], mask=busy[:, None],
                       other=float("-inf"))  # [NB, HEADS]
        o = tl.load(part_o_ptr + (part[:, None, None] * H + offs_h[None, :, None]) * DC + offs_d[None, None, :],
                    mask=busy[:, None, None], other=0.0)  # [NB, HEADS, BLOCK_D], idle blocks not read
        m = tl.max(lses, axis=0)
        has = m > float("-inf")  # no busy block at all: output 0, lse -inf
        m_safe = tl.where(has, m, 0.0)
        w = tl.exp2(lses - m_safe[None, :])  # 0 for idle blocks
        total = tl.sum(w, axis=0)
        total_safe = tl.where(has, total, 1.0)
        acc = tl.sum(w[:, :, None] * o, axis=0) / total_safe[:, None]
        lse = tl.where(has, m_safe + tl.log2(total_safe), float("-inf"))
        tl.store(out_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_d[None, :], acc.to(out_ptr.dtype.element_ty))
        if d0 == 0:
            tl.store(lse_ptr + tok64 * H + offs_h, lse)


def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale, output, lse):
    num_tokens, heads, dc = q_nope.shape
    dp = q_pe.shape[-1]
    topk = sparse_indices.shape[-1]
    few = num_tokens <= FEW_TOKENS  # on the host: no device read
    block_n = FEW_BLOCK_N if few else BLOCK_N
    warps = FEW_NUM_WARPS if few else NUM_WARPS
    assert ckv_cache.shape[-1] == dc and kpe_cache.shape[-1] == dp and topk % block_n == 0
    assert heads % MERGE_HEADS == 0 and dc % MERGE_BLOCK_D == 0
    assert ckv_cache.numel() // dc == kpe_cache.numel() // dp  # one pool row count for both caches
    assert all(x.is_contiguous() for x in (q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, output, lse))
    if num_tokens == 0:
        return
    n_rows = ckv_cache.numel() // dc  # pages x page size: ids at or past it are never gathered
    scale_log2 = float(sm_scale) * LOG2E
    if num_tokens > LOOP_TOKENS:  # one program a token, no partials (on the host: no device read)
        assert topk % BLOCK_N == 0
        _attend_rows[(num_tokens,)](
            q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, output, lse, scale_log2, n_rows, TOPK=topk,
            H=heads, DC=dc, DP=dp, BLOCK_N=BLOCK_N, DOT_DTYPE=_DOT_DTYPE, num_warps=NUM_WARPS,
            num_stages=NUM_STAGES)
        return
    blocks = topk // block_n
    chunk = min(num_tokens, CHUNK_TOKENS)
    # Made per call, as 01 does (no state kept between calls; inside a CUDA graph capture the buffers
    # come from the graph's pool). Slots are written before they are read in the same launch pair, and
    # the merge reads only busy blocks' slots, so nothing needs clearing.
    part_o = torch.empty((chunk, blocks, heads, dc), dtype=torch.float32, device=q_nope.device)
    part_lse = torch.empty((chunk, blocks, heads), dtype=torch.float32, device=q_nope.device)
    for t0 in range(0, num_tokens, CHUNK_TOKENS):  # one chunk in decode
        t1 = min(num_tokens, t0 + CHUNK_TOKENS)
        qn, qp, idx, out, ls = q_nope[t0:t1], q_pe[t0:t1], sparse_indices[t0:t1], output[t0:t1], lse[t0:t1]
        _attend_block[(t1 - t0, blocks)](
            qn, qp, ckv_cache, kpe_cache, idx, out, ls, part_o, part_lse, scale_log2, n_rows, TOPK=topk,
            H=heads, DC=dc, DP=dp, BLOCK_N=block_n, DOT_DTYPE=_DOT_DTYPE, num_warps=warps,
            num_stages=NUM_STAGES)
        _merge_blocks[(t1 - t0, heads // MERGE_HEADS, dc // MERGE_BLOCK_D)](
            idx, part_o, part_lse, out, ls, n_rows, TOPK=topk, BLOCK_N=block_n, H=heads, DC=dc,
            HEADS=MERGE_HEADS, BLOCK_D=MERGE_BLOCK_D, num_warps=MERGE_WARPS)
