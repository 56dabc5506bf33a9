"""Is a disagreement between autogk's per-workload ratio and an independent timer's noise between jobs,
or a bias of the judge? The bundled rmsnorm kernel (the start) against a tuned copy of it (the best the
tuner finds on a GPU: BLOCK_SIZE 2048, NUM_WARPS 8), judged by autogk's own ab job several times, both
ways round (start as the parent, then as the candidate: a bias of the label shows as an asymmetry), and
timed in between by this script's own CUPTI code (dsa_bench.cupti_median) after a read flush, after the
judge's kind of flush (a write), and after a write flush with the inputs rotated over as many copies as
the judge's window holds (dsa_bench.cupti_median_rotated; the run of 2026-12-05 on an H100 used this
script's own rotation over up to 8 copies, where the judge's window holds 7 at batch 8192).

    python benchmarks/agreement_probe.py --out DIR [--jobs 4] [--min-batch 1024] [--edit BLOCK_SIZE=2048,NUM_WARPS=8]

Prints, per workload, each job's best/start ratio with its interval, and each independent figure's;
writes DIR/agreement_probe.json. Needs torch, triton and a CUDA GPU.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
TARGET = ROOT / "autogk_git" / "examples" / "rmsnorm_h4096"


def edited(src: str, edit: str) -> str:
    for part in filter(None, edit.split(",")):
        name, value = part.split("=")
        src, n = re.subn(rf"^{name} = \S+", f"{name} = {value}", src, count=1, flags=re.M)
        if n != 1:
            raise SystemExit(f"--edit: {name} is not a top-level assignment of the kernel")
    return src


def ab_job(parent: str, candidate: str, workloads: list) -> dict:
    from autogk_git import config as config_mod
    from autogk_git.bench import job as job_mod
    definition = json.loads((TARGET / "definition.json").read_text())
    cfg = config_mod.parse({})
    settings = {**job_mod.settings_for(cfg), **job_mod.timed_settings(cfg)}
    return {"version": 1, "stage": "ab", "definition": definition, "workloads": workloads,
            "sources": {"parent": {"kernel.py": parent}, "candidate": {"kernel.py": candidate}},
            "generator": None, "blob_root": str(TARGET), "settings": settings, "seed": int(time.time())}


def load(src: str, name: str):
    d = Path(tempfile.mkdtemp(prefix=f"probe_{name}_"))
    (d / "kernel.py").write_text(src)
    spec = importlib.util.spec_from_file_location(f"probe_{name}", d / "kernel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def independent(kernels: dict, batches: list, reps: int) -> dict:
    import torch
    import dsa_bench as dsa
    read, write = dsa.Flush(), dsa.WriteFlush()
    out: dict = {}
    for b in batches:
        x = torch.randn(b, 4096, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        row = {}
        for tag, mod in kernels.items():
            mod.run(x, w, y)
            torch.cuda.synchronize()
            row[f"{tag}_read"] = dsa.cupti_median(lambda m=mod: m.run(x, w, y), read, reps)
            row[f"{tag}_write"] = dsa.cupti_median(lambda m=mod: m.run(x, w, y), write, reps)
            # each call on its own copy of the inputs and outputs, as many as the judge's window holds
            row[f"{tag}_write_rotated"], row["copies"] = dsa.cupti_median_rotated(
                mod.run, [x, w], lambda: [torch.empty_like(x)], write, reps)
        for kind in ("read", "write", "write_rotated"):
            row[f"ratio_{kind}"] = row[f"best_{kind}"] / row[f"start_{kind}"]
        out[str(b)] = row
    torch.cuda.empty_cache()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--min-batch", type=int, default=1024)
    ap.add_argument("--edit", default="BLOCK_SIZE=2048,NUM_WARPS=8")
    ap.add_argument("--reps", type=int, default=40)
    a = ap.parse_args()
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    from autogk_git.bench import runner
    start = (TARGET / "kernel.py").read_text()
    best = edited(start, a.edit)
    wls = [json.loads(line)["workload"] for line in (TARGET / "workloads.jsonl").read_text().splitlines()]
    wls = [w for w in wls if w["axes"]["batch_size"] >= a.min_batch]
    batch_of = {w["uuid"]: w["axes"]["batch_size"] for w in wls}
    batches = sorted(batch_of.values())
    kernels = {"start": load(start, "start"), "best": load(best, "best")}
    res: dict = {"edit": a.edit, "batches": batches, "jobs": [], "independent": []}
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}

    def write() -> None:
        (out_dir / "agreement_probe.json").write_text(json.dumps(res, indent=1))

    t0 = time.monotonic()
    res["independent"].append(independent(kernels, batches, a.reps))
    write()
    for j in range(a.jobs):
        flipped = j % 2 == 1  # best as the parent: its ratio is start/best, inverted below
        job = ab_job(best, start, wls) if flipped else ab_job(start, best, wls)
        t = time.monotonic()
        out = runner.run_worker(job, env, 600)
        rec = {"flipped": flipped, "wall_s": round(time.monotonic() - t, 1), "attempts": out.get("attempts"),
               "rounds": (out.get("ab") or {}).get("rounds"), "workloads": {}}
        for w in (out.get("ab") or {}).get("workloads", []):
            lr = w.get("log_ratios") or []
            if not lr:
                continue
            sign = -1.0 if flipped else 1.0
            m = sign * math.fsum(lr) / len(lr)
            sd = statistics.stdev(lr) if len(lr) > 1 else float("nan")
            half = 1.96 * sd / math.sqrt(len(lr))
            rec["workloads"][str(batch_of[w["uuid"]])] = {
                "ratio": math.exp(m), "lo": math.exp(m - half), "hi": math.exp(m + half), "rounds": len(lr),
                "start_us": w["latency_us"] if flipped else w["base_latency_us"],
                "best_us": w["base_latency_us"] if flipped else w["latency_us"]}
        res["jobs"].append(rec)
        write()
        if j % 2 == 1:
            res["independent"].append(independent(kernels, batches, a.reps))
            write()
    res["wall_s"] = round(time.monotonic() - t0, 1)
    write()
    print(f"edit {a.edit}; {a.jobs} ab jobs (odd ones flipped); wall {res['wall_s']} s")
    for b in map(str, batches):
        js = "  ".join(f"{r['workloads'][b]['ratio']:.3f}[{r['workloads'][b]['lo']:.3f},{r['workloads'][b]['hi']:.3f}]"
                       f"{'f' if r['flipped'] else ''} ({r['workloads'][b]['start_us']:.1f}->{r['workloads'][b]['best_us']:.1f})"
                       for r in res["jobs"] if b in r["workloads"])
        ind = "  ".join(f"r {i[b]['ratio_read']:.3f} w {i[b]['ratio_write']:.3f} wr {i[b]['ratio_write_rotated']:.3f} "
                        f"({i[b]['start_write_rotated']:.1f}->{i[b]['best_write_rotated']:.1f})" for i in res["independent"])
        print(f"batch {b}:\n  autogk {js}\n  indep  {ind}")


if __name__ == "__main__":
    main()
