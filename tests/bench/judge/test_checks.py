"""The correctness checks of an ab job (bench/judge/checks.py): which input sets each label gets."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from autogk_git.bench.judge import checks, inputs  # noqa: E402
from autogk_git.bench.judge.status import Status  # noqa: E402
from conftest import DATA  # noqa: E402

SCALE_DEF = json.loads((DATA / "scale" / "definition.json").read_text())
SCALE_WLS = [json.loads(l)["workload"] for l in (DATA / "scale" / "workloads.jsonl").read_text().splitlines()]


def recording(seen: set):
    def run(x, bias, scale, out):
        seen.add(x.contiguous().numpy().tobytes())
        torch.add(x * scale, bias, out=out)
    return run


@pytest.mark.parametrize("parent_light", [True, False])
def test_the_parent_is_checked_on_sets_the_candidate_never_gets(parent_light):
    """Checked side by side on the same sets, a candidate could wait for the parent's outputs (left in a
    buffer shared through /dev/shm by a trunk kernel made for it) and copy them. The parent's check sets are
    its own, so the two labels run side by side with nothing to copy. On the old code the parent's one
    set was the candidate's first on every workload (and with the whole battery, every set)."""
    wls = SCALE_WLS[:3]
    job = {"definition": SCALE_DEF, "workloads": wls, "seed": 7,
           "settings": {"trials": 2, "device": "cpu", "parent_light": parent_light}}
    made = inputs.Inputs(job, "cpu", None)
    ref = inputs.load_reference(SCALE_DEF)
    parent, cand = set(), set()
    recs = checks.check_all({"parent": (recording(parent), None), "candidate": (recording(cand), None)}, job,
                            made, ref, "cpu", None, lambda **r: None, emit_done=False)
    assert {r["status"] for r in recs.values()} == {Status.PASSED} and len(recs) == 6
    assert len(cand) >= len(parent) >= len(wls)
    assert not parent & cand, f"{len(parent & cand)} of the parent's {len(parent)} check inputs were the candidate's"
