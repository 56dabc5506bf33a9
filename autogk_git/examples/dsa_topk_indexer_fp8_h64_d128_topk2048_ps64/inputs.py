"""Valid inputs and the top-k judging rule for the DSA indexer (DeepSeek-V3.2, FP8, page size 64).

generate(axes, definition, seed, device, workload) makes one input set: FP8 queries quantized per (token,
head), the FP8 key cache with one float32 scale per token packed in the definition's byte layout
(per page: 64 x 128 FP8 bytes, then 64 float32 scales), head weights folded as the serving engine
folds them, sequence lengths, and block tables that scatter each sequence's pages over the pool.
The layout depends on the axes alone (every trial does the same work); values and the page
scatter depend on the seed too.

Two layout rules (batch_size B, max_num_pages M, pool of num_pages P pages):
- the workload line's own `layout`: {"seq_lens": [one length per row]}: B sequences of those
  lengths, one row each, their pages drawn from the pool without repeats. This is how the
  contest-shaped set (workloads.jsonl, made by scripts/dsa_contest_workloads.py) carries its
  per-row lengths, which the axes cannot.
- without one, the layout follows from the axes alone:
  - decode, when B <= 256 and B <= P: B sequences, one row each, of uneven fixed lengths, the
    longest filling M pages, all drawn from the pool without repeats;
  - prefill otherwise: one sequence of M pages (64 M tokens), the B rows are its last B tokens, row b
    seeing the first 64 M - B + b + 1 tokens (at least one).
  Axes serving cannot produce (M > P, more rows than tokens) still get valid data.
Block table entries past a row's pages are 0 (a real page: using them is caught as unreachable).

`topk_indices` is judged as a top-k set by score (see autogk_git/bench/rules.py, topk_set):
row_scores gives every token id's score for a row, -inf where the row cannot reach the id.
`floor(inputs, axes, definition)` gives the bytes and FLOPs a correct kernel cannot avoid on these
inputs (the judge's floor report uses it): a row of at most 2048 tokens selects all of them, so
only longer rows need their keys read and scored.
"""
from __future__ import annotations

import random

import torch

PAGE = 64
TOPK = 2048
HEADS, DIM = 64, 128
FP8_MAX = 448.0
DECODE_MAX_ROWS = 256

COMPARE = {"topk_indices": {"rule": "topk_set", "scores": "row_scores"}}
# The judge also checks one shape the workloads do not list (bench/judge/stress.py), without the
# workload's seq_lens: the axes-only rule, whose longest row fills its table, so a kernel fitted to the
# listed row lengths (one that stops scoring past the longest listed row) is caught there.
EXTRA_SHAPES = True
# How far past the largest listed value that shape may reach, per axis (the judge's default: twice it):
# tables up to 2048 pages (128K tokens, the long set's widest), so a kernel fitted to the contest's rows of
# at most 91 pages is caught whatever width it stops at (the reference scores in chunks).
AXIS_REACH = {"max_num_pages": 2048}


