"""Can autogk's GPU measurement be trusted? Runs on any CUDA GPU; prints short tables; --out writes JSON.

    python benchmarks/gpu_bench.py [--sections timers,cheats,aa,power] [--aa N] [--power N] [--out DIR]

Sections (each drives the bench worker's own code in this process, as a stage would):
- timers: per workload, each timer's median device time and its round-to-round spread (CV), with the
  host-inclusive (synchronized) latency beside it: the evidence for the default timer.
- cheats: planted kernels (cache by pointer, partial write, changes an input, early return on inputs
  seen before, lazy once timed) through the quick and ab stages: each must be rejected, and why.
- aa: a kernel against itself (a separate import of the same source), N comparisons per kernel/size
  group with the default ab settings: how often would it be kept (false keep) or called a regression.
- power: candidates doing known amounts more or less memory traffic than the parent: how often the
  ab stage finds the effect, the effect measured by a long run, and GPU-seconds per decision.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from autogk_git.bench.judge import stats  # noqa: E402
from autogk_git.bench.judge import timer as timing
from autogk_git.bench.judge import calls, process, rounds, sampling  # noqa: E402
from autogk_git.bench.judge import files as jfiles  # noqa: E402
from autogk_git.bench.judge import inputs as jinputs

DATA = REPO / "tests" / "data"
SCALE_DEF = json.loads((DATA / "scale" / "definition.json").read_text())
RMS_DIR = REPO / "kernels" / "rmsnorm_h4096"
RMS_DEF = json.loads((RMS_DIR / "definition.json").read_text())
RMS_KERNEL = (RMS_DIR / "kernel.py").read_text().replace("BLOCK_SIZE = 1024", "BLOCK_SIZE = 4096").replace(
    "NUM_WARPS = 4", "NUM_WARPS = 8")
HONEST = (DATA / "cheats" / "honest.py").read_text()
TMP = Path(tempfile.mkdtemp(prefix="autogk-bench-"))
_imports = [0]

PADDED = '''"""out = x * scale + bias, plus EXTRA * n extra fp32 reads of a zero pad (known extra traffic)."""
import torch
import triton
import triton.language as tl

EXTRA = {extra}
_PAD = {{}}


@triton.jit
def _k(x_ptr, b_ptr, p_ptr, out_ptr, n, n_pad, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask) * scale + tl.load(b_ptr + offs, mask=mask)
    p = tl.load(p_ptr + offs, mask=offs < n_pad, other=0.0)
    tl.store(out_ptr + offs, y + tl.where(p > 1e30, p, 0.0), mask=mask)


def run(x, bias, scale, out):
    n = x.numel()
    n_pad = int(n * EXTRA)
    if n_pad not in _PAD:
        _PAD[n_pad] = torch.zeros(max(n_pad, 1), device=x.device, dtype=torch.float32)
    _k[(triton.cdiv(n, 1024),)](x, bias, _PAD[n_pad], out, n, n_pad, scale, BLOCK=1024)
'''


def wl(uuid: str, **axes) -> dict:
    return {"uuid": uuid, "axes": axes, "inputs": {}}


def scale_wl(n: int) -> dict:
    return {"uuid": f"scale-n{n}", "axes": {"n": n}, "inputs": {"x": {"type": "random"}, "bias": {"type": "random"},
                                                                 "scale": {"type": "scalar", "value": 1.5}}}


def rms_wl(b: int) -> dict:
    return {"uuid": f"rms-b{b}", "axes": {"batch_size": b}, "inputs": {}}


def load(src: str):
    _imports[0] += 1
    return jfiles.import_kernel(f"k{_imports[0]}", {"kernel.py": src}, TMP).run


def job_for(definition: dict, workloads: list, seed: int, **settings) -> dict:
    s = {"device": "cuda", "timed": True, "trials": 3, "reps": 30, "warmup": 5, "timer": "cupti",
         "min_rounds": 5, "max_rounds": 40, "min_effect": 0.01, "confidence": 0.95}
    s.update(settings)
    return {"version": 1, "stage": "ab", "definition": definition, "workloads": workloads, "sources": {},
            "generator": None, "blob_root": ".", "settings": s, "seed": seed}


def ab(definition, workloads, parent, candidate, seed, **settings) -> tuple[dict, dict]:
    """One ab stage in this process: (summary, done records by label:uuid)."""
    job = job_for(definition, workloads, seed, **settings)
    recs, summary = {}, {}

    def emit(**r):
        if r.get("event") == "done":
            recs[f"{r['label']}:{r['uuid']}"] = r
        elif r.get("event") in ("ab", "timing"):
            summary.update(r)

    inputs = jinputs.Inputs(job, "cuda", None)
    ref = jinputs.load_reference(definition)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    process.run_timed(job, {"parent": (parent, None), "candidate": (candidate, None)}, inputs, ref, "cuda", None, emit)
    torch.cuda.synchronize()
    summary["wall_s"] = time.perf_counter() - t0
    return summary, recs


def table(rows: list[dict], cols: list[str]) -> str:
    def f(v):
        return f"{v:.4g}" if isinstance(v, float) else str(v)
    w = {c: max(len(c), *(len(f(r.get(c, ""))) for r in rows)) for c in cols}
    out = ["  ".join(c.ljust(w[c]) for c in cols)]
    out += ["  ".join(f(r.get(c, "")).ljust(w[c]) for c in cols) for r in rows]
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------------

def sec_timers(args) -> dict:
    rows = []
    cases = [(SCALE_DEF, scale_wl(4096), HONEST), (SCALE_DEF, scale_wl(1 << 20), HONEST),
             (SCALE_DEF, scale_wl(3 << 20), HONEST), (RMS_DEF, rms_wl(1), RMS_KERNEL),
             (RMS_DEF, rms_wl(170), RMS_KERNEL), (RMS_DEF, rms_wl(8804), RMS_KERNEL)]
    import random
    for definition, w, src in cases:
        run = load(src)
        job = job_for(definition, [w], 0)
        inputs = jinputs.Inputs(job, "cuda", None)
        ref = jinputs.load_reference(definition)
        tk = rounds.TimedKernel("candidate", run, True)
        for method in timing.TIMERS:
            timer = calls.device_timer(method)
            per_round, host = [], []
            t0 = time.perf_counter()
            for r in range(args.timer_rounds):
                n = sampling.calls_per_round(job, w)
                sets = [jinputs.make_inputs(inputs, w, r * 1000 + k, on_device=True) for k in range(n)]
                warm = jinputs.make_inputs(inputs, w, r * 1000 + n, on_device=True)
                t, _ = rounds.time_label(tk, sets, warm, job, w, ref, "cuda", random.Random(r), timer)
                per_round.append(t["us"])
                host.append(t["host_us"])
            rows.append({"workload": w["uuid"], "timer": method, "median_us": statistics.median(per_round),
                         "cv_%": 100 * statistics.stdev(per_round) / statistics.mean(per_round),
                         "sync_latency_us": statistics.median(host), "s": time.perf_counter() - t0})
    print("\n== timers: device time per call (median of per-round medians) and its spread over rounds ==")
    print(table(rows, ["workload", "timer", "median_us", "cv_%", "sync_latency_us", "s"]))
    return {"rows": rows}


def sec_cheats(args) -> dict:
    rows = []
    parent = load(HONEST)
    for name in ("honest", "cache_by_pointer", "partial_write", "changes_input", "early_return_seen",
                 "lazy_when_timed"):
        cand = load((DATA / "cheats" / f"{name}.py").read_text())
        summary, recs = ab(SCALE_DEF, [scale_wl(1 << 20)], parent, cand, seed=7, max_rounds=8)
        r = recs["candidate:scale-n1048576"]
        rows.append({"kernel": name, "status": r["status"], "why": r.get("message", "")[:110]})
    print("\n== cheats: planted kernels through the ab stage (correctness checks + timed rounds) ==")
    print(table(rows, ["kernel", "status", "why"]))
    return {"rows": rows}


AA_GROUPS = {
    "scale n=4K (us-scale)": (SCALE_DEF, [scale_wl(4096)], HONEST),
    "scale n=1M": (SCALE_DEF, [scale_wl(1 << 20)], HONEST),
    "rmsnorm b=1,170": (RMS_DEF, [rms_wl(1), rms_wl(170)], RMS_KERNEL),
    "rmsnorm b=8804,14509": (RMS_DEF, [rms_wl(8804), rms_wl(14509)], RMS_KERNEL),
    "rmsnorm b=57,512": (RMS_DEF, [rms_wl(57), rms_wl(512)], RMS_KERNEL),
    "scale n=64K": (SCALE_DEF, [scale_wl(1 << 16)], HONEST),
}


def sec_aa(args) -> dict:
    rows, raw = [], []
    groups = {g: AA_GROUPS[g] for g in (args.aa_groups.split(";") if args.aa_groups else AA_GROUPS)}
    for gname, (definition, wls, src) in groups.items():
        a, b = load(src), load(src)
        outc, gpu_s, rounds = [], [], []
        t_group = time.perf_counter()
        for k in range(args.aa):
            if time.perf_counter() - t_group > args.aa_budget_s / len(groups):
                break  # keep the run inside the lease; n says how many were made
            s, recs = ab(definition, wls, a, b, seed=1000 + k)
            outc.append(stats.classify(s["ci_low"], s["ci_high"], 0.01))
            gpu_s.append(s["wall_s"])
            rounds.append(s["rounds"])
            raw.append({"group": gname, "ratio": s["ratio"], "ci": [s["ci_low"], s["ci_high"]],
                        "rounds": s["rounds"], "stopped": s["stopped"], "wall_s": s["wall_s"]})
        rows.append({"group": gname, "n": len(outc), "false_keep": outc.count("keep"),
                     "false_regression": outc.count("regression"), "median_rounds": statistics.median(rounds),
                     "gpu_s_per_decision": statistics.mean(gpu_s)})
    tot = {"group": "ALL", "n": sum(r["n"] for r in rows), "false_keep": sum(r["false_keep"] for r in rows),
           "false_regression": sum(r["false_regression"] for r in rows)}
    rows.append(tot)
    print("\n== A/A: a kernel against itself (default ab settings: min_effect 1%, 95%, rounds 5..40) ==")
    print(table(rows, ["group", "n", "false_keep", "false_regression", "median_rounds", "gpu_s_per_decision"]))
    print(f"false keep rate {tot['false_keep'] / tot['n']:.2%}, false regression rate "
          f"{tot['false_regression'] / tot['n']:.2%}")
    return {"rows": rows, "raw": raw}


def sec_power(args) -> dict:
    n = 3 << 20  # ~10 us on an H200 with cold L2
    w = [scale_wl(n)]
    parent_extra = 0.15
    parent = load(PADDED.format(extra=parent_extra))
    rows, raw = [], []
    for extra in (0.0, 0.09, 0.21, 0.30):
        cand = load(PADDED.format(extra=extra))
        truth, _ = ab(SCALE_DEF, w, parent, cand, seed=1, min_rounds=40, max_rounds=40)
        outc, gpu_s, rounds = [], [], []
        t_cand = time.perf_counter()
        for k in range(args.power):
            if time.perf_counter() - t_cand > args.power_budget_s / 4:
                break
            s, _ = ab(SCALE_DEF, w, parent, cand, seed=2000 + k)
            outc.append(stats.classify(s["ci_low"], s["ci_high"], 0.01))
            gpu_s.append(s["wall_s"])
            rounds.append(s["rounds"])
            raw.append({"extra": extra, "ratio": s["ratio"], "ci": [s["ci_low"], s["ci_high"]], "rounds": s["rounds"]})
        want = "keep" if truth["ratio"] < 1 else "regression"
        rows.append({"candidate_extra": extra, "true_ratio(40 rounds)": truth["ratio"], "n": len(outc),
                     "expected": want, "detected": outc.count(want), "wrong_way": outc.count(
                         "regression" if want == "keep" else "keep"),
                     "rate": outc.count(want) / len(outc), "median_rounds": statistics.median(rounds),
                     "gpu_s_per_decision": statistics.mean(gpu_s)})
    print(f"\n== power: parent reads {parent_extra:.0%} extra, n={n} fp32 (scale kernel) ==")
    print(table(rows, ["candidate_extra", "true_ratio(40 rounds)", "n", "expected", "detected", "wrong_way",
                       "rate", "median_rounds", "gpu_s_per_decision"]))
    return {"rows": rows, "raw": raw}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="timers,cheats,aa,power")
    ap.add_argument("--aa", type=int, default=50, help="A/A comparisons per group (4 groups)")
    ap.add_argument("--power", type=int, default=25, help="comparisons per power candidate (4 candidates)")
    ap.add_argument("--timer-rounds", type=int, default=15)
    ap.add_argument("--aa-groups", default="", help="';'-separated A/A group names (default: all)")
    ap.add_argument("--aa-budget-s", type=float, default=1e9, help="stop A/A groups past this many seconds in all")
    ap.add_argument("--power-budget-s", type=float, default=1e9)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    p = torch.cuda.get_device_properties(0)
    timer = calls.device_timer("cudagraph")
    env = {"gpu": p.name, "torch": torch.__version__, "triton": __import__("triton").__version__,
           "cuda": torch.version.cuda, "l2_mb": timer.l2_bytes / 2**20,
           "copy_bandwidth_gbs": timer.bandwidth() / 1e9, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    print(json.dumps(env))
    out = {"env": env, "argv": sys.argv[1:]}
    for sec in args.sections.split(","):
        t0 = time.perf_counter()
        out[sec] = globals()[f"sec_{sec}"](args)
        out[sec]["section_s"] = time.perf_counter() - t0
        print(f"[{sec}: {out[sec]['section_s']:.1f} s]", flush=True)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / "gpu_bench.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
