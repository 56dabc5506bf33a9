"""On a CUDA GPU: the local backend end to end (subprocess worker, lock, crash recovery, ab stage).

Skipped without CUDA; run on the device machine with `python -m pytest -q -o addopts= -m gpu tests/test_gpu.py`.
"""
from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

from autogk_git import config as config_mod  # noqa: E402
from autogk_git.bench.backends import local  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
DEF = json.loads((DATA / "scale" / "definition.json").read_text())
WLS = [json.loads(l)["workload"] for l in (DATA / "scale" / "workloads.jsonl").read_text().splitlines()]
CRASH = '''import triton
import triton.language as tl


@triton.jit
def _k(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs * 1000000007, 1.0)


def run(x, bias, scale, out):
    _k[(1024,)](out, x.numel(), BLOCK=1024)
'''


def src(name: str) -> dict:
    return {"kernel.py": (DATA / "cheats" / f"{name}.py").read_text()}


def job(stage: str, sources: dict, workloads=None, **settings) -> dict:
    return {"version": 1, "stage": stage, "definition": DEF, "workloads": workloads or WLS[:2], "sources": sources,
            "generator": None, "blob_root": ".", "seed": 5,
            "settings": {"trials": 3, "reps": 10, "warmup": 2, **settings}}


@pytest.fixture
def backend(tmp_path, monkeypatch):
    monkeypatch.setenv(local.LOCK_DIR_ENV, str(tmp_path / "locks"))
    cfg = config_mod.parse({"bench": {"min_rounds": 3, "max_rounds": 6, "gpu": "0"}})
    return local.LocalBackend(cfg)


def test_ab_stage_times_parent_and_candidate_with_an_interval(backend):
    out = backend.run(job("ab", {"parent": src("honest"), "candidate": src("honest")}), 300)
    ab = out["ab"]
    assert ab["rounds"] >= 3 and ab["ci_low"] <= ab["ratio"] <= ab["ci_high"]
    assert ab["timer"] == "cupti" and ab["bandwidth_gbs"] > 100
    c = out["labels"]["candidate"][WLS[0]["uuid"]]
    assert c["status"] == "PASSED" and c["latency_us"] > 0 and c["host_latency_us"] >= c["latency_us"] * 0.5, c
    assert len(c["samples_us"]) == ab["rounds"] and "ratio_vs_parent" in c and c["floor_us"] > 0
    assert out["gpu_s"] > 0 and out["environment"]["gpu"]


def test_the_cudagraph_timer_agrees_with_cupti_on_the_scale(tmp_path, monkeypatch):
    monkeypatch.setenv(local.LOCK_DIR_ENV, str(tmp_path / "locks"))
    lat = {}
    for timer in ("cupti", "cudagraph"):
        cfg = config_mod.parse({"bench": {"min_rounds": 3, "max_rounds": 3, "gpu": "0", "timer": timer}})
        out = local.LocalBackend(cfg).run(job("stride", {"candidate": src("honest")}, workloads=WLS[3:4]), 300)
        c = out["labels"]["candidate"][WLS[3]["uuid"]]
        assert c["method"] == timer and out["timing"]["timer"] == timer
        lat[timer] = c["latency_us"]
    assert 0.3 < lat["cupti"] / lat["cudagraph"] < 3


def test_cheats_are_rejected_on_the_gpu(backend):
    srcs = {n: src(n) for n in ("cache_by_pointer", "partial_write", "changes_input", "early_return_seen")}
    out = backend.run(job("quick", srcs), 300)
    for name, wls in out["labels"].items():
        for r in wls.values():
            assert r["status"] in ("INCORRECT_NUMERICAL", "INPUT_MODIFIED"), (name, r)
    # Without the stress sets, whose extra calls would catch it before it is timed: the timed path here.
    j = job("ab", {"parent": src("honest"), "candidate": src("lazy_when_timed")})
    j["settings"]["stress"] = False
    lazy = backend.run(j, 300)
    for r in lazy["labels"]["candidate"].values():
        assert r["status"] == "INCORRECT_NUMERICAL" and "timed" in r["message"]


def test_a_crashing_kernel_is_a_status_and_the_next_job_runs(backend):
    out = backend.run(job("quick", {"crash": {"kernel.py": CRASH}, "honest": src("honest")}), 300)
    assert all(r["status"] == "RUNTIME_ERROR" for r in out["labels"]["crash"].values())
    assert all(r["status"] == "PASSED" for r in out["labels"]["honest"].values())
    # The judge starts the crashed kernel's process again for each workload: one job attempt suffices.
    assert all("CUDA" in r["message"] or "died" in r["message"] for r in out["labels"]["crash"].values())
    again = backend.run(job("quick", {"honest": src("honest")}), 300)
    assert all(r["status"] == "PASSED" for r in again["labels"]["honest"].values())


def test_stride_reports_speedup_against_the_reference(backend):
    out = backend.run(job("stride", {"candidate": src("honest")}, workloads=WLS[3:4]), 300)
    c = out["labels"]["candidate"][WLS[3]["uuid"]]
    assert c["status"] == "PASSED" and c["speedup_vs_reference"] > 0 and c["reference_latency_us"] > 0
    assert out["timing"]["baseline"] == "reference"


def test_one_job_per_gpu_at_a_time(backend, monkeypatch):
    spans = []
    real = local.runner.run_worker

    def timed(*a, **k):
        t0 = time.monotonic()
        try:
            return real(*a, **k)
        finally:
            spans.append((t0, time.monotonic()))

    monkeypatch.setattr(local.runner, "run_worker", timed)
    ts = [threading.Thread(target=backend.run, args=(job("quick", {"honest": src("honest")}, workloads=WLS[:1]), 300))
          for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    (a0, a1), (b0, b1) = sorted(spans)
    assert b0 >= a1  # the second worker started only after the first released GPU 0
