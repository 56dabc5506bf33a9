"""DSA on a CUDA GPU: the bundled starting kernels against the definitions' references, per workload.

For both bundled DSA targets (sparse attention, top-k indexer) and every workload in their
workloads.jsonl: make inputs with the target's generator on the GPU, check the kernel against the
reference with the target's own compare rules (autogk_git/bench/rules.py: tolerance for attention,
top-k set by score for the indexer) on two input sets, then time
- the kernel's device time: CUDA-graph replay of one call, 256 MB L2 flush before each replay
  (outside the graph), CUDA events around the replay, median;
- the kernel and the reference called from Python with events around the call after the same flush
  (host-inclusive: the reference loops in Python and synchronizes, so a graph cannot hold it), median.
The floor is max(bytes that must move / measured copy bandwidth, FLOPs / measured matmul rate):
attention moves every distinct selected cache row once, the indexer every page its rows reach.

    python benchmarks/dsa_bench.py [--targets sa,ix] [--workload-set default|long] [--reps 50] [--out FILE.json] [--worker]

--worker also runs autogk's own bench worker (correctness, every workload) on the same targets.
Needs torch, triton and a CUDA GPU; nothing else (not the autogk CLI, not git).
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from autogk_git.bench.judge import rules  # noqa: E402

EXAMPLES = ROOT / "autogk_git" / "examples"
WORKLOAD_SET = "default"  # --workload-set
TARGETS = {"sa": "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
           "ix": "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"}


def load_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def reference_fn(definition: dict):
    ns: dict = {}
    exec(compile(definition["reference"], "<reference>", "exec"), ns)
    return ns["run"]


def resolve_axes(definition: dict, wl: dict) -> dict:
    axes = {n: a["value"] for n, a in definition["axes"].items() if a.get("type") == "const"}
    axes.update(wl["axes"])
    return axes


def alloc_outputs(definition: dict, axes: dict) -> list[torch.Tensor]:
    dt = {"bfloat16": torch.bfloat16, "float32": torch.float32, "int32": torch.int32}
    return [torch.empty([axes[d] for d in s["shape"]], dtype=dt[s["dtype"]], device="cuda")
            for s in definition["outputs"].values()]


class Flush:
    """Reads 256 MB (5x the L2): the timed call then starts with a cold L2 holding clean lines only.
    (Writing the buffer instead leaves up to 50 MB of dirty lines whose write-back the timed call pays.)"""

    method = "read 256 MB (torch.sum) before each timed call"

    def __init__(self, nbytes: int = 256 << 20) -> None:
        self.buf = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
        self.acc = torch.empty((), dtype=torch.float32, device="cuda")

    def __call__(self) -> None:
        torch.sum(self.buf, dim=0, out=self.acc)


class WriteFlush:
    """The judge's kind of flush (bench/judge/timer.py): a write of twice the L2's size, which leaves the L2
    full of dirty lines whose write-back the timed call pays. Beside Flush, it tells a disagreement that
    comes from what a cold L2 means apart from one that comes from the timer."""

    method = "write twice the L2's size (fill_) before each timed call, as the judge's flush does"

    def __init__(self) -> None:
        l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 50 << 20)
        self.buf = torch.empty(max(2 * l2, 8 << 20) // 4, dtype=torch.int32, device="cuda")

    def __call__(self) -> None:
        self.buf.fill_(0)


def events_median(fn, flush: Flush, reps: int) -> float:
    """Median microseconds of fn() with events around it, each after an L2 flush."""
    times = []
    for _ in range(reps):
        flush()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def split_by_flush_ordered(kernels: list[tuple[str, float, float]], flush_names: set[str]) -> list[list[tuple[str, float]]]:
    """Per call, its kernels as (name, device us) in launch order: `kernels` are (name, start_us, duration_us)
    of every kernel seen, flushes included; a call is the kernels between two runs of flush kernels
    (kernels before the first flush are not a call, nor is a stretch where nothing ran)."""
    calls: list[list[tuple[str, float]]] = []
    cur: list[tuple[str, float]] = []
    seen_flush = False
    for name, _, dur in sorted(kernels, key=lambda k: k[1]):
        if name in flush_names:
            if seen_flush and sum(d for _, d in cur) > 0:
                calls.append(cur)
            cur, seen_flush = [], True
        elif seen_flush:
            cur.append((name, dur))
    if seen_flush and sum(d for _, d in cur) > 0:
        calls.append(cur)
    return calls


def split_by_flush_named(kernels: list[tuple[str, float, float]], flush_names: set[str]) -> list[dict[str, float]]:
    """Per call, its kernels' device time (us) summed by kernel name (split_by_flush_ordered's calls)."""
    out = []
    for call in split_by_flush_ordered(kernels, flush_names):
        named: dict[str, float] = {}
        for name, dur in call:
            named[name] = named.get(name, 0.0) + dur
        out.append(named)
    return out


def split_by_flush(kernels: list[tuple[str, float, float]], flush_names: set[str]) -> list[float]:
    """Per call, the summed device time (us) of its kernels (split_by_flush_named, names summed)."""
    return [sum(c.values()) for c in split_by_flush_named(kernels, flush_names)]


def by_kernel(calls: list[dict[str, float]]) -> dict[str, float]:
    """Each kernel name's median device time (us) a call, over the calls (0 in a call that did not launch
    it): where a multi-kernel call's time goes. The medians need not add up to the calls' median."""
    names = sorted({n for c in calls for n in c})
    return {n: statistics.median(c.get(n, 0.0) for c in calls) for n in names}


def _profiled_kernels(work) -> list[tuple[str, float, float]]:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        work()
        torch.cuda.synchronize()
    out = []
    for e in prof.events():
        if getattr(e, "device_type", None) is not None and "CUDA" in str(e.device_type):
            out.append((e.name, float(e.time_range.start), float(e.time_range.end - e.time_range.start)))
    return out


def cupti_kernels(fn, flush: Flush, reps: int) -> tuple[float, dict[str, float]]:
    """cupti_median, and each kernel's median a call (by_kernel)."""
    flush_names = {name for name, _, _ in _profiled_kernels(flush)}

    def work() -> None:
        for _ in range(reps):
            flush()
            fn()
        flush()

    calls = split_by_flush_named(_profiled_kernels(work), flush_names)
    if len(calls) != reps:
        raise RuntimeError(f"cupti: {len(calls)} calls found between flushes, {reps} made")
    return statistics.median(sum(c.values()) for c in calls), by_kernel(calls)


