"""A/A on a CUDA GPU with the loop's own judging: a kernel against itself, every workload, the verdict rule.

    python benchmarks/aa_full.py --out DIR [--target rmsnorm_h4096] [--budget-s 480] [--procs 1] [--gpus 0,1]
    python benchmarks/aa_full.py --out DIR --slower 0.0309 ...   # power: the kernel against a copy 3.09 % slower
    python benchmarks/aa_full.py --summarize DIR            # the table, from the JSONL files a run left

Each comparison is what one experiment of `autogk iterate` runs: `bench.stages.benchmark` with the
same kernel source as parent and candidate (two kernel processes, the ab job: the candidate screened
on the quick workloads, every runnable workload checked and timed in paired rounds), then the loop's
verdict rule (`loop.verdict.PairedRatioRule`: the objective's interval and the per-workload guard)
with the project's default configuration. A "keep" here is a false keep; a "guard" or "regression"
revert is a false regression (harmless for the trunk, but wasted work).

`--procs` comparisons run at once per GPU (default 1, as the loop runs them: its local backend queues
jobs per GPU), each in its own process with its own GPU lock folder. More than one at a time is a test
of a shared GPU, not an A/A of the loop: the judge's clock times the GPU timeline, sees the other jobs'
kernels in a candidate's windows and reverts honest candidates as TAMPERED (60 of 126 at six at once on
an H200, 2026-12-03: RESULTS.md).
Every comparison is appended to DIR/aa_<gpu>_<k>.jsonl when it ends, so a run stopped by its budget
keeps what it made. Needs torch, triton and a CUDA GPU; MLflow is not used.

Power (`--slower F`): the parent is the same kernel made F slower in an honest way, the candidate the
kernel itself, so the candidate is 1 / (1 + F) of its parent (F = 0.0309: -3 %); a "keep" is a
detection, and the keep rate is the loop's power at that effect. The slower copy (`slowed_source`)
is the bundled kernel whose every program, before it ends, spins on its SM's cycle counter (%clock64) for F times
its own elapsed time: extra work proportional to the kernel's own time on every workload, the outputs
unchanged. The median of the comparisons' ratios says what the effect really was. Records go to
DIR/power_<gpu>_<k>.jsonl.

`--backend interpret` (CPU, Triton interpreter: correctness only, every verdict "untimed") runs the
same plumbing end to end, to check a command before a GPU run; no parent runs there, so with
`--slower` the slowed copy is judged as the candidate, without its spin (no cycle counter there).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "autogk_git" / "examples"


def project(target: str) -> Path:
    """A throwaway project holding the bundled target, with the default configuration."""
    root = Path(tempfile.mkdtemp(prefix="autogk-aa-")) / "proj"
    shutil.copytree(EXAMPLES / target, root / "kernels" / target)
    (root / ".autogk.toml").write_text(f'[project]\ntarget = "{target}"\n[bench]\nbackend = "local"\n'
                                       '[tracking]\nenabled = false\n')
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    return root


SPIN_KERNEL = '''

@triton.jit
def _aa_clock():
    return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _aa_spin(t0, NUM: tl.constexpr, DEN: tl.constexpr):
    """Spin until this program has run (1 + NUM / DEN) times as long as it had when called."""
    t1 = _aa_clock()
    target = t1 + (t1 - t0) * NUM // DEN
    now = t1
    while now < target:
        now = _aa_clock()
'''


def slowed_source(text: str, slower: float) -> str:
    """The bundled rmsnorm kernel, each program made `slower` slower by spinning at its end for that
    share of its own elapsed time (nothing else changes: same loads, same stores, same outputs). Under
    the interpreter (no cycle counter) the spin is left out."""
    num, den = int(round(slower * 10_000)), 10_000
    anchors = ("    row = tl.program_id(0)\n", "                    BLOCK_SIZE: tl.constexpr):\n",
               "\n\n\ndef run(", "BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)")
    missing = [a for a in anchors if a not in text]
    if missing:
        raise SystemExit(f"--slower: the kernel does not look like the bundled rmsnorm kernel (no {missing[0]!r}); "
                         "the slowed copy is made for autogk_git/examples/rmsnorm_h4096/kernel.py only")
    text = text.replace("import triton.language as tl\n",
                        "import os\n\nimport triton.language as tl\n\nSPIN = os.environ.get('TRITON_INTERPRET') != '1'\n", 1)
    text = text.replace(anchors[1], "                    BLOCK_SIZE: tl.constexpr, SPIN: tl.constexpr):\n", 1)
    text = text.replace(anchors[0], anchors[0] + "    if SPIN:\n        t0 = _aa_clock()\n", 1)
    body_end = text.index(anchors[2])
    text = (text[:body_end] + f"\n    if SPIN:\n        _aa_spin(t0, {num}, {den})" + text[body_end:])
    text = text.replace(anchors[3], "BLOCK_SIZE=BLOCK_SIZE, SPIN=SPIN, num_warps=NUM_WARPS)", 1)
    head = text.index("@triton.jit")
    return text[:head] + SPIN_KERNEL.lstrip("\n") + "\n\n" + text[head:]


def worker(out: Path, target: str, budget_s: float, seed0: int, slower: float = 0.0,
           backend_name: str = "local") -> None:
    sys.path.insert(0, str(REPO))
    from autogk_git.bench.backends import interpret, local
    from autogk_git.bench.stages import benchmark
    from autogk_git.loop.verdict import CorrectnessOnly, PairedRatioRule
    from autogk_git.project import Project

    os.environ[local.LOCK_DIR_ENV] = tempfile.mkdtemp(prefix="autogk-aa-locks-")
    p = Project(project(target))
    t = p.target(target)
    src = {"kernel.py": (t.dir / "kernel.py").read_text()}
    parent = {"kernel.py": slowed_source(src["kernel.py"], slower)} if slower else src
    if backend_name == "interpret":
        backend, rule = interpret.InterpretBackend(p.config), CorrectnessOnly()
        src = parent  # no parent runs untimed: the dry run checks the slowed copy as the candidate
    else:
        backend, rule = local.LocalBackend(p.config), PairedRatioRule()
    end = time.monotonic() + budget_s
    k = 0
    while time.monotonic() < end:
        t0 = time.monotonic()
        bench = benchmark(t, backend, src, parent, p.config, seed=seed0 + k)
        wall = time.monotonic() - t0
        v = rule.decide(bench, p.config)
        ab = (bench.get("stages", {}).get("ab") or {}).get("ab") or {}
        worst = max(v.get("per_workload") or [{"ratio": float("nan")}], key=lambda r: r["ratio"])
        rec = {"seed": seed0 + k, "decision": v["decision"], "outcome": v["outcome"], "ratio": v.get("ratio"),
               "ci": [v.get("ci_low"), v.get("ci_high")], "worst_workload_ratio": worst["ratio"],
               "rounds": ab.get("rounds"), "timed": v.get("timed"), "workloads": v.get("workloads"),
               "correct": bench.get("correct"), "wall_s": round(wall, 2), "timing_s": ab.get("timing_s"), "phases": ab.get("phases"),
               "reason": v.get("reason", "")[:900], "slower": slower,
               "per_workload": {r["uuid"][:8]: round(r["ratio"], 4) for r in v.get("per_workload") or []},
               "statuses": sorted({w.get("status", "?") for st in (bench.get("stages") or {}).values()
                                   for lab in (st.get("workloads") or {}).values() for w in lab.values()}),
               "clock": clock_gaps(bench)}
        with open(out, "a") as f:
            f.write(json.dumps(rec) + "\n")
        print(json.dumps({k2: rec[k2] for k2 in ("seed", "decision", "outcome", "ratio", "rounds", "wall_s")}),
              flush=True)
        k += 1


def clock_gaps(bench: dict) -> dict:
    """Per timed workload of the ab stage: its calls a window and the judge's clock's median gap per call
    (seen - claimed, us; every candidate here is honest), raw and less each process's null window where
    `[bench] clock_null_window` was on (AUTOGK_BENCH_CLOCK_NULL_WINDOW=true)."""
    out = {}
    for u, rec in (((bench.get("stages") or {}).get("ab") or {}).get("workloads") or {}).get("candidate", {}).items():
        c = rec.get("clock") or {}
        if not c.get("seen") or not c.get("claimed"):
            continue
        row = {"calls": rec.get("calls_per_round"), "parent_us": round(statistics.median(c["parent"]), 3),
               "gap": round(statistics.median(a - b for a, b in zip(c["seen"], c["claimed"])), 3)}
        if c.get("seen_null"):
            row["gap_null"] = round(statistics.median(a - b for a, b in zip(c["seen_null"], c["claimed"])), 3)
        out[u[:8]] = row
    return out


def clock_lines(recs: list[dict]) -> list[str]:
    """The honest gaps the judge's clock saw, raw and (where measured) less the null windows."""
    rows = [g for r in recs for g in (r.get("clock") or {}).values()]
    out = []
    for key, what in (("gap", "raw"), ("gap_null", "less each process's null window")):
        gaps = sorted(abs(g[key]) for g in rows if key in g)
        if gaps:
            out.append(f"judge's clock, |seen - claimed| us a call ({what}), {len(gaps)} workload records: median "
                       f"{statistics.median(gaps):.3f}, 95th pct {gaps[min(len(gaps) - 1, int(0.95 * len(gaps)))]:.3f}, "
                       f"max {gaps[-1]:.3f}")
    return out


