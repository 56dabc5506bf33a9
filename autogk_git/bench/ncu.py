"""Nsight Compute (`ncu`) profiles: why a kernel is slow, in a few figures an agent can read.

Outside the judge and outside every timed window: after an experiment's verdict, in a process of its
own, `ncu` runs a small script that calls the kernel ONCE on a workload's generated inputs (a warm-up
call first compiles it, outside the profiled range: cudaProfilerStart/Stop bracket the one call), with
`--clock-control none` (the GPU's clocks as the judge saw them). Per workload, the Speed of Light,
Memory Workload Analysis, Occupancy and Launch Statistics sections are read back from the report as
CSV (`ncu --import REPORT --csv --page details`) and kept per kernel launched:

    duration_us, sm_pct (Compute (SM) Throughput), dram_pct, memory_pct, l2_hit_pct, dram_gbs,
    achieved_occupancy_pct, theoretical_occupancy_pct, registers, spill_requests, limiter, advice

`limiter` is read from the two speed-of-light shares: `memory` or `compute` when the larger is at least
60 % of peak, else `latency` (neither unit is busy: too few warps in flight, launch or dependency
stalls). `advice` names ncu's own rules that estimated a speedup (rule name and estimate, not its prose).

    python ncu.py run JOB.json   # under ncu, on the GPU machine: the kernel once per workload of the job

The script needs only the standard library, torch, triton and the judge's package beside it, and the
kernel is imported inside the judge's sandbox (bench/judge/sandbox.py) where Linux has Landlock.
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats")
SOL, MWA, OCC, LAUNCH = "GPU Speed Of Light Throughput", "Memory Workload Analysis", "Occupancy", "Launch Statistics"
# (section, metric) -> summary key. "Memory Throughput" is in two sections: a share of peak in Speed of
# Light, a rate in Memory Workload Analysis.
FIELDS = {
    (SOL, "Duration"): "duration_us",
    (SOL, "Compute (SM) Throughput"): "sm_pct",
    (SOL, "DRAM Throughput"): "dram_pct",
    (SOL, "Memory Throughput"): "memory_pct",
    (SOL, "L2 Cache Throughput"): "l2_pct",
    (MWA, "L2 Hit Rate"): "l2_hit_pct",
    (MWA, "Memory Throughput"): "dram_gbs",
    (MWA, "Local Memory Spilling Requests"): "spill_requests",
    (OCC, "Achieved Occupancy"): "achieved_occupancy_pct",
    (OCC, "Theoretical Occupancy"): "theoretical_occupancy_pct",
    (LAUNCH, "Registers Per Thread"): "registers",
}
TIME_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
RATE_GBS = {"byte/s": 1e-9, "byte/second": 1e-9, "Kbyte/s": 1e-6, "Kbyte/second": 1e-6, "Mbyte/s": 1e-3,
            "Mbyte/second": 1e-3, "Gbyte/s": 1.0, "Gbyte/second": 1.0, "Tbyte/s": 1e3, "Tbyte/second": 1e3}
BUSY = 60.0   # % of peak: a unit this busy is what limits the kernel
TIMEOUT_S = 300


class ProfileError(Exception):
    """ncu ran but gave no usable profile (it failed, timed out, or profiled no kernel)."""


# ------------------------------------------------------------------------------------------------
# The CSV, read back
# ------------------------------------------------------------------------------------------------

def _number(text: str) -> float | None:
    """ncu's figures: "90,781", "82.18", "no data", "n/a"."""
    t = (text or "").replace(",", "").strip()
    try:
        return float(t)
    except ValueError:
        return None


def _value(key: str, unit: str, text: str) -> float | None:
    v = _number(text)
    if v is None:
        return None
    if key == "duration_us":
        scale = TIME_US.get(unit.strip())
        return None if scale is None else round(v * scale, 4)
    if key == "dram_gbs":
        scale = RATE_GBS.get(unit.strip())
        return None if scale is None else round(v * scale, 2)
    return v


def limiter(k: dict[str, Any]) -> str:
    sm, mem = k.get("sm_pct"), max(k.get("dram_pct") or 0.0, k.get("memory_pct") or 0.0)
    if sm is None and not mem:
        return "unknown"
    sm = sm or 0.0
    if max(sm, mem) >= BUSY:
        return "memory" if mem >= sm else "compute"
    return "latency"


