"""Triton's CPU interpreter with and without the judge's once-a-launch set-up (bench/judge/interp.py).

    .venv/bin/python benchmarks/interp_once.py            # the bundled kernels, starting and best
    .venv/bin/python benchmarks/interp_once.py --json

Each kernel runs in a fresh process under TRITON_INTERPRET=1, once as Triton comes and once with
`patch_once()`, on the first CPU-sized workloads of its target's own set (inputs from the target's
generator, or N(0,1) where it has none; a fixed seed); the script prints the CPU seconds of the
kernel's calls (imports and inputs left out) and checks that both gave the same outputs, bit for bit.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "autogk_git"
TARGETS = ["rmsnorm_h4096", "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
           "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"]

RUN = r"""
import importlib.util, json, os, sys, time
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "1":
    from autogk_git.bench.judge.interp import patch_once
    assert patch_once()
import torch
ex, kernel, n, out = sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
gen = load(f"{ex}/inputs.py", "gen") if os.path.exists(f"{ex}/inputs.py") else None
ker = load(kernel, "ker")
d = json.load(open(f"{ex}/definition.json"))
consts = {k: a["value"] for k, a in d["axes"].items() if a.get("type") == "const"}
wls = [json.loads(l)["workload"] for l in open(f"{ex}/workloads.jsonl")][:n]
got, spent = [], 0.0
for i, wl in enumerate(wls):
    axes = {**consts, **wl["axes"]}
    if gen is not None:
        x = gen.generate(dict(axes), d, 100 + i, "cpu", workload=wl)
    else:  # N(0,1) of each input's shape and dtype (rmsnorm: no generator of its own)
        g = torch.Generator().manual_seed(100 + i)
        x = {k: torch.randn([axes[a] if isinstance(a, str) else a for a in spec["shape"]], generator=g).to(
            getattr(torch, spec["dtype"])) for k, spec in d["inputs"].items()}
    outs = []
    for name, spec in d["outputs"].items():
        shape = [axes[a] if isinstance(a, str) else a for a in spec["shape"]]
        outs.append(torch.zeros(shape, dtype=getattr(torch, spec["dtype"])))
    t = time.process_time()
    ker.run(*[x[k] for k in d["inputs"]], *outs)
    spent += time.process_time() - t
    got.append(outs)
torch.save(got, out)
print(json.dumps({"cpu_s": round(spent, 2), "workloads": len(wls)}))
"""


def one(kernel: Path, target: str, once: bool, n: int, out: Path) -> dict:
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    p = subprocess.run([sys.executable, "-c", RUN, str(REPO), "1" if once else "0", str(PKG / "examples" / target),
                        str(kernel), str(n), str(out)], capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode != 0:
        raise SystemExit(f"{kernel} ({'once' if once else 'as Triton comes'}) failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", type=int, default=6, help="the first N workloads of each target's set (6)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import torch
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for target in TARGETS:
            for which, kernel in (("start", PKG / "examples" / target / "kernel.py"),
                                  ("best", PKG / "best_kernels" / target / "kernel.py")):
                a, b = Path(d) / "triton.pt", Path(d) / "once.pt"
                plain = one(kernel, target, False, args.workloads, a)
                fast = one(kernel, target, True, args.workloads, b)
                same = all(torch.equal(x, y) for xs, ys in zip(torch.load(a), torch.load(b), strict=True)
                           for x, y in zip(xs, ys, strict=True))
                rows.append({"target": target, "kernel": which, "workloads": plain["workloads"],
                             "cpu_s_triton": plain["cpu_s"], "cpu_s_once": fast["cpu_s"], "same_outputs": same})
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            ratio = r["cpu_s_once"] / r["cpu_s_triton"]
            print(f"{r['target'][:24]:24s} {r['kernel']:5s} {r['workloads']} workloads: {r['cpu_s_triton']:6.1f} "
                  f"CPU-s as Triton comes, {r['cpu_s_once']:6.1f} once a launch ({ratio:.2f}x); "
                  f"outputs {'identical' if r['same_outputs'] else 'DIFFER'}")
    return 0 if all(r["same_outputs"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
