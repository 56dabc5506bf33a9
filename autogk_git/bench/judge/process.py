"""The judge's process: runs ON the benchmark machine, one job at a time.

It imports only the standard library, torch and triton (safetensors when a workload needs a blob),
so the same files run on this machine's CPU (Triton interpreter), on a local CUDA GPU and inside a
Modal container. It never imports a kernel: each kernel label gets its own process
(`kernel_process.py`, started once per job and reused across workloads), which receives the inputs and
poisoned outputs the judge made, runs the kernel, and answers "done" (and, when timed, its timings).
Inputs, reference outputs, comparisons, statuses and the progress record stay here.

    launched by runner.run_worker: ... OUT_DIR [--only LABEL:UUID,...] [--deadline S] [--workload-limit S]

stdin holds two lines: the job's key, then the job (JSON). The key: every line of OUT_DIR/progress.jsonl carries an HMAC of
the record under it, so the runner ignores lines a kernel forged (it runs as the same user and can
write any file the judge can). For every (label, workload) there is a "start" line before the
kernel is called and a "done" line after, so the parent can tell which workload a crash or a hang
happened in and restart the judge on what is left.
"""
from __future__ import annotations

import faulthandler
import functools
import hashlib
import hmac
import json
import math
import os
import platform
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

from . import folders, forks, hygiene, stats, tenants
from .calls import short_tb, warm_profiler
from .checks import set_target
from .correctness import check_all
from .clock import clock_limit_us
from .files import import_files
from .inputs import Inputs, floor_record, load_reference
from .kernels import LIMITS, end_children, note_helpers, ready_kernels, set_starter, start_kernels
from .profiling import profiled
from .label_window import TimedKernel
from .phases import PHASES, phase
from .rounds import timed_rounds
from .status import Status


def clock_record(w: dict) -> dict:
    """Per round, us a call: the parent's figure, the candidate's claim and the candidate as the judge's
    clock saw it (clock.paired_figures), so a clock verdict can be read back from the record."""
    rec = {k: [round(x, 3) for x in w[k]] for k in ("parent", "claimed", "seen", "net", "seen_null") if w.get(k)}
    for k in ("flush_us", "null_us"):
        if w.get(k):
            rec[k] = w[k]
    return rec

def environment(device: str) -> dict:
    import triton
    env = {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
           "device": device, "interpret": os.environ.get("TRITON_INTERPRET") == "1",
           "host": platform.node(), "platform": platform.platform()}
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.update(gpu=p.name, cuda=torch.version.cuda, capability=f"{p.major}.{p.minor}",
                   driver=_driver_version())
    return env


@functools.lru_cache(maxsize=1)
def _driver_version() -> str:  # asked once a job: the environment record is written twice (before, after the starts)
    try:
        import subprocess
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0]
    except Exception:
        return ""


def screen_first(kernels: dict, job: dict, inputs: Inputs, reference, device: str, only,
                 emit, timed: bool = True) -> tuple[dict, bool]:
    """A job's cheap gate: the candidate alone on the `screen` workloads (the smallest and the
    largest) before anything else runs. Returns (their records, failed). When one failed, every
    other record is NOT_RUN, all are emitted (a timed job's with its empty timing summary), and the
    job is over. Untimed (the quick gate and the full check in one job), a screen record is final and
    emitted as it is made."""
    screen = set(job.get("settings", {}).get("screen") or ())
    keys = {f"candidate:{u}" for u in screen if only is None or f"candidate:{u}" in only}
    if not keys:
        return {}, False
    recs = check_all(kernels, job, inputs, reference, device, keys, emit, emit_done=not timed)
    failed = [(k, r) for k, r in recs.items() if r.get("status") != Status.PASSED]
    if not failed:
        return recs, False
    k0, r0 = failed[0]
    why = f"not run: the candidate failed the screen on workload {k0.split(':', 1)[1][:8]} ({r0.get('status')})"
    not_run = {k: {"event": "done", "label": label, "uuid": wl["uuid"], "status": Status.NOT_RUN, "message": why}
               for label in kernels for wl in job["workloads"]
               if (k := f"{label}:{wl['uuid']}") not in recs and (only is None or k in only)}
    for rec in [*(recs.values() if timed else ()), *not_run.values()]:  # untimed: the screen's, emitted already
        emit(**rec)
    recs.update(not_run)
    if timed:
        emit(event="ab", baseline="parent", workloads=[], timing_s=0.0, bandwidth_gbs=None, rounds=0,
             stopped="screen failed", outcome="inconclusive")
    return recs, True


def unscreened(kernels: dict, job: dict, only, screened: dict):
    """What a job checks after its screen: `only` (None: everything) less the screened keys."""
    if not screened:
        return only
    everything = {f"{label}:{wl['uuid']}" for label in kernels for wl in job["workloads"]}
    return (everything if only is None else set(only)) - set(screened)


