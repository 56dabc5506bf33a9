"""Wall seconds of one bench job for the bundled rmsnorm target, on CPU or on a GPU.

    python benchmarks/judge_speed.py [--repeats 3] [--labels 2] [--device cpu|cuda] [--src DIR]

CPU: what the interpret backend runs: every workload within `[bench] cpu_max_numel` (6 of 11 for
rmsnorm_h4096), `trials` 3, the bundled kernel as `candidate` (and as `parent` with --labels 2, as
an ab job carries both). cuda: the ab stage as the local backend runs it (the config's defaults,
all 11 workloads, parent and candidate both the bundled kernel). --src runs another checkout's
autogk_git (e.g. the code before a change). Prints one line per repeat and the median.
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
TARGET = ROOT / "autogk_git" / "examples" / "rmsnorm_h4096"


def job(labels: int, device: str) -> dict:
    from autogk_git import config as config_mod
    from autogk_git.bench import job as job_mod
    definition = json.loads((TARGET / "definition.json").read_text())
    wls = [json.loads(line)["workload"] for line in (TARGET / "workloads.jsonl").read_text().splitlines()]
    kernel = {"kernel.py": (TARGET / "kernel.py").read_text()}
    sources = {"candidate": kernel} if labels == 1 else {"parent": kernel, "candidate": kernel}
    if device == "cpu":
        wls = [w for w in wls if job_mod.numel(definition, w) <= 1 << 20]
        return {"version": 1, "stage": "quick", "definition": definition, "workloads": wls, "sources": sources,
                "generator": None, "blob_root": str(TARGET), "settings": {"trials": 3, "device": "cpu"}, "seed": 1}
    cfg = config_mod.parse({})
    settings = {**job_mod.settings_for(cfg), **job_mod.timed_settings(cfg)}
    return {"version": 1, "stage": "ab", "definition": definition, "workloads": wls, "sources": sources,
            "generator": None, "blob_root": str(TARGET), "settings": settings, "seed": 1}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--labels", type=int, default=2, choices=(1, 2))
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--src", default=str(ROOT), help="the checkout whose autogk_git runs the job")
    a = ap.parse_args()
    sys.path.insert(0, a.src)
    from autogk_git.bench import runner
    print(f"autogk_git from {runner.__file__}", flush=True)
    j = job(a.labels, a.device)
    if a.device == "cpu":
        env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    else:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    walls = []
    for r in range(a.repeats):
        t0 = time.perf_counter()
        out = runner.run_worker(j, env, 600)
        wall = time.perf_counter() - t0
        walls.append(wall)
        st = {s["status"] for w in out["labels"].values() for s in w.values()}
        extra = ""
        if "ab" in out:
            extra = f", ab rounds {out['ab'].get('rounds')}, timing_s {out['ab'].get('timing_s')}"
        print(f"repeat {r + 1}: {wall:.2f} s, {len(j['workloads'])} workloads x {len(j['sources'])} labels, "
              f"statuses {sorted(st)}, attempts {out['attempts']}{extra}", flush=True)
    print(f"median {statistics.median(walls):.2f} s")


if __name__ == "__main__":
    main()
