"""The tuner's loop on one bundled target, then its claim checked per workload by an independent timer.

How to re-run (on a CUDA GPU with torch and triton; MLflow, GitPython and the autogk install are not needed,
the repository on PYTHONPATH is enough):

    PYTHONPATH=$PWD python3 benchmarks/loop_gpu.py --target rmsnorm_h4096 -n 10 --max-time 240 --out loop-out
    PYTHONPATH=$PWD python3 benchmarks/loop_gpu.py --target dsa_topk_indexer_fp8_h64_d128_topk2048_ps64 \
        -n 20 --max-time 300 --out loop-out

Smoke run on a CPU (Triton interpreter; no GPU timing, the loop's correct candidates are merged with
`--merge-untimed` so the trunk moves; the check of both kernels against the reference runs on the
workloads under [bench] cpu_max_numel, and the "latencies" are host wall times of the interpreter):

    PYTHONPATH=$PWD python benchmarks/loop_gpu.py --target rmsnorm_h4096 -n 2 --backend interpret \
        --max-time 200 --out /tmp/loopgpu-smoke

On the lent H200 (10 minutes a command): bound the whole run with --wall-limit (iterate is cut short so the
timing and the report still fit), and split a long loop over calls on one project kept in /tmp while the
machine stays warm (--project; --no-timing on all calls but the last, or a last call with --no-iterate):

    PYTHONPATH=$PWD timeout 600 python3 benchmarks/loop_gpu.py --target rmsnorm_h4096 -n 10 --max-time 400 \
        --grace 90 --wall-limit 580 --no-timing --project /tmp/loopgpu/rmsnorm --out $OUT/rmsnorm_1
    PYTHONPATH=$PWD timeout 600 python3 benchmarks/loop_gpu.py --target rmsnorm_h4096 -n 10 --max-time 400 \
        --grace 90 --wall-limit 580 --no-iterate --project /tmp/loopgpu/rmsnorm --out $OUT/rmsnorm_2

[bench] keys can be set through the environment, which the loop inherits (AUTOGK_BENCH_REPS=10, ...).

Steps, each wrapped so that a failure is written into the outputs and the rest still runs:
1. `autogk init PROJ --example TARGET` in a temp dir (MLflow off, foreground hooks);
2. `autogk iterate -n N --agent tune --backend B --max-time T --json`, its progress streamed to stdout
   and to OUT/iterate_TARGET.log (killed, with its whole process tree, at T + --grace seconds);
3. the project's bundle (OUT/project_TARGET.bundle), right after the loop: a run cut later keeps it;
   the result notes: per experiment the change, decision, objective ratio and interval, worst workload,
   wall seconds (three sources: the note's bench_wall_s, iterate's own bench_s, and the time from this
   experiment's "proposing" line to the next one in the log) and per-workload parent/candidate latencies
   of the ab stage;
4. independent reproduction, in a child process with a time limit: the kernel at the trunk's start
   (the first trunk commit holding the target's kernel.py) and at `autogk best` (else the trunk's tip),
   every workload: inputs from the target's own generator (autogk_git.bench.jinputs.Inputs), one check
   of both kernels against the definition's reference by the target's compare rules (checks.check_once),
   then device time by CUDA-graph replay after a 256 MB L2 flush (benchmarks/dsa_bench.py graph_median,
   Flush), and by CUPTI (torch.profiler in this process: a call's kernels summed between flushes,
   dsa_bench.cupti_median: the quantity the judge decides on, read by code of its own; the graph replay
   adds its launch, ~3 us, and the gaps between a call's kernels), by CUPTI again after the judge's own
   kind of flush (dsa_bench.WriteFlush, a write: dirty lines whose write-back the call pays, where the
   read flush leaves clean ones; mid-size workloads near the L2's size differ by it), and once more with
   each call on its own copy of the inputs and outputs, as many copies as the judge's window holds
   (dsa_bench.cupti_median_rotated: the judge's conditions; on an H100, 2026-12-05, the judge's own
   ratio matched this one within 5 % at batch 8192, where the read flush on one input set differed by 8-9 %,
   benchmarks/agreement_probe.py), and the reference host-inclusive with events (dsa_bench.events_median; reps capped by a
   per-workload and a total budget); the floor from dsa_bench.floor_us for the DSA targets, else
   bytes in + out over the measured copy bandwidth (dsa_bench.ceilings). With --time-keeps, each kept
   experiment's kernel and its parent's too, by the last CUPTI figure only (the judge's conditions), so
   each keep's ratio stands beside autogk's. autogk's figures are the GPU's its notes name: where that is
   not this machine's (a project carried between calls), no agreement is counted;
5. `autogk report --no-mlflow`: its PNG copied to OUT/report_gpu_TARGET.png (report_cpu_ on interpret);
6. OUT/loop_TARGET.md and OUT/loop_TARGET.json.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCH_DIR = Path(__file__).resolve().parent
AGREE = 0.05        # best/start ratios by autogk and by the independent timer agree within this fraction ...
AGREE_MIN_US = 10.0  # ... on workloads at least this long (shorter ones: launch overheads differ by timer)
SLOWER = 0.02       # a workload of best slower than the start by more than this is flagged (the guard's default)


def say(msg: str) -> None:
    print(f"[loop_gpu {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def short_error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e)[:500]}\n" + "".join(traceback.format_tb(e.__traceback__)[-3:])[-1500:]


# ---------------------------------------------------------------------------------------------
# Processes: every child has a time limit, and at the limit its whole tree is ended
# ---------------------------------------------------------------------------------------------

def descendants(pid: int) -> list[int]:
    """Every process below pid (by /proc's parent links): bench workers start their own process
    groups, so ending the group of the process this script started would leave them running."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from autogk_git.bench.judge import hygiene
    return hygiene.descendants(pid)


def end_tree(proc: subprocess.Popen) -> None:
    """SIGTERM the child and everything below it, then SIGKILL what is left after 5 s."""
    pids = [proc.pid] + descendants(proc.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            try:
                os.kill(p, sig)
            except (ProcessLookupError, PermissionError):
                pass
        if sig == signal.SIGTERM:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            time.sleep(0.5)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def run_streamed(cmd: list[str], cwd: Path, env: dict[str, str], log_path: Path, timeout_s: float
                 ) -> dict[str, Any]:
    """Run cmd; its stderr (progress) goes line by line to stdout and log_path with the time since the
    start; its stdout is kept. Returns rc (124 at the limit), stdout, [(t, line)], wall_s."""
    t0 = time.monotonic()
    lines: list[tuple[float, str]] = []
    with tempfile.TemporaryFile("w+") as out, open(log_path, "w") as log:
        log.write(f"$ {' '.join(cmd)}   (cwd {cwd})\n")
        log.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, bufsize=1)

        def pump() -> None:
            for line in proc.stderr:
                t = time.monotonic() - t0
                lines.append((t, line.rstrip("\n")))
                log.write(f"{t:8.1f}s {line}")
                log.flush()
                sys.stdout.write(f"  | {line}")
                sys.stdout.flush()

        th = threading.Thread(target=pump, daemon=True)
        th.start()
        rc: int
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            say(f"{cmd[3] if len(cmd) > 3 else cmd[0]} passed its limit of {timeout_s:.0f} s: ending it and its children")
            end_tree(proc)
            rc = 124
        th.join(timeout=10)
        out.seek(0)
        stdout = out.read()
        log.write(f"--- rc {rc}, {time.monotonic() - t0:.1f} s\n--- stdout:\n{stdout[-20000:]}\n")
    return {"rc": rc, "stdout": stdout, "lines": lines, "wall_s": round(time.monotonic() - t0, 2)}


def run_quiet(cmd: list[str], cwd: Path, env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess:
    """A short child with a limit; at the limit its tree is ended and rc is 124."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        end_tree(proc)
        out, err = proc.communicate()
        return subprocess.CompletedProcess(cmd, 124, out, (err or "") + f"\n(ended at its limit of {timeout_s:.0f} s)")


def cli_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "PYTHONUNBUFFERED": "1", "AUTOGK_TRACKING_ENABLED": "0", "AUTOGK_BENCH_HOOK_MODE": "foreground",
            "GIT_AUTHOR_NAME": "autogk bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
            "GIT_COMMITTER_NAME": "autogk bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}


def autogk(cwd: Path, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    return run_quiet([sys.executable, "-m", "autogk_git", *args], cwd, cli_env(), timeout_s)


def git_out(cwd: Path, *args: str) -> str:
    r = run_quiet(["git", *args], cwd, cli_env(), 60)
    if r.returncode:
        raise RuntimeError(f"git {' '.join(args)} failed: {r.stderr.strip()[:300]}")
    return r.stdout.strip()


# ---------------------------------------------------------------------------------------------
# Reading the loop's record
# ---------------------------------------------------------------------------------------------

PROPOSING = re.compile(r"^#(\d+): .*(proposing|committed)")


def walls_from_log(lines: list[tuple[float, str]]) -> dict[int, float]:
    """Seconds from an experiment's first line to the next experiment's first line (the last one: to
    the loop's "done:" line, else its last line). Serial runs only: with -j the lines interleave."""
    first: dict[int, float] = {}
    for t, line in lines:
        m = PROPOSING.match(line.strip())
        if m and int(m.group(1)) not in first:
            first[int(m.group(1))] = t
    end = next((t for t, line in lines if line.startswith("done:")), lines[-1][0] if lines else 0.0)
    nums = sorted(first)
    out = {}
    for k, n in enumerate(nums):
        nxt = first[nums[k + 1]] if k + 1 < len(nums) else end
        out[n] = round(nxt - first[n], 1)
    return out


def ab_latencies(res: dict[str, Any], label: str) -> dict[str, float]:
    w = ((((res.get("stages") or {}).get("ab") or {}).get("workloads") or {}).get(label) or {})
    return {u: float(r["latency_us"]) for u, r in w.items() if isinstance(r, dict) and r.get("latency_us") is not None}


def read_experiments(root: Path, target: str, iterate_report: dict[str, Any], log_walls: dict[int, float]
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rows for the table, the raw result notes), oldest first."""
    sys.path.insert(0, str(REPO))
    from autogk_git.project import Project
    from autogk_git.record.experiments import results
    project = Project(root)
    res = results(project, target)
    bench_s = {e.get("number"): e.get("bench_s") for e in iterate_report.get("experiments", []) or []}
    axes = {w["uuid"]: w.get("axes", {}) for w in project.target(target).workloads}
    rows = []
    for r in res:
        v = r.get("verdict") or {}
        per = v.get("per_workload") or []
        worst = max(per, key=lambda w: w["ratio"]) if per else None
        n = r.get("experiment")
        cand, par = ab_latencies(r, "candidate"), ab_latencies(r, "parent")
        rows.append({
            "experiment": n, "commit": r.get("commit"), "parent": r.get("parent"), "change": r.get("hypothesis", ""),
            "decision": v.get("decision"), "outcome": v.get("outcome"), "objective": v.get("objective"),
            "ratio": v.get("ratio"), "ci_low": v.get("ci_low"), "ci_high": v.get("ci_high"), "rounds": v.get("rounds"),
            "worst_workload": ({"uuid": worst["uuid"], "axes": axes.get(worst["uuid"], {}), "ratio": worst["ratio"],
                                "ci_low": worst.get("ci_low"), "ci_high": worst.get("ci_high")} if worst else None),
            "coverage": (v.get("coverage") or {}).get("checked"), "workloads": v.get("workloads"),
            "figures": v.get("figures", ""), "reason": v.get("reason", ""),
            "wall_s_note": (r.get("cost") or {}).get("bench_wall_s"), "wall_s_iterate": bench_s.get(n),
            "wall_s_log": log_walls.get(n), "gpu_s": (r.get("cost") or {}).get("gpu_s"),
            "ab_timing_s": (((r.get("stages") or {}).get("ab") or {}).get("ab") or {}).get("timing_s"),
            "timer": (((r.get("stages") or {}).get("ab") or {}).get("ab") or {}).get("timer"),
            "parent_drift": (v.get("parent_drift") or {}).get("ratio"),  # the trunk's kernel now / at its keep
            "parent_drift_worst": ((v.get("parent_drift") or {}).get("worst") or {}).get("ratio"),  # its worst workload
            "latency_us": {u: {"parent": par.get(u), "candidate": cand.get(u)} for u in sorted(set(cand) | set(par))},
            "gpu": (r.get("environment") or {}).get("gpu"),
        })
    return rows, res


def kernel_files(root: Path, target: str, rev: str) -> dict[str, str]:
    sys.path.insert(0, str(REPO))
    from autogk_git.project import Project
    from autogk_git.record import kernels
    project = Project(root)
    files = kernels.sources_at(project.root, project.target(target), rev)
    if "kernel.py" not in files:
        raise RuntimeError(f"no kernel.py for {target} at {rev}")
    return files


def keep_kernels(root: Path, target: str, exps: list[dict[str, Any]], known: dict[str, dict[str, str]]
                 ) -> tuple[list[dict[str, Any]], dict[str, dict[str, str]]]:
    """Each kept experiment's kernel and its parent's, labelled by their files (one label a kernel: the
    start's or best's where they are the same files): ([{experiment, label, parent_label}], the files of the
    labels `known` does not hold)."""
    by_files = {json.dumps(fs, sort_keys=True): label for label, fs in known.items()}
    extra: dict[str, dict[str, str]] = {}

    def label_of(rev: str, name: str) -> str:
        fs = kernel_files(root, target, rev)
        key = json.dumps(fs, sort_keys=True)
        if key not in by_files:
            by_files[key], extra[name] = name, fs
        return by_files[key]

    keeps = []
    for e in exps:
        if e.get("decision") == "keep" and e.get("commit") and e.get("parent"):
            n = e["experiment"]
            keeps.append({"experiment": n, "label": label_of(e["commit"], f"keep{n}"),
                          "parent_label": label_of(e["parent"], f"parent{n}")})
    return keeps, extra


def autogk_figures(res: list[dict[str, Any]], start: str, best_commits: set[str], best_number: int | None,
                   start_src: str, best_src: str, sources: dict[str, str]) -> dict[str, Any]:
    """autogk's own per-workload latencies of the start and of best, from the ab stages.

    start: the parent's latencies in the first experiment whose parent is the start kernel; best: the
    candidate's in best's own experiment, else the latest experiment that timed best as its parent.
    A commit "is" a kernel when its kernel.py is the same text (a trunk merge and its experiment)."""
    out: dict[str, Any] = {"start": {}, "best": {}, "start_from": None, "best_from": None,
                           "start_gpu": None, "best_gpu": None}

    def found(label: str, r: dict[str, Any], lat: dict[str, float], role: str) -> None:
        # the GPU its note names: a project carried from one machine to another (SA_FROM, IX_FROM) holds
        # figures of a GPU other than the one the independent timer runs on
        out[label], out[f"{label}_from"] = lat, f"#{r['experiment']} ({role})"
        out[f"{label}_gpu"] = (r.get("environment") or {}).get("gpu")

    for r in res:
        if r.get("parent") and (r["parent"] == start or sources.get(r["parent"]) == start_src):
            lat = ab_latencies(r, "parent")
            if lat:
                found("start", r, lat, "parent")
                break
    for r in res:
        if best_number is not None and r.get("experiment") == best_number:
            lat = ab_latencies(r, "candidate")
            if lat:
                found("best", r, lat, "candidate")
    if not out["best"]:
        for r in reversed(res):
            if r.get("parent") and (r["parent"] in best_commits or sources.get(r["parent"]) == best_src):
                lat = ab_latencies(r, "parent")
                if lat:
                    found("best", r, lat, "parent")
                    break
    return out


def other_gpu(timing: dict[str, Any], ag: dict[str, Any]) -> str:
    """'' where autogk's figures were measured on the GPU the independent timer ran on (or either is not
    known), else what differs: a ratio of one GPU against a ratio of another is no check of either."""
    here = (timing.get("env") or {}).get("gpu")
    there = sorted({g for g in (ag.get("start_gpu"), ag.get("best_gpu")) if g})
    if not here or not there or there == [here]:
        return ""
    return f"autogk's figures were measured on {' and '.join(there)}, the independent timer ran on {here}"


def keep_rows(timing: dict[str, Any], keeps: list[dict[str, Any]], exps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each kept experiment's ratio against its parent, by autogk (its ab stage, on the GPU its note names)
    and by the independent CUPTI under the judge's conditions (write flush, each call on its own copy),
    per workload and as a geometric mean over the workloads both timed (--time-keeps)."""
    here = (timing.get("env") or {}).get("gpu")
    by_n = {e.get("experiment"): e for e in exps}
    out = []
    for k in keeps:
        e = by_n.get(k["experiment"]) or {}
        elsewhere = bool(here and e.get("gpu") and e["gpu"] != here)
        per, both, applies, agree = [], [], 0, 0
        for t in timing.get("rows", []):
            c, p = (t.get(k["label"]) or {}).get("cupti_wr_us"), (t.get(k["parent_label"]) or {}).get("cupti_wr_us")
            lat = (e.get("latency_us") or {}).get(t["uuid"]) or {}
            ag = lat["candidate"] / lat["parent"] if lat.get("candidate") and lat.get("parent") else None
            ind = c / p if c and p else None
            row = {"uuid": t["uuid"], "axes": t.get("axes", {}), "autogk": ag, "independent": ind}
            if ag and ind:
                both.append((ag, ind))
                if max(c, p) >= AGREE_MIN_US and not elsewhere:
                    applies += 1
                    row["agree"] = abs(ind / ag - 1) <= AGREE
                    agree += row["agree"]
            per.append(row)

        def gm(xs: list[float]) -> float | None:
            return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else None

        # over the workloads both timed; where they share none (autogk's figures untimed, the CPU's), each
        # over its own
        ags = [a for a, _ in both] or [r["autogk"] for r in per if r["autogk"]]
        inds = [i for _, i in both] or [r["independent"] for r in per if r["independent"]]
        out.append({**k, "change": e.get("change", ""), "gpu": e.get("gpu"), "other_gpu": elsewhere,
                    "ratio_autogk": gm(ags), "ratio_independent": gm(inds), "workloads_both": len(both),
                    "workloads_independent": len(inds), "workloads_checked": applies, "agree": agree,
                    "workloads": per})
    return out


# ---------------------------------------------------------------------------------------------
# Independent reproduction: a child process (`--timing-job JOB.json`), so a hang or a lost CUDA
# context cannot stop the rest; it writes its JSON after every workload
# ---------------------------------------------------------------------------------------------

def load_path(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def install_fake_timers(dsa) -> None:
    """Host-clock stand-ins for dsa_bench's CUDA timers, with their signatures (a CPU test of the GPU path)."""
    def host_median(fn, flush, reps: int) -> float:
        ts = []
        for _ in range(reps):
            flush()
            t = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t) * 1e6)
        return statistics.median(ts)

    class FakeFlush:
        method = "none (fake timer)"

        def __call__(self) -> None:
            pass

    dsa.graph_median = dsa.events_median = dsa.cupti_median = host_median
    dsa.cupti_kernels = lambda fn, flush, reps: (host_median(fn, flush, reps), {})  # no kernel names on a host
    dsa.Flush = dsa.WriteFlush = FakeFlush
    dsa.ceilings = lambda: {"copy_bytes_per_s": 1e10, "bf16_flops": 1e11, "fp8_flops": None}


def timing_main(job_path: Path) -> int:
    job = json.loads(job_path.read_text())
    out_path = Path(job["out"])
    device = job["device"]
    gpu = device.startswith("cuda")
    state: dict[str, Any] = {"device": device, "rows": [], "errors": [], "done": False}

    def save() -> None:
        out_path.write_text(json.dumps(state, indent=1, default=str))

    t_start = time.monotonic()
    import torch
    sys.path.insert(0, str(REPO))
    from autogk_git.bench.judge import calls, checks, process
    from autogk_git.bench.judge import files as jfiles
    from autogk_git.bench.judge import inputs as jinputs
    tdir = Path(job["target_dir"])
    definition = json.loads((tdir / "definition.json").read_text())
    wfile = Path(job.get("workloads_file") or tdir / "workloads.jsonl")
    wls = [json.loads(x) for x in wfile.read_text().splitlines() if x.strip()]
    wls = [w.get("workload", w) for w in wls]
    gen = calls.load_module("loopgpu_gen", tdir, "inputs.py") if (tdir / "inputs.py").exists() else None
    checks.set_target(gen)  # the target's compare rules (checks.compare reads them)
    inputs = jinputs.Inputs({"definition": definition}, device, gen)
    reference = jinputs.load_reference(definition)
    kroot = Path(tempfile.mkdtemp(prefix="loopgpu-kernels-"))
    kernels = {}
    for label, kdir in job["kernels"].items():
        try:
            files = {str(p.relative_to(kdir)): p.read_text() for p in Path(kdir).rglob("*.py")}
            kernels[label] = jfiles.import_kernel(f"loopgpu_{label}", files, kroot)
        except Exception as e:  # noqa: BLE001 - a kernel that cannot be imported: said on every row
            state["errors"].append(f"kernel {label} could not be imported: {short_error(e)}")
            state[f"import_error_{label}"] = short_error(e)
    state["env"] = process.environment(device)
    # timed: the GPU path. fake_timer (tests on a CPU only): the same path with dsa_bench's timers and
    # ceilings replaced by host-clock stand-ins, so everything but the CUDA calls themselves runs.
    fake = bool(job.get("fake_timer"))
    timed = gpu or fake
    dsa = None
    ceil = None
    flush = None
    if timed:
        dsa = load_path("loopgpu_dsa_bench", BENCH_DIR / "dsa_bench.py")
        if fake:
            install_fake_timers(dsa)
        try:
            ceil = dsa.ceilings()
        except Exception as e:  # noqa: BLE001 - fall back to the H200 figures of ../shared/device.md, said so
            state["errors"].append(f"ceilings not measured: {short_error(e)}")
            ceil = {"copy_bytes_per_s": 4.245e12, "bf16_flops": 791e12, "fp8_flops": 1455e12,
                    "note": "not measured here: the H200 figures of 2026-11-30"}
        flush = dsa.Flush()
        wflush = dsa.WriteFlush()
        state.update(ceilings=ceil, flush=dsa.Flush.method,
                     kernel_timer=f"CUDA-graph replay of one call, median of {job['reps']}, L2 flush before each",
                     reference_timer="CUDA events around the Python call after the L2 flush (host-inclusive), "
                                     "median; reps capped by budget")
        if fake:
            state["kernel_timer"] = state["reference_timer"] = "FAKE host-clock stand-ins (a test of the script)"
        if gpu:
            torch.cuda.synchronize()
    else:
        state.update(kernel_timer="host wall of one interpreted call (CPU smoke: not a kernel latency)",
                     reference_timer="host wall of the reference's check call (CPU smoke)")
    dsa_key = None
    if dsa is not None:
        names = {v: k for k, v in dsa.TARGETS.items()}
        dsa_key = names.get(definition.get("name", "")) or names.get(job["target"])
    state["setup_s"] = round(time.monotonic() - t_start, 2)
    save()
    ref_spent = 0.0
    t_loop = time.monotonic()
    for i, wl in enumerate(wls):
        u = wl["uuid"]
        rec: dict[str, Any] = {"index": i, "uuid": u, "axes": wl.get("axes", {})}
        state["rows"].append(rec)
        if time.monotonic() - t_loop > job["budget_s"]:
            rec["skipped"] = f"the timing budget of {job['budget_s']:.0f} s was spent"
            save()
            continue
        axes = jinputs.resolve_axes(definition, wl)
        if not gpu:  # the interpreter: only what [bench] cpu_max_numel lets the loop run too
            numel = sum(math.prod(jinputs.shape_of(s, axes) or [1]) for s in definition["inputs"].values())
            if numel > job["cpu_max_numel"]:
                rec["skipped"] = f"{numel} input elements > cpu_max_numel {job['cpu_max_numel']} (CPU smoke)"
                save()
                continue
        t_wl = time.monotonic()
        try:
            args = inputs.make(wl, 1000 + i, on_device=gpu)
            t1 = time.perf_counter()
            ref_out = jinputs.reference_outputs(reference, args)
            if gpu:
                torch.cuda.synchronize()
            ref_one_s = time.perf_counter() - t1
            ref_spent += ref_one_s
            rec["reference_check_call_s"] = round(ref_one_s, 4)
        except Exception as e:  # noqa: BLE001 - inputs or the reference failed: say so, next workload
            rec["error"] = f"inputs/reference: {short_error(e)}"
            save()
            continue
        outs_of = {}
        for label, mod in kernels.items():
            r = rec.setdefault(label, {})
            try:
                t1 = time.perf_counter()
                stats = checks.check_once(mod.run, args, ref_out, definition, axes, device, 0, {})
                r.update(correct=True, max_abs_err=stats["max_abs_err"], check_s=round(time.perf_counter() - t1, 3))
                outs_of[label] = checks.alloc_outputs(definition, axes, device, 0)
                if not timed:
                    r["host_us"] = (time.perf_counter() - t1) * 1e6
            except Exception as e:  # noqa: BLE001 - a wrong or failing kernel: recorded, not timed
                r.update(correct=False, error=short_error(e))
        if timed:
            for label, outs in outs_of.items():
                r = rec[label]
                run = kernels[label].run
                if label in job.get("wr_only", ()):  # a keep's kernel or its parent's (--time-keeps): the
                    try:                             # judge's conditions alone, the figure each keep is read by
                        r["cupti_wr_us"], r["cupti_wr_copies"] = dsa.cupti_median_rotated(
                            run, args, lambda: checks.alloc_outputs(definition, axes, device, 0), wflush, job["reps"])
                    except Exception as e:  # noqa: BLE001 - said on the row
                        r["cupti_wr_error"] = short_error(e)[:400]
                    continue
                try:
                    r["graph_us"] = dsa.graph_median(lambda run=run, outs=outs, a=args: run(*a, *outs), flush, job["reps"])
                    r["method"] = "graph"
                except Exception as e:  # noqa: BLE001 - no graph (a host sync in run()): events instead, said so
                    r["graph_error"] = short_error(e)[:400]
                    try:
                        if gpu:
                            torch.cuda.synchronize()
                        r["graph_us"] = dsa.events_median(lambda run=run, outs=outs, a=args: run(*a, *outs), flush,
                                                          job["reps"])
                        r["method"] = "events (graph capture failed)"
                    except Exception as e2:  # noqa: BLE001
                        r["error"] = f"not timed: {short_error(e2)}"
                try:  # the quantity the judge decides on (kernels summed per call), by this script's own code
                    r["cupti_us"] = dsa.cupti_median(lambda run=run, outs=outs, a=args: run(*a, *outs), flush,
                                                     job["reps"])
                except Exception as e:  # noqa: BLE001 - said on the row, the graph figure stands
                    r["cupti_error"] = short_error(e)[:400]
                try:  # the same after the judge's kind of flush (a write): where a cold L2 means dirty lines
                    r["cupti_w_us"], r["cupti_w_kernels"] = dsa.cupti_kernels(
                        lambda run=run, outs=outs, a=args: run(*a, *outs), wflush, job["reps"])
                except Exception as e:  # noqa: BLE001 - said on the row, the other figures stand
                    r["cupti_w_error"] = short_error(e)[:400]
                try:  # and with each call on its own copy of the inputs and outputs, as the judge's window
                    r["cupti_wr_us"], r["cupti_wr_copies"] = dsa.cupti_median_rotated(
                        run, args, lambda: checks.alloc_outputs(definition, axes, device, 0), wflush, job["reps"])
                except Exception as e:  # noqa: BLE001 - said on the row, the other figures stand
                    r["cupti_wr_error"] = short_error(e)[:400]
            # The reference: host-inclusive events, reps within the per-workload and the total budget.
            left = job["ref_total_s"] - ref_spent
            reps = max(1, min(job["ref_reps"], int(job["ref_wl_s"] / max(ref_one_s, 1e-6))))
            reps = min(reps, int(left / max(ref_one_s, 1e-6)))
            if reps < 1:
                rec["reference_note"] = (f"not timed: one call takes {ref_one_s:.2f} s and {max(left, 0):.1f} s of the "
                                         f"reference budget ({job['ref_total_s']:.0f} s) is left")
            else:
                try:
                    t1 = time.perf_counter()
                    with torch.no_grad():
                        rec["reference_us"] = dsa.events_median(lambda a=args: reference(*a), flush, reps)
                    ref_spent += time.perf_counter() - t1
                    rec["reference_reps"] = reps
                except Exception as e:  # noqa: BLE001
                    rec["reference_note"] = f"not timed: {short_error(e)[:400]}"
            try:
                named = dict(zip(definition["inputs"], args))
                outs0 = next(iter(outs_of.values()), None)
                if dsa_key:
                    fl, nbytes, flops = dsa.floor_us(dsa_key, named, outs0, ceil)
                    rec.update(floor_us=fl, floor_bytes=nbytes, floor_flops=flops,
                               floor_rule="dsa_bench.floor_us: the target's own floor(), max(bytes / copy bandwidth, FLOPs / matmul rate)")
                else:
                    nbytes, rule = jinputs.floor_bytes(definition, axes)
                    rec.update(floor_us=nbytes / ceil["copy_bytes_per_s"] * 1e6, floor_bytes=nbytes,
                               floor_rule=f"{rule} / measured copy bandwidth")
            except Exception as e:  # noqa: BLE001
                rec["floor_error"] = short_error(e)[:400]
        else:
            rec["reference_us"] = ref_one_s * 1e6
            rec["reference_reps"] = 1
        rec["seconds"] = round(time.monotonic() - t_wl, 2)
        print(json.dumps({k: v for k, v in rec.items() if k not in kernels} |
                         {lab: {k: v for k, v in rec.get(lab, {}).items() if k != "error"} for lab in kernels}),
              file=sys.stderr, flush=True)  # stderr: the parent streams it as it comes
        save()
        del args, ref_out, outs_of
        if gpu:
            torch.cuda.empty_cache()
    state["done"] = True
    state["loop_s"] = round(time.monotonic() - t_loop, 2)
    state["total_s"] = round(time.monotonic() - t_start, 2)
    save()
    return 0


# ---------------------------------------------------------------------------------------------
# Putting it together
# ---------------------------------------------------------------------------------------------

def fnum(x: Any, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def axes_str(axes: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in axes.items()) or "-"


def compare_rows(timing: dict[str, Any], ag: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per workload: independent vs autogk figures, agreement, slowdowns; and the summary. Where autogk's
    figures come from another GPU than the independent timer's (other_gpu), no agreement is counted."""
    elsewhere = other_gpu(timing, ag)
    rows = []
    for t in timing.get("rows", []):
        u = t["uuid"]
        s, b = t.get("start") or {}, t.get("best") or {}
        r: dict[str, Any] = {"uuid": u, "axes": t.get("axes", {}), "reference_us": t.get("reference_us"),
                             "reference_reps": t.get("reference_reps"),
                             "start_us": s.get("graph_us", s.get("host_us")),
                             "best_us": b.get("graph_us", b.get("host_us")),
                             "start_correct": s.get("correct"), "best_correct": b.get("correct"),
                             "autogk_start_us": ag["start"].get(u), "autogk_best_us": ag["best"].get(u),
                             "floor_us": t.get("floor_us"),
                             "note": t.get("skipped") or t.get("error") or t.get("reference_note") or
                             s.get("error") or b.get("error") or
                             (f"best not imported: {timing['import_error_best']}" if timing.get("import_error_best")
                              else "") or
                             (f"start not imported: {timing['import_error_start']}" if timing.get("import_error_start")
                              else "")}
        r["start_cupti_us"], r["best_cupti_us"] = s.get("cupti_us"), b.get("cupti_us")
        r["start_cupti_w_us"], r["best_cupti_w_us"] = s.get("cupti_w_us"), b.get("cupti_w_us")
        r["start_cupti_wr_us"], r["best_cupti_wr_us"] = s.get("cupti_wr_us"), b.get("cupti_wr_us")
        r["start_kernels"], r["best_kernels"] = s.get("cupti_w_kernels"), b.get("cupti_w_kernels")
        if r["start_us"] and r["best_us"]:
            r["ratio_independent"] = r["best_us"] / r["start_us"]
        if r["start_cupti_us"] and r["best_cupti_us"]:
            r["ratio_cupti"] = r["best_cupti_us"] / r["start_cupti_us"]
        if r["start_cupti_w_us"] and r["best_cupti_w_us"]:
            r["ratio_cupti_w"] = r["best_cupti_w_us"] / r["start_cupti_w_us"]
        if r["start_cupti_wr_us"] and r["best_cupti_wr_us"]:
            r["ratio_cupti_wr"] = r["best_cupti_wr_us"] / r["start_cupti_wr_us"]
        if r["autogk_start_us"] and r["autogk_best_us"]:
            r["ratio_autogk"] = r["autogk_best_us"] / r["autogk_start_us"]
        if "ratio_independent" in r and "ratio_autogk" in r:
            r["ratio_gap"] = r["ratio_independent"] / r["ratio_autogk"] - 1
            r["agreement_applies"] = max(r["start_us"], r["best_us"]) >= AGREE_MIN_US and not elsewhere
            r["agree"] = abs(r["ratio_gap"]) <= AGREE
        for tag in ("cupti", "cupti_w", "cupti_wr"):
            if f"ratio_{tag}" in r and "ratio_autogk" in r:
                r[f"{tag}_applies"] = max(r[f"start_{tag}_us"], r[f"best_{tag}_us"]) >= AGREE_MIN_US and not elsewhere
                r[f"{tag}_agree"] = abs(r[f"ratio_{tag}"] / r["ratio_autogk"] - 1) <= AGREE
        if "ratio_independent" in r:
            r["best_slower_independent"] = r["ratio_independent"] > 1 + SLOWER
        if "ratio_autogk" in r:
            r["best_slower_autogk"] = r["ratio_autogk"] > 1 + SLOWER
        for k in ("start", "best"):
            if r["floor_us"] and r[f"{k}_us"]:
                r[f"{k}_pct_floor"] = 100 * r["floor_us"] / r[f"{k}_us"]
            if r["reference_us"] and r[f"{k}_us"]:
                r[f"{k}_speedup"] = r["reference_us"] / r[f"{k}_us"]
        rows.append(r)
    summ: dict[str, Any] = {"other_gpu": elsewhere, "autogk_gpu": ag.get("best_gpu") or ag.get("start_gpu"),
                            "timer_gpu": (timing.get("env") or {}).get("gpu")}
    applies = [r for r in rows if r.get("agreement_applies")]
    summ["agreement"] = {"workloads_checked": len(applies), "agree": sum(bool(r["agree"]) for r in applies),
                         "disagree": [axes_str(r["axes"]) for r in applies if not r["agree"]],
                         "rule": f"|independent best/start / autogk best/start - 1| <= {AGREE:.0%} where the "
                                 f"kernel takes >= {AGREE_MIN_US:g} us"}
    for tag, flushed in (("cupti", "after a read of 256 MB"), ("cupti_w", "after the judge's kind of flush, a write"),
                         ("cupti_wr", "after a write flush, each call on its own copy of the inputs and outputs "
                                      "as many as the judge's window holds")):
        applies = [r for r in rows if r.get(f"{tag}_applies")]
        summ[f"agreement_{tag}"] = {
            "workloads_checked": len(applies), "agree": sum(bool(r[f"{tag}_agree"]) for r in applies),
            "disagree": [axes_str(r["axes"]) for r in applies if not r[f"{tag}_agree"]],
            "rule": f"|CUPTI best/start (this script's own profiler, kernels summed per call, {flushed}) / "
                    f"autogk best/start - 1| <= {AGREE:.0%} where the kernel takes >= {AGREE_MIN_US:g} us"}
    summ["best_slower_than_start_independent"] = [axes_str(r["axes"]) for r in rows if r.get("best_slower_independent")]
    summ["best_slower_than_start_independent_ge_10us"] = [
        axes_str(r["axes"]) for r in rows if r.get("best_slower_independent") and r.get("agreement_applies")]
    summ["best_slower_than_start_autogk"] = [axes_str(r["axes"]) for r in rows if r.get("best_slower_autogk")]
    for k in ("start", "best"):
        sp = [r[f"{k}_speedup"] for r in rows if r.get(f"{k}_speedup")]
        summ[f"contest_score_{k}"] = statistics.fmean(sp) if sp else None
        summ[f"contest_workloads_{k}"] = len(sp)
        lat = [r[f"{k}_us"] for r in rows if r.get(f"{k}_us")]
        summ[f"geomean_us_{k}"] = math.exp(statistics.fmean(math.log(x) for x in lat)) if lat else None
    both = [r for r in rows if r.get("ratio_independent")]
    summ["geomean_ratio_independent"] = (math.exp(statistics.fmean(math.log(r["ratio_independent"]) for r in both))
                                         if both else None)
    both = [r for r in rows if r.get("ratio_autogk")]
    summ["geomean_ratio_autogk"] = (math.exp(statistics.fmean(math.log(r["ratio_autogk"]) for r in both))
                                    if both else None)
    # The contest's figure: the mean latency a workload (CUPTI), start and best, by each source that has
    # both on every workload it times (autogk's: the judge's own figures; the independent CUPTI under the
    # judge's conditions), and best's share of the physical floor (on the long-context set: --timing-workloads).
    for name, key in (("autogk", "autogk_{}_us"), ("cupti_wr", "{}_cupti_wr_us"), ("graph", "{}_us")):
        have = [r for r in rows if r.get(key.format("start")) and r.get(key.format("best"))]
        summ[f"mean_us_{name}"] = ({k: statistics.fmean(r[key.format(k)] for r in have) for k in ("start", "best")}
                                   | {"workloads": len(have)}) if have else None
    fl = [r["best_pct_floor"] for r in rows if r.get("best_pct_floor")]
    summ["best_floor_pct"] = ({"mean": statistics.fmean(fl), "median": statistics.median(fl), "min": min(fl),
                               "max": max(fl), "workloads": len(fl), "within3": sum(x >= 100 / 3 for x in fl)}
                              if fl else None)
    summ["total_us_start"] = sum(r["start_us"] for r in rows if r.get("start_us") and r.get("best_us")) or None
    summ["total_us_best"] = sum(r["best_us"] for r in rows if r.get("start_us") and r.get("best_us")) or None
    return rows, summ


def kernel_cells(kernels: dict[str, float] | None) -> str:
    return ", ".join(f"`{n}` {v:.2f}" for n, v in sorted(kernels.items(), key=lambda kv: -kv[1])) if kernels else "-"


def kernel_table(rows: list[dict[str, Any]]) -> list[str]:
    """Where each call's time goes, kernel by kernel (CUPTI after a write flush, each kernel's median a
    call), for start and best: which of a multi-kernel call's launches a change moved. Nothing where no
    row has names (a host timer, or CUPTI failed)."""
    if not any(r.get("start_kernels") or r.get("best_kernels") for r in rows):
        return []
    L = ["", "## Per kernel: each kernel's median us a call (CUPTI after a write flush; the medians need not "
         "add up to the call's)", "", "| workload | start | best |", "| --- | --- | --- |"]
    for r in rows:
        L.append(f"| {axes_str(r['axes'])} | {kernel_cells(r.get('start_kernels'))} | "
                 f"{kernel_cells(r.get('best_kernels'))} |")
    return L


def keep_table(keeps: list[dict[str, Any]]) -> list[str]:
    """--time-keeps: each keep's ratio against its parent, autogk's and the independent CUPTI's."""
    if not keeps:
        return []
    L = ["", "## Each keep against its parent (--time-keeps)", "",
         "Geometric means over the workloads both timed; independent: this script's CUPTI after a write flush, "
         f"each call on its own copy (the judge's conditions); agree: within {AGREE:.0%} where the kernel takes >= "
         f"{AGREE_MIN_US:g} us, on the same GPU.", "",
         "| # | change | autogk | independent | workloads both timed (independent alone) | agree | GPU of autogk's figures |",
         "| --- | --- | ---: | ---: | ---: | --- | --- |"]
    for k in keeps:
        agree = ("other GPU: not compared" if k["other_gpu"] else
                 f"{k['agree']} of {k['workloads_checked']}" if k["workloads_checked"] else "- (none >= 10 us)")
        L.append(f"| {k['experiment']} | {(k.get('change') or '')[:80]} | {fnum(k['ratio_autogk'], '{:.4f}')} | "
                 f"{fnum(k['ratio_independent'], '{:.4f}')} | {k['workloads_both']} ({k['workloads_independent']}) | "
                 f"{agree} | {k.get('gpu') or '-'} |")
    return L


def markdown(res: dict[str, Any]) -> str:
    a = res["args"]
    gpu = a["backend"] != "interpret"
    L = [f"# The tuner on {a['target']} ({a['backend']} backend), and its claim checked independently", "",
         f"`{res['command']}`", "",
         f"Started {res['started']}; {res.get('wall_s', 0):.0f} s wall in all. Steps that failed: "
         f"{', '.join(sorted(res['errors'])) or 'none'}.", ""]
    for step, err in sorted(res["errors"].items()):
        L += [f"- **{step}** failed: `{err.splitlines()[0][:300]}`"]
    if res["errors"]:
        L.append("")
    it = res.get("iterate") or {}
    if it:
        L += [f"Loop: `autogk iterate` rc {it.get('rc')}, {it.get('wall_s', 0):.0f} s, stop: "
              f"{(it.get('report') or {}).get('stop_reason', '?')}. Log: `{it.get('log')}`.", ""]

    def device(env: dict[str, Any]) -> str:
        return ", ".join(f"{k} {v}" for k, v in env.items() if k in ("gpu", "device", "torch", "triton", "cuda", "driver"))

    env = res.get("environment") or {}
    here = (res.get("timing") or {}).get("env") or {}
    if env:
        L += [f"Device of autogk's figures (the project's last result note): {device(env)}.", ""]
    if here:
        L += [f"Device of the independent timer (this call): {device(here)}.", ""]
    exps = res.get("experiments") or []
    if exps:
        L += ["## Experiments", "",
              "Wall s: note = the benchmark (`cost.bench_wall_s`), iterate = benchmark + record + conclude "
              "(`bench_s`), log = from this experiment's first log line to the next's (proposal included).", "",
              "Parent drift: the trunk's kernel as this parent over its latency when it was kept, geometric mean "
              "and worst workload (loop/drift.py; - where it has no kept past to compare).", "",
              "| # | change | decision | outcome | objective ratio [interval] | worst workload | wall s (note / iterate / log) | ab timing s | parent drift |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for e in exps:
            w = e.get("worst_workload")
            ratio = (f"{e['ratio']:.4f} [{fnum(e.get('ci_low'), '{:.4f}')}, {fnum(e.get('ci_high'), '{:.4f}')}]"
                     if e.get("ratio") is not None else "-")
            ws = f"{w['ratio']:.3f} ({axes_str(w['axes'])})" if w else "-"
            L.append(f"| {e['experiment']} | {e['change']} | {e['decision']} | {e['outcome']} | {ratio} | {ws} | "
                     f"{fnum(e.get('wall_s_note'), '{:.1f}')} / {fnum(e.get('wall_s_iterate'), '{:.1f}')} / "
                     f"{fnum(e.get('wall_s_log'), '{:.1f}')} | {fnum(e.get('ab_timing_s'), '{:.1f}')} | "
                     f"{fnum(e.get('parent_drift'), '{:.4f}')} / {fnum(e.get('parent_drift_worst'), '{:.4f}')} |")
        walls = [e["wall_s_log"] for e in exps if e.get("wall_s_log")]
        if walls:
            L += ["", f"Wall seconds per experiment (log): median {statistics.median(walls):.1f}, "
                      f"mean {statistics.fmean(walls):.1f}, max {max(walls):.1f} over {len(walls)}."]
        L += ["", "Reasons:", ""] + [f"- #{e['experiment']}: {e['reason']}" for e in exps]
        timed = [e for e in exps if e.get("latency_us")]
        if timed:
            order = res.get("workload_order") or []
            L += ["", "## autogk's ab-stage latencies (us, parent -> candidate)", "",
                  "| workload | " + " | ".join(f"#{e['experiment']}" for e in timed) + " |",
                  "| --- | " + " | ".join("---" for _ in timed) + " |"]
            for u, ax in order:
                cells = []
                for e in timed:
                    x = e["latency_us"].get(u)
                    cells.append(f"{fnum(x['parent'])} -> {fnum(x['candidate'])}" if x else "-")
                L.append(f"| {axes_str(ax)} | " + " | ".join(cells) + " |")
    b = res.get("best") or {}
    if b:
        L += ["", "## Kernels compared", "",
              f"- start: `{(b.get('start_commit') or '')[:10]}` (the trunk's first commit holding the kernel)",
              f"- best: `{(b.get('best_commit') or '')[:10]}` ({b.get('best_what', '')})",
              f"- `autogk best`: {b.get('basis', '')}; speedup_vs_start {fnum(b.get('speedup_vs_start'), '{:.4f}')}",
              f"- autogk's start latencies from {b.get('autogk_start_from')}, best's from {b.get('autogk_best_from')}"]
    t = res.get("timing") or {}
    rows = res.get("workloads") or []
    if rows:
        L += ["", "## Per workload: reference, start, best (independent) and autogk's own figures", "",
              f"Kernels: {t.get('kernel_timer', '')}. Reference: {t.get('reference_timer', '')}. "
              f"L2 flush: {t.get('flush', '-')}. Ceilings: {json.dumps(t.get('ceilings'))}.", "",
              "| workload | correct start / best | reference us (reps) | start us | best us | autogk start us | "
              "autogk best us | best/start indep. | best/start autogk | agree (5 %) | best slower >2 % | "
              "% floor start / best | note |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | --- |"]
        for r in rows:
            agree = ("-" if "agree" not in r else ("yes" if r["agree"] else "NO") +
                     ("" if r.get("agreement_applies") else " (< 10 us)"))
            slower = "-" if "best_slower_independent" not in r else ("YES" if r["best_slower_independent"] else "no")
            ok = {True: "yes", False: "NO", None: "-"}
            L.append(f"| {axes_str(r['axes'])} | {ok[r['start_correct']]} / {ok[r['best_correct']]} | "
                     f"{fnum(r['reference_us'], '{:,.1f}')} ({r.get('reference_reps') or '-'}) | "
                     f"{fnum(r['start_us'])} | {fnum(r['best_us'])} | {fnum(r['autogk_start_us'])} | "
                     f"{fnum(r['autogk_best_us'])} | {fnum(r.get('ratio_independent'), '{:.3f}')} | "
                     f"{fnum(r.get('ratio_autogk'), '{:.3f}')} | {agree} | {slower} | "
                     f"{fnum(r.get('start_pct_floor'), '{:.1f}')} / {fnum(r.get('best_pct_floor'), '{:.1f}')} | "
                     f"{r['note'].splitlines()[0][:120] if r['note'] else ''} |")
        s = res.get("summary") or {}
        ag = s.get("agreement") or {}
        if s.get("other_gpu"):
            L += ["", f"- **no agreement counted**: {s['other_gpu']}; autogk's columns are that GPU's, the "
                      "independent ones this machine's"]
        L += ["", f"- agreement (best/start, autogk vs independent, {ag.get('rule', '')}): "
                  f"{ag.get('agree')} of {ag.get('workloads_checked')}"
                  + (f"; disagree: {'; '.join(ag['disagree'])}" if ag.get("disagree") else ""),
              *[f"- agreement by CUPTI ({(s.get(k) or {}).get('rule', '')}): "
                f"{(s.get(k) or {}).get('agree')} of {(s.get(k) or {}).get('workloads_checked')}"
                + (f"; disagree: {'; '.join(s[k]['disagree'])}" if (s.get(k) or {}).get("disagree") else "")
                for k in ("agreement_cupti", "agreement_cupti_w", "agreement_cupti_wr") if k in s],
              f"- best slower than start beyond {SLOWER:.0%} (independent): "
              f"{'; '.join(s.get('best_slower_than_start_independent') or []) or 'none'} (of those >= "
              f"{AGREE_MIN_US:g} us: {'; '.join(s.get('best_slower_than_start_independent_ge_10us') or []) or 'none'}); "
              f"(autogk): {'; '.join(s.get('best_slower_than_start_autogk') or []) or 'none'}",
              f"- geomean best/start: independent {fnum(s.get('geomean_ratio_independent'), '{:.4f}')}, autogk "
              f"{fnum(s.get('geomean_ratio_autogk'), '{:.4f}')}; summed latency start {fnum(s.get('total_us_start'), '{:,.1f}')} "
              f"us, best {fnum(s.get('total_us_best'), '{:,.1f}')} us",
              "- mean latency a workload, start -> best: " + ("; ".join(
                  f"{label} {m['start']:.2f} -> {m['best']:.2f} us ({m['workloads']} workloads)"
                  for label, m in ((f"autogk (the judge's CUPTI{', ' + s['autogk_gpu'] if s.get('autogk_gpu') else ''})",
                                    s.get("mean_us_autogk")),
                                   (f"independent CUPTI (write flush, own copies{', ' + s['timer_gpu'] if s.get('timer_gpu') else ''})",
                                    s.get("mean_us_cupti_wr")),
                                   ("independent graph replay", s.get("mean_us_graph"))) if m) or "-"),
              "- best's share of the physical floor (floor / latency, graph replay): " + (
                  "mean {mean:.1f} %, median {median:.1f} %, {min:.1f}-{max:.1f} %; within 3x of the floor "
                  "(>= 33.3 %) on {within3} of {workloads}".format(**s["best_floor_pct"])
                  if s.get("best_floor_pct") else "-"),
              f"- contest score (mean over workloads of reference / kernel): start "
              f"{fnum(s.get('contest_score_start'), '{:.2f}')}x over {s.get('contest_workloads_start')} workload(s), "
              f"best {fnum(s.get('contest_score_best'), '{:.2f}')}x over {s.get('contest_workloads_best')}"]
        if not gpu:
            L += ["", "CPU smoke: the figures above are host wall times of the Triton interpreter, not latencies."]
        L += keep_table(res.get("keeps") or [])
        L += kernel_table(rows)
        if t.get("total_s") is not None:
            L += [f"- independent timing: {t.get('total_s')} s in all ({t.get('setup_s')} s setup: imports, ceilings)"]
    if res.get("report_png"):
        L += ["", "## Report", "", f"![report]({Path(res['report_png']).name})  (`{res['report_png']}`)"]
    if res.get("bundle"):
        name = Path(res["bundle"]).name
        L += ["", f"The project (trunk, experiments, result notes) is in `{name}`; to look at it again, e.g. "
                  "`autogk report` where matplotlib is installed:", "",
              f"    git init p && cd p && git fetch --update-head-ok ../{name} '+refs/*:refs/*' && git reset -q --hard "
              f"{(res.get('best') or {}).get('trunk', 'main')}",
              "    PYTHONPATH=REPO AUTOGK_TRACKING_ENABLED=0 python -m autogk_git report --no-mlflow --out ."]
    bj = res.get("best_json")
    if bj is not None:
        L += ["", "`autogk best --json`:", "", "```json", json.dumps(bj, indent=1)[:6000], "```"]
    return "\n".join(L) + "\n"


def timing_workloads(given: str, target: str) -> str:
    """--timing-workloads as an absolute path ("" where not given): a path as it is, else a file of the
    target's bundled example folder (workloads_long.jsonl)."""
    if not given:
        return ""
    path = Path(given)
    if not path.exists():
        path = REPO / "autogk_git" / "examples" / target / given
    if not path.is_file():
        raise SystemExit(f"--timing-workloads {given}: no such file, nor in autogk_git/examples/{target}/")
    return str(path.resolve())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="rmsnorm_h4096", help="a bundled example target (autogk_git/examples/)")
    ap.add_argument("-n", type=int, default=10, help="experiments")
    ap.add_argument("--max-time", type=float, default=300.0, help="iterate's --max-time (s): no experiment starts after it")
    ap.add_argument("--grace", type=float, default=240.0,
                    help="iterate is ended (with its workers) at --max-time + this many seconds")
    ap.add_argument("--backend", default="local", choices=["local", "interpret", "modal"])
    ap.add_argument("--out", type=Path, help="folder for the results (required)")
    ap.add_argument("--reps", type=int, default=20, help="graph replays per kernel and workload")
    ap.add_argument("--ref-reps", type=int, default=5, help="most timed reference calls per workload")
    ap.add_argument("--ref-wl-s", type=float, default=1.5, help="reference timing budget per workload (s)")
    ap.add_argument("--ref-total-s", type=float, default=25.0, help="reference budget over all workloads (s)")
    ap.add_argument("--time-keeps", action="store_true",
                    help="also time each kept experiment's kernel and its parent's (independent CUPTI under the "
                         "judge's conditions) and compare each keep's ratio with autogk's")
    ap.add_argument("--timing-budget-s", type=float, default=65.0,
                    help="no new workload is timed after this many seconds of the timing loop")
    ap.add_argument("--wall-limit", type=float, default=0.0,
                    help="the whole run ends within this many seconds (iterate is cut short to leave room for the "
                         "timing and the report); 0: no such limit")
    ap.add_argument("--project", type=Path,
                    help="the project folder: reused when it is already a project (to run the loop in several "
                         "calls), else made there; default: a fresh temp dir")
    ap.add_argument("--agent-command", default="",
                    help="run the loop with `--agent command` and this [agent] command instead of the tuner")
    ap.add_argument("--init-args", default="",
                    help="more arguments for `autogk init` of a new project, e.g. \"--workload-set long --start best\"")
    ap.add_argument("--no-iterate", action="store_true", help="do not run the loop (read and time what is there)")
    ap.add_argument("--no-timing", action="store_true", help="skip the independent reproduction")
    ap.add_argument("--timing-workloads", default="",
                    help="time start and best on this workload file instead of the project's (a path, or a file "
                         "name in the target's bundled example folder: workloads_long.jsonl, the long-context "
                         "set); autogk's own columns stay empty where the project never judged those workloads")
    ap.add_argument("--timing-job", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--fake-timer", action="store_true", help=argparse.SUPPRESS)  # CPU test of the GPU path
    args = ap.parse_args()
    if args.timing_job:
        return timing_main(args.timing_job)
    if args.out is None:
        ap.error("--out DIR is required: the folder for loop_TARGET.md/.json, the logs and the report PNG")
    wfile = timing_workloads(args.timing_workloads, args.target)  # a wrong name fails here, not after the loop

    t0 = time.monotonic()
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    tgt = args.target
    gpu = args.backend != "interpret"
    # Limits. Without --wall-limit: init 120 s, iterate --max-time + --grace, each read-out command 120-180 s,
    # the timing child its budget + 90 s. With it, iterate is cut short so that the timing and the report
    # (RESERVE_S) still fit, and every later step gets at most what is left.
    timing_limit = args.timing_budget_s + 90
    # What --wall-limit keeps back for the steps after the loop: the timing's budget and its set-up
    # (~5 s on the H200), the read-out commands and the report (~20 s); its own limit stays the worst case.
    reserve_s = (0 if args.no_timing else args.timing_budget_s + 30) + 40
    iterate_limit = args.max_time + args.grace
    max_time = args.max_time
    if args.wall_limit:
        iterate_limit = max(30.0, min(iterate_limit, args.wall_limit - 30 - reserve_s))
        # no experiment starts later than --grace before iterate's end: it has that long to finish
        max_time = max(1.0, min(max_time, iterate_limit - args.grace))
        if max_time < args.max_time:
            say(f"--wall-limit {args.wall_limit:g} leaves iterate {iterate_limit:.0f} s: --max-time cut from "
                f"{args.max_time:g} to {max_time:g} s (raise --wall-limit, or lower --grace or --timing-budget-s)")
    bound = (args.wall_limit or (120 + iterate_limit + 4 * 120 + timing_limit))
    loop_line = ("the loop is not run (--no-iterate)" if args.no_iterate else
                 f"-n {args.n}, --max-time {max_time:g}: iterate is ended at {iterate_limit:.0f} s")
    say(f"target {tgt}, backend {args.backend}, {loop_line}; the independent timing "
        f"{'is skipped' if args.no_timing else f'is ended at {timing_limit:.0f} s'}; the whole run takes at most "
        f"{bound:.0f} s (typically --max-time + the experiment running then + ~2 min)")

    def left(cap: float) -> float:
        """A step's limit: cap, or less when --wall-limit is near."""
        if not args.wall_limit:
            return cap
        return max(5.0, min(cap, args.wall_limit - (time.monotonic() - t0) - 5))

    res: dict[str, Any] = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                           "command": "python benchmarks/loop_gpu.py " + " ".join(sys.argv[1:]),
                           "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                           "errors": {}, "worst_case_wall_s": bound,
                           "limits": {"iterate_s": iterate_limit, "iterate_max_time_s": max_time,
                                      "timing_s": timing_limit, "reserve_s": reserve_s}}
    md_path, json_path = out / f"loop_{tgt}.md", out / f"loop_{tgt}.json"

    def write() -> None:
        res["wall_s"] = round(time.monotonic() - t0, 1)
        json_path.write_text(json.dumps(res, indent=1, default=str))
        try:
            md_path.write_text(markdown(res))
        except Exception as e:  # noqa: BLE001 - the JSON is written; say why the page is not
            md_path.write_text(f"# loop_gpu: the markdown could not be written\n\n```\n{short_error(e)}\n```\n")

    def step(name: str, fn) -> Any:
        say(f"step: {name}")
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - one step's failure is written down; the rest runs
            res["errors"][name] = short_error(e)
            say(f"step {name} failed: {short_error(e)}")
            return None
        finally:
            write()

    state: dict[str, Any] = {}  # what steps hand each other, not written out
    root = (args.project.resolve() if args.project else Path(tempfile.mkdtemp(prefix="autogk-loopgpu-")) / "proj")
    res["project"] = str(root)

    def init() -> None:
        if (root / ".autogk.toml").exists() and (root / ".git").exists():
            res["init"] = {"rc": 0, "output": f"reused the project at {root}"}
            say(f"reusing the project at {root} (its experiments so far are read below too)")
            return
        # A repository of its own first: inside another work tree (a --project under a checkout), `autogk
        # init` would otherwise make the enclosing repository the project.
        root.mkdir(parents=True, exist_ok=True)
        try:
            git_out(root, "init", "-q", "-b", "main")
        except RuntimeError:  # a git older than 2.28: the default branch name, whatever it is
            git_out(root, "init", "-q")
        r = autogk(root.parent, "init", str(root), "--example", tgt, "--no-check", "--here", *shlex.split(args.init_args),
                   timeout_s=left(120))
        res["init"] = {"rc": r.returncode, "output": (r.stdout + r.stderr)[-3000:]}
        print(r.stdout + r.stderr, flush=True)
        if r.returncode:
            raise RuntimeError(f"autogk init failed (rc {r.returncode}): {(r.stdout + r.stderr)[-1500:]}")

    if step("init", init) is None and "init" in res["errors"]:
        return 1

    def iterate() -> None:
        cmd = [sys.executable, "-m", "autogk_git", "iterate", "-n", str(args.n), "--target", tgt, "--agent",
               "command" if args.agent_command else "tune", "--backend", args.backend, "--max-time", f"{max_time:g}",
               "--json"]
        if not gpu:  # CPU smoke: merge correct candidates, so the trunk moves and best differs from the start
            cmd.append("--merge-untimed")
        log = out / f"iterate_{tgt}.log"
        limit = iterate_limit
        if args.wall_limit:  # leave the reserve for what follows, whatever init took
            limit = max(30.0, min(limit, args.wall_limit - reserve_s - (time.monotonic() - t0)))
        env = cli_env()
        if args.agent_command:  # a coding CLI (or a script playing one) proposes each experiment
            env["AUTOGK_AGENT_COMMAND"] = args.agent_command
        r = run_streamed(cmd, root, env, log, limit)
        report = {}
        text = r["stdout"].strip()
        at = 0 if text.startswith("{") else text.find("\n{") + 1  # the JSON report is the last thing printed
        if at >= 0 and text[at:].startswith("{"):
            try:
                report = json.loads(text[at:])
            except ValueError:
                res["iterate_stdout_tail"] = text[-2000:]
        res["iterate"] = {"rc": r["rc"], "wall_s": r["wall_s"], "log": str(log), "report": report}
        state["lines"] = r["lines"]
        if r["rc"] not in (0,):
            raise RuntimeError(f"autogk iterate ended with rc {r['rc']} (see {log}); the experiments that finished "
                               "are read below")

    if args.no_iterate:
        say("--no-iterate: the loop is not run; the experiments already in the project are read")
    else:
        step("iterate", iterate)
    lines = state.get("lines", [])

    def bundle() -> None:
        # Every ref (trunk, experiment branches, result notes): the project can be rebuilt elsewhere, e.g. to
        # run `autogk report` on a machine with matplotlib (see the markdown's last lines). Made right after
        # the loop, before the read-out and the timing: a run cut during those (session 66: a device step's
        # limit) still leaves its experiments.
        dest = out / f"project_{tgt}.bundle"
        git_out(root, "bundle", "create", str(dest), "--all")
        res["bundle"] = str(dest)

    step("bundle", bundle)

    def notes() -> None:
        # Walls from earlier calls on the same project (--project) are kept beside its git folder.
        keep = root / ".git" / "loopgpu-walls.json"
        try:
            walls = json.loads(keep.read_text()) if keep.exists() else {}
        except ValueError:
            walls = {}
        log_walls = {int(k): v for k, v in (walls.get("log") or {}).items()}
        log_walls.update(walls_from_log(lines))
        report = dict((res.get("iterate") or {}).get("report") or {})
        exps = {int(e["number"]): e for e in walls.get("iterate") or [] if e.get("number") is not None}
        exps.update({int(e["number"]): e for e in report.get("experiments") or [] if e.get("number") is not None})
        report["experiments"] = [exps[k] for k in sorted(exps)]
        keep.write_text(json.dumps({"log": log_walls, "iterate": report["experiments"]}))
        rows, raw = read_experiments(root, tgt, report, log_walls)
        res["experiments"] = rows
        state["raw"] = raw
        sys.path.insert(0, str(REPO))
        from autogk_git.project import Project
        target = Project(root).target(tgt)
        res["workload_order"] = [(w["uuid"], w.get("axes", {})) for w in target.workloads]
        if raw:
            res["environment"] = raw[-1].get("environment") or {}

    step("notes", notes)

    def best() -> None:
        r = autogk(root, "best", "--json", "--target", tgt, timeout_s=left(120))
        if r.returncode:
            raise RuntimeError(f"autogk best failed (rc {r.returncode}): {r.stderr[-800:]}")
        found = json.loads(r.stdout)
        res["best_json"] = found
        b = found[0] if found else {}
        sys.path.insert(0, str(REPO))
        from autogk_git.project import Project
        project = Project(root)
        rel = project.target_rel(tgt)
        trunk = project.trunk
        start = git_out(root, "log", "--first-parent", "--reverse", "--format=%H", trunk, "--", f"{rel}/kernel.py"
                        ).splitlines()[0]
        exp = b.get("experiment")
        if exp:
            best_commit, what = exp["commit"], f"`autogk best`: experiment #{exp['number']}"
        else:
            best_commit = git_out(root, "rev-parse", trunk)
            what = "the trunk's tip (`autogk best` names no experiment: " + b.get("basis", "nothing kept") + ")"
        info = {"trunk": trunk, "start_commit": start, "best_commit": best_commit, "best_what": what, "basis": b.get("basis"),
                "speedup_vs_start": b.get("speedup_vs_start"), "best_number": exp["number"] if exp else None,
                "best_trunk_commit": b.get("trunk_commit")}
        kd = out / f"kernels_{tgt}"
        files = {}
        for label, rev in (("start", start), ("best", best_commit)):
            files[label] = kernel_files(root, tgt, rev)
            d = kd / label
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            for name, text in files[label].items():
                (d / name).parent.mkdir(parents=True, exist_ok=True)
                (d / name).write_text(text)
        info["same_kernel"] = files["start"] == files["best"]
        info["kernel_dirs"] = {k: str(kd / k) for k in files}
        if args.time_keeps:  # each keep's kernel and its parent's, timed under the judge's conditions only
            info["keeps"], extra = keep_kernels(root, tgt, res.get("experiments") or [], files)
            for label, fs in extra.items():
                d = kd / label
                shutil.rmtree(d, ignore_errors=True)
                for name, text in fs.items():
                    (d / name).parent.mkdir(parents=True, exist_ok=True)
                    (d / name).write_text(text)
                info["kernel_dirs"][label] = str(d)
            info["wr_only"] = sorted(extra)
        # autogk's own figures: which text each measured parent had
        raw = state.get("raw") or []
        parents = {r.get("parent") for r in raw if r.get("parent")}
        src = {}
        for p in parents:
            try:
                src[p] = kernel_files(root, tgt, p)["kernel.py"]
            except Exception:  # noqa: BLE001 - a parent without the kernel: not a match
                src[p] = ""
        ag = autogk_figures(raw, start, {best_commit, b.get("trunk_commit") or ""}, info["best_number"],
                            files["start"]["kernel.py"], files["best"]["kernel.py"], src)
        if info["same_kernel"]:
            ag["best"], ag["best_from"] = ag["best"] or ag["start"], ag["best_from"] or ag["start_from"]
        info.update(autogk_start_from=ag["start_from"], autogk_best_from=ag["best_from"])
        res["best"] = info
        state["ag"] = ag

    step("best", best)

    def timing() -> None:
        b = res.get("best") or {}
        if not b.get("kernel_dirs"):
            raise RuntimeError("no kernels to time: the `best` step did not find them")
        sys.path.insert(0, str(REPO))
        from autogk_git.project import Project
        project = Project(root)
        job = {"target": tgt, "target_dir": str(project.target(tgt).dir), "kernels": b["kernel_dirs"],
               "device": "cuda" if gpu else "cpu", "out": str(out / f"timing_{tgt}.json"), "reps": args.reps,
               "ref_reps": args.ref_reps, "ref_wl_s": args.ref_wl_s, "ref_total_s": args.ref_total_s,
               "budget_s": args.timing_budget_s, "cpu_max_numel": project.config.bench.cpu_max_numel,
               "fake_timer": args.fake_timer, "workloads_file": wfile, "wr_only": b.get("wr_only") or []}
        jp = out / f"timing_job_{tgt}.json"
        jp.write_text(json.dumps(job, indent=1))
        env = cli_env()
        if not gpu:
            env["TRITON_INTERPRET"] = "1"
        r = run_streamed([sys.executable, str(Path(__file__).resolve()), "--timing-job", str(jp)], REPO, env,
                         out / f"timing_{tgt}.log", left(timing_limit))
        if r["stdout"].strip():
            print(r["stdout"][-6000:], flush=True)
        tp = Path(job["out"])
        timing_state = json.loads(tp.read_text()) if tp.exists() else {"rows": []}
        res["timing"] = {k: v for k, v in timing_state.items() if k != "rows"}
        res["timing"]["rc"] = r["rc"]
        ag = state.get("ag") or {"start": {}, "best": {}}
        rows, summ = compare_rows(timing_state, ag)
        res["workloads"], res["summary"] = rows, summ
        if b.get("keeps"):
            res["keeps"] = keep_rows(timing_state, b["keeps"], res.get("experiments") or [])
        if r["rc"] or not timing_state.get("done"):
            raise RuntimeError(f"the timing child ended with rc {r['rc']}, done={timing_state.get('done')}: "
                               f"{' | '.join(x for _, x in r['lines'][-5:])[-1500:]} (log {out / f'timing_{tgt}.log'})")
        unimported = [f"{k[len('import_error_'):]}: {v}" for k, v in timing_state.items() if k.startswith("import_error_")]
        if unimported:
            # the child ended but measured nothing of a kernel it could not import (session 60: every row
            # "best not imported" under "Steps that failed: none"): the step failed, and the report says so
            raise RuntimeError("kernels not imported, so not timed: " + "; ".join(unimported))

    if args.no_timing:
        say("--no-timing: the independent reproduction is skipped")
    else:
        step("independent timing", timing)

    def report() -> None:
        rd = out / f"report_{tgt}"
        r = autogk(root, "report", "--target", tgt, "--out", str(rd), "--no-mlflow", "--json", timeout_s=left(180))
        if r.returncode:
            raise RuntimeError(f"autogk report failed (rc {r.returncode}): {(r.stderr or r.stdout)[-1000:]}")
        found = json.loads(r.stdout)
        png = next((Path(x["png"]) for x in found if x.get("png")), None)
        if png is None or not png.exists():
            raise RuntimeError(f"autogk report wrote no PNG: {r.stdout[-500:]}")
        dest = out / f"report_{'gpu' if gpu else 'cpu'}_{tgt}.png"
        shutil.copyfile(png, dest)
        res["report_png"] = str(dest)
        res["report_summary"] = [x.get("summary") for x in found]

    step("report", report)

    write()
    say(f"wrote {md_path}, {json_path} ({res['wall_s']:.0f} s; errors: {', '.join(res['errors']) or 'none'})")
    print(md_path.read_text(), flush=True)
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