def check_seq_lens(seq_lens, batch: int, max_pages: int, num_pages: int) -> list[int]:
    """The workload's `layout.seq_lens`, checked against its axes: one length per row, each within
    max_num_pages pages, the rows' pages together within the pool. A ValueError says what is wrong."""
    if not isinstance(seq_lens, list) or len(seq_lens) != batch:
        raise ValueError(f"layout.seq_lens needs one length per row ({batch}), got "
                         f"{len(seq_lens) if isinstance(seq_lens, list) else type(seq_lens).__name__}")
    for b, n in enumerate(seq_lens):
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= PAGE * max_pages:
            raise ValueError(f"layout.seq_lens[{b}] must be an integer in 0..{PAGE * max_pages} "
                             f"(max_num_pages {max_pages}), got {n!r:.40}")
    need = sum(-(-n // PAGE) for n in seq_lens)
    if need > num_pages:
        raise ValueError(f"layout.seq_lens needs {need} pages, the pool has {num_pages}")
    return list(seq_lens)


def layout(batch: int, max_pages: int, num_pages: int, seq_lens: list[int] | None = None
           ) -> tuple[list[int], list[int], list[int]]:
    """(pages per sequence, sequence of each row, sequence length seen by each row); seq_lens: the
    workload's own lengths (one sequence per row), checked."""
    b, m, p = int(batch), int(max_pages), int(num_pages)
    if seq_lens is not None:
        lens = check_seq_lens(seq_lens, b, m, p)
        return [-(-n // PAGE) for n in lens], list(range(b)), lens
    if b <= 0:
        return [], [], []
    m = min(m, p)  # a sequence cannot hold more pages than the pool has (such axes still get valid data)
    if b <= DECODE_MAX_ROWS and b <= p:
        rng = random.Random(f"dsa-indexer-decode:{b}:{m}:{p}")
        pages = [m] + [min(m, max(1, round(m * rng.uniform(0.05, 1.0)))) for _ in range(b - 1)]
        while sum(pages) > p:  # the pool is too small for these lengths: shorten the longest
            pages[pages.index(max(pages))] -= 1
        return pages, list(range(b)), [max(0, n * PAGE - rng.randrange(PAGE)) for n in pages]
    # More rows than tokens cannot happen in serving; the first rows then see one token (none if p is 0).
    return [m], [0] * b, [min(PAGE * m, max(1, PAGE * m - b + i + 1)) for i in range(b)]


def pack_k_cache(k_fp8: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """[P, 64, 128] FP8 values and [P, 64] float32 scales -> [P, 64, 1, 132] int8 in the definition's layout."""
    p = k_fp8.shape[0]
    values = k_fp8.contiguous().view(torch.uint8).reshape(p, PAGE * DIM)
    scale_bytes = scales.to(torch.float32).contiguous().view(torch.uint8).reshape(p, PAGE * 4)
    return torch.cat([values, scale_bytes], dim=1).view(torch.int8).reshape(p, PAGE, 1, DIM + 4)


def unpack_k_cache(cache: torch.Tensor) -> torch.Tensor:
    """The packed cache as [P * 64, 128] float32 keys (FP8 value times its token's scale)."""
    p = cache.shape[0]
    flat = cache.reshape(p, PAGE * (DIM + 4)).view(torch.uint8)
    values = flat[:, :PAGE * DIM].contiguous().view(torch.float8_e4m3fn).to(torch.float32).reshape(p, PAGE, DIM)
    scales = flat[:, PAGE * DIM:].contiguous().view(torch.float32).reshape(p, PAGE, 1)
    return (values * scales).reshape(p * PAGE, DIM)


def tables(batch: int, max_pages: int, num_pages: int, gen: torch.Generator, device: str,
           lens: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(seq_lens [B] int32, block_table [B, M] int32): each sequence's pages drawn from the pool without
    repeats, sequences disjoint, rows of one prefill sequence sharing its pages; 0 past a row's pages.
    lens: the workload's own per-row lengths (layout.seq_lens)."""
    b, m, p = int(batch), int(max_pages), int(num_pages)
    pages, seq_of, seq_lens = layout(b, m, p, lens)
    table = torch.zeros((b, m), dtype=torch.int32, device=device)
    if b:
        perm = torch.randperm(p, generator=gen, device=device).to(torch.int32)
        per_seq = torch.zeros((len(pages), m), dtype=torch.int32, device=device)
        start = 0
        for s, n in enumerate(pages):
            per_seq[s, :n] = perm[start:start + n]
            start += n
        table = per_seq[torch.tensor(seq_of, dtype=torch.int64, device=device)].contiguous()
    return torch.tensor(seq_lens, dtype=torch.int32, device=device).reshape(b), table


def generate(axes: dict, definition: dict, seed: int, device: str, workload: dict | None = None) -> dict:
    b, m, p = int(axes["batch_size"]), int(axes["max_num_pages"]), int(axes["num_pages"])
    gen = torch.Generator(device=device).manual_seed(int(seed))

    def normal(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=gen, device=device, dtype=torch.float32)

    # Keys: unit-variance vectors with a per-token magnitude, quantized per token to the full FP8 range.
    k = normal(p, PAGE, DIM) * torch.exp(0.3 * normal(p, PAGE, 1))
    k_scale = k.abs().amax(dim=-1).clamp_min(1e-6) / FP8_MAX
    k_fp8 = (k / k_scale[..., None]).to(torch.float8_e4m3fn)
    # Queries: quantized per (token, head); the quantization scale is folded into the weights, with
    # the head count and softmax scale factors, as the serving engine does.
    q = normal(b, HEADS, DIM)
    q_scale = q.abs().amax(dim=-1).clamp_min(1e-6) / FP8_MAX
    q_fp8 = (q / q_scale[..., None]).to(torch.float8_e4m3fn)
    weights = normal(b, HEADS) * HEADS ** -0.5 * q_scale * DIM ** -0.5
    seq_lens, table = tables(b, m, p, gen, device, ((workload or {}).get("layout") or {}).get("seq_lens"))
    return {"q_index_fp8": q_fp8, "k_index_cache_fp8": pack_k_cache(k_fp8, k_scale), "weights": weights,
            "seq_lens": seq_lens, "block_table": table}


def stress(axes: dict, definition: dict, seed: int, device: str, usual: dict) -> dict:
    """A set of the target's own (bench/judge/stress.py runs it after the judge's): `last_token_tops`, the
    usual draw with each row of more than 2048 tokens given its top-scoring key again at its last token,
    scale doubled (the row's top score, doubled, and alone: the top-1 of the set). A kernel one short at
    the end of a row (never scoring token seq_len - 1) misses it; on the usual draws that token ranks
    anywhere, and below the boundary it only shifts the ranks by one, inside the tie band."""
    lens, table = usual["seq_lens"].to(torch.int64), usual["block_table"].to(torch.int64)
    long_rows = [r for r in range(int(lens.numel())) if int(lens[r]) > TOPK]
    if not long_rows:
        return {}
    cache = usual["k_index_cache_fp8"].clone()
    flat = cache.view(torch.uint8).reshape(cache.shape[0], PAGE * (DIM + 4))
    for r in long_rows:
        s = row_scores(usual, axes, range(r, r + 1))[0]
        top = int(torch.argmax(s))
        if not float(s[top]) > 0:
            continue  # doubling a key's scale raises only a positive score
        pos = int(lens[r]) - 1
        last = int(table[r, pos // PAGE]) * PAGE + pos % PAGE
        (tp, ts), (lp, ls) = divmod(top, PAGE), divmod(last, PAGE)
        flat[lp, ls * DIM:(ls + 1) * DIM] = flat[tp, ts * DIM:(ts + 1) * DIM]
        scale = flat[tp, PAGE * DIM + 4 * ts:PAGE * DIM + 4 * ts + 4].clone().view(torch.float32) * 2
        flat[lp, PAGE * DIM + 4 * ls:PAGE * DIM + 4 * ls + 4] = scale.view(torch.uint8)
    return {"last_token_tops": {"k_index_cache_fp8": cache}}


def row_scores(inputs: dict, axes: dict, rows: range) -> torch.Tensor:
    """[len(rows), num_pages * 64] float32: each token id's score for each row, -inf where unreachable.

    Only the ids a row reaches are scored (gathered through its block table): a decode row of a
    16384-page pool reaches 1/64 of it, and scoring every id took most of an experiment's judging on
    the H200 (2026-11-30)."""
    cache, q = inputs["k_index_cache_fp8"], inputs["q_index_fp8"]
    keys = unpack_k_cache(cache)  # [ids, 128]
    n_ids, dev = keys.shape[0], keys.device
    sl = slice(rows.start, rows.stop)
    qf = q[sl].to(torch.float32)  # [R, 64, 128]
    w = inputs["weights"][sl].to(torch.float32)  # [R, 64]
    seq_lens = inputs["seq_lens"][sl].to(torch.int64)
    table = inputs["block_table"][sl].to(torch.int64)
    out = torch.full((qf.shape[0], n_ids), float("-inf"), dtype=torch.float32, device=dev)
    width = int(seq_lens.max()) if seq_lens.numel() else 0
    if not width:
        return out
    pos = torch.arange(width, device=dev)
    ids = table[:, pos // PAGE] * PAGE + pos % PAGE  # [R, width]: the id at each position of each row
    ok = (pos[None, :] < seq_lens[:, None]) & (ids >= 0) & (ids < n_ids)
    ids = ids.clamp(0, max(0, n_ids - 1))
    # Rows that reach most of the pool (prefill rows sharing one sequence) score every id at once;
    # rows that reach a small part of it (decode) score only their own ids, gathered.
    dense = n_ids <= 4 * width
    step = max(1, (1 << 19) // (n_ids if dense else width))  # [step, 64, ids] float32: 128 MB at most
    for r0 in range(0, qf.shape[0], step):
        r1 = min(qf.shape[0], r0 + step)
        if dense:
            s = torch.einsum("rhd,nd->rhn", qf[r0:r1], keys)
        else:
            s = torch.einsum("rhd,rwd->rhw", qf[r0:r1], keys[ids[r0:r1]])
        s = (torch.relu(s) * w[r0:r1, :, None]).sum(dim=1)  # [r, ids or width]
        row, col = ok[r0:r1].nonzero(as_tuple=True)
        at = ids[r0 + row, col]
        out[r0 + row, at] = s[row, at] if dense else s[row, col]
    return out


def floor(inputs: dict, axes: dict, definition: dict) -> dict:
    """What a correct kernel must move and compute on these inputs. A row of at most 2048 tokens
    selects every one of its tokens, so it needs only its block table entries and its output; a
    longer row must read the key and scale of each token it reaches (132 bytes; a token reached by
    several rows of one sequence counts once), its query and weights, and score each of its tokens
    (2 x 64 heads x 128 FLOPs). Seq lens and the output are moved for every row."""
    sl = inputs["seq_lens"].to(torch.int64)
    table = inputs["block_table"].to(torch.int64)
    b = int(sl.numel())
    cols = torch.arange(table.shape[1], device=table.device)
    in_page = (sl[:, None] - PAGE * cols[None, :]).clamp(0, PAGE)  # [B, M]: tokens of each page a row reaches
    long_rows = sl > TOPK
    # Distinct tokens the long rows reach: per page, the most of its slots any long row uses.
    n_pages = inputs["k_index_cache_fp8"].shape[0]
    used = torch.zeros(max(1, n_pages), dtype=torch.int64, device=table.device)
    hit = (in_page > 0) & long_rows[:, None]
    used.scatter_reduce_(0, table[hit].clamp(0, max(0, n_pages - 1)), in_page[hit], "amax")
    n_long = int(long_rows.sum())
    nbytes = (int(used.sum()) * (DIM + 4) + n_long * (HEADS * DIM + HEADS * 4) + b * 4
              + int((in_page > 0).sum()) * 4 + b * TOPK * 4)
    return {"bytes": nbytes, "flops": int(sl[long_rows].sum()) * HEADS * DIM * 2,
            "rule": "rows over 2048 tokens: each token reached x 132 B + query + weights, FLOPs 2 x 64 x 128 "
                    "per token; every row: its block table entries + seq_len + output"}
