"""Experiments per hour of `autogk iterate --parallel K` against K=1, and where each experiment's time went.

    python benchmarks/parallel_throughput.py [--k 1,2] [-n 4] [--target rmsnorm_h4096] [--out DIR]
    python benchmarks/parallel_throughput.py --backend interpret --target scale ...   # on CPU: the phases only

For each K: a fresh temporary project (`autogk init --example TARGET`, or the tests' `scale` target), the
tune agent, MLflow off (`AUTOGK_TRACKING_ENABLED=true` beside the command: on); `autogk iterate -n N --parallel K` run as a user would, timed end to end, while
nvidia-smi samples every GPU's utilization every 250 ms (local backend). Prints one row per K (wall
time, experiments/hour, share of samples each GPU was busy), each experiment's GPU and verdict from
its result note, and the phases the report gives each experiment: proposing and committing (the
loop's thread), its benchmarks, its finished benchmarks waiting for the loop's thread, concluding
(note, replay, merge: the loop's thread). The loop's thread is the serial part: its share of the
wall time is printed as `loop thread busy`. On CPU (`--backend interpret`) nothing is timed, so
correct candidates are merged (`untimed = "merge"`) to give replays, and the interpreter's benchmarks
share the machine's cores: the figures there are the scheduler's, not a GPU's.
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
               AUTOGK_TRACKING_ENABLED=os.environ.get("AUTOGK_TRACKING_ENABLED", "false"))
    env.update(extra or {})
    return env


def make_project(root: Path, target: str, backend: str) -> Path:
    """A project as `autogk init` makes it (a bundled example, or the tests' `scale` target)."""
    proj = root / "proj"
    env = autogk_env()
    if target == "scale":
        data = REPO / "tests" / "data" / "scale"
        sh(sys.executable, "-m", "autogk_git", "init", str(proj), "--definition", str(data / "definition.json"),
           "--workloads", str(data / "workloads.jsonl"), "--no-check", cwd=root, env=env)
        shutil.copyfile(data / "kernel.py", proj / "kernels" / "scale" / "kernel.py")
    else:
        sh(sys.executable, "-m", "autogk_git", "init", str(proj), "--example", target, "--no-check", cwd=root, env=env)
    if backend == "interpret":  # nothing is timed on CPU: merge correct candidates, so keeps move the trunk
        cfg = (proj / ".autogk.toml").read_text()
        (proj / ".autogk.toml").write_text(cfg.replace("[bench]\n", '[bench]\nuntimed = "merge"\n', 1))
    if sh("git", "status", "--porcelain", cwd=proj, env=env).strip():  # init committed the rest
        sh("git", "commit", "-qam", f"{target}: the starting kernel", cwd=proj, env=env)
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


def phase_summary(report: dict, wall: float) -> dict:
    """The report's phases summed by autogk itself (`phases`), and the loop's thread's share of the wall time."""
    tot = dict(report.get("phases") or {})
    busy = tot.get("open_alone_s", 0.0) + tot.get("conclude_s", 0.0)  # proposals asked beside others run elsewhere
    tot["loop_thread_share"] = round(busy / wall, 3) if tot and wall else None
    return tot


def run_k(template: Path, k: int, n: int, work: Path, extra_env: dict, gpus: bool) -> dict:
    proj = work / f"k{k}"
    shutil.copytree(template, proj, symlinks=True)
    cmd = [sys.executable, "-m", "autogk_git", "iterate", "-n", str(n), "--parallel", str(k), "--agent", "tune",
           "--json"]
    # A fresh Triton cache per K: no run reuses another's compiles.
    env = autogk_env({**extra_env, "TRITON_CACHE_DIR": str(work / f"triton-cache-k{k}")})
    sampler = GpuSampler() if gpus else None
    t0 = time.monotonic()
    out = subprocess.run(cmd, cwd=proj, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    busy = sampler.stop() if sampler else {}
    if out.returncode != 0:
        raise SystemExit(f"K={k}: autogk iterate failed ({out.returncode}):\n{out.stdout}\n{out.stderr[-4000:]}")
    report = json.loads(out.stdout)
    rows = []
    for e in report["experiments"]:
        if not e.get("commit"):  # a repeat, discarded unbenchmarked
            continue
        res = note(proj, e["commit"])
        gpus_used = sorted({str(s.get("gpu")) for s in res["stages"].values() if s.get("gpu") is not None})
        rows.append({"number": e["number"], "hypothesis": e["hypothesis"], "decision": e["decision"],
                     "gpus": gpus_used, "rebased": bool(e.get("rebased_from")),
                     "bench_wall_s": res["cost"].get("bench_wall_s"), "gpu_s": res["cost"].get("gpu_s"),
                     "figures": res["verdict"].get("figures", ""), "phases": e.get("phases")})
    done = len(report["experiments"])
    return {"k": k, "n": done, "wall_s": round(wall, 1), "experiments_per_hour": round(3600 * done / wall, 1),
            "gpu_busy_share": busy, "phases": phase_summary(report, wall), "experiments": rows,
            "stop_reason": report["stop_reason"], "log_tail": out.stderr[-3000:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", default="1,2", help="comma-separated K values")
    ap.add_argument("-n", type=int, default=4, help="experiments per K")
    ap.add_argument("--target", default="rmsnorm_h4096")
    ap.add_argument("--max-rounds", type=int, default=10, help="[bench] max_rounds (keeps the run short)")
    ap.add_argument("--backend", default="local", choices=["local", "interpret"],
                    help="local: this machine's CUDA GPUs; interpret: the CPU (the scheduler's phases only)")
    ap.add_argument("--out", type=Path, default=None, help="write results.json here")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="autogk-parallel-"))
    (work / "template").mkdir()
    template = make_project(work / "template", args.target, args.backend)
    extra = {"AUTOGK_BENCH_MAX_ROUNDS": str(args.max_rounds), "AUTOGK_GPU_LOCK_DIR": str(work / "locks"),
             "AUTOGK_BENCH_BACKEND": args.backend}
    on_gpu = args.backend == "local"
    gpus = sh("nvidia-smi", "-L", cwd=work).strip().splitlines() if on_gpu else [f"CPU: {os.cpu_count()} cores"]
    print(f"{len(gpus)} GPU(s): " + "; ".join(gpus) if on_gpu else gpus[0])
    results = []
    for k in [int(x) for x in args.k.split(",")]:
        r = run_k(template, k, args.n, work, extra, on_gpu)
        results.append(r)
        ph = r["phases"]
        print(f"K={k}: {r['n']} experiments in {r['wall_s']} s = {r['experiments_per_hour']} experiments/hour; "
              f"GPU busy share {r['gpu_busy_share']}")
        print(f"   phases (s, summed over experiments): open {ph.get('open_s')}, bench {ph.get('bench_s')} "
              f"({ph.get('benchmarks')} benchmarks), wait {ph.get('wait_s')}, conclude {ph.get('conclude_s')}; "
              f"loop thread busy {ph['loop_thread_share']} of the wall time")
        for e in r["experiments"]:
            print(f"   #{e['number']:04d} gpu {','.join(e['gpus'])} {e['decision']:<6} {e['hypothesis']:<36} "
                  f"bench {e['bench_wall_s']} s{' (rebased, measured again)' if e['rebased'] else ''} {e['figures']} "
                  f"{e['phases']}")
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
