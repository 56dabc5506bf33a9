"""Output rules (autogk_git/bench/rules.py): exact, tolerance, and the top-k set judged by score."""
from __future__ import annotations

import math
import types

import pytest
import torch

from autogk_git.bench.judge import rules

K = 4


def scores_fn(table: torch.Tensor):
    """Rows of scores over ids, -inf = unreachable, as a target's row_scores gives them."""
    return lambda rows: table[rows.start:rows.stop]


# Row 0 reaches ids 0..7 (scores descending with id, ids 3 and 4 tie at the boundary);
# row 1 reaches only ids 5, 6 (fewer than K: two -1 expected); id 9 is reachable from no row.
INF = -math.inf
SCORES = torch.tensor([[9.0, 8.0, 7.0, 5.0, 5.0, 1.0, 0.5, 0.1, INF, INF],
                       [INF, INF, INF, INF, INF, 2.0, 3.0, INF, INF, INF]])
REF = torch.tensor([[0, 1, 2, 3], [6, 5, -1, -1]], dtype=torch.int32)


def judge(out: torch.Tensor, **kw) -> dict:
    return rules.topk_set("topk_indices", out, REF, scores_fn(SCORES), **kw)


def test_topk_set_accepts_other_order_other_tie_break_and_padding_position():
    judge(REF.clone())
    judge(torch.tensor([[2, 4, 0, 1], [-1, 5, -1, 6]], dtype=torch.int32))  # id 4 ties with the ref's 3


@pytest.mark.parametrize("out,words", [
    ([[0, 1, 2, 2], [6, 5, -1, -1]], "appears more than once"),
    ([[0, 1, 2, 3], [6, 5, 9, -1]], "not reachable"),          # id 9: no row reaches it
    ([[0, 1, 2, 3], [6, 5, 0, -1]], "not reachable"),          # id 0: another row's token
    ([[0, 1, 2, 10], [6, 5, -1, -1]], "not reachable"),        # past the last id
    ([[0, 1, 2, -7], [6, 5, -1, -1]], "not reachable"),        # negative, not the -1 pad
    ([[0, 1, 2, 7], [6, 5, -1, -1]], "rank-4 score"),          # score 0.1 where the ref has 5
    ([[-1, -1, -1, -1], [6, 5, -1, -1]], "0 ids, expected 4"),
    ([[0, 1, 2, -1], [6, 5, -1, -1]], "3 ids, expected 4"),
    ([[0, 1, 2, 3], [6, -1, -1, -1]], "1 ids, expected 2"),
])
def test_topk_set_rejects(out, words):
    with pytest.raises(rules.Mismatch, match=words) as e:
        judge(torch.tensor(out, dtype=torch.int32))
    assert e.value.status == "INCORRECT_NUMERICAL"


def test_topk_set_tolerance_is_on_scores_not_ids():
    near = SCORES.clone()
    near[0, 5] = 5.0 * (1 - 0.5 * rules.TOPK_RTOL)  # a different id, a score within tolerance
    rules.topk_set("t", torch.tensor([[0, 1, 2, 5], [6, 5, -1, -1]]), REF, scores_fn(near))
    near[0, 5] = 5.0 * (1 - 3 * rules.TOPK_RTOL)
    with pytest.raises(rules.Mismatch, match="rank-4"):
        rules.topk_set("t", torch.tensor([[0, 1, 2, 5], [6, 5, -1, -1]]), REF, scores_fn(near))


def test_topk_set_blames_a_reference_that_breaks_the_rule():
    bad_ref = torch.tensor([[0, 1, 2, 9], [6, 5, -1, -1]], dtype=torch.int32)
    with pytest.raises(rules.BadReference, match="reference"):
        rules.topk_set("t", REF.clone(), bad_ref, scores_fn(SCORES))


def test_topk_set_judges_in_row_blocks(monkeypatch):
    monkeypatch.setattr(rules, "SCORE_BLOCK_ELEMENTS", 10)  # one row per block
    seen = []

    def fn(rows):
        seen.append((rows.start, rows.stop))
        return SCORES[rows.start:rows.stop]
    rules.topk_set("t", REF.clone(), REF, fn)
    assert seen == [(0, 1), (1, 2)]


def test_declared_rules_and_dispatch():
    mod = types.SimpleNamespace(COMPARE={"idx": "topk_set", "y": {"rule": "tolerance", "atol": 0.5, "rtol": 0}},
                                row_scores=lambda inputs, axes, rows: SCORES[rows.start:rows.stop])
    spec = rules.declared(mod)
    assert spec["idx"] == {"rule": "topk_set"}
    rules.judge("idx", "int32", REF.clone(), REF, spec["idx"], {}, {}, mod)
    with pytest.raises(rules.Mismatch):
        rules.judge("idx", "int32", torch.tensor([[0, 1, 2, 2], [6, 5, -1, -1]]), REF, spec["idx"], {}, {}, mod)
    # A declared tolerance overrides the dtype's.
    rules.judge("y", "float32", torch.tensor([1.4]), torch.tensor([1.0]), spec["y"])
    with pytest.raises(rules.Mismatch, match="outside"):
        rules.judge("y", "float32", torch.tensor([1.6]), torch.tensor([1.0]), spec["y"])
    with pytest.raises(ValueError, match="not one of"):
        rules.declared(types.SimpleNamespace(COMPARE={"y": "approximately"}))
    with pytest.raises(rules.BadReference, match="row_scores"):
        rules.judge("idx", "int32", REF.clone(), REF, spec["idx"], {}, {}, types.SimpleNamespace())


def test_undeclared_outputs_go_by_dtype():
    rules.judge("x", "float32", torch.tensor([1.0, -math.inf]), torch.tensor([1.0 + 1e-6, -math.inf]))
    with pytest.raises(rules.Mismatch, match="NaN"):
        rules.judge("x", "float32", torch.tensor([math.nan]), torch.tensor([1.0]))
    with pytest.raises(rules.Mismatch, match="outside"):
        rules.judge("x", "float32", torch.tensor([math.inf]), torch.tensor([-math.inf]))
    with pytest.raises(rules.Mismatch, match="1 of 2 elements differ"):
        rules.judge("i", "int32", torch.tensor([1, 2]), torch.tensor([1, 3]))
    with pytest.raises(rules.Mismatch) as e:
        rules.judge("i", "int32", torch.tensor([1, 2]), torch.tensor([1, 2, 3]))
    assert e.value.status == "INCORRECT_SHAPE"


def test_tolerance_takes_nan_only_where_the_reference_has_it():
    """As its docstring says (it failed NaN matching NaN: NaN == NaN is false, so the difference was inf)."""
    ref = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    rules.tolerance("o", ref.clone(), ref, 1e-3, 1e-3)
    for i in range(4):  # a NaN or a finite value where the reference holds something else
        for bad in (float("nan"), 0.5):
            out = ref.clone()
            out[i] = bad
            if torch.isnan(ref[i]) and bad != bad:
                continue
            with pytest.raises(rules.Mismatch):
                rules.tolerance("o", out, ref, 1e-3, 1e-3)
