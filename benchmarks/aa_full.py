"""A/A on a CUDA GPU with the loop's own judging: a kernel against itself, every workload, the verdict rule.

    python benchmarks/aa_full.py --out DIR [--target rmsnorm_h4096] [--budget-s 480] [--procs 3] [--gpus 0,1]
    python benchmarks/aa_full.py --summarize DIR            # the table, from the JSONL files a run left

Each comparison is what one experiment of `autogk iterate` runs: `bench.stages.benchmark` with the
same kernel source as parent and candidate (two kernel processes, the ab job: the candidate screened
on the quick workloads, every runnable workload checked and timed in paired rounds), then the loop's
verdict rule (`loop.verdict.PairedRatioRule`: the objective's interval and the per-workload guard)
with the project's default configuration. A "keep" here is a false keep; a "guard" or "regression"
revert is a false regression (harmless for the trunk, but wasted work).

`--procs` comparisons run at once per GPU, each in its own process with its own GPU lock folder
(the local backend otherwise queues them): several jobs share one GPU, as parallel experiments would.
Every comparison is appended to DIR/aa_<gpu>_<k>.jsonl when it ends, so a run stopped by its budget
keeps what it made. Needs torch, triton and a CUDA GPU; MLflow is not used.
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


def worker(out: Path, target: str, budget_s: float, seed0: int) -> None:
    sys.path.insert(0, str(REPO))
    from autogk_git.bench.backends import local
    from autogk_git.bench.stages import benchmark
    from autogk_git.loop.verdict import PairedRatioRule
    from autogk_git.project import Project

    os.environ[local.LOCK_DIR_ENV] = tempfile.mkdtemp(prefix="autogk-aa-locks-")
    p = Project(project(target))
    t = p.target(target)
    src = {"kernel.py": (t.dir / "kernel.py").read_text()}
    backend = local.LocalBackend(p.config)
    end = time.monotonic() + budget_s
    k = 0
    while time.monotonic() < end:
        t0 = time.monotonic()
        bench = benchmark(t, backend, src, src, p.config, seed=seed0 + k)
        wall = time.monotonic() - t0
        v = PairedRatioRule().decide(bench, p.config)
        ab = (bench.get("stages", {}).get("ab") or {}).get("ab") or {}
        worst = max(v.get("per_workload") or [{"ratio": float("nan")}], key=lambda r: r["ratio"])
        rec = {"seed": seed0 + k, "decision": v["decision"], "outcome": v["outcome"], "ratio": v.get("ratio"),
               "ci": [v.get("ci_low"), v.get("ci_high")], "worst_workload_ratio": worst["ratio"],
               "rounds": ab.get("rounds"), "timed": v.get("timed"), "workloads": v.get("workloads"),
               "correct": bench.get("correct"), "wall_s": round(wall, 2), "timing_s": ab.get("timing_s"), "phases": ab.get("phases"),
               "reason": v.get("reason", "")[:300]}
        with open(out, "a") as f:
            f.write(json.dumps(rec) + "\n")
        print(json.dumps({k2: rec[k2] for k2 in ("seed", "decision", "outcome", "ratio", "rounds", "wall_s")}),
              flush=True)
        k += 1


def summarize(d: Path) -> str:
    recs = [json.loads(line) for f in sorted(d.glob("aa_*.jsonl")) for line in f.read_text().splitlines() if line]
    if not recs:
        return "no comparisons recorded"
    n = len(recs)
    keep = sum(r["decision"] == "keep" for r in recs)
    outcomes: dict[str, int] = {}
    for r in recs:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    walls = [r["wall_s"] for r in recs]
    ratios = [r["ratio"] for r in recs if isinstance(r.get("ratio"), (int, float))]
    lines = [f"comparisons: {n} (files: {len(list(d.glob('aa_*.jsonl')))})",
             f"false keeps: {keep} ({keep / n:.2%})",
             "outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())),
             f"all correct: {all(r['correct'] for r in recs)}; workloads timed per comparison: "
             f"{sorted({r['timed'] for r in recs})} of {sorted({r['workloads'] for r in recs})}",
             f"wall s per comparison: median {statistics.median(walls):.1f}, min {min(walls):.1f}, "
             f"max {max(walls):.1f}",
             f"geomean ratio: median {statistics.median(ratios):.4f}, min {min(ratios):.4f}, max {max(ratios):.4f}"
             if ratios else "no ratios",
             f"median rounds: {statistics.median([r['rounds'] or 0 for r in recs])}"]
    phases = [r["phases"] for r in recs if r.get("phases")]
    if phases:
        keys = sorted({k for p in phases for k in p})
        lines.append("median wall s by phase of the judge: " + ", ".join(
            f"{k} {statistics.median([p.get(k, 0.0) for p in phases]):.1f}" for k in keys))
    guards = [r for r in recs if r["outcome"] == "guard"][:3]
    lines += [f"guard example: {r['reason']}" for r in guards]
    worst = [r["worst_workload_ratio"] for r in recs if isinstance(r.get("worst_workload_ratio"), float)
             and not math.isnan(r["worst_workload_ratio"])]
    if worst:
        lines.append(f"worst single-workload ratio seen: {max(worst):.4f}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="folder for the JSONL files and the summary")
    ap.add_argument("--target", default="rmsnorm_h4096")
    ap.add_argument("--budget-s", type=float, default=480.0, help="stop starting comparisons after this")
    ap.add_argument("--procs", type=int, default=3, help="comparisons at once per GPU")
    ap.add_argument("--gpus", default="0", help="CUDA indices, e.g. 0,1")
    ap.add_argument("--summarize", help="print the summary of a finished run's folder and exit")
    ap.add_argument("--_worker", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.summarize:
        print(summarize(Path(a.summarize)))
        return 0
    if a._worker:
        worker(Path(a._worker[0]), a.target, a.budget_s, int(a._worker[1]) * 100_000 + int(a._worker[2]) * 1000)
        return 0
    if not a.out:
        ap.error("--out is required")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    procs = []
    for g in [x.strip() for x in a.gpus.split(",") if x.strip()]:
        for k in range(a.procs):
            env = dict(os.environ, CUDA_VISIBLE_DEVICES=g, PYTHONUNBUFFERED="1", AUTOGK_TRACKING_ENABLED="0")
            log = open(out / f"aa_{g}_{k}.log", "w")
            procs.append(subprocess.Popen(
                [sys.executable, __file__, "--target", a.target, "--budget-s", str(a.budget_s),
                 "--_worker", str(out / f"aa_{g}_{k}.jsonl"), g, str(k)], env=env, stdout=log, stderr=log))
    for p in procs:
        p.wait()
    text = summarize(out)
    (out / "aa_summary.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
