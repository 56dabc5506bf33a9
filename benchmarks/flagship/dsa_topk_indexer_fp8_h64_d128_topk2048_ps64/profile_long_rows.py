"""Time an indexer attempt's kernels apart on the contest workloads that hold a row over 2048 tokens.

The judge gives one number per workload (the CUPTI kernel time of a call); to choose the next change
to the long-row path one needs its parts: how much is the score kernel, how much the select, how
much each varies from one input draw (seed) to the next and from one round to the next on the same
inputs, and how the select's warp count and the score tile move them. For each such workload, each
seed and each configuration (module constants patched on a fresh import), this runs the attempt's
`run` under torch.profiler and records each kernel's device time per call.

    python benchmarks/flagship/dsa_topk_indexer_fp8_h64_d128_topk2048_ps64/profile_long_rows.py OUT_DIR \
        [--attempt PATH] [--seeds 3] [--rounds 3] [--reps 20]

Writes OUT_DIR/profile_long_rows.md (a table per configuration) and OUT_DIR/profile_long_rows.json.
`--device cpu` (with TRITON_INTERPRET=1) only checks the plumbing: no kernel times, wall time only.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
EXAMPLE = REPO / "autogk_git" / "examples" / HERE.name
DEFAULT_ATTEMPT = HERE / "05_rank_select_spread.py"
# Module constants patched per configuration ({} is the attempt as written); a name the attempt
# lacks makes that configuration be skipped, with a line in the report.
CONFIGS = [{}, {"SELECT_WARPS": 4}, {"SELECT_WARPS": 16}, {"BLOCK_N": 64}, {"SINGLE_MAX": 4096}]


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def kernel_times(fn, reps: int, device: str) -> dict[str, float]:
    """Device time per call (us) of each kernel fn launches, by kernel name; wall time per call on CPU."""
    if device == "cpu":
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return {"wall": (time.perf_counter() - t0) / reps * 1e6}
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    out: dict[str, float] = {}
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None)
        if t is None:
            t = getattr(ev, "cuda_time_total", 0.0)
        if t > 0:
            out[ev.key[:60]] = out.get(ev.key[:60], 0.0) + t / reps
    out["all kernels"] = sum(out.values())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--attempt", type=Path, default=DEFAULT_ATTEMPT)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3, help="measurements per seed (round-to-round spread)")
    ap.add_argument("--reps", type=int, default=20, help="calls per measurement")
    ap.add_argument("--workloads", type=int, default=0, help="first N long-row workloads only (0: all)")
    ap.add_argument("--configs", type=int, default=0, help="first N configurations only (0: all)")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: run this on the GPU machine, or pass --device cpu (with TRITON_INTERPRET=1) "
              "to check the script only", file=sys.stderr)
        return 2
    a.out_dir.mkdir(parents=True, exist_ok=True)
    gen = load(EXAMPLE / "inputs.py", "gen")
    d = json.loads((EXAMPLE / "definition.json").read_text())
    consts = {n: x["value"] for n, x in d["axes"].items() if x.get("type") == "const"}
    rows = [json.loads(line)["workload"] for line in (EXAMPLE / "workloads.jsonl").read_text().splitlines()
            if line.strip()]
    long_wl = [w for w in rows if w["axes"]["max_num_pages"] * 64 > 2048]
    if a.workloads:
        long_wl = long_wl[:a.workloads]
    results = []
    lines = [f"# Kernel times of {a.attempt.name} on the {len(long_wl)} workloads with a long row", "",
             f"us per call (torch.profiler device time), {a.seeds} seeds x {a.rounds} rounds x {a.reps} calls; "
             "each cell: median over seeds and rounds, then [seed spread % | round spread %] "
             "(spread: (max - min) / median of the per-seed medians; of the rounds, worst seed).", ""]
    for cfg in CONFIGS[:a.configs or None]:
        ker = load(a.attempt, "ker")
        missing = [n for n in cfg if not hasattr(ker, n)]
        if missing:
            lines += [f"## {cfg}: skipped ({a.attempt.name} has no {', '.join(missing)})", ""]
            continue
        for n, v in cfg.items():
            setattr(ker, n, v)
        table: dict[str, dict[str, list[list[float]]]] = {}
        for w in long_wl:
            axes = {**consts, **w["axes"]}
            name = ", ".join(f"{k}={v}" for k, v in w["axes"].items())
            per_kernel: dict[str, list[list[float]]] = {}
            for seed in range(a.seeds):
                x = gen.generate(dict(axes), d, seed, a.device, workload=w)
                args = [x[n] for n in d["inputs"]]
                out = torch.empty((axes["batch_size"], 2048), dtype=torch.int32, device=a.device)
                for _ in range(3):  # compile and warm up
                    ker.run(*args, out)
                for _ in range(a.rounds):
                    for kname, t in kernel_times(lambda: ker.run(*args, out), a.reps, a.device).items():
                        per_kernel.setdefault(kname, [[] for _ in range(a.seeds)])[seed].append(t)
            table[name] = per_kernel
            results.append({"config": cfg, "workload": w["axes"], "seq_lens": (w.get("layout") or {}).get("seq_lens"),
                            "times_us": per_kernel})
            print(cfg, name, {k: round(statistics.median(sum(v, [])), 2) for k, v in per_kernel.items()}, flush=True)
        kernels = sorted({k for v in table.values() for k in v}, key=lambda k: (k == "all kernels", k))
        lines += [f"## {cfg or 'as written'}", "", "| workload | " + " | ".join(kernels) + " |",
                  "| --- |" + " --- |" * len(kernels)]
        for name, per_kernel in table.items():
            cells = []
            for k in kernels:
                v = per_kernel.get(k)
                if not v or not all(v):
                    cells.append("-")
                    continue
                seed_meds = [statistics.median(s) for s in v]
                med = statistics.median(sum(v, []))
                seed_spread = (max(seed_meds) - min(seed_meds)) / med * 100 if med else math.nan
                round_spread = max((max(s) - min(s)) / statistics.median(s) * 100 for s in v)
                cells.append(f"{med:.2f} [{seed_spread:.1f} | {round_spread:.1f}]")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    (a.out_dir / "profile_long_rows.md").write_text("\n".join(lines) + "\n")
    (a.out_dir / "profile_long_rows.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {a.out_dir / 'profile_long_rows.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