def parse_csv(text: str) -> list[dict[str, Any]]:
    """The kernels of `ncu --csv --page details` output, in launch order: {id, name, block, grid, <FIELDS>,
    limiter, advice}. Lines before the header (ncu's ==PROF== lines, the program's own output) are skipped."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    kernels: dict[str, dict[str, Any]] = {}
    advice: dict[str, list[tuple[float, str]]] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        kid = row.get("ID")
        if kid is None or not (row.get("Kernel Name") or "").strip():
            continue
        k = kernels.setdefault(kid, {"id": int(_number(kid) or 0), "name": row["Kernel Name"].strip(),
                                     "block": (row.get("Block Size") or "").strip(),
                                     "grid": (row.get("Grid Size") or "").strip()})
        key = FIELDS.get(((row.get("Section Name") or "").strip(), (row.get("Metric Name") or "").strip()))
        if key:
            k[key] = _value(key, row.get("Metric Unit") or "", row.get("Metric Value") or "")
        rule, gain = (row.get("Rule Name") or "").strip(), _number(row.get("Estimated Speedup") or "")
        if rule and gain:
            advice.setdefault(kid, []).append((gain, rule))
    out = []
    for kid, k in kernels.items():
        k["limiter"] = limiter(k)
        k["advice"] = [f"{rule} (est. {gain:.0f}%)" for gain, rule in sorted(advice.get(kid, []), reverse=True)[:3]]
        out.append(k)
    return sorted(out, key=lambda k: k["id"])


# ------------------------------------------------------------------------------------------------
# What agents read
# ------------------------------------------------------------------------------------------------

def _pct(x: Any) -> str:
    return "-" if x is None else f"{x:.0f}%"


def kernel_line(k: dict[str, Any]) -> str:
    dur = "-" if k.get("duration_us") is None else f"{k['duration_us']:.2f} us"
    bits = [f"{k['name'][:40]}: {dur}", f"SM {_pct(k.get('sm_pct'))}", f"DRAM {_pct(k.get('dram_pct'))}"
            + (f" ({k['dram_gbs']:.0f} GB/s)" if k.get("dram_gbs") is not None else ""),
            f"occupancy {_pct(k.get('achieved_occupancy_pct'))} achieved / {_pct(k.get('theoretical_occupancy_pct'))} "
            "theoretical"]
    if k.get("registers") is not None:
        bits.append(f"{k['registers']:.0f} registers/thread")
    if k.get("spill_requests"):
        bits.append(f"{k['spill_requests']:.0f} spill requests")
    bits.append(f"limiter: {k.get('limiter', 'unknown')}")
    if k.get("advice"):
        bits.append("ncu suggests " + ", ".join(k["advice"]))
    return "; ".join(bits)


def of(history: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest profile recorded in a result note (`profile`), taken or not."""
    for r in reversed(history):
        if isinstance(r.get("profile"), dict):
            return r["profile"]
    return None


def view_lines(history: list[dict[str, Any]], config: Any = None, axes: dict[str, dict] | None = None) -> list[str]:
    """The profile section of every agent's view: the newest profile in the notes, or one line saying why
    there is none (`no profile: ncu not found`)."""
    prof = of(history)
    if not prof or not prof.get("workloads"):
        why = (prof or {}).get("reason") or unavailable(config)
        return [f"no profile: {why}", ""]
    who = prof.get("kernel", "the kernel")
    lines = [f"Nsight Compute profile of {who} (ncu {prof.get('ncu_version', '')}, one call per workload, outside "
             f"the timed runs; limiter: memory or compute when that unit is >= {BUSY:.0f}% of its peak, else latency):"]
    for w in prof["workloads"]:
        ax = ", ".join(f"{k}={v}" for k, v in ((axes or {}).get(w["uuid"]) or w.get("axes") or {}).items())
        why = f", {w['why']}" if w.get("why") else ""
        lines.append(f"- workload {w['uuid'][:8]}" + (f" ({ax})" if ax else "") + f"{why}:")
        if w.get("error"):
            lines.append(f"  profile failed: {w['error'][:200]}")
        for k in w.get("kernels", [])[:4]:
            lines.append("  " + kernel_line(k))
    return lines + [""]


def one_line(history: list[dict[str, Any]], config: Any = None) -> str:
    """A single line for a log (the tuner's plan)."""
    prof = of(history)
    if not prof or not prof.get("workloads"):
        return f"no profile: {(prof or {}).get('reason') or unavailable(config)}"
    w = prof["workloads"][0]
    k = (w.get("kernels") or [{}])[0]
    if not k:
        return f"profile of {prof.get('kernel', 'the kernel')}: {w.get('error') or 'no kernel profiled'}"
    return f"profile of {prof.get('kernel', 'the kernel')} on {w['uuid'][:8]}: " + kernel_line(k)


# ------------------------------------------------------------------------------------------------
# Taking one
# ------------------------------------------------------------------------------------------------

