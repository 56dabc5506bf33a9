"""The judge's clock against each label's own timer, per round, for honest pairs (no verdict).

    PYTHONPATH=$PWD python benchmarks/witness_diag.py --out DIR [--rounds 6] [--timer cupti] [--null-window]

Runs the judge's ab job (two kernel processes, the judge's clock on both) for two honest pairs, a
Triton kernel against itself and against a multi-kernel torch version of it, on sizes from 100 to
16M elements of tests/data/scale, and writes every label's record (status, message, latency, the
witness lists: parent, claimed, seen, windows) to DIR/witness_diag.json, with one line per workload
on stdout. Needs a CUDA GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from autogk_git.bench import runner  # noqa: E402

DATA = ROOT / "tests" / "data"
DEF = json.loads((DATA / "scale" / "definition.json").read_text())
SIZES = (100, 4096, 262144, 1 << 21, 1 << 24)


def workload(n: int) -> dict:
    return {"uuid": f"00000000-0000-4000-8000-{n:012d}", "axes": {"n": n},
            "inputs": {"x": {"type": "random"}, "bias": {"type": "random"}, "scale": {"type": "scalar", "value": 1.5}}}


def src(name: str) -> dict:
    return {"kernel.py": (DATA / "cheats" / f"{name}.py").read_text()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--timer", default="cupti")
    ap.add_argument("--pairs", default="honest:honest,honest:torch_honest")
    ap.add_argument("--null-window", action="store_true",
                    help="each label's null window too (clock_null_window): the clock less each process's fixed "
                         "cost per window, printed beside the raw figure")
    a = ap.parse_args()
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    wls = [workload(n) for n in SIZES]
    dump = {}
    for pair in a.pairs.split(","):
        p, c = pair.split(":")
        s = {"device": "cuda", "trials": 3, "reps": 20, "warmup": 2, "min_rounds": a.rounds,
             "max_rounds": a.rounds, "timer": a.timer, "timed": True, "stress": False,
             "clock_null_window": a.null_window}
        job = {"version": 1, "stage": "ab", "definition": DEF, "workloads": wls,
               "sources": {"parent": src(p), "candidate": src(c)}, "generator": None, "blob_root": ".",
               "seed": 3, "settings": s}
        out = runner.run_worker(job, env, 400)
        dump[pair] = out
        for wl in wls:
            rp = out.get("labels", {}).get("parent", {}).get(wl["uuid"], {})
            rc = out.get("labels", {}).get("candidate", {}).get(wl["uuid"], {})
            print(f"{pair} n={wl['axes']['n']}: parent {rp.get('status')} {rp.get('latency_us')} | "
                  f"candidate {rc.get('status')} {rc.get('latency_us')} ratio {rc.get('ratio_vs_parent')} "
                  f"clock {rc.get('witness_latency_us')} null-corrected {rc.get('witness_null_us')} | "
                  f"{rc.get('message', '')[:300]}", flush=True)
    (out_dir / "witness_diag.json").write_text(json.dumps(dump, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
