"""How many timed calls a round holds (rounds.calls_per_round): a memory budget, larger on a large GPU."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import torch

from autogk_git.bench.judge import rounds

EXAMPLES = Path(__file__).resolve().parents[3] / "autogk_git" / "examples"
IDX = EXAMPLES / "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
SA = EXAMPLES / "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"


def first_with(folder: Path, **axes) -> tuple[dict, dict]:
    definition = json.loads((folder / "definition.json").read_text())
    for line in (folder / "workloads.jsonl").read_text().splitlines():
        wl = json.loads(line)["workload"]
        if all(wl["axes"].get(k) == v for k, v in axes.items()):
            return {"definition": definition, "settings": {"reps": 30}}, wl
    raise AssertionError(f"no workload with {axes} in {folder}")


def a_gpu_of(monkeypatch, total_bytes: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: SimpleNamespace(total_memory=total_bytes))


def test_a_large_gpu_gives_the_indexers_short_calls_every_rep(monkeypatch):
    # One call of the contest-shaped indexer holds ~100 MB (11,923 pages of fp8 keys): 10 calls under
    # 1 GiB, whose ~1.5 us figures took 40 rounds to bound within the guard on the H200.
    job, wl = first_with(IDX, num_pages=11923)
    assert rounds.calls_per_round(job, wl, "cpu") == 10
    a_gpu_of(monkeypatch, 143 * 10**9)  # an H200
    assert rounds.calls_per_round(job, wl, "cuda") == 30
    a_gpu_of(monkeypatch, 24 * 10**9)  # a small GPU keeps the 1 GiB
    assert rounds.calls_per_round(job, wl, "cuda") == 10


def test_the_budget_is_capped_and_an_explicit_setting_wins(monkeypatch):
    job, wl = first_with(SA, num_pages=8462)
    a_gpu_of(monkeypatch, 10**12)  # more memory than any GPU: still 4 GiB at most
    assert 2 < rounds.calls_per_round(job, wl, "cuda") < 30  # ~620 MB a call: 6 under 4 GiB
    job["settings"]["timing_mem_bytes"] = 1 << 30
    assert rounds.calls_per_round(job, wl, "cuda") == rounds.calls_per_round(job, wl, "cpu") == 2
