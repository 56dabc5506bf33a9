"""Wall seconds of one bench job on CPU (Triton interpreter) for the bundled rmsnorm target.

    PYTHONPATH=. python benchmarks/judge_speed.py [--repeats 3] [--labels 2]

The job is what the interpret backend runs: every workload within `[bench] cpu_max_numel`
(6 of 11 for rmsnorm_h4096), `trials` 3, the bundled kernel as `candidate` (and as `parent` with
--labels 2, as an ab job carries both). Prints one line per repeat and the median.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autogk_git.bench import runner  # noqa: E402
from autogk_git.bench.job import numel  # noqa: E402

TARGET = ROOT / "autogk_git" / "examples" / "rmsnorm_h4096"


def job(labels: int) -> dict:
    definition = json.loads((TARGET / "definition.json").read_text())
    wls = [json.loads(line)["workload"] for line in (TARGET / "workloads.jsonl").read_text().splitlines()]
    wls = [w for w in wls if numel(definition, w) <= 1 << 20]
    kernel = {"kernel.py": (TARGET / "kernel.py").read_text()}
    sources = {"candidate": kernel} if labels == 1 else {"parent": kernel, "candidate": kernel}
    return {"version": 1, "stage": "quick", "definition": definition, "workloads": wls, "sources": sources,
            "generator": None, "blob_root": str(TARGET), "settings": {"trials": 3, "device": "cpu"}, "seed": 1}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--labels", type=int, default=2, choices=(1, 2))
    a = ap.parse_args()
    j = job(a.labels)
    env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    walls = []
    for r in range(a.repeats):
        t0 = time.perf_counter()
        out = runner.run_worker(j, env, 600)
        wall = time.perf_counter() - t0
        walls.append(wall)
        st = {s["status"] for w in out["labels"].values() for s in w.values()}
        print(f"repeat {r + 1}: {wall:.2f} s, {len(j['workloads'])} workloads x {len(j['sources'])} labels, "
              f"statuses {sorted(st)}, attempts {out['attempts']}", flush=True)
    print(f"median {statistics.median(walls):.2f} s")


if __name__ == "__main__":
    main()
