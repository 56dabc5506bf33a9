"""Kernels that patch the timer in their own process, against an honest parent, through the worker's
ab job (the judge and two kernel processes, as one experiment runs them).

    python benchmarks/tamper_gpu.py --out DIR [--kernel-process-py PATH]

Prints, per planted kernel (tests/data/cheats/), the candidate's status and its claimed ratio to the
parent on each workload, and writes DIR/tamper.json. --kernel-process-py runs the kernel processes from
another copy of `autogk_git/bench/judge/kernel_process.py` (e.g. one without the seal), to show what
the same kernels claimed there. Needs torch, triton and a CUDA GPU (on CPU: the host timer).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = REPO / "tests" / "data"
CHEATS = ["torch_honest", "patches_timer", "replaces_time_batch", "scales_profiler_times", "shrinks_flush"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--kernel-process-py", type=Path, help="another kernel_process.py for the kernel processes")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    from autogk_git.bench import runner
    device = "cuda" if torch.cuda.is_available() else "cpu"
    definition = json.loads((DATA / "scale" / "definition.json").read_text())
    wls = [{"uuid": f"00000000-0000-4000-8000-0000000000{k:02x}", "axes": {"n": n},
            "inputs": {"x": {"type": "random"}, "bias": {"type": "random"}, "scale": {"type": "scalar", "value": 1.5}}}
           for k, n in enumerate((1 << 16, 1 << 24))]
    settings = {"device": device, "timed": True, "trials": 2, "reps": 20, "warmup": 3, "min_rounds": 3,
                "max_rounds": 3, "timer": "cupti"}
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    extra = {"kernel_process.py": args.kernel_process_py} if args.kernel_process_py else None
    rows = []
    for name in CHEATS:
        src = {"kernel.py": (DATA / "cheats" / f"{name}.py").read_text()}
        honest = {"kernel.py": (DATA / "cheats" / "torch_honest.py").read_text()}
        job = {"version": 1, "stage": "ab", "definition": definition, "workloads": wls, "generator": None,
               "blob_root": ".", "seed": 5, "settings": settings,
               "sources": {"parent": honest, "candidate": src}}
        out = runner.run_worker(job, env, 600, extra_files=extra)
        for w in wls:
            c = out["labels"]["candidate"].get(w["uuid"], {})
            row = {"kernel": name, "n": w["axes"]["n"], "status": c.get("status"),
                   "ratio_vs_parent": c.get("ratio_vs_parent"), "latency_us": c.get("latency_us"),
                   "message": (c.get("message") or "")[:200]}
            rows.append(row)
            ratio = f"{row['ratio_vs_parent']:.3f}" if row["ratio_vs_parent"] else "-"
            print(f"{name:24s} n={row['n']:>9d} {row['status']:10s} ratio {ratio:>6s}  {row['message'][:110]}",
                  flush=True)
    (args.out / "tamper.json").write_text(json.dumps({"device": device, "kernel_process_py": str(args.kernel_process_py or ""),
                                                       "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