def ncu_path() -> str | None:
    return shutil.which("ncu")


def unavailable(config: Any = None, backend: str | None = None) -> str | None:
    """Why no profile can be taken here, or None when one can."""
    bench = getattr(config, "bench", None)
    if bench is not None and getattr(bench, "profile", "ncu") == "off":
        return "[bench] profile = \"off\""
    if not ncu_path():
        return "ncu not found"
    if backend and backend != "local":
        return f"ncu runs only where the kernel runs on this machine (--backend local), not {backend}"
    return None


def version(ncu: str) -> str:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    last = [ln for ln in out.splitlines() if ln.strip()]
    return last[-1].replace("Version ", "").split(" (")[0] if last else ""


def profile(job: dict[str, Any], ncu: str, timeout_s: float = TIMEOUT_S, env: dict[str, str] | None = None
            ) -> list[dict[str, Any]]:
    """Run ncu over this file's script once per workload of the job; [{uuid, kernels | error}]."""
    out = []
    for wl in job["workloads"]:
        with tempfile.TemporaryDirectory(prefix="autogk-ncu-") as d:
            jp, rep = Path(d) / "job.json", Path(d) / "report"
            jp.write_text(json.dumps(dict(job, workloads=[wl])))
            cmd = [ncu, "--profile-from-start", "off", "--target-processes", "all", "--clock-control", "none",
                   *[a for s in SECTIONS for a in ("--section", s)], "-f", "-o", str(rep),
                   sys.executable, str(Path(__file__).resolve()), "run", str(jp)]
            row: dict[str, Any] = {"uuid": wl["uuid"]}
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
                if proc.returncode != 0 or not rep.with_suffix(".ncu-rep").exists():
                    raise ProfileError(f"ncu exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-400:]}")
                csv_text = subprocess.run([ncu, "--import", str(rep.with_suffix(".ncu-rep")), "--csv", "--page",
                                           "details"], capture_output=True, text=True, timeout=timeout_s).stdout
                row["kernels"] = parse_csv(csv_text)
                if not row["kernels"]:
                    raise ProfileError("ncu profiled no kernel (does run() launch one?)")
            except subprocess.TimeoutExpired:
                row["error"] = f"ncu did not finish within {timeout_s:.0f} s"
            except (OSError, ProfileError) as e:
                row["error"] = str(e)
            out.append(row)
    return out


def _run_once(job: dict[str, Any]) -> int:
    """Under ncu: the job's one kernel, once per workload, between cudaProfilerStart and Stop."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from judge import checks, sandbox
    from judge import files as jfiles
    from judge import inputs as jinputs

    tmp = Path(tempfile.mkdtemp(prefix="autogk-ncu-run-"))
    os.environ["TRITON_CACHE_DIR"] = str(tmp / "triton")
    gen = jfiles.import_files("generator", {"inputs.py": job["generator"]}, tmp, main="inputs.py") \
        if job.get("generator") else None
    inputs = jinputs.Inputs(job, "cuda", gen)
    made = []
    for i, wl in enumerate(job["workloads"]):
        axes = jinputs.resolve_axes(job["definition"], wl)
        made.append((inputs.make(wl, job.get("seed", 0) + i), checks.alloc_outputs(job["definition"], axes, "cuda", i)))
    torch.cuda.synchronize()
    # The kernel's code runs where the judge's kernels run: its folder and caches writable, no more.
    kdir = tmp / "kernel"
    (kdir / "tmp").mkdir(parents=True)
    # ncu's own lock folder (<tmp>/nvidia/nsight_compute) must stay writable: without it ncu refused to
    # profile a sandboxed process on the H200 ("InterprocessLockFailed"). Triton needs a temporary folder.
    locks = {os.path.join(tempfile.gettempdir(), "nvidia"), "/tmp/nvidia"}
    os.environ["TMPDIR"] = str(kdir / "tmp")
    tempfile.tempdir = None
    if os.environ.get("AUTOGK_SANDBOX", "1") != "0":
        read, write = sandbox.kernel_paths(kdir)
        sandbox.restrict(read, [*write, *sorted(locks)])
    label, files = next(iter(job["sources"].items()))
    run = jfiles.import_kernel(label, files, kdir).run
    for args, outs in made:
        run(*args, *outs)  # compiles: outside the profiled range
    torch.cuda.synchronize()
    for args, outs in made:
        torch.cuda.cudart().cudaProfilerStart()
        run(*args, *outs)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        sys.exit(_run_once(json.loads(Path(sys.argv[2]).read_text())))
    print("usage: python ncu.py run JOB.json   (under ncu; autogk runs it after a verdict)", file=sys.stderr)
    sys.exit(2)
