"""Experiments per hour of `autogk iterate --parallel K` against K=1, on this machine's GPUs.

    python benchmarks/parallel_throughput.py [--k 1,2] [-n 4] [--target rmsnorm_h4096] [--out DIR]

For each K: a fresh temporary project (the bundled target, its kernel at the repo's version), the
tune agent, the local backend, MLflow off; `autogk iterate -n N --parallel K` run as a user would,
timed end to end, while nvidia-smi samples every GPU's utilization every 250 ms. Prints one row per
K (wall time, experiments/hour, share of samples each GPU was busy) and each experiment's GPU and
verdict from its result note. Needs git, torch, triton and click; nothing else.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def sh(*args: str, cwd: Path, env: dict | None = None) -> str:
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout


def autogk_env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOGK_")}
    env.update(PYTHONPATH=str(REPO), GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@localhost",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost",
               AUTOGK_TRACKING_ENABLED="false", AUTOGK_BENCH_BACKEND="local")
    env.update(extra or {})
    return env


def make_project(root: Path, target: str) -> Path:
    """A project as `autogk init` makes it, minus the hooks (the loop's own commits skip them), so that
    it runs from a plain checkout (PYTHONPATH) where the package's hook shims are not installed."""
    sys.path.insert(0, str(REPO))
    from autogk_git.config import render_default
    proj = root / "proj"
    shutil.copytree(REPO / "kernels" / target, proj / "kernels" / target,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (proj / ".autogk.toml").write_text(render_default("main", target))
    env = autogk_env()
    sh("git", "init", "-q", "-b", "main", cwd=proj, env=env)
    sh("git", "add", "-A", cwd=proj, env=env)
    sh("git", "commit", "-qm", f"{target}: kernel", cwd=proj, env=env)
    return proj


class GpuSampler:
    """nvidia-smi utilization.gpu of every GPU every 250 ms, in the background."""

    def __init__(self) -> None:
        self.samples: list[dict[str, int]] = []
        self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=index,utilization.gpu",
                                      "--format=csv,noheader,nounits", "-lms", "250"],
                                     stdout=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        row: dict[str, int] = {}
        for line in self.proc.stdout:
            idx, util = [x.strip() for x in line.split(",")]
            if idx in row:
                self.samples.append(row)
                row = {}
            row[idx] = int(util)

    def stop(self) -> dict[str, float]:
        self.proc.terminate()
        self.proc.wait()
        gpus = sorted({g for s in self.samples for g in s})
        n = max(1, len(self.samples))
        return {g: round(sum(1 for s in self.samples if s.get(g, 0) > 0) / n, 3) for g in gpus}


def note(proj: Path, sha: str) -> dict:
    text = sh("git", "notes", "--ref", "autogk/results", "show", sha, cwd=proj)
    return json.loads(text[text.index("{"):])


def run_k(template: Path, k: int, n: int, work: Path, extra_env: dict) -> dict:
    proj = work / f"k{k}"
    shutil.copytree(template, proj, symlinks=True)
    cmd = [sys.executable, "-m", "autogk_git", "iterate", "-n", str(n), "--parallel", str(k), "--agent", "tune",
           "--json"]
    # A fresh Triton cache per K: no run reuses another's compiles.
    env = autogk_env({**extra_env, "TRITON_CACHE_DIR": str(work / f"triton-cache-k{k}")})
    sampler = GpuSampler()
    t0 = time.monotonic()
    out = subprocess.run(cmd, cwd=proj, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    busy = sampler.stop()
    if out.returncode != 0:
        raise SystemExit(f"K={k}: autogk iterate failed ({out.returncode}):\n{out.stdout}\n{out.stderr[-4000:]}")
    report = json.loads(out.stdout)
    rows = []
    for e in report["experiments"]:
        res = note(proj, e["commit"])
        gpus = sorted({str(s.get("gpu")) for s in res["stages"].values() if s.get("gpu") is not None})
        rows.append({"number": e["number"], "hypothesis": e["hypothesis"], "decision": e["decision"],
                     "gpus": gpus, "rebased": bool(e.get("rebased_from")),
                     "bench_wall_s": res["cost"].get("bench_wall_s"), "gpu_s": res["cost"].get("gpu_s"),
                     "figures": res["verdict"].get("figures", "")})
    done = len(report["experiments"])
    return {"k": k, "n": done, "wall_s": round(wall, 1), "experiments_per_hour": round(3600 * done / wall, 1),
            "gpu_busy_share": busy, "experiments": rows, "stop_reason": report["stop_reason"],
            "log_tail": out.stderr[-3000:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", default="1,2", help="comma-separated K values")
    ap.add_argument("-n", type=int, default=4, help="experiments per K")
    ap.add_argument("--target", default="rmsnorm_h4096")
    ap.add_argument("--max-rounds", type=int, default=10, help="[bench] max_rounds (keeps the run short)")
    ap.add_argument("--out", type=Path, default=None, help="write results.json here")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="autogk-parallel-"))
    template = make_project(work / "template", args.target)
    extra = {"AUTOGK_BENCH_MAX_ROUNDS": str(args.max_rounds), "AUTOGK_GPU_LOCK_DIR": str(work / "locks")}
    gpus = sh("nvidia-smi", "-L", cwd=work).strip().splitlines()
    print(f"{len(gpus)} GPU(s): " + "; ".join(gpus))
    results = []
    for k in [int(x) for x in args.k.split(",")]:
        r = run_k(template, k, args.n, work, extra)
        results.append(r)
        print(f"K={k}: {r['n']} experiments in {r['wall_s']} s = {r['experiments_per_hour']} experiments/hour; "
              f"GPU busy share {r['gpu_busy_share']}")
        for e in r["experiments"]:
            print(f"   #{e['number']:04d} gpu {','.join(e['gpus'])} {e['decision']:<6} {e['hypothesis']:<36} "
                  f"bench {e['bench_wall_s']} s{' (rebased, measured again)' if e['rebased'] else ''} {e['figures']}")
        sys.stdout.flush()
        if args.out:  # after each K, so a cut-off run keeps what it measured
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "results.json").write_text(json.dumps({"gpus": gpus, "runs": results}, indent=1))
    if len(results) > 1:
        base = results[0]["experiments_per_hour"]
        for r in results[1:]:
            print(f"speed-up K={r['k']} vs K={results[0]['k']}: {r['experiments_per_hour'] / base:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
