"""How an output is judged: exactly, within a tolerance, or as a top-k set judged by score.

Standard library and torch only: this file ships beside the bench worker (as `autogk_rules.py`) to
whatever machine runs it, and every rule is a pure function of (output, reference output, inputs,
axes), so a judge process can call it without the candidate's code.

A target declares its rules in its `inputs.py`, beside the generator:

    COMPARE = {"topk_indices": "topk_set"}          # or {"rule": "topk_set", "rtol": 1e-3, ...}
    def row_scores(inputs, axes, rows): ...          # what "topk_set" judges by (see topk_set)

An output it does not name is judged by its dtype: floats within TOLERANCES capped at FlashInfer-Bench's
band (CONTEST_ATOL, CONTEST_RTOL), integers exactly.
Failures raise Mismatch (the kernel's fault) or BadReference (the harness's: the reference itself
breaks the rule, so no verdict on the kernel can be drawn).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

# |out - ref| <= atol + rtol * |ref|, by output dtype. One bf16 ulp is 2^-8 relative.
TOLERANCES = {
    "float32": (1e-4, 1e-4),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
    "float8_e4m3fn": (1.25e-1, 1.25e-1),
    "float8_e5m2": (2.5e-1, 2.5e-1),
}
RULES = ("exact", "tolerance", "topk_set")
# topk_set: the sorted scores match within rtol * |ref| + atol * (the row's largest |ref score|).
# Wide enough for FP8 tensor-core products, whose accumulation on Hopper is not full fp32: on the
# H200 the DSA indexer's FP8 dot moved scores near rank 2048 by up to 0.6 % (2026-11-30,
# benchmarks/results/dsa.md); narrow enough to reject a missing scale, ReLU, head or weight sign.
TOPK_RTOL, TOPK_ATOL = 1e-2, 1e-3
# FlashInfer-Bench's judge (its evaluators' defaults, rtol = atol = 1e-2, every element required): an
# element fails when |out - ref| > atol AND |out - ref| / |ref| > rtol, i.e. the band is
# max(atol, rtol * |ref|), for every output dtype and for the DSA indexer's sorted scores alike.
# The default bands above are capped by it, so a kernel judged correct here is not rejected there
# for its numbers: without the cap the bf16 band was 1.6-3.2x wider than the contest's (a decode
# kernel with a bf16 accumulator passed), and the top-k band accepted +-2-3 % score noise.
CONTEST_ATOL, CONTEST_RTOL = 1e-2, 1e-2
# Rows judged together: bounds the memory of a [rows, ids] score block.
SCORE_BLOCK_ELEMENTS = 1 << 23


class Mismatch(Exception):
    """The output does not mean what the reference's means; status is the worker's status name."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class BadReference(Exception):
    """The reference's own output breaks the rule: the harness, not the kernel, is wrong."""


def declared(module: Any) -> dict[str, dict[str, Any]]:
    """The rules a target's inputs.py declares, as {output: {"rule": name, **params}}; checked here."""
    raw = getattr(module, "COMPARE", None) or {}
    out = {}
    for name, spec in raw.items():
        spec = {"rule": spec} if isinstance(spec, str) else dict(spec)
        if spec.get("rule") not in RULES:
            raise ValueError(f"COMPARE[{name!r}]: rule {spec.get('rule')!r} is not one of {', '.join(RULES)}")
        out[name] = spec
    return out