def check_screened(kernels: dict, job: dict, inputs: Inputs, reference, device: str, only, emit) -> None:
    """An untimed job: the `screen` workloads first, when it has one; the rest only when they passed."""
    screened, failed = screen_first(kernels, job, inputs, reference, device, only, emit, timed=False)
    if failed:
        return
    rest = unscreened(kernels, job, only, screened)
    check_all(kernels, job, inputs, reference, device, rest, emit, emit_done=True)


def run_timed(job: dict, kernels: dict, inputs: Inputs, reference, device: str, only, emit) -> None:
    """stride: candidate against the reference; ab: candidate against the parent (sequential)."""
    stage = job["stage"]
    settings = job.get("settings", {})
    for k in [k for k in PHASES if k != "start"]:  # in-process callers run several jobs: count this one's
        del PHASES[k]
    t_check = time.perf_counter()
    screened: dict = {}
    if stage == "ab" and settings.get("screen"):
        screened, failed = screen_first(kernels, job, inputs, reference, device, only, emit)
        if failed:
            return
    rest = unscreened(kernels, job, only, screened)
    recs = {**screened, **check_all(kernels, job, inputs, reference, device, rest, emit, emit_done=False)}
    phase("check", t_check)
    cand = TimedKernel("candidate", kernels.get("candidate", (None, None))[0], True)
    if stage == "ab":
        base = TimedKernel("parent", kernels.get("parent", (None, None))[0], True)
    else:
        base = TimedKernel("reference", reference, False)
    def ok(label: str, u: str) -> bool:
        return recs.get(f"{label}:{u}", {}).get("status") == Status.PASSED
    wls = [(i, wl) for i, wl in enumerate(job["workloads"])
           if ok("candidate", wl["uuid"]) and (base.label == "reference" or ok(base.label, wl["uuid"]))]
    seq = None
    rounds = int(settings.get("min_rounds", 5))
    if stage == "ab":
        seq = stats.Rounds(rounds, int(settings.get("max_rounds", 40)), float(settings.get("confidence", 0.95)),
                           float(settings.get("min_effect", 0.01)), float(settings.get("guard", 0.02)),
                           int(settings.get("wide_rounds", 0)))
        rounds = seq.last_round
    t0 = time.perf_counter()
    fig, failures, timer_bw = (timed_rounds(job, base, cand, wls, inputs, reference, device, emit, seq, rounds)
                               if wls else ({}, {}, None))
    timing_s = time.perf_counter() - t0
    per_wl = []
    for i, wl in wls:
        u = wl["uuid"]
        if u in failures:
            label, e = failures[u]
            recs[f"{label}:{u}"].update(status=e.status, message=str(e))
            # The other label passed its checks but has no figures here: said so in its record (its
            # status stays what the checks found; the verdict reads the failing label's).
            other = next((lb for lb in (cand.label, base.label) if lb != label and f"{lb}:{u}" in recs), None)
            if other is not None:
                recs[f"{other}:{u}"].update(timed=False, message=f"not timed: the {label} failed here "
                                            f"({e.status.value if hasattr(e.status, 'value') else e.status}: "
                                            f"{str(e)[:200]})")
            if fig.get(u, {}).get("witness"):  # what the judge's clock saw, whichever way it ended
                recs[f"candidate:{u}"]["clock"] = clock_record(fig[u]["witness"])
            continue
        f = fig[u]
        if not f["log_ratio"]:
            for lb in (cand.label, base.label):
                if f"{lb}:{u}" in recs:
                    recs[f"{lb}:{u}"].update(timed=False, message="not timed: no round completed on this workload")
            continue
        c = recs[f"candidate:{u}"]
        c.update(latency_us=stats.median(f["candidate"]), host_latency_us=stats.median(f["host_candidate"]),
                 samples_us=[round(x, 4) for x in f["candidate"]], method=f.get("method"),
                 calls_per_round=f["calls"], rounds=len(f["log_ratio"]))
        if "calls_asked" in f:  # fewer than timing_mem_mb asked for: the GPU's free memory (sampling.calls_within)
            c["calls_asked"] = f["calls_asked"]
        if f.get("witness"):  # the candidate as the judge's own clock saw it (clock.clock_failure)
            w = f["witness"]
            if w.get("net"):  # net of each label's own flushes: a measurement, not a verdict's figure
                c["witness_net_us"] = stats.median(w["net"])
            if w.get("seen_null"):  # less each process's null window: a measurement, not a verdict's figure
                c["witness_null_us"] = stats.median(w["seen_null"])
            c.update(witness_latency_us=stats.median(w["seen"]), witness_claimed_us=stats.median(w["claimed"]),
                     window_us={k: round(stats.median(v), 3) for k, v in w["window_us"].items()},
                     clock=clock_record(w))
            if device.startswith("cuda"):  # the smallest under-report the clock could catch here, per call
                c["clock_limit_us"] = round(clock_limit_us(f, device), 3)
        for k in ("interfered_parent", "interfered_candidate"):
            if f.get(k):
                c[k] = f[k]
        if "timer_error" in f:
            c["timer_error"] = f["timer_error"][:300]
        if "l2_reset" in f:
            c["l2_reset"] = f["l2_reset"][:200]
        base_lat = stats.median(f[base.label])
        if stage == "ab":
            p = recs[f"parent:{u}"]
            p.update(latency_us=base_lat, host_latency_us=stats.median(f["host_parent"]),
                     samples_us=[round(x, 4) for x in f["parent"]], method=f.get("method"))
            m = math.fsum(f["log_ratio"]) / len(f["log_ratio"])
            c["ratio_vs_parent"] = math.exp(m)
            if len(f["log_ratio"]) >= 2:
                _, lo, hi = stats.mean_interval(f["log_ratio"], float(settings.get("confidence", 0.95)))
                c["ratio_ci"] = [math.exp(lo), math.exp(hi)]
        else:
            c.update(reference_latency_us=base_lat, reference_host_latency_us=stats.median(f["host_reference"]),
                     speedup_vs_reference=base_lat / max(c["latency_us"], 1e-9))
        if timer_bw:
            fr = floor_record(job, inputs, i, wl, timer_bw)
            nb, floor_us = fr["floor_bytes"], fr["floor_us"]
            c.update(fr)
            if c["latency_us"] < float(settings.get("floor_margin", 0.9)) * floor_us:
                c.update(status=Status.BELOW_FLOOR,
                         message=f"{c['latency_us']:.3f} us is below the physical floor {floor_us:.3f} us "
                                 f"({nb} bytes over the measured {timer_bw / 1e9:.0f} GB/s): the timing "
                                 "cannot be real (skipped work, or inputs cached)")
        per_wl.append({"uuid": u, "latency_us": c["latency_us"], "base_latency_us": base_lat,
                       "log_ratios": [round(x, 6) for x in f["log_ratio"]]})
    for key, rec in recs.items():
        emit(**rec)
    summary = {"event": stage if stage == "ab" else "timing", "baseline": base.label, "workloads": per_wl,
               "timing_s": round(timing_s, 3), "bandwidth_gbs": round(timer_bw / 1e9, 1) if timer_bw else None,
               "timer": settings.get("timer", "cupti") if device.startswith("cuda") else "host",
               "phases": {k: round(v, 3) for k, v in PHASES.items()}}
    if seq is not None:
        summary.update(seq.summary() if seq.seq.log_ratios else {"rounds": 0, "stopped": "no data",
                                                              "outcome": "inconclusive"})
    emit(**summary)


