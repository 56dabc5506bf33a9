"""DSA top-k indexer, FP8: per row, score every token of its sequence and return the 2048 best ids.

score[b, j] = sum_h weights[b, h] * relu(q[b, h] . k[j] * k_scale[j]) over the row's tokens j <
seq_lens[b], where token j lives at page block_table[b, j // 64], slot j % 64, and its FP8 key and
float32 scale are packed per page (64 x 128 FP8 bytes, then 64 float32 scales). The output holds
the global ids page * 64 + slot of the top 2048 scores, in any order, -1 past the row's length.

Two steps. A Triton kernel, one program per (row, BLOCK_N tokens), loads the row's 64 x 128 FP8
query once, gathers BLOCK_N keys through the block table, takes one FP8 tensor-core product
(64 heads x BLOCK_N tokens, float32 accumulation), applies the per-token scale, ReLU and the head
weights, and writes the BLOCK_N scores (-inf past seq_len) into a [rows, max_num_pages * 64]
buffer. Then torch.topk selects the 2048 best positions per row, and a second Triton kernel maps
positions to global ids through the block table, -1 where the score was -inf. The selection is
torch.topk, not Triton: a Triton radix select is the obvious next step (see program.md).

A row of at most 2048 tokens keeps every token: it needs no score and no selection. When the block
table is at most 2048 tokens wide (max_num_pages * 64 <= 2048) no row can be longer, and one small
kernel writes every row's ids straight from the block table. Otherwise the score kernel skips the
short rows and the tiles past a row's length (writing -inf there), and the mapping kernel writes a
short row's ids from the block table, ignoring what the selection picked for it.
"""
import os

import torch
import triton
import triton.language as tl

BLOCK_N = 128  # autogk: tune [32, 64, 128]
NUM_WARPS = 4  # autogk: tune [4, 8]
NUM_STAGES = 2  # autogk: tune [1, 2, 3]
FP8_DOT = True  # autogk: tune [True, False]
MAP_WARPS = 4  # autogk: tune [1, 2, 4, 8]

PAGE, HEAD_DIM, TOPK = 64, 128, 2048
_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def _index_scores(q_ptr, k_ptr, ks_ptr, w_ptr, seq_lens_ptr, table_ptr, score_ptr, max_pages, width,
                  H: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr, BLOCK_N: tl.constexpr,
                  DOT_DTYPE: tl.constexpr, TOPK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    start = tl.program_id(1) * BLOCK_N
    offs_n = start + tl.arange(0, BLOCK_N)
    offs_h = tl.arange(0, H)
    offs_d = tl.arange(0, D)
    seq_len = tl.load(seq_lens_ptr + row)
    valid = offs_n < seq_len
    if (seq_len <= TOPK) | (start >= seq_len):  # a short row keeps all its tokens; a tile past the row has none
        tl.store(score_ptr + row * width + offs_n, tl.full([BLOCK_N], float("-inf"), tl.float32),
                 mask=offs_n < width)
    else:
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
        tl.store(score_ptr + row * width + offs_n, tl.where(valid, score, float("-inf")), mask=offs_n < width)


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
    block = min(1024, triton.next_power_of_2(k))
    if max_pages * page <= k:  # no row can be longer than the top-k: every row keeps all its tokens
        # (pos and val are never read here: the row's own tokens are its ids; any int and float tensor do)
        _positions_to_ids[(batch, triton.cdiv(k, block))](seq_lens, weights, block_table, seq_lens, topk_indices,
                                                           max_pages, K=k, PAGE=page, BLOCK=block,
                                                           num_warps=MAP_WARPS)
        return
    flat = k_index_cache_fp8.reshape(-1)
    k_fp8 = flat.view(torch.float8_e4m3fn)  # the same bytes: FP8 values, read by page and slot
    k_scales = flat.view(torch.float32)  # the same bytes: scales, read at their float32 offsets
    width = max(max_pages * page, k)
    scores = torch.empty((batch, width), dtype=torch.float32, device=q_index_fp8.device)
    dot_dtype = tl.float32 if _INTERPRET else (tl.float8e4nv if FP8_DOT else tl.bfloat16)
    _index_scores[(batch, triton.cdiv(width, BLOCK_N))](
        q_index_fp8, k_fp8, k_scales, weights, seq_lens, block_table, scores, max_pages, width,
        H=heads, D=dim, PAGE=page, BLOCK_N=BLOCK_N, DOT_DTYPE=dot_dtype, TOPK=k, num_warps=NUM_WARPS,
        num_stages=NUM_STAGES)
    vals, pos = torch.topk(scores, k, dim=1, sorted=False)
    _positions_to_ids[(batch, triton.cdiv(k, block))](pos, vals, block_table, seq_lens, topk_indices, max_pages,
                                                       K=k, PAGE=page, BLOCK=block, num_warps=MAP_WARPS)
