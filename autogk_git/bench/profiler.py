"""The profiler: where one kernel's time goes, workload by workload, written as an artifact agents read.

Runs beside the judge's package (`judge/`) and reuses its input making, so it needs only the standard library, torch
and triton on the machine that runs it:

    python profiler.py JOB.json OUT.json             # on the GPU machine: profile the job's candidate
    python -m autogk_git.bench.profiler [--target T] [--rev R]   # in a project: build the job, run, write
                                                                  # .git/autogk/artifacts/<target>/profile.md

Per workload: host wall time per call (synchronized), device time per call summed over the kernels
torch.profiler (CUPTI) saw, kernel launches per call, the three costliest kernels, and the achieved
bandwidth (input and output bytes over device time). Without CUDA only the host time is measured
(the Triton interpreter's time says nothing about a GPU) and the report says so. Hardware counters per
kernel (Nsight Compute) are bench/ncu.py's, taken by the loop after a verdict (loop/profile.py).
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path


def profile_job(job: dict, calls: int = 20, warmup: int = 3) -> dict:
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    # The judge's package, a sibling folder: the same inputs and kernel import (also run as a file).
    from judge import calls as jcalls
    from judge import checks, process
    from judge import files as jfiles
    from judge import inputs as jinputs

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":  # Triton's interpreter (profile_target's CPU path), as the judge's CPU kernel processes run it
        from judge import interp
        interp.patch_once()
    tmp = Path(tempfile.mkdtemp(prefix="autogk-profile-"))
    gen = jfiles.import_files("generator", {"inputs.py": job["generator"]}, tmp, main="inputs.py") \
        if job.get("generator") else None
    inputs = jinputs.Inputs(job, device, gen)
    label, files = next(iter(job["sources"].items()))
    run = jfiles.import_kernel(label, files, tmp).run
    rows = []
    for i, wl in enumerate(job["workloads"]):
        axes = jinputs.resolve_axes(job["definition"], wl)
        args = inputs.make(wl, job.get("seed", 0) + i)
        outs = checks.alloc_outputs(job["definition"], axes, device, i)
        nbytes = sum(t.numel() * t.element_size() for t in [*args, *outs] if isinstance(t, torch.Tensor))
        for _ in range(warmup):
            run(*args, *outs)
        jcalls.sync(device)
        t0 = time.perf_counter()
        for _ in range(calls):
            run(*args, *outs)
        jcalls.sync(device)
        host_us = (time.perf_counter() - t0) / calls * 1e6
        row = {"uuid": wl["uuid"], "axes": {k: v for k, v in axes.items() if k in wl.get("axes", {})},
               "bytes": nbytes, "host_us_per_call": round(host_us, 2)}
        if device == "cuda":
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(calls):
                    run(*args, *outs)
                jcalls.sync(device)
            kernels: dict[str, list[float]] = {}
            for ev in prof.events():
                if str(getattr(ev, "device_type", "")).endswith("CUDA"):
                    kernels.setdefault(ev.name, []).append(ev.time_range.elapsed_us())
            total = sum(sum(v) for v in kernels.values())
            row.update(device_us_per_call=round(total / calls, 3),
                       launches_per_call=round(sum(len(v) for v in kernels.values()) / calls, 2),
                       top_kernels=[{"name": k[:80], "us_per_call": round(sum(v) / calls, 3), "calls": len(v)}
                                    for k, v in sorted(kernels.items(), key=lambda kv: -sum(kv[1]))[:3]],
                       achieved_gbps=round(nbytes / (total / calls) / 1e3, 1) if total else None)
        rows.append(row)
    env = process.environment(device)
    return {"label": label, "device": device, "calls": calls, "environment": env, "workloads": rows,
            "note": None if device == "cuda" else "no CUDA: host time only (the Triton interpreter on CPU)"}


def render(report: dict, target: str) -> str:
    lines = [f"# Profile of {target} ({report['device']}, {report['calls']} calls per workload)", ""]
    if report.get("note"):
        lines += [report["note"], ""]
    gpu = report["device"] == "cuda"
    head = "| workload | axes | host us/call |" + (" device us/call | launches | GB/s | costliest kernel |"
                                                   if gpu else "")
    lines += [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in report["workloads"]:
        axes = ", ".join(f"{k}={v}" for k, v in r["axes"].items())
        line = f"| {r['uuid'][:8]} | {axes} | {r['host_us_per_call']} |"
        if gpu:
            top = r["top_kernels"][0]["name"] if r.get("top_kernels") else ""
            line += f" {r['device_us_per_call']} | {r['launches_per_call']} | {r['achieved_gbps']} | {top} |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def profile_target(project, target, sources: dict[str, str], sha: str, calls: int = 20) -> Path:
    """Profile one kernel (its sources, as committed at sha) on this machine; returns the artifact path.

    The caller resolves the sources (record/kernels.sources_at): bench never reads git."""
    import os
    import subprocess

    from autogk_git.bench.backends import cuda_available
    from autogk_git.bench.backends.interpret import InterpretBackend
    from autogk_git.bench.job import make_job
    from autogk_git.errors import BenchError

    env, workloads = dict(os.environ), target.workloads
    if not cuda_available():  # the interpreter on CPU, within its size limit
        env.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
        workloads = InterpretBackend(project.config).eligible(target.definition, workloads)[0]
    job = make_job(target, "profile", {"candidate": sources}, workloads,
                   {}, int(sha[:8], 16))
    with tempfile.TemporaryDirectory() as d:
        jp, out = Path(d) / "job.json", Path(d) / "out.json"
        jp.write_text(json.dumps(job))
        proc = subprocess.run([sys.executable, __file__, str(jp), str(out), str(calls)], capture_output=True,
                              text=True, env=env)
        if proc.returncode != 0 or not out.exists():
            raise BenchError(f"the profiler failed: {proc.stderr.strip()[-800:]}",
                             "run `autogk bench` first: the kernel must be correct to be profiled")
        report = json.loads(out.read_text())
    report["commit"] = sha
    dest = project.artifact_dir(target.name)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "profile.json").write_text(json.dumps(report, indent=1))
    (dest / "profile.md").write_text(render(report, target.name))
    return dest / "profile.md"


def main(argv: list[str]) -> int:
    if argv and argv[0].endswith(".json"):
        report = profile_job(json.loads(Path(argv[0]).read_text()), calls=int(argv[2]) if len(argv) > 2 else 20)
        Path(argv[1]).write_text(json.dumps(report, indent=1))
        return 0
    import argparse

    from autogk_git.errors import BenchError
    from autogk_git.project import Project
    from autogk_git.record.kernels import commit_of, sources_at

    ap = argparse.ArgumentParser(prog="python -m autogk_git.bench.profiler", description=__doc__.splitlines()[0])
    ap.add_argument("--target")
    ap.add_argument("--rev")
    ap.add_argument("--calls", type=int, default=20)
    a = ap.parse_args(argv)
    project = Project.find()
    target = project.target(a.target)
    # This entry point resolves the kernel through record/ (which reads git): bench never starts git.
    rev = a.rev or project.trunk
    sha = commit_of(project.root, rev)
    if not sha:
        raise BenchError(f"'{rev}' is not a commit", "pass --rev with a branch, tag or sha")
    path = profile_target(project, target, sources_at(project.root, target, sha), sha, a.calls)
    print(path.read_text())
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
