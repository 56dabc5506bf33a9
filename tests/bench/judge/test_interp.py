"""bench/judge/interp.py: Triton's interpreter patches triton.language once a launch, not once a helper
call, with the same results; and the judge's kernel processes on the CPU run with it."""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from autogk_git.bench import runner
from autogk_git.bench.judge.status import Status

from conftest import REPO, interpreted

DATA = Path(__file__).resolve().parents[2] / "data" / "scale"

# A kernel with helpers of its own (one calling another) and of the library's (tl.max, tl.sum: their module
# sees triton.language.core, not triton.language), launched twice, then a launch that fails and one after it.
SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[3])
import torch, triton, triton.language as tl
from triton.runtime import interpreter as ip
once = sys.argv[1] == "1"
real, count = ip._patch_lang, [0]
def counted(fn):
    count[0] += 1
    return real(fn)
ip._patch_lang = counted
if once:
    from autogk_git.bench.judge.interp import patch_once
    assert patch_once() and patch_once()  # a second call changes nothing

@triton.jit
def _relu(x):
    return tl.maximum(x, 0.0)

@triton.jit
def _soft(x):
    y = _relu(x) + 1.0
    return y / tl.sum(y, axis=0)

@triton.jit
def _k(x_ptr, out_ptr, m_ptr, N: tl.constexpr, BAD: tl.constexpr):
    o = tl.arange(0, N)
    x = tl.load(x_ptr + tl.program_id(0) * N + o)
    for i in tl.static_range(3):
        x = _soft(x * (i + 1))
    tl.store(out_ptr + tl.program_id(0) * N + o, x)
    tl.store(m_ptr + tl.program_id(0), tl.max(x, axis=0))
    if BAD:
        tl.static_assert(False, "a failing launch")

x = torch.randn(6, 16, generator=torch.Generator().manual_seed(0))
outs = []
for launch in range(2):
    out, m = torch.empty_like(x), torch.empty(6)
    _k[(6,)](x, out, m, 16, False)
    outs.append((out, m))
n_two = count[0]
try:
    _k[(6,)](x, torch.empty_like(x), torch.empty(6), 16, True)
    failed = ""
except Exception as e:
    failed = type(e).__name__
out, m = torch.empty_like(x), torch.empty(6)
_k[(6,)](x, out, m, 16, False)
outs.append((out, m))
torch.save(outs, sys.argv[2])
print(json.dumps({"patches_two_launches": n_two, "failed": failed,
                  "load_restored": tl.load.__name__ == "load" and hasattr(tl.load, "__triton_builtin__")}))
"""


def run(tmp_path, once: bool) -> tuple[dict, list]:
    path = tmp_path / f"outs{int(once)}.pt"
    out = interpreted(SCRIPT, int(once), path, REPO, timeout=300, once=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), torch.load(path)


def test_a_launch_patches_the_language_once_per_module_with_the_same_results(tmp_path):
    fast, fast_outs = run(tmp_path, True)
    slow, slow_outs = run(tmp_path, False)
    # Triton's own: the launch's patch, then each helper call's, in each of 6 programs (3 x (_soft, _relu,
    # tl.sum) + tl.max = 10 a program). Once a launch: the launch's patch and one for the library's module.
    assert slow["patches_two_launches"] == 2 * (1 + 6 * 10), slow
    assert fast["patches_two_launches"] == 2 * 2, fast
    for (a, am), (b, bm) in zip(fast_outs, slow_outs, strict=True):
        assert torch.equal(a, b) and torch.equal(am, bm)
    assert fast["failed"] == slow["failed"] != ""  # a failing launch fails alike, and the next one still runs
    assert fast["load_restored"] and slow["load_restored"]  # the launch's restore is Triton's own


# The honest cheat-suite kernel, passing only where its process set the interpreter up once a launch.
HONEST = (DATA.parent / "cheats" / "honest.py").read_text()
INTERP_PROBE = "from triton.runtime import interpreter as _ip\n" + HONEST.replace(
    "def run(x, bias, scale, out):\n",
    "def run(x, bias, scale, out):\n"
    "    assert getattr(_ip, '_autogk_patch_once', False), 'the interpreter is not set up once a launch'\n")
assert INTERP_PROBE.count("_autogk_patch_once") == 1, "honest.py's run() changed: update INTERP_PROBE"


def test_the_judges_kernel_processes_on_the_cpu_run_the_interpreter_set_up_once():
    workloads = [json.loads(line)["workload"] for line in (DATA / "workloads.jsonl").read_text().splitlines()][:2]
    job = {"stage": "quick", "definition": json.loads((DATA / "definition.json").read_text()),
           "workloads": workloads, "sources": {"candidate": {"kernel.py": INTERP_PROBE}}, "generator": None,
           "blob_root": str(DATA), "settings": {"trials": 2, "device": "cpu"}, "seed": 7}
    out = runner.run_worker(job, dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES=""), 300)
    res = out["labels"]["candidate"]
    assert [res[w["uuid"]]["status"] for w in workloads] == [Status.PASSED] * 2, res


def test_the_cpu_profiler_runs_the_interpreter_set_up_once_too(project):
    from autogk_git.bench import profiler
    from autogk_git.project import Project
    from autogk_git.record.kernels import sources_at
    from autogk_git.git import repo
    p = Project(project)
    sha = repo.rev(p.root, p.trunk)
    sources = dict(sources_at(p.root, p.target("scale"), sha), **{"kernel.py": INTERP_PROBE})
    path = profiler.profile_target(p, p.target("scale"), sources, sha, calls=1)
    assert "host time only" in path.read_text()  # profiled: the probe's assert held in the profiler's process