def judge(name: str, dtype_name: str, out: torch.Tensor, ref: torch.Tensor, spec: dict[str, Any] | None = None,
          inputs: dict[str, Any] | None = None, axes: dict[str, Any] | None = None, module: Any = None,
          tolerances: dict[str, Any] | None = None) -> dict[str, float]:
    """Judge one output by its declared rule (spec), else by its dtype; returns error statistics."""
    spec = spec or {}
    if tuple(out.shape) != tuple(ref.shape):
        raise Mismatch("INCORRECT_SHAPE", f"output {name}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    rule = spec.get("rule") or ("tolerance" if out.dtype.is_floating_point else "exact")
    if rule == "exact":
        return exact(name, out, ref)
    # The contest's cap holds for the default bands; a target (or the job) that names its own tolerance
    # is judged by exactly that.
    own = "atol" in spec or "rtol" in spec
    if rule == "tolerance":
        own = own or dtype_name in (tolerances or {})
        atol, rtol = (tolerances or {}).get(dtype_name, TOLERANCES.get(dtype_name, (1e-3, 1e-3)))
        return tolerance(name, out, ref, spec.get("atol", atol), spec.get("rtol", rtol), contest=not own)
    fn_name = spec.get("scores", "row_scores")
    scores = getattr(module, fn_name, None)
    if not callable(scores):
        raise BadReference(f"output {name} is judged as a top-k set, but the target's inputs.py defines no "
                           f"{fn_name}(inputs, axes, rows)")
    return topk_set(name, out, ref, lambda rows: scores(inputs, axes, rows),
                    spec.get("rtol", TOPK_RTOL), spec.get("atol", TOPK_ATOL), contest=not own)


def exact(name: str, out: torch.Tensor, ref: torch.Tensor) -> dict[str, float]:
    """Every element equal (floats compared by value, NaN nowhere)."""
    mism = int((out != ref.to(out.device, out.dtype)).sum())
    if mism:
        raise Mismatch("INCORRECT_NUMERICAL", f"output {name}: {mism} of {out.numel()} elements differ")
    return {"max_abs_err": 0.0, "max_rel_err": 0.0}


def contest_band(ref_abs: torch.Tensor) -> torch.Tensor:
    """The largest |out - ref| FlashInfer-Bench's judge accepts, per element: max(atol, rtol * |ref|)."""
    return torch.clamp(CONTEST_RTOL * ref_abs, min=CONTEST_ATOL)


def _cap_note(capped: bool) -> str:
    return (f", capped at FlashInfer-Bench's max({CONTEST_ATOL}, {CONTEST_RTOL}·|ref|)" if capped else "")


def tolerance(name: str, out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float,
              contest: bool = True) -> dict[str, float]:
    """|out - ref| <= atol + rtol * |ref| elementwise (and, with contest, within contest_band);
    infinities must match exactly; NaN only where ref has it."""
    if not out.dtype.is_floating_point:
        return exact(name, out, ref)
    o = out.detach().to(torch.float32)  # compared where it lives: a GPU compares 36 M elements in microseconds
    r = ref.detach().to(o.device, torch.float32)
    nan_out = torch.isnan(o) & ~torch.isnan(r)
    if nan_out.any():
        raise Mismatch("INCORRECT_NUMERICAL", f"output {name}: {int(nan_out.sum())} of {o.numel()} elements NaN "
                       "(not written, or computed as NaN)")
    both = torch.isfinite(r)
    diff = (o - r).abs()
    same = (o == r) | (torch.isnan(o) & torch.isnan(r))  # an infinity matched, or NaN where the reference's is
    diff = torch.where(both, diff, torch.where(same, torch.zeros_like(diff), torch.full_like(diff, math.inf)))
    rel = diff / r.abs().clamp_min(1e-12)
    r_abs = r.abs().nan_to_num(0.0)
    limit = atol + rtol * r_abs
    capped = False
    if contest:
        cap = contest_band(r_abs)
        capped = bool((cap < limit).any())
        limit = torch.minimum(limit, cap)
    bad = diff > limit
    stats = {"max_abs_err": float(diff.max()) if diff.numel() else 0.0,
             "max_rel_err": float(torch.where(both, rel, torch.zeros_like(rel)).max()) if rel.numel() else 0.0}
    if bad.any():
        raise Mismatch("INCORRECT_NUMERICAL", f"output {name}: {int(bad.sum())} of {o.numel()} elements outside "
                       f"atol={atol}, rtol={rtol}{_cap_note(capped)} (max abs err {stats['max_abs_err']:.3g})")
    return stats


def topk_set(name: str, out: torch.Tensor, ref: torch.Tensor, scores: Callable[[range], torch.Tensor],
             rtol: float = TOPK_RTOL, atol: float = TOPK_ATOL, contest: bool = True) -> dict[str, float]:
    """Per row, `out` must be a top-k set as good as `ref`'s, in any order, with any tie-break.

    out, ref: [rows, k] integer ids, -1 for padding. scores(rows) gives [len(rows), n_ids] float
    scores of every id for those rows, -inf where the id is not reachable from the row. A row passes
    when: every id is -1 or reachable; no id repeats; it holds exactly min(k, reachable ids) ids (so
    -1 pads exactly the rows with fewer than k reachable ids); and its scores, sorted, match the
    reference's sorted scores within rtol * |ref| + atol * (the row's largest |ref score|), and, with
    contest, within contest_band (FlashInfer-Bench's indexer judge compares the same sorted scores).
    """
    if out.dim() != 2:
        raise Mismatch("INCORRECT_SHAPE", f"output {name}: a top-k set is [rows, k], got shape {tuple(out.shape)}")
    if out.dtype.is_floating_point:
        raise Mismatch("INCORRECT_SHAPE", f"output {name}: top-k ids must be integers, got {out.dtype}")
    n_rows, k = out.shape
    stats = {"max_abs_err": 0.0, "max_rel_err": 0.0}
    if n_rows == 0 or k == 0:
        return stats
    step = None
    start = 0
    while start < n_rows:
        rows = range(start, min(n_rows, start + (step or 1)))
        s = scores(rows).to(torch.float32)
        if step is None:  # size the next blocks from the first row's width
            step = max(1, SCORE_BLOCK_ELEMENTS // max(1, s.shape[1]))
        o = out[rows.start:rows.stop].to(s.device, torch.int64)
        r = ref[rows.start:rows.stop].to(s.device, torch.int64)
        expected = torch.isfinite(s).sum(dim=1).clamp(max=k)
        try:
            ref_sorted = _row_scores(s, r, expected, rows, "the reference")
        except Mismatch as e:
            raise BadReference(f"output {name}: the reference breaks the top-k rule: {e}") from None
        out_sorted = _row_scores(s, o, expected, rows, "")
        width = int(expected.max()) if expected.numel() else 0
        if width:
            keep = torch.arange(width, device=s.device)[None, :] < expected[:, None]
            o_s, r_s = out_sorted[:, :width], ref_sorted[:, :width]
            diff = torch.where(keep, (o_s - r_s).abs(), torch.zeros_like(o_s))
            scale = torch.where(keep, r_s.abs(), torch.zeros_like(r_s)).amax(dim=1, keepdim=True)
            r_abs = r_s.abs().where(keep, torch.zeros_like(r_s))
            limit = rtol * r_abs + atol * scale
            if contest:
                limit = torch.minimum(limit, contest_band(r_abs))
            bad = diff > limit
            rel = diff / torch.where(keep, r_s.abs(), torch.ones_like(r_s)).clamp_min(1e-12)
            stats["max_abs_err"] = max(stats["max_abs_err"], float(diff.max()))
            stats["max_rel_err"] = max(stats["max_rel_err"], float(rel.max()))
            if bad.any():
                row, rank = (int(v) for v in bad.nonzero()[0])
                raise Mismatch("INCORRECT_NUMERICAL",
                               f"output {name}: row {rows.start + row}: the rank-{rank + 1} score of the returned "
                               f"set is {float(o_s[row, rank]):.6g}, the reference's is {float(r_s[row, rank]):.6g} "
                               f"({int(bad.any(dim=1).sum())} rows differ beyond rtol={rtol}, atol={atol}·row max"
                               f"{_cap_note(contest)}): "
                               "the set is not a top-k set")
        start = rows.stop
    return stats


def _row_scores(s: torch.Tensor, ids: torch.Tensor, expected: torch.Tensor, rows: range, who: str) -> torch.Tensor:
    """Check one block of id rows against reachability, duplicates and count; their scores, sorted descending."""
    n_ids = s.shape[1]
    who = f"{who}: " if who else ""
    valid = ids != -1
    off = valid & ((ids < 0) | (ids >= n_ids))
    got = s.gather(1, ids.clamp(0, n_ids - 1)) if n_ids else torch.full(ids.shape, -math.inf, device=s.device)
    unreachable = off | (valid & ~torch.isfinite(got))
    if unreachable.any():
        row, col = (int(v) for v in unreachable.nonzero()[0])
        raise Mismatch("INCORRECT_NUMERICAL",
                       f"{who}row {rows.start + row}: id {int(ids[row, col])} at position {col} is not reachable "
                       f"from that row ({int(unreachable.sum())} such ids in rows {rows.start}..{rows.stop - 1})")
    srt = torch.sort(torch.where(valid, ids, torch.full_like(ids, -1)), dim=1).values
    dup = (srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] != -1)
    if dup.any():
        row, col = (int(v) for v in dup.nonzero()[0])
        raise Mismatch("INCORRECT_NUMERICAL",
                       f"{who}row {rows.start + row}: id {int(srt[row, col])} appears more than once")
    count = valid.sum(dim=1)
    wrong = count != expected
    if wrong.any():
        row = int(wrong.nonzero()[0, 0])
        raise Mismatch("INCORRECT_NUMERICAL",
                       f"{who}row {rows.start + row}: {int(count[row])} ids, expected {int(expected[row])} "
                       f"(min(k={ids.shape[1]}, reachable ids)); -1 pads only rows with fewer reachable ids than k")
    masked = torch.where(valid, got, torch.full_like(got, -math.inf))
    return torch.sort(masked, dim=1, descending=True).values
