"""CPU and wall seconds of small judge jobs, their kernel processes (--start kernel) or their judges
(--start judge) forked (bench/judge/forks.py: the judge's starter; the runner's judge template) or
started afresh, alternating, on this machine's CPU (Triton interpreter not needed: two torch kernels).

    python3 benchmarks/kernel_start.py [--pairs 3] [--start kernel|judge] [--jobs 1] [--json OUT.json] [--device cuda]

Each measurement runs --jobs jobs one after the other (a judge template serves a loop's jobs: the first
starts it) under a process of its own that is a subreaper and waits for every descendant, so its CPU
figure (user + system, from getrusage) counts the judges, the template, the starters and every kernel
process, whoever reaped them; the whole machine's (/proc/stat) is printed beside it. Figures are per job.
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


def measured(how: str, device: str, start: str = "kernel", jobs: int = 1) -> dict:
    """`jobs` of one_job(how) in a child that is a subreaper: (their figures a job, and the CPU of all its
    descendants a job)."""
    import ctypes
    import resource
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        recs = [one_job(how, device, start) for _ in range(jobs)]
        for tpl in list(runner._TEMPLATES.values()):
            tpl.close()  # it ends, and is reaped, here: its CPU counts
        rec = {"how": how, "statuses": sorted({s for r in recs for s in r["statuses"]}),
               **{k: round(sum(r[k] for r in recs) / jobs, 2) for k in ("wall_s", "machine_cpu_s")},
               "first_wall_s": recs[0]["wall_s"]}
        while True:  # every descendant, reaped here once its parent is gone
            try:
                os.wait()
            except ChildProcessError:
                break
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        rec["job_cpu_s"] = round((ru.ru_utime + ru.ru_stime) / jobs, 2)
        os.write(w, json.dumps(rec).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.waitpid(pid, 0)
    return json.loads(data)


def one_job(how: str, device: str, start: str = "kernel") -> dict:
    definition = json.loads((DATA / "scale" / "definition.json").read_text())
    wl = json.loads((DATA / "scale" / "workloads.jsonl").read_text().splitlines()[4])["workload"]
    job = {"version": 1, "stage": "ab", "definition": definition, "workloads": [wl], "generator": None,
           "blob_root": ".", "seed": 11, "sources": {"parent": {"kernel.py": HONEST}, "candidate": {"kernel.py": HONEST}},
           "settings": {"device": device, "timed": True, "trials": 2, "reps": 6, "warmup": 2, "min_rounds": 3,
                        "max_rounds": 3, "min_effect": 0.01, "confidence": 0.95, f"{start}_start": how}}
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
    ap.add_argument("--start", choices=("kernel", "judge"), default="kernel", help="what starts forked or afresh")
    ap.add_argument("--jobs", type=int, default=1, help="jobs a measurement (one after the other)")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda (the GPU's first device)")
    a = ap.parse_args()
    runs = []
    for i in range(a.pairs):
        for how in (("exec", "fork") if i % 2 == 0 else ("fork", "exec")):
            r = measured(how, a.device, a.start, a.jobs)
            runs.append(r)
            print(json.dumps(r), flush=True)
    summary = {how: {k: statistics.median(r[k] for r in runs if r["how"] == how) for k in ("wall_s", "job_cpu_s", "machine_cpu_s")}
               for how in ("exec", "fork")}
    summary["cpu_ratio_fork_over_exec"] = round(summary["fork"]["job_cpu_s"] / summary["exec"]["job_cpu_s"], 3)
    print(json.dumps({"median": summary, "cores": os.cpu_count(), "device": a.device, "start": a.start,
                      "jobs": a.jobs}))
    if a.json:
        a.json.write_text(json.dumps({"runs": runs, "median": summary}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
