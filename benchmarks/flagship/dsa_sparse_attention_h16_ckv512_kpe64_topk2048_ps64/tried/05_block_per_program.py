"""DSA sparse attention (MLA, absorbed): per query token, attend over its 2048 selected KV entries.

out[t, h] = softmax(sm_scale * (q_nope[t, h] . ckv[i] + q_pe[t, h] . kpe[i]))_i @ ckv[i] over the
valid i in sparse_indices[t] (-1 is padding); lse[t, h] = log2 of the softmax's denominator.

Two launches, neither with a loop over gathers or partials:
- attention: one program per (token, BLOCK_N-wide block of its index row). A program reads its own
  BLOCK_N indices and stops there if all are padding (most of a decode row is). Otherwise it gathers
  its rows of the latent cache (512) and the rope cache (64) once, shared by the token's 16 heads,
  and computes that block's softmax in base 2 (logits pre-multiplied by sm_scale * log2(e)). If the
  token has no other busy block it writes the output and lse itself; else it writes a partial
  (normalized output and lse) into the slot of its block number, so no program needs a rank.
- merge: one program per (token, MERGE_HEADS heads, MERGE_BLOCK_D latent dims). It lists the token's
  busy blocks from the index row, loads all their partial lses and outputs at once (masked: idle
  blocks' slots are never read) and combines them by lse. It skips a token of one busy block and
  writes 0 and -inf for a token with none.
Long batches (over CHUNK_TOKENS tokens) run chunk by chunk, so the partials stay CHUNK_TOKENS x 1 MB.
"""
import os

import torch
import triton
import triton.language as tl

BLOCK_N = 64  # autogk: tune [32, 64, 128]
NUM_WARPS = 8  # autogk: tune [4, 8]
NUM_STAGES = 1  # autogk: tune [1, 2]
MERGE_HEADS = 2  # autogk: tune [1, 2, 4, 8, 16]
MERGE_BLOCK_D = 128  # autogk: tune [64, 128, 256, 512]
MERGE_WARPS = 4  # autogk: tune [1, 2, 4, 8]
CHUNK_TOKENS = 256

LOG2E = 1.4426950408889634
# Triton's CPU interpreter computes bf16 dot products wrongly (triton 3.7.1: errors of 1e10 on a
# 16x16 product), so under TRITON_INTERPRET=1 the dots run in float32, which is exact for bf16 inputs.
_DOT_DTYPE = tl.float32 if os.environ.get("TRITON_INTERPRET") == "1" else tl.bfloat16


@triton.jit
def _busy_blocks(idx_ptr, tok64, TOPK: tl.constexpr, BLOCK_N: tl.constexpr):
    """Per BLOCK_N-wide block of the token's index row: 1 if it holds a valid entry."""
    NB: tl.constexpr = TOPK // BLOCK_N
    idx_all = tl.load(idx_ptr + tok64 * TOPK + tl.arange(0, TOPK))
    return tl.max(tl.reshape((idx_all >= 0).to(tl.int32), [NB, BLOCK_N]), axis=1)


@triton.jit
def _attend_block(qn_ptr, qp_ptr, ckv_ptr, kpe_ptr, idx_ptr, out_ptr, lse_ptr, part_o_ptr, part_lse_ptr,
                  scale_log2, TOPK: tl.constexpr, H: tl.constexpr, DC: tl.constexpr, DP: tl.constexpr,
                  BLOCK_N: tl.constexpr, DOT_DTYPE: tl.constexpr):
    tok = tl.program_id(0)
    blk = tl.program_id(1)
    NB: tl.constexpr = TOPK // BLOCK_N
    tok64 = tok.to(tl.int64)
    offs_n = blk * BLOCK_N + tl.arange(0, BLOCK_N)
    idx = tl.load(idx_ptr + tok64 * TOPK + offs_n)
    valid = idx >= 0
    if tl.max(valid.to(tl.int32), axis=0) > 0:  # an idle block's program ends after one 256-byte load
        offs_h = tl.arange(0, H)
        offs_c = tl.arange(0, DC)
        offs_p = tl.arange(0, DP)
        # Issued together, none waits for another: the row (for the token's busy count), q, the gather.
        busy = _busy_blocks(idx_ptr, tok64, TOPK, BLOCK_N)
        qn = tl.load(qn_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_c[None, :]).to(DOT_DTYPE)
        qp = tl.load(qp_ptr + tok64 * H * DP + offs_h[:, None] * DP + offs_p[None, :]).to(DOT_DTYPE)
        row = tl.where(valid, idx, 0).to(tl.int64)
        kc = tl.load(ckv_ptr + row[:, None] * DC + offs_c[None, :], mask=valid[:, None], other=0.0).to(DOT_DTYPE)
        kp = tl.load(kpe_ptr + row[:, None] * DP + offs_p[None, :], mask=valid[:, None], other=0.0).to(DOT_DTYPE)
        # Transposed, [BLOCK_N rows, H heads]: with M = BLOCK_N (not 16 heads) both dots compile to
        # Hopper's wgmma, reading the one shared-memory copy of kc (as is, then transposed); the
        # [H, BLOCK_N] form made a second 64 KB copy for the first dot (114 KB: 1 program per SM).
        st = tl.dot(kc, tl.trans(qn)) + tl.dot(kp, tl.trans(qp))  # [BLOCK_N, H]
        st = tl.where(valid[:, None], st * scale_log2, float("-inf"))
        m = tl.max(st, axis=0)  # [H], finite: the block holds a valid entry
        p = tl.exp2(st - m[None, :])
        l_i = tl.sum(p, axis=0)
        # p in two bf16 parts (high, then the rest), rounded through bf16 under the interpreter too:
        # one bf16 p is off by up to 2^-9 of itself, which a row of large values of mixed sign turns
        # into 2-4 bf16 ulps of a small output, outside FlashInfer-Bench's max(1e-2, 1e-2 |ref|) band.
        p_hi = p.to(tl.bfloat16)
        p_lo = (p - p_hi.to(tl.float32)).to(tl.bfloat16)
        acc = tl.dot(tl.trans(kc), p_hi.to(DOT_DTYPE)) + tl.dot(tl.trans(kc), p_lo.to(DOT_DTYPE))  # [DC, H]
        o = tl.trans(acc / l_i[None, :])
        lse = m + tl.log2(l_i)
        if tl.sum(busy, axis=0) == 1:  # the whole token in this block: write the result, no merge
            tl.store(out_ptr + tok64 * H * DC + offs_h[:, None] * DC + offs_c[None, :], o.to(out_ptr.dtype.element_ty))
            tl.store(lse_ptr + tok64 * H + offs_h, lse)
        else:
            part = tok64 * NB + blk
            tl.store(part_o_ptr + part * H * DC + offs_h[:, None] * DC + offs_c[None, :], o)
            tl.store(part_lse_ptr + part * H + offs_h, lse)


