"""On a CUDA GPU: a candidate faster on most workloads but slower on the largest is reverted by the
per-workload guard, though the geometric mean over all workloads alone would keep it.

Skipped without CUDA; run on the device machine with `python -m pytest -q -o addopts= -m gpu tests/test_verdict_gpu.py`.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

DATA = Path(__file__).resolve().parent / "data"
SIZES = [1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24]

KERNEL = '''import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, b_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x * scale + b, mask=mask)


def passes(n):
    return {passes}


def run(x, bias, scale, out):
    n = x.numel()
    for _ in range(passes(n)):  # each pass writes the same, correct output: only the time differs
        _scale_kernel[(triton.cdiv(n, 1024),)](x, bias, out, n, scale, BLOCK=1024)
'''


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_a_slowdown_on_the_largest_workload_hidden_by_the_geomean_is_reverted(tmp_path, monkeypatch):
    from autogk_git import config as config_mod
    from autogk_git.bench.backends import local
    from autogk_git.bench.stages import benchmark
    from autogk_git.loop.verdict import PairedRatioRule
    from autogk_git.record import kernels
    from autogk_git.project import Project

    monkeypatch.setenv(local.LOCK_DIR_ENV, str(tmp_path / "locks"))
    root = tmp_path / "proj"
    target = root / "kernels" / "scale"
    target.mkdir(parents=True)
    (root / ".autogk.toml").write_text('[bench]\nbackend = "local"\nmin_rounds = 5\nmax_rounds = 12\n'
                                       '[tracking]\nenabled = false\n')
    (target / "definition.json").write_text((DATA / "scale" / "definition.json").read_text())
    wls = [{"definition": "scale", "workload": {"uuid": f"{i:08d}-0000-4000-8000-000000000000", "axes": {"n": n},
            "inputs": {"x": {"type": "random"}, "bias": {"type": "random"}, "scale": {"type": "scalar", "value": 1.5}}}}
           for i, n in enumerate(SIZES)]
    (target / "workloads.jsonl").write_text("".join(json.dumps(w) + "\n" for w in wls))
    git(root, "init", "-q", "-b", "main")
    for k, v in (("user.name", "T"), ("user.email", "t@example.com")):
        git(root, "config", k, v)
    # Parent: two passes everywhere. Candidate: one pass, except three on the largest workload.
    (target / "kernel.py").write_text(KERNEL.replace("{passes}", "2"))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "parent")
    parent = git(root, "rev-parse", "HEAD").strip()
    (target / "kernel.py").write_text(KERNEL.replace("{passes}", f"3 if n >= {SIZES[-1]} else 1"))
    git(root, "commit", "-qam", "candidate")
    cand = git(root, "rev-parse", "HEAD").strip()

    p = Project(root)
    backend = local.LocalBackend(p.config)
    t = p.target("scale")
    bench = benchmark(t, backend, kernels.sources_at(p.root, t, cand), kernels.sources_at(p.root, t, parent),
                      p.config, seed=11)
    assert bench["correct"] and list(bench["stages"]) == ["ab"], json.dumps(bench, default=str)[:4000]  # one job
    assert bench["coverage"]["timed"] == len(SIZES)  # every workload timed, not only the stride subset
    v = PairedRatioRule().decide(bench, p.config)
    (tmp_path / "verdict.json").write_text(json.dumps(v, indent=1))
    per = {w["uuid"]: w["ratio"] for w in v["per_workload"]}
    largest = wls[-1]["workload"]["uuid"]
    print(json.dumps({"decision": v["decision"], "ratio": v["ratio"], "per_workload": per}, indent=1))
    assert v["ratio"] < 0.95 and v["ci_high"] < 1 - p.config.bench.min_effect  # the geomean alone: keep
    assert per[largest] > 1.2
    assert v["decision"] == "revert" and v["outcome"] == "guard"
    assert f"n={SIZES[-1]}" in v["reason"] and "slower than its parent by" in v["reason"]
    # With the guard off the same figures keep it: the guard, not the objective, caught it.
    loose = config_mod.parse({"bench": {"backend": "local", "min_rounds": 5, "max_rounds": 12, "guard": 0.9}})
    assert PairedRatioRule().decide(bench, loose)["decision"] == "keep"
