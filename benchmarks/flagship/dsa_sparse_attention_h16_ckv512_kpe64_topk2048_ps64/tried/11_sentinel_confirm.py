"""DSA sparse attention (MLA, absorbed): per query token, attend over its 2048 selected KV entries.

out[t, h] = softmax(sm_scale * (q_nope[t, h] . ckv[i] + q_pe[t, h] . kpe[i]))_i @ ckv[i] over the
valid i in sparse_indices[t] (-1 is padding); lse[t, h] = log2 of the softmax's denominator.

One launch, a 1-D grid of two kinds of program (08's shape), with no counter and no atomic:
- attention programs, pid < T x NB (NB = 2048 / BLOCK_N; token fastest): program (token, j) loads the
  token's whole index row once (8 KB, the same DRAM round trip as 08's 256 B of own ids) and counts the
  row's busy BLOCK_N-wide blocks, n_busy. A row of at most SOLO_MAX busy blocks is done by j = 0 alone,
  its blocks one after another in a pipelined loop (online softmax), and written directly: no partial,
  no merge. A longer row gives program j < n_busy the block of rank j, which writes a partial (its
  normalized output and lse) into slot j of the token. Every other program ends after the row. A
  trip's ids are taken from the row already in registers (no reload), so the gather is the only load
  in the loop and the next trip's gather is issued while the current one computes.
- merge programs, pid >= T x NB (M = 16 / MERGE_HEADS x 512 / MERGE_BLOCK_D per token), for rows of
  more than SOLO_MAX busy blocks only: each waits until its own slice of the partials (its heads, its
  channels, slots 0 .. n_busy - 1; and its own copy of those slots' lse) holds no SENTINEL any more,
  reading the data itself (volatile loads from L2), combines the slots by lse, writes its slice of the
  output, and puts SENTINEL back into exactly the words it read. The slices of different merge programs
  are disjoint (the lse is stored once per channel slice), so no program ever resets what another still
  waits for, and the buffers are all SENTINEL again after every call (made once per device).

The wait, and why 10 (this kernel without step 2) wrote NaN on the H200. Triton holds a tile smaller
than the program's threads in several copies: the [32 slots, 2 heads] lse tile, 64 words, in 4 (layout
[16, 2] threads x [8, 1] warps over 32 rows, triton 3.6.0 and 3.7.1 alike), and every copy is its own
volatile load, issued by its own warp at its own time. Triton's reductions take the copies to be equal:
the poll's "no SENTINEL left" reads one copy per word (whichever warp wrote its flag into shared memory
last) and the combine another (warps 0-1 for the max and the sum). An lse store landing between two
warps' loads let 10's loop end on a copy that had it while the copy the combine used still held
SENTINEL, a NaN: the program's whole slice (2 heads x 256 channels, 512 elements) came out NaN. So:
  1. poll the lse tile (small: cheap to poll while the attention programs run) until the poll sees no
     SENTINEL: each word has then been seen written by some thread of this program;
  2. CTA barrier, then load the lse tile again and, in the same round trip, the o tile: an lse word is
     one 4-byte L2 location, which a load after the barrier cannot see older than a load before it did
     (per-location coherence), so every copy now holds the written word;
  3. poll the o tile (and the lse, which never waits here) word by word in one loop, as 10 did the o:
     an attention program's stores have no order among them. That check is exact: the [NB, HEADS,
     BLOCK_D] o tile (at least 32 x 1 x 128 words) outnumbers the threads (at most 8 warps x 32 x 4) and
     Triton holds it in one copy, so each word is loaded, checked and used by one thread (the tests
     read the compiled kernel's layout). Both tiles come out of that loop: Triton cannot re-issue a
     loop's result in another layout, as it does with a plain load (11's first form loaded its lse 5
     times, once per layout that read it, and took 249 registers);
  4. a CTA barrier before the SENTINEL resets: no copy of a word is still being read when it is reset.

SENTINEL is the int32 pattern 0xFFFFFFFF, a NaN that no float operation produces (the GPU's NaNs are
0x7FFFFFFF): a finished partial never holds it, even with NaN inputs, so a wait always ends.

Why the wait cannot deadlock: an attention program never waits. A merge program waits only on
attention programs, whose pids are all lower; a 1-D grid's CTAs are dispatched in increasing index, so
when any merge program is resident every attention program has been dispatched and runs to its end.

No pointer can leave its tensor, whatever the indices hold: an id is valid only if 0 <= id < the
pool's row count, every gather is masked by that and reads row 0 where it is not valid; every other
offset is a program's token (< T), slot (< NB), heads and channels (constexpr ranges inside 16 and
512). Batches over CHUNK_TOKENS tokens run chunk by chunk on the same scratch (stream order: a chunk's
merges have put SENTINEL back before the next chunk starts).
"""
import os