def cupti_median(fn, flush: Flush, reps: int) -> float:
    """Median microseconds of fn()'s kernels, summed per call, by CUPTI (torch.profiler), each call after an
    L2 flush: the quantity autogk's judge decides on, measured here by code of this script's own (the
    kernels of a call are those between two flushes, the flush's kernels found by profiling it alone)."""
    return cupti_kernels(fn, flush, reps)[0]


def cupti_median_rotated(run, args: list, alloc_outs, flush, reps: int, mem_bytes: int = 1 << 30) -> tuple[float, int]:
    """cupti_median with each call on its own copy of the inputs and outputs, in turn, as many copies as
    the judge's window holds within its memory budget (bench/judge/sampling.py calls_per_round: at least 2,
    at most reps): the judge's conditions, where a workload larger than the L2 meets its pages afresh.
    Returns (median microseconds, copies)."""
    outs0 = alloc_outs()
    nbytes = sum(t.numel() * t.element_size() for t in (*args, *outs0) if isinstance(t, torch.Tensor))
    copies = max(2, min(reps, mem_bytes // max(1, nbytes)))
    sets = [[t.clone() if isinstance(t, torch.Tensor) else t for t in args] for _ in range(copies)]
    outs = [outs0] + [alloc_outs() for _ in range(copies - 1)]
    turn = iter(range(1 << 62))

    def call() -> None:
        i = next(turn) % copies
        run(*sets[i], *outs[i])

    return cupti_median(call, flush, reps), copies


def graph_median(fn, flush: Flush, reps: int) -> float:
    """Median microseconds of a CUDA-graph replay of fn(), each replay after an L2 flush."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        flush()
        starts[i].record()
        g.replay()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 for a, b in zip(starts, ends))


def ceilings() -> dict:
    """Copy bandwidth (1 GiB device-to-device) and dense bf16 / fp8 matmul rates, measured here."""
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    ts = []
    for _ in range(10):
        ev[0].record()
        b.copy_(a)
        ev[1].record()
        ev[1].synchronize()
        ts.append(ev[0].elapsed_time(ev[1]) / 1e3)
    bw = 2 * n / statistics.median(ts)
    del a, b
    m = 8192
    x = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        x @ y
    torch.cuda.synchronize()
    ts = []
    for _ in range(10):
        ev[0].record()
        x @ y
        ev[1].record()
        ev[1].synchronize()
        ts.append(ev[0].elapsed_time(ev[1]) / 1e3)
    bf16 = 2 * m ** 3 / statistics.median(ts)
    fp8 = None
    try:
        xf, yf = x.to(torch.float8_e4m3fn), y.to(torch.float8_e4m3fn).t()
        one = torch.ones((), device="cuda")
        for _ in range(3):
            torch._scaled_mm(xf, yf, one, one, out_dtype=torch.bfloat16)
        torch.cuda.synchronize()
        ts = []
        for _ in range(10):
            ev[0].record()
            torch._scaled_mm(xf, yf, one, one, out_dtype=torch.bfloat16)
            ev[1].record()
            ev[1].synchronize()
            ts.append(ev[0].elapsed_time(ev[1]) / 1e3)
        fp8 = 2 * m ** 3 / statistics.median(ts)
    except Exception as e:  # noqa: BLE001 - an older torch: no fp8 ceiling, say so
        print(f"fp8 matmul rate not measured: {e}", flush=True)
    return {"copy_bytes_per_s": bw, "bf16_flops": bf16, "fp8_flops": fp8}


_FLOORS: dict = {}


def target_floor(key: str):
    """The bundled target's own `floor(inputs, axes, definition)` (its inputs.py), which the judge's floor report
    uses: for the indexer, a row of at most 2048 tokens needs none of its keys (it keeps every token)."""
    if key not in _FLOORS:
        _FLOORS[key] = load_module(f"floor_{key}", EXAMPLES / TARGETS[key] / "inputs.py").floor
    return _FLOORS[key]


def floor_us(key: str, inputs: dict, out: list, ceil: dict) -> tuple[float, int, float]:
    """(floor in us, bytes, flops) for one input set: max(the target's bytes / copy bandwidth, its FLOPs /
    the matmul rate of its dtype). Until 2026-12-07 this script had its own rule for the indexer, which
    scored every row and so put the floor of a batch of short rows above a kernel that skips them (241 %
    of the floor on the long set's 2048 rows of at most 2048 tokens)."""
    f = target_floor(key)(inputs, {}, {})
    nbytes, flops = int(f["bytes"]), int(f["flops"])
    rate = ceil["bf16_flops"] if key == "sa" else (ceil["fp8_flops"] or ceil["bf16_flops"])
    t_us = max(nbytes / ceil["copy_bytes_per_s"], flops / rate) * 1e6
    return t_us, nbytes, flops


def bench_target(key: str, reps: int, ceil: dict, flush: Flush, overrides: dict, only: set | None,
                 with_reference: bool = True) -> list[dict]:
    d = EXAMPLES / TARGETS[key]
    definition = json.loads((d / "definition.json").read_text())
    gen = load_module(f"gen_{key}", d / "inputs.py")
    ker = load_module(f"kernel_{key}", d / "kernel.py")
    for name, value in overrides.items():  # tunables set from the command line: NAME=python literal
        setattr(ker, name, value)
    ref = reference_fn(definition)
    declared = rules.declared(gen)
    wfile = d / ("workloads.jsonl" if WORKLOAD_SET == "default" else f"workloads_{WORKLOAD_SET}.jsonl")
    wls = [json.loads(line)["workload"] for line in wfile.read_text().splitlines() if line.strip()]
    rows = []
    for i, wl in enumerate(wls):
        if only is not None and i not in only:
            continue
        axes = resolve_axes(definition, wl)
        rec = {"target": key, "axes": wl["axes"], "tunables": overrides}
        t0 = time.perf_counter()
        try:
            for seed in (1, 2):
                inp = gen.generate(dict(axes), definition, seed, "cuda", workload=wl)  # its layout
                args = [inp[n] for n in definition["inputs"]]
                with torch.no_grad():
                    want = ref(*args)
                outs = alloc_outputs(definition, axes)
                for o in outs:
                    o.fill_(float("nan") if o.dtype.is_floating_point else -7)
                ker.run(*args, *outs)
                torch.cuda.synchronize()
                for (name, spec), o, r in zip(definition["outputs"].items(), outs, want):
                    s = rules.judge(name, spec["dtype"], o, r, declared.get(name), inp, axes, gen)
                    rec[f"max_abs_err_{name}"] = max(rec.get(f"max_abs_err_{name}", 0.0), s["max_abs_err"])
            rec["correct"] = True
        except Exception as e:  # noqa: BLE001 - a wrong, failing or uncompilable kernel: record it, go on
            rec.update(correct=False, error=f"{type(e).__name__}: {str(e)[:300]}")
            print(json.dumps(rec), flush=True)
            rows.append(rec)
            continue
        rec["check_s"] = round(time.perf_counter() - t0, 2)
        fl, nbytes, flops = floor_us(key, inp, outs, ceil)
        rec.update(floor_us=fl, floor_bytes=nbytes, flops=flops)
        rec["kernel_graph_us"] = graph_median(lambda: ker.run(*args, *outs), flush, reps)
        rec["kernel_events_us"] = events_median(lambda: ker.run(*args, *outs), flush, max(5, reps // 5))
        if not with_reference:
            print(json.dumps(rec), flush=True)
            rows.append(rec)
            continue
        t1 = time.perf_counter()
        with torch.no_grad():
            ref(*args)
        torch.cuda.synchronize()
        one = time.perf_counter() - t1
        ref_reps = 3 if one > 0.2 else 10
        with torch.no_grad():
            rec["reference_events_us"] = events_median(lambda: ref(*args), flush, ref_reps)
        rec["reference_reps"] = ref_reps
        rec["speedup_graph"] = rec["reference_events_us"] / rec["kernel_graph_us"]
        rec["pct_of_floor"] = 100 * fl / rec["kernel_graph_us"]
        print(json.dumps(rec), flush=True)
        rows.append(rec)
        del inp, args, outs, want
        torch.cuda.empty_cache()
    return rows


def run_worker(keys: list[str]) -> dict:
    """autogk's own worker (correctness stage, two input sets) on every workload of each target."""
    import os

    from autogk_git.bench import runner
    from autogk_git.bench.job import make_job
    from autogk_git.project import Target
    out = {}
    for key in keys:
        t = Target(TARGETS[key], EXAMPLES / TARGETS[key])
        job = make_job(t, "full", {"candidate": {"kernel.py": t.kernel_source()}}, t.workloads,
                       {"device": "cuda", "trials": 2}, seed=5)
        t0 = time.perf_counter()
        res = runner.run_worker(job, dict(os.environ), 900)
        statuses = {u: r["status"] for u, r in res["labels"]["candidate"].items()}
        bad = {u: r.get("message", "")[:200] for u, r in res["labels"]["candidate"].items() if r["status"] != "PASSED"}
        out[key] = {"passed": sum(s == "PASSED" for s in statuses.values()), "of": len(statuses), "failures": bad,
                    "seconds": round(time.perf_counter() - t0, 1)}
        print(json.dumps({"worker": key, **out[key]}), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="sa,ix")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--workload-set", default="default", help="default (contest-shaped, workloads.jsonl) or long "
                    "(workloads_long.jsonl)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY.NAME=VALUE",
                    help="override a kernel tunable, e.g. ix.FP8_DOT=False")
    ap.add_argument("--only", help="workload numbers (0-based, in file order), e.g. 3,4")
    ap.add_argument("--sweep", action="append", default=[], metavar="KEY:WORKLOADS:NAME=V,NAME=V",
                    help="before the run, time variants of a target's tunables on a few workloads (no reference) "
                         "and run with the fastest (geometric mean), e.g. sa:4,7:BLOCK_N=32 (repeatable; the "
                         "defaults are always a variant)")
    ap.add_argument("--no-ceilings", action="store_true", help="use device.md's H200 figures instead")
    args = ap.parse_args()
    global WORKLOAD_SET
    WORKLOAD_SET = args.workload_set
    import ast
    overrides: dict = {k: {} for k in TARGETS}
    for item in args.set:
        lhs, value = item.split("=", 1)
        key, name = lhs.split(".", 1)
        overrides[key][name] = ast.literal_eval(value)
    only = {int(x) for x in args.only.split(",")} if args.only else None
    import triton
    p = torch.cuda.get_device_properties(0)
    env = {"gpu": p.name, "torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
           "python": platform.python_version(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    print(json.dumps(env), flush=True)
    # 2026-11-30 on the H200 (../shared/device.md): 1 GiB copy, bf16 and fp8 matmul
    ceil = ({"copy_bytes_per_s": 4.245e12, "bf16_flops": 791e12, "fp8_flops": 1455e12} if args.no_ceilings
            else ceilings())
    print(json.dumps(ceil), flush=True)
    flush = Flush()
    keys = args.targets.split(",")
    sweep = {}
    for item in args.sweep:
        key, wls, assigns = item.split(":", 2)
        variant = {n: ast.literal_eval(v) for n, v in (a.split("=", 1) for a in assigns.split(","))}
        sweep.setdefault(key, (wls, []))[1].append(variant)
    chosen = {}
    for key, (wls, variants) in sweep.items():
        subset = {int(x) for x in wls.split(",")}
        scored = []
        for variant in [{}] + variants:
            rs = bench_target(key, max(10, args.reps // 2), ceil, flush, {**overrides[key], **variant}, subset,
                              with_reference=False)
            if all(r["correct"] for r in rs):
                scored.append((math.exp(statistics.fmean(math.log(r["kernel_graph_us"]) for r in rs)), variant))
            print(json.dumps({"sweep": key, "variant": variant, "geomean_us": scored[-1][0] if scored and
                              scored[-1][1] is variant else None}), flush=True)
        best = min(scored, key=lambda x: x[0])
        if scored and scored[0][1] == {} and best[0] > 0.97 * scored[0][0]:
            best = scored[0]  # within 3 % of the defaults: noise, keep the defaults
        chosen[key] = best[1]
        overrides[key].update(best[1])
        print(json.dumps({"sweep": key, "chosen": best[1], "geomean_us": best[0]}), flush=True)
    rows = [r for k in keys for r in bench_target(k, args.reps, ceil, flush, overrides[k], only)]
    summary = {}
    for k in keys:
        rs = [r for r in rows if r["target"] == k]
        if not all(r["correct"] for r in rs):
            summary[k] = {"all_correct": False}
            continue
        summary[k] = {"all_correct": True, "workloads": len(rs),
                      "mean_speedup_graph": statistics.fmean(r["speedup_graph"] for r in rs),
                      "geomean_speedup_graph": math.exp(statistics.fmean(math.log(r["speedup_graph"]) for r in rs))}
    print(json.dumps(summary), flush=True)
    worker = run_worker(keys) if args.worker else None
    if args.out:
        args.out.write_text(json.dumps({"env": env, "ceilings": ceil, "flush": Flush.method, "rows": rows,
                                        "summary": summary, "sweep_chosen": chosen, "worker": worker}, indent=1))


if __name__ == "__main__":
    main()
