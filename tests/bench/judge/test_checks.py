"""The correctness checks of an ab job (bench/judge/checks.py): which input sets each label gets."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from autogk_git.bench.judge import checks, correctness, inputs  # noqa: E402
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
    recs = correctness.check_all({"parent": (recording(parent), None), "candidate": (recording(cand), None)}, job,
                                 made, ref, "cpu", None, lambda **r: None, emit_done=False)
    assert {r["status"] for r in recs.values()} == {Status.PASSED} and len(recs) == 6
    assert len(cand) >= len(parent) >= len(wls)
    assert not parent & cand, f"{len(parent & cand)} of the parent's {len(parent)} check inputs were the candidate's"


def test_no_two_check_sets_share_a_seed_up_to_the_configs_bound_on_trials(monkeypatch):
    """Every set a workload's checks draw (fresh sets, the refill, the stress sets, the unlisted shape), the
    candidate's and the parent's, at the most trials the config accepts: no trial number twice, none
    reaching the next workload's (1009 apart). At the bound the old config allowed (1,000 trials) the
    candidate's own sets met its stress sets and the parent's."""
    from autogk_git.config import UPPER
    trials = int(UPPER[("bench", "trials")])
    used: dict[int, list[int]] = {0: [], checks.OWN_SETS: []}
    real = checks.trial_seed
    first = [0]
    monkeypatch.setattr(checks, "trial_seed", lambda job, i, t: used[first[0]].append(t) or real(job, i, t))
    wl = SCALE_WLS[0]
    job = {"definition": SCALE_DEF, "workloads": [wl], "seed": 3, "settings": {"trials": trials, "device": "cpu"}}
    made = inputs.Inputs(job, "cpu", None)
    ref = inputs.load_reference(SCALE_DEF)
    for f in used:
        first[0] = f
        checks.check_workload(lambda x, b, s, out: torch.add(x * s, b, out=out), 0, wl, job, made, ref, "cpu",
                              first=f)
    every = used[0] + used[checks.OWN_SETS]
    assert len(used[0]) >= trials + 2 and len(every) == len(set(every)), sorted(every)
    assert max(every) < 1009