import torch
import triton
import triton.language as tl

BLOCK_N = 64  # autogk: tune [32, 64, 128]
NUM_WARPS = 8  # autogk: tune [4, 8]
NUM_STAGES = 3  # autogk: tune [2, 3]
SOLO_MAX = 2  # autogk: tune [1, 2, 3, 4, 6]
MERGE_HEADS = 2  # autogk: tune [1, 2, 4]
MERGE_BLOCK_D = 256  # autogk: tune [128, 256]
CHUNK_TOKENS = 32

LOG2E = 1.4426950408889634
SENTINEL = -1  # int32 0xFFFFFFFF: a NaN bit pattern no float operation produces
_SENT = tl.constexpr(SENTINEL)
# Triton's CPU interpreter computes bf16 dot products wrongly (triton 3.7.1: errors of 1e10 on a
# 16x16 product), so under TRITON_INTERPRET=1 the dots run in float32, which is exact for bf16 inputs.
_DOT_DTYPE = tl.float32 if os.environ.get("TRITON_INTERPRET") == "1" else tl.bfloat16


@triton.jit
def _valid(idx, n_rows):
    """An id names a row of the pool: -1 (padding) and ids past the pool are not gathered."""
    return (idx >= 0) & (idx < n_rows)


@triton.jit
def _attend_and_merge(qn_ptr, qp_ptr, ckv_ptr, kpe_ptr, idx_ptr, out_ptr, lse_ptr, part_o_ptr, part_lse_ptr,
                      scale_log2, n_rows, n_tok, TOPK: tl.constexpr, H: tl.constexpr, DC: tl.constexpr,
                      DP: tl.constexpr, BLOCK_N: tl.constexpr, SOLO_MAX: tl.constexpr, HEADS: tl.constexpr,
                      BLOCK_D: tl.constexpr, DOT_DTYPE: tl.constexpr):
    pid = tl.program_id(0)
    NB: tl.constexpr = TOPK // BLOCK_N
    HG: tl.constexpr = H // HEADS
    ND: tl.constexpr = DC // BLOCK_D  # channel slices: the lse is stored once per slice
    M: tl.constexpr = HG * ND  # merge programs per token
    offs_b = tl.arange(0, NB)
    if pid < n_tok * NB:
        # ---- attention: one program per (token, j); never waits on another program ----
        tok = pid % n_tok  # fastest in launch order: every token's first programs go first
        j = pid // n_tok  # < NB
        tok64 = tok.to(tl.int64)
        idx2d = tl.reshape(tl.load(idx_ptr + tok64 * TOPK + tl.arange(0, TOPK)), [NB, BLOCK_N])
        busy = tl.max(_valid(idx2d, n_rows).to(tl.int32), axis=1)  # [NB]
        n_busy = tl.sum(busy, axis=0)
        rank = tl.cumsum(busy, axis=0) - busy
        solo = n_busy <= SOLO_MAX
        # A short row (or one of padding only): j = 0 takes every busy block; a long row: j its rank-j block.
        n_mine = tl.where(solo, tl.where(j == 0, n_busy, 0), tl.where(j < n_busy, 1, 0))
        if (n_mine > 0) | (solo & (j == 0)):  # idle programs end after the row
            offs_h = tl.arange(0, H)
            offs_c = tl.arange(0, DC)
            offs_p = tl.arange(0, DP)
            qn = tl.load(qn_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_c[None, :]).to(DOT_DTYPE)
            qp = tl.load(qp_ptr + tok64 * H * DP + offs_h[:, None] * DP + offs_p[None, :]).to(DOT_DTYPE)
            m_i = tl.full([H], float("-inf"), dtype=tl.float32)
            l_i = tl.zeros([H], dtype=tl.float32)
            acc = tl.zeros([H, DC], dtype=tl.float32)
            for k in range(0, n_mine):
                want = j + k  # the rank of this trip's block (solo: j = 0, trips 0 .. n_busy - 1)
                blk = tl.sum(tl.where((busy > 0) & (rank == want), offs_b, 0), axis=0)  # < NB
                # The block's ids from the row in registers: the gather is the only load of the trip.
                idx = tl.sum(tl.where(offs_b[:, None] == blk, idx2d, 0), axis=0)  # [BLOCK_N]
                valid = _valid(idx, n_rows)
                row = tl.where(valid, idx, 0).to(tl.int64)  # 0 <= row < n_rows on every lane
                kc = tl.load(ckv_ptr + row[:, None] * DC + offs_c[None, :], mask=valid[:, None], other=0.0).to(DOT_DTYPE)
                kp = tl.load(kpe_ptr + row[:, None] * DP + offs_p[None, :], mask=valid[:, None], other=0.0).to(DOT_DTYPE)
                s = tl.dot(qn, tl.trans(kc)) + tl.dot(qp, tl.trans(kp))  # [H, BLOCK_N]
                s = tl.where(valid[None, :], s * scale_log2, float("-inf"))
                m_new = tl.maximum(m_i, tl.max(s, axis=1))  # finite: a busy block holds a valid id
                alpha = tl.exp2(m_i - m_new)  # 0 on the first trip
                p = tl.exp2(s - m_new[:, None])  # 0 on padding lanes
                l_i = l_i * alpha + tl.sum(p, axis=1)
                # p in two bf16 parts (high, then the rest), rounded through bf16 under the interpreter
                # too: one bf16 p is off by up to 2^-9 of itself, which a row of large values of mixed
                # sign turns into 2-4 bf16 ulps of a small output, outside FlashInfer-Bench's band.
                p_hi = p.to(tl.bfloat16)
                p_lo = (p - p_hi.to(tl.float32)).to(tl.bfloat16)
                acc = tl.dot(p_hi.to(DOT_DTYPE), kc, acc * alpha[:, None])
                acc = tl.dot(p_lo.to(DOT_DTYPE), kc, acc)
                m_i = m_new
            has = l_i > 0.0  # false only for a row of padding only (no trip)
            o = acc / tl.where(has, l_i, 1.0)[:, None]
            lse = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))
            if solo:  # the whole token here: write the result, no merge
                tl.store(out_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_c[None, :], o.to(out_ptr.dtype.element_ty))
                tl.store(lse_ptr + tok64 * H + offs_h, lse)
            else:
                part = tok64 * NB + j  # slot j < n_busy of the token
                tl.store(part_o_ptr + part * H * DC + offs_h[:, None] * DC + offs_c[None, :], o)
                offs_s = tl.arange(0, ND)
                tl.store(part_lse_ptr + (part * ND + offs_s[:, None]) * H + offs_h[None, :],
                         tl.broadcast_to(lse[None, :], [ND, H]))  # one copy per merge channel slice
    else:
        # ---- merge: one program per (token, MERGE_HEADS heads, MERGE_BLOCK_D channels) ----
        mp = pid - n_tok * NB  # < n_tok x M: the grid
        tok64 = (mp % n_tok).to(tl.int64)
        sl = mp // n_tok  # < M
        hg = sl % HG
        ds = sl // HG  # < ND
        idx2d = tl.reshape(tl.load(idx_ptr + tok64 * TOPK + tl.arange(0, TOPK)), [NB, BLOCK_N])
        busy = tl.max(_valid(idx2d, n_rows).to(tl.int32), axis=1)  # as the attention saw it
        n_busy = tl.sum(busy, axis=0)
        if n_busy > SOLO_MAX:  # otherwise attention program 0 wrote the result
            offs_h = hg * HEADS + tl.arange(0, HEADS)  # < H
            offs_d = ds * BLOCK_D + tl.arange(0, BLOCK_D)  # < DC
            used = offs_b < n_busy  # slots 0 .. n_busy - 1, one per busy block
            part = tok64 * NB + offs_b  # [NB]
            lse_p = (part_lse_ptr + (part[:, None] * ND + ds) * H + offs_h[None, :]).to(tl.pointer_type(tl.int32))
            o_p = (part_o_ptr + (part[:, None, None] * H + offs_h[None, :, None]) * DC
                   + offs_d[None, None, :]).to(tl.pointer_type(tl.int32))
            # The words themselves tell when they are written (each once per call, by one attention
            # program). 1. Poll this program's lse words until the poll sees none SENTINEL. The tile is
            # held in several copies (4 warps each load every word) and the poll's reduction reads one
            # copy per word: another copy may still hold SENTINEL, so none of the polled copies is used.
            lse_b = tl.load(lse_p, mask=used[:, None], other=0, volatile=True)  # [NB, HEADS]
            while tl.max(tl.max((lse_b == _SENT).to(tl.int32), axis=1), axis=0) > 0:
                lse_b = tl.load(lse_p, mask=used[:, None], other=0, volatile=True)
            # 2. Every lse word was seen written by a thread of this program before this barrier: a load
            # after it sees the word written in every copy (one L2 location). The o words go with it.
            tl.debug_barrier()
            lse_b = tl.load(lse_p, mask=used[:, None], other=0, volatile=True)
            o_b = tl.load(o_p, mask=used[:, None, None], other=0, volatile=True)  # [NB, HEADS, BLOCK_D]
            # 3. The o words word by word (an attention program's stores have no order among them): one
            # copy per word (the tile outnumbers the threads), so the check reads what the combine uses.
            # The lse rides along (it never waits here): as a loop's result, it is loaded once.
            while (tl.max(tl.max(tl.max((o_b == _SENT).to(tl.int32), axis=2), axis=1), axis=0)
                   + tl.max(tl.max((lse_b == _SENT).to(tl.int32), axis=1), axis=0)) > 0:
                lse_b = tl.load(lse_p, mask=used[:, None], other=0, volatile=True)
                o_b = tl.load(o_p, mask=used[:, None, None], other=0, volatile=True)
            lses = tl.where(used[:, None], lse_b.to(tl.float32, bitcast=True), float("-inf"))
            o = o_b.to(tl.float32, bitcast=True)  # 0 on unused slots
            m = tl.max(lses, axis=0)  # finite: >= 2 busy blocks, each lse finite
            w = tl.exp2(lses - m[None, :])  # 0 on unused slots
            total = tl.sum(w, axis=0)  # >= 1
            res = tl.sum(w[:, :, None] * o, axis=0) / total[:, None]
            tl.store(out_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_d[None, :], res.to(out_ptr.dtype.element_ty))
            if ds == 0:
                tl.store(lse_ptr + tok64 * H + offs_h, m + tl.log2(total))
            # The words this program read, and only those, back to SENTINEL for the next call, once no
            # thread of it is still reading any copy of them (4.).
            tl.debug_barrier()
            tl.store(lse_p, tl.full([NB, HEADS], _SENT, tl.int32), mask=used[:, None])
            tl.store(o_p, tl.full([NB, HEADS, BLOCK_D], _SENT, tl.int32), mask=used[:, None, None])


