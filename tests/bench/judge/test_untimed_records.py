"""A workload one label failed on while timed: the other label's record says it was not timed (it never
stays a silent PASSED without figures), and the loop's verdict reads the right reason from the records.

The judge's timed rounds run in-process on CPU with pure-torch kernels and its host-clock timer, as in
tests/test_worker_timed.py; the verdict is the loop's own rule on a bench result built from those records."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from autogk_git import config as config_mod  # noqa: E402
from autogk_git.bench import stages  # noqa: E402
from autogk_git.bench.judge import inputs as jinputs  # noqa: E402
from autogk_git.bench.judge import process  # noqa: E402
from autogk_git.loop.verdict import PairedRatioRule  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data"
DEF = json.loads((DATA / "scale" / "definition.json").read_text())
WL = json.loads((DATA / "scale" / "workloads.jsonl").read_text().splitlines()[0])["workload"]


def honest(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)


def lazy_after(n: int):
    """Honest for its first n calls (the checks), then skips its work: fails in the timed calls."""
    calls = [0]

    def run(x, bias, scale, out):
        calls[0] += 1
        if calls[0] <= n:
            torch.add(x * scale, bias, out=out)
    return run


def run_ab(parent, candidate) -> tuple[dict, dict]:
    s = {"device": "cpu", "timed": True, "trials": 2, "reps": 4, "warmup": 1, "min_rounds": 3, "max_rounds": 3,
         "min_effect": 0.01, "confidence": 0.95, "stress": False}
    job = {"version": 1, "stage": "ab", "definition": DEF, "workloads": [WL], "sources": {}, "generator": None,
           "blob_root": ".", "settings": s, "seed": 11}
    recs: dict = {"parent": {}, "candidate": {}}
    summary: dict = {}

    def emit(**r):
        ev = r.pop("event")
        if ev == "done":
            recs[r["label"]][r["uuid"]] = r
        elif ev == "ab":
            summary.update(r)

    process.run_timed(job, {"parent": (parent, None), "candidate": (candidate, None)},
                      jinputs.Inputs(job, "cpu", None), jinputs.load_reference(DEF), "cpu", None, emit)
    return recs, summary


def verdict(recs: dict, summary: dict) -> dict:
    stage = {"workloads": recs, "ab": summary}
    cov = stages.coverage([WL], [WL], [], {"ab": stage}, True)
    bench = {"backend": "local", "timing": True, "stages": {"ab": stage}, "correct": True,
             "cost": {"gpu_s": 1.0}, "coverage": cov}
    return PairedRatioRule().decide(bench, config_mod.parse({"bench": {"inconclusive": "keep"}}))


def test_the_parent_of_a_candidate_that_failed_while_timed_is_marked_not_timed():
    recs, summary = run_ab(honest, lazy_after(8))
    c, p = recs["candidate"][WL["uuid"]], recs["parent"][WL["uuid"]]
    assert c["status"] == "INCORRECT_NUMERICAL" and "timed call" in c["message"], c
    # The parent passed its checks, but has no figures here: its record says why, never a bare PASSED.
    assert "latency_us" not in p and p.get("timed") is False, p
    assert p.get("message", "").startswith("not timed: the candidate failed here (INCORRECT_NUMERICAL"), p
    v = verdict(recs, summary)
    assert v["decision"] == "revert" and v["outcome"] == "incorrect" and "INCORRECT_NUMERICAL" in v["reason"], v


def test_a_candidate_whose_parent_failed_while_timed_is_marked_not_timed_and_not_kept():
    recs, summary = run_ab(lazy_after(8), honest)
    c, p = recs["candidate"][WL["uuid"]], recs["parent"][WL["uuid"]]
    assert p["status"] == "INCORRECT_NUMERICAL", p
    # Correct (its status says what the checks found), but not timed, and its record says so.
    assert c["status"] == "PASSED" and "latency_us" not in c and c.get("timed") is False, c
    assert c.get("message", "").startswith("not timed: the parent failed here (INCORRECT_NUMERICAL"), c
    v = verdict(recs, summary)
    assert v["decision"] == "revert" and v["outcome"] == "harness_error", v
    assert "the parent failed" in v["reason"], v["reason"]
