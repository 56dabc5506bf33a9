"""The definition's reference, vectorized: the DSA FP8 top-k indexer for a block of rows at once.

Same `run` signature and output as definition.json's "reference", which loops over the batch in
Python (a host sync per row). autogk proves the two agree on every workload (bench/refproof.py)
before the judge uses this one. Any page size (read from the cache's shape).

Math as the definition's: keys dequantized from the packed cache (per page: page_size x 128 FP8
bytes, then page_size float32 scales), scores relu(q . k) weighted and summed over the 64 heads for
the first seq_len tokens of each row's pages, the top min(2048, seq_len) token ids (page * page_size
+ offset), -1 after. Positions past a row's length score -inf, so they are never chosen before a
real token and are cut off after the first seq_len.
"""
from __future__ import annotations

import math

import torch

TOPK = 2048
# float32 elements per block of rows ([rows, tokens, 128] keys plus [rows, 64, tokens] scores): ~512 MB.
CHUNK_ELEMENTS = 1 << 27


def dequant(pages_u8: torch.Tensor, page_size: int, head_dim: int) -> torch.Tensor:
    """[n, page_size * (head_dim + 4)] uint8 packed pages -> [n, page_size, head_dim] float32 keys."""
    n = pages_u8.shape[0]
    fp8 = pages_u8[:, :page_size * head_dim].contiguous().view(torch.float8_e4m3fn)
    scale = pages_u8[:, page_size * head_dim:].contiguous().view(torch.float32)
    return fp8.to(torch.float32).reshape(n, page_size, head_dim) * scale.reshape(n, page_size, 1)


@torch.no_grad()
def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    batch, heads, head_dim = q_index_fp8.shape
    num_pages, page_size, _, head_dim_sf = k_index_cache_fp8.shape
    device = q_index_fp8.device
    out = torch.full((batch, TOPK), -1, dtype=torch.int32, device=device)
    if batch == 0:
        return (out,)
    packed = k_index_cache_fp8.view(torch.uint8).reshape(num_pages, page_size * head_dim_sf)
    lens = seq_lens.to(torch.long)
    pages_needed = (lens + page_size - 1) // page_size
    width_pages = int(pages_needed.max())
    if width_pages == 0:
        return (out,)
    width = width_pages * page_size
    q = q_index_fp8.to(torch.float32)
    w = weights.to(torch.float32)
    table = block_table[:, :width_pages].to(torch.long)
    step = max(1, CHUNK_ELEMENTS // (width * (head_dim + heads)))
    pos = torch.arange(width, device=device)
    for b0 in range(0, batch, step):
        b1 = min(batch, b0 + step)
        rows = b1 - b0
        # Pages past a row's length may hold any id (0 in the bundled tables): clamped to a real page and
        # masked below, as the definition never reads them.
        pages = table[b0:b1].clamp(0, num_pages - 1)  # [rows, width_pages]
        keys = dequant(packed[pages.reshape(-1)], page_size, head_dim).reshape(rows, width, head_dim)
        scores = torch.relu(torch.bmm(q[b0:b1], keys.transpose(1, 2)))  # [rows, 64, width]
        final = (scores * w[b0:b1, :, None]).sum(dim=1)  # [rows, width]
        inside = pos[None, :] < lens[b0:b1, None]
        final = torch.where(inside, final, torch.full_like(final, -math.inf))
        k = min(TOPK, width)
        _, top = torch.topk(final, k, dim=1)  # [rows, k], largest first
        token = table[b0:b1].gather(1, top // page_size) * page_size + top % page_size
        keep = torch.arange(k, device=device)[None, :] < torch.clamp(lens[b0:b1], max=TOPK)[:, None]
        out[b0:b1, :k] = torch.where(keep, token, torch.full_like(token, -1)).to(torch.int32)
    return (out,)
