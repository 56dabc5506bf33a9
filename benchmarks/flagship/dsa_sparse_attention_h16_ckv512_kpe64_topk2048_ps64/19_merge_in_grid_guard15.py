"""DSA sparse attention (MLA, absorbed): per query token, attend over its 2048 selected KV entries.

out[t, h] = softmax(sm_scale * (q_nope[t, h] . ckv[i] + q_pe[t, h] . kpe[i]))_i @ ckv[i] over the
valid i in sparse_indices[t] (-1 is padding); lse[t, h] = log2 of the softmax's denominator.

One launch, a 1-D grid of two kinds of program (every call's device time is one kernel's):
- attention programs, pid < T x NB (NB = 2048 / BLOCK_N = 32 blocks per row; token fastest, so every
  token's first blocks, where its valid ids are, start first): one per (token, BLOCK_N-wide block of
  its index row), as 07 at 8 warps. A program reads its own BLOCK_N ids and stops there if none is
  valid (most of a decode row is padding). Otherwise it issues, together, the token's whole row (for
  its busy count), the token's 16 query heads and its one gather of BLOCK_N rows of the latent cache
  (512) and the rope cache (64), and computes the block's softmax in base 2 in one trip of a loop
  (Triton stages the gather by cp.async into one shared buffer that both mma.sync dots read). The
  gather uses the ids already loaded (07 loaded them a second time inside the trip: one dependent L2
  round trip less). A token with one busy block: the program writes output and lse itself. Else it
  writes a partial (normalized output, lse) into the slot of its block number, then (a CTA barrier,
  then one release atomic) adds 1 to the token's counter.
- merge programs, pid >= T x NB (M = 16 / MERGE_HEADS x 512 / MERGE_BLOCK_D per token): each lists its
  token's busy blocks from the row; for a token of one busy block it ends, for a row of padding only
  it writes 0 and -inf; otherwise it waits (acquire loads of the counter) until every busy block's
  partial is written, loads all busy partials of its heads and channels at once (L2, bypassing L1),
  combines them by lse and writes its slice. Then it adds 1 to the counter; the token's last merge
  program (it sees n_busy + M - 1) puts the counter back to 0, so every call starts from zeros.

Why the wait cannot deadlock: an attention program never waits. A merge program waits only on
attention programs, whose pids are all lower than every merge program's; the hardware dispatches a
1-D grid's CTAs in increasing block index (the property CUB's single-pass scan relies on: a tile
spins on lower-indexed tiles), so when any merge program is resident every attention program has been
dispatched, and each runs to its end without waiting on anything.

No pointer can leave its tensor, whatever the indices hold: an id is valid only if 0 <= id < the
pool's row count (ids out of the pool count as padding, in every program alike), every gather is
masked by that and reads row 0 where it is not valid; every other offset is a program's token (< T),
block (< NB), heads and channels (constexpr ranges inside 16 and 512). Long batches (over
CHUNK_TOKENS tokens) run chunk by chunk, so partials stay CHUNK_TOKENS x 1 MB and the counters 256.
"""
import os

import torch
import triton
import triton.language as tl