def summarize(d: Path) -> str:
    """The A/A table (aa_*.jsonl) and the power table (power_*.jsonl) of a run's folder, each ending in
    the row benchmarks/RESULTS.md takes."""
    parts = [_summary(d, kind) for kind in ("aa", "power") if list(d.glob(f"{kind}_*.jsonl"))]
    return "\n\n".join(parts) if parts else "no comparisons recorded"


def _summary(d: Path, kind: str) -> str:
    recs = [json.loads(line) for f in sorted(d.glob(f"{kind}_*.jsonl")) for line in f.read_text().splitlines() if line]
    if not recs:
        return f"{kind}: no comparisons recorded"
    n = len(recs)
    keep = sum(r["decision"] == "keep" for r in recs)
    outcomes: dict[str, int] = {}
    for r in recs:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    walls = [r["wall_s"] for r in recs]
    ratios = [r["ratio"] for r in recs if isinstance(r.get("ratio"), (int, float))]
    slower = sorted({r.get("slower", 0.0) for r in recs})
    head = ("A/A: the kernel against itself" if kind == "aa" else
            f"power: the kernel against a copy {', '.join(f'{x:.2%}' for x in slower)} slower "
            f"(candidate/parent {', '.join(f'{1 / (1 + x):.4f}' for x in slower)})")
    lines = [f"== {head}", f"comparisons: {n} (files: {len(list(d.glob(f'{kind}_*.jsonl')))})",
             (f"false keeps: {keep} ({keep / n:.2%})" if kind == "aa" else f"keeps (detections): {keep} ({keep / n:.2%})"),
             "outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())),
             f"all correct: {all(r['correct'] for r in recs)}; workloads timed per comparison: "
             f"{sorted({r['timed'] for r in recs}, key=str)} of {sorted({r['workloads'] for r in recs}, key=str)}",
             "statuses seen: " + ", ".join(sorted({s for r in recs for s in r.get("statuses", [])})),
             f"wall s per comparison: median {statistics.median(walls):.1f}, min {min(walls):.1f}, "
             f"max {max(walls):.1f}",
             f"geomean ratio: median {statistics.median(ratios):.4f}, min {min(ratios):.4f}, max {max(ratios):.4f}"
             if ratios else "no ratios",
             f"median rounds: {statistics.median([r['rounds'] or 0 for r in recs])}"]
    per: dict[str, list[float]] = {}
    for r in recs:
        for u, x in (r.get("per_workload") or {}).items():
            per.setdefault(u, []).append(x)
    if per:
        lines.append("median ratio per workload: " + ", ".join(f"{u} {statistics.median(v):.4f}" for u, v in per.items()))
    phases = [r["phases"] for r in recs if r.get("phases")]
    if phases:
        keys = sorted({k for p in phases for k in p})
        lines.append("median wall s by phase of the judge: " + ", ".join(
            f"{k} {statistics.median([p.get(k, 0.0) for p in phases]):.1f}" for k in keys))
    examples = [r for r in recs if r["outcome"] not in ("inconclusive", "keep")][:3]
    lines += [f"{r['outcome']} example: {r['reason']}" for r in examples]
    worst = [r["worst_workload_ratio"] for r in recs if isinstance(r.get("worst_workload_ratio"), float)
             and not math.isnan(r["worst_workload_ratio"])]
    if worst:
        lines.append(f"worst single-workload ratio seen: {max(worst):.4f}")
    lines += clock_lines(recs)
    med = f"{statistics.median(ratios):.4f}" if ratios else "-"
    if kind == "aa":
        lines.append(f"RESULTS row: | A/A through the loop's own stages and verdict rule (judge's clock on) | "
                     f"**{keep} false keeps in {n}** ({', '.join(f'{v} {k}' for k, v in sorted(outcomes.items()))}); "
                     f"median {statistics.median(walls):.1f} s per comparison | <= 1 % | `aa_full.py` |")
    else:
        lines.append(f"RESULTS row: | power at {1 / (1 + slower[0]) - 1:+.1%} on rmsnorm through the loop's own stages "
                     f"(parent: the kernel spinning {slower[0]:.2%} of each program's time) | **{keep}/{n} kept "
                     f"({keep / n:.0%})**, median measured ratio {med} | >= 95 % | `aa_full.py --slower {slower[0]:g}` |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="folder for the JSONL files and the summary")
    ap.add_argument("--target", default="rmsnorm_h4096")
    ap.add_argument("--budget-s", type=float, default=480.0, help="stop starting comparisons after this")
    ap.add_argument("--procs", type=int, default=1, help="comparisons at once per GPU (more than 1: a shared GPU)")
    ap.add_argument("--gpus", default="0", help="CUDA indices, e.g. 0,1")
    ap.add_argument("--slower", type=float, default=0.0,
                    help="power: the parent is the kernel made this much slower (0.0309: the candidate at -3 %%)")
    ap.add_argument("--backend", default="local", choices=("local", "interpret"),
                    help="interpret: a CPU dry run of the plumbing (correctness only, untimed verdicts)")
    ap.add_argument("--summarize", help="print the summary of a finished run's folder and exit")
    ap.add_argument("--_worker", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.summarize:
        print(summarize(Path(a.summarize)))
        return 0
    if a._worker:
        worker(Path(a._worker[0]), a.target, a.budget_s, int(a._worker[1]) * 100_000 + int(a._worker[2]) * 1000,
               a.slower, a.backend)
        return 0
    if not a.out:
        ap.error("--out is required")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    procs = []
    kind = "power" if a.slower else "aa"
    for g in [x.strip() for x in a.gpus.split(",") if x.strip()]:
        for k in range(a.procs):
            env = dict(os.environ, CUDA_VISIBLE_DEVICES=g, PYTHONUNBUFFERED="1", AUTOGK_TRACKING_ENABLED="0")
            if a.backend == "interpret":
                env["TRITON_INTERPRET"] = "1"
            log = open(out / f"{kind}_{g}_{k}.log", "w")
            procs.append(subprocess.Popen(
                [sys.executable, __file__, "--target", a.target, "--budget-s", str(a.budget_s), "--slower",
                 str(a.slower), "--backend", a.backend, "--_worker", str(out / f"{kind}_{g}_{k}.jsonl"), g, str(k)],
                env=env, stdout=log, stderr=log))
    for p in procs:
        p.wait()
    text = summarize(out)
    (out / f"{kind}_summary.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
