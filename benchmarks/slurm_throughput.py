"""Experiments per hour of `autogk iterate --parallel K` through SLURM, on a single-node CPU cluster.

    python benchmarks/slurm_throughput.py [--k 1,2] [-n 4] [--out DIR]

Uses the cluster SLURM_CONF names when it answers, else starts one with scripts/slurm-local.sh (as
root; the Debian packages slurm-wlm and munge). For each K: a fresh project with the small `scale`
test target, the tune agent, [bench] backend = "slurm" with the interpret backend inside each job
(one CPU per job, partition cpu), MLflow off; `autogk iterate -n N --parallel K` timed end to end.
Prints one row per K (wall time, experiments/hour, summed queue and run seconds of the SLURM jobs
from the result notes) and the speed-up.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "scale"


def sh(*args: str, cwd: Path, env: dict | None = None) -> str:
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout


def cluster(work: Path) -> tuple[str, Path | None]:
    conf = os.environ.get("SLURM_CONF", "")
    if conf and subprocess.run(["sinfo", "-h"], capture_output=True, env=os.environ).returncode == 0:
        return conf, None
    d = work / "slurm"
    out = subprocess.run(["bash", str(REPO / "scripts" / "slurm-local.sh"), "start", str(d)], capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise SystemExit(f"could not start a SLURM cluster:\n{out.stdout}{out.stderr}")
    return str(d / "slurm.conf"), d


def bench_env(conf: str, work: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOGK_")}
    env.update(PYTHONPATH=str(REPO), SLURM_CONF=conf, HOME=str(work / "home"),
               GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@localhost",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost",
               AUTOGK_TRACKING_ENABLED="false", AUTOGK_BENCH_BACKEND="slurm", AUTOGK_SLURM_INSIDE="interpret",
               AUTOGK_SLURM_CPUS="1", AUTOGK_SLURM_PARTITION="cpu", AUTOGK_SLURM_POLL_S="0.5",
               AUTOGK_BENCH_UNTIMED="merge", AUTOGK_BENCH_HOOK_MODE="foreground")
    return env


def make_project(root: Path, env: dict) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    proj = root / "proj"
    sh(sys.executable, "-m", "autogk_git", "init", str(proj), "--definition", str(DATA / "definition.json"),
       "--workloads", str(DATA / "workloads.jsonl"), "--no-check", cwd=root, env=env)
    shutil.copyfile(DATA / "kernel.py", proj / "kernels" / "scale" / "kernel.py")
    sh("git", "commit", "-qam", "scale: triton kernel", cwd=proj, env=env)
    return proj


def note(proj: Path, sha: str) -> dict:
    text = sh("git", "notes", "--ref", "autogk/results", "show", sha, cwd=proj)
    return json.loads(text[text.index("{"):])


def run_k(template: Path, k: int, n: int, work: Path, env: dict) -> dict:
    proj = work / f"k{k}"
    shutil.copytree(template, proj, symlinks=True)
    env = {**env, "AUTOGK_SLURM_SHARED": str(work / f"shared-k{k}"), "TRITON_CACHE_DIR": str(work / f"triton-k{k}")}
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "autogk_git", "iterate", "-n", str(n), "--parallel", str(k),
                          "--agent", "tune", "--json"], cwd=proj, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    if out.returncode != 0:
        raise SystemExit(f"K={k}: autogk iterate failed ({out.returncode}):\n{out.stdout}\n{out.stderr[-4000:]}")
    report = json.loads(out.stdout)
    queue = run = 0.0
    jobs = 0
    for e in report["experiments"]:
        for s in note(proj, e["commit"])["stages"].values():
            jobs += 1
            queue += s["slurm"].get("queue_s", 0.0)
            run += s.get("gpu_s", 0.0)
    done = len(report["experiments"])
    return {"k": k, "n": done, "wall_s": round(wall, 1), "experiments_per_hour": round(3600 * done / wall, 1),
            "slurm_jobs": jobs, "queue_s": round(queue, 1), "run_s": round(run, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", default="1,2", help="comma-separated K values")
    ap.add_argument("-n", type=int, default=4, help="experiments per K")
    ap.add_argument("--out", type=Path, default=None, help="write results.json here")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="autogk-slurm-bench-"))
    (work / "home").mkdir()
    conf, started = cluster(work)
    try:
        env = bench_env(conf, work)
        template = make_project(work / "template", env)
        cpus = sh("sinfo", "-h", "-o", "%c", cwd=work, env=env).strip()
        print(f"{platform.node()}: {os.cpu_count()} CPU(s); SLURM node CPUs {cpus}; "
              f"load {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        results = []
        for k in [int(x) for x in args.k.split(",")]:
            r = run_k(template, k, args.n, work, env)
            results.append(r)
            print(f"K={k}: {r['n']} experiments in {r['wall_s']} s = {r['experiments_per_hour']} experiments/hour; "
                  f"{r['slurm_jobs']} SLURM jobs, {r['run_s']} s running, {r['queue_s']} s queued")
            sys.stdout.flush()
        if len(results) > 1:
            base = results[0]["experiments_per_hour"]
            for r in results[1:]:
                print(f"speed-up K={r['k']} vs K={results[0]['k']}: {r['experiments_per_hour'] / base:.2f}x")
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "results.json").write_text(json.dumps(results, indent=1))
    finally:
        if started is not None:
            subprocess.run(["bash", str(REPO / "scripts" / "slurm-local.sh"), "stop", str(started)],
                           capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