BLOCK_N = 64  # autogk: tune [32, 64, 128]
NUM_WARPS = 8  # autogk: tune [4, 8]
NUM_STAGES = 2  # autogk: tune [1, 2, 3]
MERGE_HEADS = 2  # autogk: tune [1, 2, 4]
MERGE_BLOCK_D = 256  # autogk: tune [128, 256]
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
def _attend_and_merge(qn_ptr, qp_ptr, ckv_ptr, kpe_ptr, idx_ptr, out_ptr, lse_ptr, part_o_ptr, part_lse_ptr,
                      count_ptr, scale_log2, n_rows, n_tok, TOPK: tl.constexpr, H: tl.constexpr,
                      DC: tl.constexpr, DP: tl.constexpr, BLOCK_N: tl.constexpr, HEADS: tl.constexpr,
                      BLOCK_D: tl.constexpr, DOT_DTYPE: tl.constexpr):
    pid = tl.program_id(0)
    NB: tl.constexpr = TOPK // BLOCK_N
    HG: tl.constexpr = H // HEADS
    M: tl.constexpr = HG * (DC // BLOCK_D)  # merge programs per token
    if pid < n_tok * NB:
        # ---- attention: one program per (token, block); never waits on another program ----
        tok = pid % n_tok  # fastest in launch order: every token's first blocks go first
        blk = pid // n_tok  # < NB
        tok64 = tok.to(tl.int64)
        offs_n = blk * BLOCK_N + tl.arange(0, BLOCK_N)  # < TOPK
        idx = tl.load(idx_ptr + tok64 * TOPK + offs_n)
        valid = _valid(idx, n_rows)
        n_mine = tl.max(valid.to(tl.int32), axis=0)  # 1 if the block holds a valid id, else 0
        if n_mine > 0:  # an idle block's program ends after one 256-byte load
            offs_h = tl.arange(0, H)
            offs_c = tl.arange(0, DC)
            offs_p = tl.arange(0, DP)
            # Issued together, none waits for another: the row (busy count), q, the gather.
            busy = _busy_blocks(idx_ptr, tok64, n_rows, TOPK, BLOCK_N)
            qn = tl.load(qn_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_c[None, :]).to(DOT_DTYPE)
            qp = tl.load(qp_ptr + tok64 * H * DP + offs_h[:, None] * DP + offs_p[None, :]).to(DOT_DTYPE)
            m_i = tl.zeros([H], dtype=tl.float32)
            l_i = tl.full([H], 1.0, dtype=tl.float32)
            acc = tl.zeros([H, DC], dtype=tl.float32)
            # One trip (n_mine is 1 here), a loop on purpose: in a loop Triton stages the gather by
            # cp.async into one shared buffer that both dots read (as 01, 06, 07). The gather's rows
            # are the ids loaded above (07 loaded them again inside the trip: a dependent L2 round
            # trip). They go through `first = k == min(k, n_mine - 1)`, true on the one trip, which
            # the compiler cannot fold: a loop-invariant gather is hoisted out of the loop and then
            # is neither pipelined nor staged once (measured: no cp.async, 146 KB of shared memory).
            # Any lane not `use`d reads row 0 under a false mask; every row is inside the pool.
            for k in range(0, n_mine):
                use = valid & (tl.minimum(k, n_mine - 1) == k)
                row = tl.where(use, idx, 0).to(tl.int64)  # 0 <= row < n_rows on every lane
                kc = tl.load(ckv_ptr + row[:, None] * DC + offs_c[None, :], mask=use[:, None], other=0.0).to(DOT_DTYPE)
                kp = tl.load(kpe_ptr + row[:, None] * DP + offs_p[None, :], mask=use[:, None], other=0.0).to(DOT_DTYPE)
                s = tl.dot(qn, tl.trans(kc)) + tl.dot(qp, tl.trans(kp))  # [H, BLOCK_N]
                s = tl.where(use[None, :], s * scale_log2, float("-inf"))
                m_i = tl.max(s, axis=1)  # finite: the block holds a valid id
                p = tl.exp2(s - m_i[:, None])  # 0 on padding lanes
                l_i = tl.sum(p, axis=1)  # >= 1: the max's own lane gives exp2(0)
                # p in two bf16 parts (high, then the rest), rounded through bf16 under the interpreter
                # too: one bf16 p is off by up to 2^-9 of itself, which a row of large values of mixed
                # sign turns into 2-4 bf16 ulps of a small output, outside FlashInfer-Bench's band.
                p_hi = p.to(tl.bfloat16)
                p_lo = (p - p_hi.to(tl.float32)).to(tl.bfloat16)
                acc = tl.dot(p_hi.to(DOT_DTYPE), kc, acc)  # acc is 0 here: the one trip's first product
                acc = tl.dot(p_lo.to(DOT_DTYPE), kc, acc)
            o = acc / l_i[:, None]  # l_i >= 1
            lse = m_i + tl.log2(l_i)
            if tl.sum(busy, axis=0) == 1:  # the whole token in this block: write the result, no merge
                tl.store(out_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_c[None, :], o.to(out_ptr.dtype.element_ty))
                tl.store(lse_ptr + tok64 * H + offs_h, lse)
            else:
                part = tok64 * NB + blk  # < T x NB: the partial buffers' slots
                tl.store(part_o_ptr + part * H * DC + offs_h[:, None] * DC + offs_c[None, :], o)
                tl.store(part_lse_ptr + part * H + offs_h, lse)
                # The atomic is one thread's: a CTA barrier first, so every thread's partial stores
                # are ordered before its release.
                tl.debug_barrier()
                tl.atomic_add(count_ptr + tok64, 1, sem="release", scope="gpu")
    else:
        # ---- merge: one program per (token, MERGE_HEADS heads, MERGE_BLOCK_D channels) ----
        mp = pid - n_tok * NB  # < n_tok x M: the grid
        tok64 = (mp % n_tok).to(tl.int64)
        sl = mp // n_tok  # < M
        h0 = (sl % HG) * HEADS
        d0 = (sl // HG) * BLOCK_D
        offs_h = h0 + tl.arange(0, HEADS)  # < H
        offs_d = d0 + tl.arange(0, BLOCK_D)  # < DC
        busy = _busy_blocks(idx_ptr, tok64, n_rows, TOPK, BLOCK_N) > 0  # [NB], as the attention saw it
        n_busy = tl.sum(busy.to(tl.int32), axis=0)
        if n_busy == 0:  # a row of padding only: output 0, lse -inf
            tl.store(out_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_d[None, :],
                     tl.zeros([HEADS, BLOCK_D], dtype=out_ptr.dtype.element_ty))
            if d0 == 0:
                tl.store(lse_ptr + tok64 * H + offs_h, tl.full([HEADS], float("-inf"), dtype=tl.float32))
        elif n_busy > 1:  # one busy block: its attention program wrote the result
            # Wait until every busy block's partial is written (the counter reaches n_busy; merge
            # programs add to it only after they have seen n_busy, hence >=).
            seen = tl.atomic_add(count_ptr + tok64, 0, sem="acquire", scope="gpu")
            while seen < n_busy:
                seen = tl.atomic_add(count_ptr + tok64, 0, sem="acquire", scope="gpu")
            tl.debug_barrier()
            offs_b = tl.arange(0, NB)
            part = tok64 * NB + offs_b  # [NB]
            lses = tl.load(part_lse_ptr + part[:, None] * H + offs_h[None, :], mask=busy[:, None],
                           other=float("-inf"), cache_modifier=".cg")  # [NB, HEADS]
            o = tl.load(part_o_ptr + (part[:, None, None] * H + offs_h[None, :, None]) * DC + offs_d[None, None, :],
                        mask=busy[:, None, None], other=0.0, cache_modifier=".cg")  # idle slots never read
            m = tl.max(lses, axis=0)  # finite: >= 2 busy blocks, each lse finite
            w = tl.exp2(lses - m[None, :])  # 0 for idle blocks
            total = tl.sum(w, axis=0)  # >= 1
            res = tl.sum(w[:, :, None] * o, axis=0) / total[:, None]
            tl.store(out_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_d[None, :], res.to(out_ptr.dtype.element_ty))
            if d0 == 0:
                tl.store(lse_ptr + tok64 * H + offs_h, m + tl.log2(total))
            # Every merge program of the token adds 1 after its wait; the last (all M seen) resets.
            tl.debug_barrier()
            before = tl.atomic_add(count_ptr + tok64, 1, sem="relaxed", scope="gpu")
            if before == n_busy + M - 1:
                tl.atomic_xchg(count_ptr + tok64, 0, sem="relaxed", scope="gpu")


_COUNTS: dict = {}


def _counts(device) -> torch.Tensor:
    """CHUNK_TOKENS zeroed int32 counters, made once per device; every launch leaves them at zero."""
    c = _COUNTS.get(device)
    if c is None:
        c = _COUNTS[device] = torch.zeros(CHUNK_TOKENS, dtype=torch.int32, device=device)
    return c


def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale, output, lse):
    num_tokens, heads, dc = q_nope.shape
    dp = q_pe.shape[-1]
    topk = sparse_indices.shape[-1]
    assert ckv_cache.shape[-1] == dc and kpe_cache.shape[-1] == dp and topk % BLOCK_N == 0
    assert heads % MERGE_HEADS == 0 and dc % MERGE_BLOCK_D == 0
    assert ckv_cache.numel() // dc == kpe_cache.numel() // dp  # one pool row count for both caches
    assert all(x.is_contiguous() for x in (q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, output, lse))
    if num_tokens == 0:
        return
    n_rows = ckv_cache.numel() // dc  # pages x page size: ids at or past it are never gathered
    blocks = topk // BLOCK_N
    merges = (heads // MERGE_HEADS) * (dc // MERGE_BLOCK_D)
    chunk = min(num_tokens, CHUNK_TOKENS)
    # Made per call (no kernel: the caching allocator); slots are written before the merge reads them
    # (it waits for the counter) and only busy blocks' slots are read, so nothing needs clearing.
    part_o = torch.empty((chunk, blocks, heads, dc), dtype=torch.float32, device=q_nope.device)
    part_lse = torch.empty((chunk, blocks, heads), dtype=torch.float32, device=q_nope.device)
    counts = _counts(q_nope.device)
    scale_log2 = float(sm_scale) * LOG2E
    for t0 in range(0, num_tokens, CHUNK_TOKENS):  # one chunk in decode
        t1 = min(num_tokens, t0 + CHUNK_TOKENS)
        n = t1 - t0
        _attend_and_merge[(n * (blocks + merges),)](
            q_nope[t0:t1], q_pe[t0:t1], ckv_cache, kpe_cache, sparse_indices[t0:t1], output[t0:t1], lse[t0:t1],
            part_o, part_lse, counts, scale_log2, n_rows, n, TOPK=topk, H=heads, DC=dc, DP=dp, BLOCK_N=BLOCK_N,
            HEADS=MERGE_HEADS, BLOCK_D=MERGE_BLOCK_D, DOT_DTYPE=_DOT_DTYPE, num_warps=NUM_WARPS,
            num_stages=NUM_STAGES)
