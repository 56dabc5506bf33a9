"""Valid inputs for DSA sparse attention (DeepSeek-V3.2, 16 heads per TP-8 rank, page size 64).

generate(axes, definition, seed, device) makes one input set: a paged KV pool whose pages are
scattered over the sequences, and per query token up to 2048 distinct selected KV entries, each
reachable inside that token's causal context, padded with -1 only when the context is shorter
than 2048 tokens. The layout (how many sequences, their lengths) depends on the axes alone, so
every trial of a workload does the same amount of work; the values, the page scatter and the
selection depend on the seed too.

Layout rule (num_tokens T, pool of num_pages P pages of 64 tokens):
- decode, when T <= 256 and T <= P: T sequences, one query token each (its last token), the pool's
  pages shared among them in uneven, fixed proportions;
- prefill otherwise: one sequence filling the pool (64 P tokens), the T query tokens are its last T,
  token t seeing the first 64 P - T + t + 1 tokens (at least one).

Both outputs are judged within tolerance: `output` (bf16) and the base-2 `lse` (float32).
"""
from __future__ import annotations

import math
import random

import torch

PAGE = 64
TOPK = 2048
HEADS, D_CKV, D_KPE = 16, 512, 64
DECODE_MAX_TOKENS = 256
SM_SCALE = 1.0 / math.sqrt(128 + 64)  # the definition: pre-absorption head dim (128 nope + 64 rope)
# Rows of a [rows, context] random-key block drawn at once when selecting entries.
KEY_BLOCK_ELEMENTS = 1 << 24

COMPARE = {"output": "tolerance", "lse": "tolerance"}


def layout(num_tokens: int, num_pages: int) -> tuple[list[int], list[int], list[int]]:
    """(pages per sequence, sequence of each query token, context length of each query token)."""
    t, p = int(num_tokens), int(num_pages)
    if t <= 0:
        return [], [], []
    if t <= DECODE_MAX_TOKENS and t <= p:
        rng = random.Random(f"dsa-decode:{t}:{p}")
        w = [rng.lognormvariate(0.0, 0.75) for _ in range(t)]
        pages = [max(1, int(p * x / sum(w))) for x in w]
        while sum(pages) > p:  # rounding up to one page each can overshoot: take back from the longest
            pages[pages.index(max(pages))] -= 1
        ctx = [n * PAGE - rng.randrange(PAGE) for n in pages]
        return pages, list(range(t)), ctx
    # A pool smaller than the chunk cannot happen in serving; such axes still get valid data: the
    # first rows see a context of one token (none when the pool is empty).
    return [p], [0] * t, [min(PAGE * p, max(1, PAGE * p - t + i + 1)) for i in range(t)]


def select_positions(ctx: torch.Tensor, k: int, gen: torch.Generator) -> torch.Tensor:
    """[rows, k] distinct positions in [0, ctx[row]), in random order, -1 after the first min(k, ctx[row])."""
    rows, device = ctx.shape[0], ctx.device
    width = int(ctx.max()) if rows else 0
    out = torch.full((rows, k), -1, dtype=torch.int64, device=device)
    if width == 0:
        return out
    step = max(1, KEY_BLOCK_ELEMENTS // width)
    take = min(k, width)
    cols = torch.arange(width, device=device)
    for a in range(0, rows, step):
        c = ctx[a:a + step]
        keys = torch.rand((c.shape[0], width), generator=gen, device=device)
        keys = torch.where(cols[None, :] < c[:, None], keys, torch.full_like(keys, 2.0))
        vals, pos = torch.topk(keys, take, dim=1, largest=False)  # smallest keys: a uniform random subset
        out[a:a + step, :take] = torch.where(vals < 2.0, pos, torch.full_like(pos, -1))
    return out


def _scatter_pages(pages: list[int], num_pages: int, gen: torch.Generator, device: str) -> torch.Tensor:
    """[sequences, max pages] block table: each sequence's pages, drawn without repeats from the pool."""
    perm = torch.randperm(num_pages, generator=gen, device=device)
    table = torch.zeros((len(pages), max(pages)), dtype=torch.int64, device=device)
    start = 0
    for s, n in enumerate(pages):
        table[s, :n] = perm[start:start + n]
        start += n
    return table


def sparse_indices(num_tokens: int, num_pages: int, gen: torch.Generator, device: str) -> torch.Tensor:
    """[T, 2048] int32 ids page * 64 + slot, distinct per row, inside the row's context, -1 after."""
    t, p = int(num_tokens), int(num_pages)
    pages, seq_of, ctx = layout(t, p)
    if not t or not p:
        return torch.full((t, TOPK), -1, dtype=torch.int32, device=device)
    table = _scatter_pages(pages, p, gen, device)
    ctx_t = torch.tensor(ctx, dtype=torch.int64, device=device)
    seq_t = torch.tensor(seq_of, dtype=torch.int64, device=device)
    pos = select_positions(ctx_t, TOPK, gen)
    page = table[seq_t[:, None], pos.clamp(min=0) // PAGE]
    return torch.where(pos >= 0, page * PAGE + pos % PAGE, torch.full_like(pos, -1)).to(torch.int32).contiguous()


def generate(axes: dict, definition: dict, seed: int, device: str) -> dict:
    t, p = int(axes["num_tokens"]), int(axes["num_pages"])
    gen = torch.Generator(device=device).manual_seed(int(seed))

    def normal(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=gen, device=device, dtype=torch.float32)

    # Magnitudes: with unit-variance queries and keys (per-channel key scales, as after the latent's
    # RMSNorm weights) the scaled logits spread with a standard deviation near 2: a peaked softmax over
    # 2048 entries, so a kernel that gets the softmax wrong cannot pass by averaging.
    channel = torch.exp(0.5 * normal(D_CKV))
    ckv = (normal(p, PAGE, D_CKV) * channel).to(torch.bfloat16)
    kpe = normal(p, PAGE, D_KPE).to(torch.bfloat16)
    q_nope = normal(t, HEADS, D_CKV).to(torch.bfloat16)
    q_pe = normal(t, HEADS, D_KPE).to(torch.bfloat16)
    return {"q_nope": q_nope, "q_pe": q_pe, "ckv_cache": ckv, "kpe_cache": kpe,
            "sparse_indices": sparse_indices(t, p, gen, device), "sm_scale": SM_SCALE}