_SCRATCH: dict = {}


def _scratch(device, blocks, heads, dc):
    """The partial buffers, CHUNK_TOKENS tokens, made once per device and shape, all SENTINEL; every
    launch leaves them so."""
    key = (device, blocks, heads, dc)
    s = _SCRATCH.get(key)
    if s is None:
        nd = dc // MERGE_BLOCK_D
        part_o = torch.full((CHUNK_TOKENS, blocks, heads, dc), SENTINEL, dtype=torch.int32, device=device)
        part_lse = torch.full((CHUNK_TOKENS, blocks, nd, heads), SENTINEL, dtype=torch.int32, device=device)
        s = _SCRATCH[key] = (part_o.view(torch.float32), part_lse.view(torch.float32))
    return s


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
    part_o, part_lse = _scratch(q_nope.device, blocks, heads, dc)
    scale_log2 = float(sm_scale) * LOG2E
    for t0 in range(0, num_tokens, CHUNK_TOKENS):  # one chunk in decode
        t1 = min(num_tokens, t0 + CHUNK_TOKENS)
        n = t1 - t0
        _attend_and_merge[(n * (blocks + merges),)](
            q_nope[t0:t1], q_pe[t0:t1], ckv_cache, kpe_cache, sparse_indices[t0:t1], output[t0:t1], lse[t0:t1],
            part_o, part_lse, scale_log2, n_rows, n, TOPK=topk, H=heads, DC=dc, DP=dp, BLOCK_N=BLOCK_N,
            SOLO_MAX=SOLO_MAX, HEADS=MERGE_HEADS, BLOCK_D=MERGE_BLOCK_D, DOT_DTYPE=_DOT_DTYPE,
            num_warps=NUM_WARPS, num_stages=NUM_STAGES)
