"""CPU and wall seconds of one small judge job, its kernel processes forked (bench/judge/forks.py) or
started afresh, alternating, on this machine's CPU (Triton interpreter not needed: two torch kernels).

    python3 benchmarks/kernel_start.py [--pairs 3] [--json OUT.json] [--device cuda]

Each job runs under a process of its own that is a subreaper and waits for every descendant, so its
CPU figure (user + system, from getrusage) counts the judge, its starter and every kernel process,
whoever reaped them; the whole machine's (/proc/stat) is printed beside it.
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
sys.path.insert(0, str(ROOT))

from autogk_git.bench import runner  # noqa: E402

DATA = ROOT / "tests" / "data"
HONEST = "import torch\n\ndef run(x, bias, scale, out):\n    torch.add(x * scale, bias, out=out)\n"


def machine_cpu_s() -> float:
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:4]  # user, nice, system
    return sum(int(p) for p in parts) / os.sysconf("SC_CLK_TCK")


def measured(how: str, device: str) -> dict:
    """one_job(how) in a child that is a subreaper: (its figures, and the CPU of all its descendants)."""
    import ctypes
    import resource
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        rec = one_job(how, device)
        while True:  # every descendant, reaped here once its parent is gone
            try:
                os.wait()
            except ChildProcessError:
                break
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        rec["job_cpu_s"] = round(ru.ru_utime + ru.ru_stime, 2)
        os.write(w, json.dumps(rec).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.waitpid(pid, 0)
    return json.loads(data)


def one_job(how: str, device: str) -> dict:
    definition = json.loads((DATA / "scale" / "definition.json").read_text())
    wl = json.loads((DATA / "scale" / "workloads.jsonl").read_text().splitlines()[4])["workload"]
    job = {"version": 1, "stage": "ab", "definition": definition, "workloads": [wl], "generator": None,
           "blob_root": ".", "seed": 11, "sources": {"parent": {"kernel.py": HONEST}, "candidate": {"kernel.py": HONEST}},
           "settings": {"device": device, "timed": True, "trials": 2, "reps": 6, "warmup": 2, "min_rounds": 3,
                        "max_rounds": 3, "min_effect": 0.01, "confidence": 0.95, "kernel_start": how}}
    c0, t0 = machine_cpu_s(), time.monotonic()
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="") if device == "cpu" else dict(os.environ)
    out = runner.run_worker(job, env, 300)
    wall, cpu = time.monotonic() - t0, machine_cpu_s() - c0
    statuses = sorted({w["status"] for ws in out["labels"].values() for w in ws.values()})
    return {"how": how, "wall_s": round(wall, 2), "machine_cpu_s": round(cpu, 2), "statuses": statuses}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda (the GPU's first device)")
    a = ap.parse_args()
    runs = []
    for i in range(a.pairs):
        for how in (("exec", "fork") if i % 2 == 0 else ("fork", "exec")):
            r = measured(how, a.device)
            runs.append(r)
            print(json.dumps(r), flush=True)
    summary = {how: {k: statistics.median(r[k] for r in runs if r["how"] == how) for k in ("wall_s", "job_cpu_s", "machine_cpu_s")}
               for how in ("exec", "fork")}
    summary["cpu_ratio_fork_over_exec"] = round(summary["fork"]["job_cpu_s"] / summary["exec"]["job_cpu_s"], 3)
    print(json.dumps({"median": summary, "cores": os.cpu_count(), "device": a.device}))
    if a.json:
        a.json.write_text(json.dumps({"runs": runs, "median": summary}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
