"""A pair of kernels that work together across experiments, in real kernel processes through the real
channel (/dev/shm): the trunk's kernel records what it is given, the candidate looks for its own inputs
there. The judge gives the candidate no input the parent has had first (bench/judge/rounds.py)."""
from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from autogk_git.bench import runner

DATA = Path(__file__).resolve().parents[2] / "data"
DEF = json.loads((DATA / "scale" / "definition.json").read_text())
WLS = [json.loads(l)["workload"] for l in (DATA / "scale" / "workloads.jsonl").read_text().splitlines()]


def cheat(name: str) -> dict:
    return {"kernel.py": (DATA / "cheats" / f"{name}.py").read_text()}


def test_a_candidate_never_finds_its_inputs_among_those_its_parent_was_given():
    # On the code before, 122 of the candidate's 230 calls found their inputs there (the rounds the parent
    # went first, and the correctness checks run side by side).
    tag = secrets.token_hex(6)
    s = {"device": "cpu", "timed": True, "trials": 2, "reps": 6, "warmup": 2, "min_rounds": 6, "max_rounds": 6,
         "min_effect": 0.01, "confidence": 0.95}
    job = {"version": 1, "stage": "ab", "definition": DEF, "workloads": WLS[3:5], "generator": None,
           "blob_root": ".", "settings": s, "seed": 11,
           "sources": {"parent": cheat("leaves_outputs_for_the_next"), "candidate": cheat("copies_what_the_parent_left")}}
    files = [Path(f"/dev/shm/autogk_pair_{tag}.{x}") for x in ("seen", "calls")]
    try:
        out = runner.run_worker(job, dict(os.environ, CUDA_VISIBLE_DEVICES="", AUTOGK_TEST_PAIR=tag), 120)
        assert {v["status"] for w in out["labels"].values() for v in w.values()} == {"PASSED"}, out["labels"]
        assert files[0].exists(), "the parent recorded nothing: the channel this test needs is closed"
        calls = files[1].read_text().split()
        assert len(calls) > 100 and calls.count("found") == 0, (calls.count("found"), len(calls))
    finally:
        for f in files:
            f.unlink(missing_ok=True)
