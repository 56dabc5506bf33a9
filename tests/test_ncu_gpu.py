"""On the H200 (or any CUDA GPU with Nsight Compute): the real `ncu` profiles the bundled rmsnorm kernel
through bench/ncu.py, and its CSV reads into the summary the agents see.

    python -m pytest -q -o addopts= -m gpu tests/test_ncu_gpu.py
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from autogk_git.bench import ncu  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
              pytest.mark.skipif(ncu.ncu_path() is None, reason="needs ncu (Nsight Compute) on PATH")]

EX = Path(__file__).resolve().parents[1] / "autogk_git" / "examples" / "rmsnorm_h4096"


def test_real_ncu_profiles_the_bundled_rmsnorm_kernel():
    definition = json.loads((EX / "definition.json").read_text())
    rows = [json.loads(ln)["workload"] for ln in (EX / "workloads.jsonl").read_text().splitlines() if ln.strip()]
    big = max(rows, key=lambda w: w["axes"]["batch_size"])
    job = {"version": 1, "stage": "profile", "definition": definition, "workloads": [big],
           "sources": {"profiled": {"kernel.py": (EX / "kernel.py").read_text()}}, "generator": None,
           "blob_root": ".", "seed": 1, "settings": {}}
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    (row,) = ncu.profile(job, ncu.ncu_path(), timeout_s=300, env=env)  # ncu's replay passes: seconds, not minutes
    assert "error" not in row, row
    (k,) = [k for k in row["kernels"] if "rms" in k["name"].lower()] or row["kernels"][:1]
    print(json.dumps(row, indent=1))
    assert k["duration_us"] and 1.0 < k["duration_us"] < 10_000, k
    assert k["dram_pct"] and k["dram_pct"] > 10, k  # ~240 MB moved at batch 14509: DRAM is busy
    assert k["sm_pct"] is not None and k["achieved_occupancy_pct"] and k["registers"], k
    assert k["limiter"] in ("memory", "compute", "latency")
    assert "limiter:" in ncu.kernel_line(k)