@triton.jit
def _merge_blocks(idx_ptr, part_o_ptr, part_lse_ptr, out_ptr, lse_ptr, TOPK: tl.constexpr,
                  BLOCK_N: tl.constexpr, H: tl.constexpr, DC: tl.constexpr, HEADS: tl.constexpr,
                  BLOCK_D: tl.constexpr):
    tok64 = tl.program_id(0).to(tl.int64)
    NB: tl.constexpr = TOPK // BLOCK_N
    busy = _busy_blocks(idx_ptr, tok64, TOPK, BLOCK_N) > 0  # [NB]
    if tl.sum(busy.to(tl.int32), axis=0) != 1:  # one busy block: its program wrote the result
        h0 = tl.program_id(1) * HEADS
        d0 = tl.program_id(2) * BLOCK_D
        offs_h = h0 + tl.arange(0, HEADS)
        offs_d = d0 + tl.arange(0, BLOCK_D)
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


_SCRATCH: dict = {}


def _scratch(num_tokens: int, blocks: int, heads: int, dc: int, device) -> tuple:
    """Per device: the partial buffers (one slot per token and index block), made once and again only
    for more tokens: no allocation or fill per call. Slots are written before they are read in the
    same call (the merge reads only busy blocks' slots), so nothing needs clearing."""
    key = (str(device), blocks, heads, dc)
    s = _SCRATCH.get(key)
    if s is None or s[1].shape[0] < num_tokens:
        n = max(num_tokens, 8)
        s = _SCRATCH[key] = (torch.empty((n, blocks, heads, dc), dtype=torch.float32, device=device),
                             torch.empty((n, blocks, heads), dtype=torch.float32, device=device))
    return s


def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale, output, lse):
    num_tokens, heads, dc = q_nope.shape
    dp = q_pe.shape[-1]
    topk = sparse_indices.shape[-1]
    assert ckv_cache.shape[-1] == dc and kpe_cache.shape[-1] == dp and topk % BLOCK_N == 0
    assert heads % MERGE_HEADS == 0 and dc % MERGE_BLOCK_D == 0
    assert all(x.is_contiguous() for x in (q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, output, lse))
    if num_tokens == 0:
        return
    blocks = topk // BLOCK_N
    part_o, part_lse = _scratch(min(num_tokens, CHUNK_TOKENS), blocks, heads, dc, q_nope.device)
    scale_log2 = float(sm_scale) * LOG2E
    for t0 in range(0, num_tokens, CHUNK_TOKENS):  # one chunk in decode
        t1 = min(num_tokens, t0 + CHUNK_TOKENS)
        qn, qp, idx, out, ls = q_nope[t0:t1], q_pe[t0:t1], sparse_indices[t0:t1], output[t0:t1], lse[t0:t1]
        _attend_block[(t1 - t0, blocks)](
            qn, qp, ckv_cache, kpe_cache, idx, out, ls, part_o, part_lse, scale_log2, TOPK=topk, H=heads,
            DC=dc, DP=dp, BLOCK_N=BLOCK_N, DOT_DTYPE=_DOT_DTYPE, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        _merge_blocks[(t1 - t0, heads // MERGE_HEADS, dc // MERGE_BLOCK_D)](
            idx, part_o, part_lse, out, ls, TOPK=topk, BLOCK_N=BLOCK_N, H=heads, DC=dc, HEADS=MERGE_HEADS,
            BLOCK_D=MERGE_BLOCK_D, num_warps=MERGE_WARPS)