def _term(signum, frame) -> None:  # noqa: ARG001
    """The runner's SIGTERM (its limit) or its death (PR_SET_PDEATHSIG): end every kernel process first."""
    end_children()
    _quit(128 + signum)


def _quit(code: int) -> None:
    for d in _TEMP:  # main's own clean-up never runs after this
        shutil.rmtree(d, ignore_errors=True)
    os._exit(code)


_TEMP: list[Path] = []  # the judge's temp folder, for _term


def _lifeline(fd: int) -> None:
    """The runner holds this judge's stdin open while the job runs. Its end (the runner killed, or done
    with the job) ends this judge and everything under it, from this thread: PR_SET_PDEATHSIG alone
    names only the parent (a judge template's fork outlives a killed runner while the template is
    stopped), and its handler waits for the main thread."""
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass
    hygiene.kill_pids(hygiene.descendants(os.getpid()))
    _quit(128 + signal.SIGTERM)


T_START = time.perf_counter()


def main(argv: list[str]) -> int:
    out_dir = Path(argv[0])
    only = None
    opts = dict(zip(argv[1::2], argv[2::2]))
    if "--only" in opts:
        only = set(opts["--only"].split(",")) if opts["--only"] else set()
    if "--deadline" in opts:
        LIMITS["job_deadline"] = time.monotonic() + float(opts["--deadline"])
    if "--workload-limit" in opts:
        LIMITS["workload_s"] = float(opts["--workload-limit"])
    if "--job-limit" in opts:
        LIMITS["job_s"] = float(opts["--job-limit"])
    profiling = bool(os.environ.get("AUTOGK_PROFILE_DIR"))
    if opts.get("--kernel-start") == "fork" and not profiling:  # before the key and job are read: forks.py
        try:
            set_starter(forks.Starter())
        except OSError:
            pass  # each kernel process starts afresh
    # The key comes on stdin (not argv or the environment, which other processes can read).
    # The job follows it on stdin too: no file a kernel could read holds it (both labels' sources, the seed).
    key = sys.stdin.readline().strip().encode() if not sys.stdin.isatty() else b""
    job = json.loads(sys.stdin.readline())
    parent = os.getppid()
    import torch.multiprocessing
    torch.multiprocessing.set_sharing_strategy("file_system")  # as kernel_process.py: shm by name, no fd passing
    # Start torch's shm manager now: a signal that lands while it starts leaves libshm spinning.
    torch.zeros(1).share_memory_()
    note_helpers()  # the manager (and the kernel starter): no kernel process has started yet
    hygiene.make_undumpable()
    hygiene.die_with_parent(signal.SIGTERM)
    hygiene.become_subreaper()
    signal.signal(signal.SIGTERM, _term)
    # The runner's SIGUSR1, before it ends a judge that overran its limits: every thread's Python stack to
    # stderr (which the runner reads), so where it hung is in the result, not only that it did.
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    if os.getppid() != parent:  # the runner died before PR_SET_PDEATHSIG was set
        return 3
    threading.Thread(target=_lifeline, args=(sys.stdin.fileno(),), daemon=True, name="lifeline").start()
    # Every input set is drawn from the job's seed mixed with a secret of this process: a kernel that
    # read the job (or knows its commit) cannot draw the same inputs and answer from a table.
    job["seed"] = int(job.get("seed", 0)) ^ secrets.randbits(31)
    device = job.get("settings", {}).get("device", "cpu")
    progress = open(out_dir / "progress.jsonl", "a", buffering=1)
    seq = [0]
    lock = threading.Lock()

    def emit(**rec) -> None:
        body = json.dumps(rec)
        with lock:
            seq[0] += 1
            mac = hmac.new(key, f"{seq[0]}:{body}".encode(), hashlib.sha256).hexdigest()
            progress.write(json.dumps({"seq": seq[0], "rec": rec, "mac": mac}) + "\n")
            progress.flush()  # read on this machine, from the page cache: no disk sync to wait on (a loaded
            # machine held a judge over 20 s in one, its job's limit spent before any kernel ran)

    tmp = Path(tempfile.mkdtemp(prefix="autogk-worker-"))
    _TEMP.append(tmp)
    folders.mark_owner(tmp)
    try:
        # The GPU's free memory before any kernel's process can take some (rounds.free_device_bytes).
        free_before = tenants.free_memory() if device.startswith("cuda") else {}
        remote = start_kernels(job, tmp / "kernels", device, emit, only)  # first: they import meanwhile
        job["gpu_free_before"] = free_before
        emit(event="env", environment=environment(device))
        settings = job.get("settings", {})
        if (device.startswith("cuda") and settings.get("timed") and job.get("stage") == "stride"
                and settings.get("timer", "cupti") == "cupti"):
            warm_profiler()  # the judge times the reference itself
        gen_module = None
        if job.get("generator"):  # the target's own generator: trusted, not editable by agents
            try:
                gen_module = import_files("generator", {"inputs.py": job["generator"]}, tmp, main="inputs.py")
                set_target(gen_module)
            except Exception as e:
                emit(event="fatal", message=f"the target's inputs.py failed to import: {short_tb(e)}")
                return 2
        inputs = Inputs(job, device, gen_module)
        reference = load_reference(job["definition"], job.get("fast_reference"))
        ready_kernels(remote)
        emit(event="env", environment={**environment(device),
                                       "sandbox": sorted({k.sandbox for k in remote.values() if k.sandbox}),
                                       "reference": reference_used(job)})
        phase("start", T_START)
        kernels = {label: (k, k.load_error) for label, k in remote.items()}
        if job.get("settings", {}).get("timed") and job.get("stage") in ("stride", "ab"):
            run_timed(job, kernels, inputs, reference, device, only, emit)
        else:
            check_screened(kernels, job, inputs, reference, device, only, emit)
        for k in remote.values():
            # Killed, not asked to exit: a graceful exit (the CUDA context's teardown) cost ~0.75 s a
            # process on the H200. Asked only when profiling, so the process writes its profile.
            k.close() if profiling else k.stop()
        emit(event="end")
    finally:
        end_children()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def reference_used(job: dict) -> str:
    """Which reference made the expected outputs, for the result's environment record."""
    fast = job.get("fast_reference")
    return f"{fast['file']} (proven equal to the definition's, proof {fast['proof']})" if fast else "definition"


def entry(argv: list[str]) -> int:
    return profiled(main, argv, "judge")
