"""DSA top-k indexer, FP8: per row, score every token of its sequence and return the 2048 best ids.

score[b, j] = sum_h weights[b, h] * relu(q[b, h] . k[j] * k_scale[j]) over the row's tokens j <
seq_lens[b], where token j lives at page block_table[b, j // 64], slot j % 64, and its FP8 key and
float32 scale are packed per page (64 x 128 FP8 bytes, then 64 float32 scales). The output holds
the global ids page * 64 + slot of the top 2048 scores, in any order, -1 past the row's length.

A row of at most 2048 tokens keeps every token: it needs no score and no selection, only its ids
from the block table. When the block table is at most 2048 tokens wide (max_num_pages * 64 <= 2048)
no row can be longer, and one launch of the small mapping kernel writes every row's ids, two
programs a row of 1024 ids each (attempt 01's launch, as it was).

Otherwise two launches, no torch op but one torch.empty for the scores:
1. _long_scores, one program per (row, BLOCK_N tokens), scores the rows longer than 2048 only: it
   loads the row's 64 x 128 FP8 query once, gathers BLOCK_N keys through the block table, takes one
   FP8 tensor-core product (64 heads x BLOCK_N tokens, float32 accumulation), applies the per-token
   scale, ReLU and the head weights, and writes the scores of the row's real tokens. A short row's
   programs and the tiles past a row's length return at once.
2. _select, one program per row. A short row writes its ids. A long row finds the 2048th largest
   score by an 8-bit radix select on its float bits (4 passes, each a 256-bin histogram of one
   byte of the scores that share the bytes already fixed), then writes, in one pass, the ids of
   every score above that threshold and of the first ties at it, up to 2048 (positions from prefix
   sums, so every output slot is written exactly once and no id twice). A row of at most SINGLE_MAX
   tokens keeps its scores in registers for all five passes; a longer one streams them by CHUNK.

Rows wider than SELECT_MAX tokens (the long-context set's 32K-128K rows, where one program per row
would stream the row ten times) keep the starting kernel's selection: torch.topk over the scores,
then a small kernel maps positions to ids.
"""
import os

import torch
import triton
import triton.language as tl

BLOCK_N = 128  # autogk: tune [32, 64, 128]
NUM_WARPS = 4  # autogk: tune [4, 8]
NUM_STAGES = 2  # autogk: tune [1, 2, 3]
FP8_DOT = True  # autogk: tune [True, False]
SELECT_WARPS = 8  # autogk: tune [4, 8, 16]  (per 4096 tokens a select program holds: 8192 takes twice, at most 16)
MAP_WARPS = 4  # autogk: tune [1, 2, 4, 8]
SINGLE_MAX = 8192  # widest row whose scores stay in registers through the select
CHUNK = 4096  # tokens per step when a row's scores are streamed
SELECT_MAX = 16384  # widest block table the radix select takes; wider ones use torch.topk

PAGE, HEAD_DIM, TOPK = 64, 128, 2048
_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def _long_scores(q_ptr, k_ptr, ks_ptr, w_ptr, seq_lens_ptr, table_ptr, score_ptr, max_pages, width,
                 H: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr, BLOCK_N: tl.constexpr,
                 DOT_DTYPE: tl.constexpr, TOPK: tl.constexpr, MASK_TAIL: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    start = tl.program_id(1) * BLOCK_N
    seq_len = tl.load(seq_lens_ptr + row)
    offs_n = start + tl.arange(0, BLOCK_N)
    # A short row keeps all its tokens and needs no score; a tile past the row has no token. The
    # selection reads only positions below seq_len (-inf past it when MASK_TAIL, for torch.topk).
    if (seq_len > TOPK) & (start < seq_len):
        offs_h = tl.arange(0, H)
        offs_d = tl.arange(0, D)
        valid = offs_n < seq_len
        page = tl.load(table_ptr + row * max_pages + offs_n // PAGE, mask=valid, other=0).to(tl.int64)
        slot = offs_n % PAGE
        # Per page: PAGE * D FP8 bytes, then PAGE float32 scales (PAGE * (D + 4) bytes in all).
        k = tl.load(k_ptr + page[:, None] * (PAGE * (D + 4)) + slot[:, None] * D + offs_d[None, :],
                    mask=valid[:, None], other=0.0)
        k_scale = tl.load(ks_ptr + page * (PAGE * (D + 4) // 4) + PAGE * D // 4 + slot, mask=valid, other=0.0)
        q = tl.load(q_ptr + row * H * D + offs_h[:, None] * D + offs_d[None, :])
        s = tl.dot(q.to(DOT_DTYPE), tl.trans(k.to(DOT_DTYPE)))  # [H, BLOCK_N], exact products, fp32 sums
        s = tl.maximum(s * k_scale[None, :], 0.0)
        w = tl.load(w_ptr + row * H + offs_h)
        score = tl.sum(s * w[:, None], axis=0)
        if MASK_TAIL:
            tl.store(score_ptr + row * width + offs_n, tl.where(valid, score, float("-inf")), mask=offs_n < width)
        else:
            tl.store(score_ptr + row * width + offs_n, score, mask=valid)
    elif MASK_TAIL:
        tl.store(score_ptr + row * width + offs_n, tl.full([BLOCK_N], float("-inf"), tl.float32),
                 mask=offs_n < width)


@triton.jit
def _keys(score_ptr, offs, valid):
    """Scores as int32 keys whose unsigned order is the scores' order (sign bit flipped for a
    positive float, every bit for a negative one); arithmetic on the bits, not the values."""
    b = tl.load(score_ptr + offs, mask=valid, other=0.0).to(tl.int32, bitcast=True)
    return b ^ ((b >> 31) & 0x7FFFFFFF) ^ (-2147483648)


@triton.jit
def _byte_hist(key, valid, prefix, SHIFT: tl.constexpr):
    """256-bin histogram of key byte SHIFT // 8 over the keys whose higher bytes equal prefix's."""
    if SHIFT == 24:
        match = valid
    else:
        match = valid & (((key ^ prefix) >> (SHIFT + 8)) == 0)
    return tl.histogram((key >> SHIFT) & 255, 256, mask=match)


@triton.jit
def _pick_byte(hist, need, prefix, SHIFT: tl.constexpr):
    """The largest byte value d with at least `need` matching keys at or above it; returns the prefix
    with d set and how many of the `need` remain to be taken at or below it."""
    bins = tl.arange(0, 256)
    at_or_above = tl.sum(hist, axis=0) - tl.cumsum(hist, axis=0) + hist
    d = tl.max(tl.where(at_or_above >= need, bins, 0), axis=0)
    above = tl.sum(tl.where(bins > d, hist, 0), axis=0)
    return prefix | (d << SHIFT), need - above


@triton.jit
def _emit(key, offs, valid, thr, n_gt, n_eq, ties, row, table_ptr, out_ptr, max_pages,
          K: tl.constexpr, PAGE: tl.constexpr):
    """Write the ids of the keys above thr and of the first `ties` keys equal to it (n_gt, n_eq: how
    many of each earlier chunks held); returns the counts with this chunk's added."""
    # Signed compare of the unsigned-order keys: flip the sign bit back on both sides.
    gt = valid & ((key ^ (-2147483648)) > (thr ^ (-2147483648)))
    eq = valid & (key == thr)
    gt_i = gt.to(tl.int32)
    eq_i = eq.to(tl.int32)
    rank_gt = n_gt + tl.cumsum(gt_i, axis=0)  # 1-based, among all keys above thr
    rank_eq = n_eq + tl.cumsum(eq_i, axis=0)  # 1-based, among all ties
    take = gt | (eq & (rank_eq <= ties))
    pos = tl.where(gt, rank_gt - 1, (K - ties) + rank_eq - 1)
    page = tl.load(table_ptr + row * max_pages + offs // PAGE, mask=take, other=0)
    tl.store(out_ptr + row * K + pos, page * PAGE + offs % PAGE, mask=take)
    return n_gt + tl.sum(gt_i, axis=0), n_eq + tl.sum(eq_i, axis=0)


@triton.jit
def _select(score_ptr, table_ptr, seq_lens_ptr, out_ptr, max_pages, width, K: tl.constexpr,
            PAGE: tl.constexpr, SHORT_BLOCK: tl.constexpr, BLOCK: tl.constexpr, STREAM: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    seq_len = tl.load(seq_lens_ptr + row)
    if seq_len <= K:  # every token of the row, position j is token j, then -1
        # (names of their own: Triton merges a name bound in both branches, and the shapes differ)
        for c in tl.static_range(0, K, SHORT_BLOCK):
            s_offs = c + tl.arange(0, SHORT_BLOCK)
            s_in = s_offs < seq_len
            s_page = tl.load(table_ptr + row * max_pages + s_offs // PAGE, mask=s_in, other=0)
            tl.store(out_ptr + row * K + s_offs, tl.where(s_in, s_page * PAGE + s_offs % PAGE, -1))
    else:
        base = score_ptr + row * width
        prefix = tl.zeros([], tl.int32)
        need = tl.full([], K, tl.int32)  # how many of the top K are still to be found below the prefix
        if STREAM:
            for p in tl.static_range(4):
                hist = tl.zeros([256], tl.int32)
                for c in range(0, seq_len, BLOCK):
                    offs = c + tl.arange(0, BLOCK)
                    valid = offs < seq_len
                    hist += _byte_hist(_keys(base, offs, valid), valid, prefix, 24 - 8 * p)
                prefix, need = _pick_byte(hist, need, prefix, 24 - 8 * p)
            n_gt = tl.zeros([], tl.int32)
            n_eq = tl.zeros([], tl.int32)
            for c in range(0, seq_len, BLOCK):
                offs = c + tl.arange(0, BLOCK)
                valid = offs < seq_len
                n_gt, n_eq = _emit(_keys(base, offs, valid), offs, valid, prefix, n_gt, n_eq, need, row,
                                   table_ptr, out_ptr, max_pages, K, PAGE)
        else:
            offs = tl.arange(0, BLOCK)
            valid = offs < seq_len
            key = _keys(base, offs, valid)
            for p in tl.static_range(4):
                prefix, need = _pick_byte(_byte_hist(key, valid, prefix, 24 - 8 * p), need, prefix, 24 - 8 * p)
            _emit(key, offs, valid, prefix, tl.zeros([], tl.int32), tl.zeros([], tl.int32), need, row,
                  table_ptr, out_ptr, max_pages, K, PAGE)


@triton.jit
def _positions_to_ids(pos_ptr, val_ptr, table_ptr, seq_lens_ptr, out_ptr, max_pages, K: tl.constexpr,
                      PAGE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < K
    seq_len = tl.load(seq_lens_ptr + row)
    short = seq_len <= K  # every token of the row, in order: position j is token j
    pos = tl.load(pos_ptr + row * K + offs, mask=mask & (seq_len > K), other=0)
    val = tl.load(val_ptr + row * K + offs, mask=mask & (seq_len > K), other=float("-inf"))
    pos = tl.where(short, offs, pos)
    found = tl.where(short, offs < seq_len, val > float("-inf"))
    page = tl.load(table_ptr + row * max_pages + pos // PAGE, mask=mask & found, other=0)
    ids = tl.where(found, page * PAGE + pos % PAGE, -1)
    tl.store(out_ptr + row * K + offs, ids.to(out_ptr.dtype.element_ty), mask=mask)


def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table, topk_indices):
    batch, heads, dim = q_index_fp8.shape
    num_pages, page, _, dim_sf = k_index_cache_fp8.shape
    max_pages = block_table.shape[1]
    k = topk_indices.shape[1]
    assert page == PAGE and dim == HEAD_DIM and dim_sf == dim + 4
    assert all(x.is_contiguous() for x in (q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table,
                                           topk_indices))
    if batch == 0:
        return
    width = max_pages * page
    short_block = min(1024, triton.next_power_of_2(k))
    if width <= k:  # no row can be longer than the top-k: every row keeps all its tokens
        # Attempt 01's launch, unchanged: (rows, K / 1024) programs of MAP_WARPS warps, each writing
        # 1024 ids. One _select program per row writing all 2048 (02) was 14 % slower at 32 pages.
        # (pos and val are never read here: the row's own tokens are its ids; any int and float tensor do)
        _positions_to_ids[(batch, triton.cdiv(k, short_block))](seq_lens, weights, block_table, seq_lens,
                                                                 topk_indices, max_pages, K=k, PAGE=page,
                                                                 BLOCK=short_block, num_warps=MAP_WARPS)
        return
    flat = k_index_cache_fp8.reshape(-1)
    k_fp8 = flat.view(torch.float8_e4m3fn)  # the same bytes: FP8 values, read by page and slot
    k_scales = flat.view(torch.float32)  # the same bytes: scales, read at their float32 offsets
    dot_dtype = tl.float32 if _INTERPRET else (tl.float8e4nv if FP8_DOT else tl.bfloat16)
    radix = width <= SELECT_MAX
    width_s = width if radix else max(width, k)
    scores = torch.empty((batch, width_s), dtype=torch.float32, device=q_index_fp8.device)
    _long_scores[(batch, triton.cdiv(width_s, BLOCK_N))](
        q_index_fp8, k_fp8, k_scales, weights, seq_lens, block_table, scores, max_pages, width_s,
        H=heads, D=dim, PAGE=page, BLOCK_N=BLOCK_N, DOT_DTYPE=dot_dtype, TOPK=k, MASK_TAIL=not radix,
        num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    if radix:
        stream = width > SINGLE_MAX
        block = CHUNK if stream else triton.next_power_of_2(width)
        # 8192 scores in 8 warps take 255 registers a thread on sm_90: more warps, fewer each
        warps = min(16, SELECT_WARPS * max(1, block // 4096))
        _select[(batch,)](scores, block_table, seq_lens, topk_indices, max_pages, width_s, K=k, PAGE=page,
                          SHORT_BLOCK=short_block, BLOCK=block, STREAM=stream, num_warps=warps)
        return
    vals, pos = torch.topk(scores, k, dim=1, sorted=False)
    _positions_to_ids[(batch, triton.cdiv(k, short_block))](pos, vals, block_table, seq_lens, topk_indices,
                                                             max_pages, K=k, PAGE=page, BLOCK=short_block,
                                                             num_warps=MAP_WARPS)
