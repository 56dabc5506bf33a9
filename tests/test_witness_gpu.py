"""On a CUDA GPU: the judge's own clock (bench/judge/witness.py) confirms the candidate's figures.

    python -m pytest -q -o addopts= -m gpu tests/test_witness_gpu.py -s

Each test prints one line per workload (parent's CUPTI time per call, the candidate's own claim, the
candidate by the judge's clock, the ratio), which benchmarks/results/ keeps.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

from autogk_git.bench import runner  # noqa: E402
from autogk_git.bench.judge import hygiene  # noqa: E402
from autogk_git.bench.judge.clock import INTERFERED_WINDOWS  # noqa: E402
from autogk_git.bench.judge.status import Status  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
DEF = json.loads((DATA / "scale" / "definition.json").read_text())


def wl(n: int, tag: str) -> dict:
    return {"uuid": f"00000000-0000-4000-8000-0000000000{tag}", "axes": {"n": n},
            "inputs": {"x": {"type": "random"}, "bias": {"type": "random"}, "scale": {"type": "scalar", "value": 1.5}}}


SIZES = [wl(1 << 18, "c1"), wl(1 << 21, "c2"), wl(1 << 24, "c3")]  # ~3, ~10, ~85 us a call on an H200


def src(name: str) -> dict:
    return {"kernel.py": (DATA / "cheats" / f"{name}.py").read_text()}


def ab(parent: str, candidate: str, workloads: list, timeout_s: float = 400, on_progress=None, **settings) -> dict:
    s = {"device": "cuda", "timed": True, "trials": 2, "reps": 20, "warmup": 3, "min_rounds": 6, "max_rounds": 6,
         "timer": "cupti", "stress": False, **settings}
    job = {"version": 1, "stage": "ab", "definition": DEF, "workloads": workloads, "generator": None,
           "blob_root": ".", "seed": 5, "settings": s, "sources": {"parent": src(parent), "candidate": src(candidate)}}
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return runner.run_worker(job, env, timeout_s, on_progress=on_progress)


@contextlib.contextmanager
def _trace(name: str, t0: float):
    """Write, every 5 s while the block runs, this process's descendants (pid, state, kernel wait,
    command) and the GPU's compute processes to $AUTOGK_TEST_TRACE_DIR/NAME.txt (benchmarks/h200_call.sh
    sets it; else the system's temp folder). Yields an on_progress callback that writes there too."""
    folder = Path(os.environ.get("AUTOGK_TEST_TRACE_DIR") or tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    f = open(folder / f"{name}.txt", "a", buffering=1)
    done = threading.Event()

    def snap() -> None:
        while not done.wait(5.0):
            f.write(f"-- {time.monotonic() - t0:.1f} s\n")
            for pid in hygiene.descendants(os.getpid()):
                try:
                    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                    wchan = Path(f"/proc/{pid}/wchan").read_text()
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    threads = []  # each thread's state and kernel wait: a main thread blocked in the driver shows
                    for t in sorted(Path(f"/proc/{pid}/task").iterdir(), key=lambda t: int(t.name)):
                        ts = (t / "stat").read_text().rsplit(")", 1)[1].split()[0]
                        threads.append(f"{t.name}:{ts}:{(t / 'wchan').read_text() or '-'}")
                except OSError:
                    continue
                f.write(f"   {pid} {state} {wchan or '-'} {cmd[:120]}\n      threads {' '.join(threads[:12])}\n")
            try:
                gpu = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
                                     capture_output=True, text=True, timeout=20).stdout.strip().replace("\n", "; ")
            except (OSError, subprocess.TimeoutExpired) as e:
                gpu = str(e)
            f.write(f"   gpu: {gpu or '-'}\n")

    def progress(label: str, uuid: str, status: str, secs: float) -> None:
        f.write(f"{time.monotonic() - t0:.1f} s: {label} {uuid[:8]} {status} ({secs:.1f} s)\n")

    t = threading.Thread(target=snap, daemon=True)
    t.start()
    try:
        yield progress
    finally:
        done.set()
        t.join(30)
        f.write(f"== {name}: {time.monotonic() - t0:.1f} s\n")
        f.close()


def show(name: str, out: dict, workloads: list) -> list[dict]:
    recs = []
    for w in workloads:
        c, p = out["labels"]["candidate"][w["uuid"]], out["labels"]["parent"][w["uuid"]]
        print(f"WITNESS {name} n={w['axes']['n']}: {c['status']} parent {p.get('latency_us')} us, candidate "
              f"claims {c.get('latency_us')} us, judge's clock {c.get('witness_latency_us')} us, ratio "
              f"{c.get('ratio_vs_parent')}, windows {c.get('window_us')}, interfered "
              f"{c.get('interfered_parent', 0)}/{c.get('interfered_candidate', 0)}; net of each label's flushes "
              f"{c.get('witness_net_us')} us (claims per round {c.get('witness_claimed_us')} us), flushes "
              f"{(c.get('clock') or {}).get('flush_us')}; {c.get('message', '')[:160]}")
        recs.append(c)
    return recs


def test_an_honest_pair_agrees_with_cupti_and_with_itself():
    out = ab("torch_honest", "torch_honest", SIZES)
    for w, c in zip(SIZES, show("A/A", out, SIZES)):
        assert c["status"] == Status.PASSED and c.get("witness_latency_us"), c
        # Under the judge's own rule: a label's windows seen after another context's work in fewer than
        # INTERFERED_WINDOWS rounds. One such window came on an honest pair (an H100, 2026-12-06: the first
        # workload, one of the parent's six), with both figures within 1 % of each other.
        assert c.get("interfered_parent", 0) < INTERFERED_WINDOWS, c
        assert c.get("interfered_candidate", 0) < INTERFERED_WINDOWS, c
        if c["latency_us"] >= 10:
            assert abs(c["ratio_vs_parent"] - 1) < 0.05, c
    # (torch_honest's `x * scale + bias` is two kernels a call: the idle time between them is the clock's,
    # not CUPTI's, ~1.1 us at ~15 us on an H100, 2026-12-06, so the clock's agreement with CUPTI is held on
    # a one-kernel pair below.)


def test_the_clock_less_each_processs_null_window_agrees_with_cupti_from_10_us_up():
    # One Triton kernel a call, so every microsecond the clock sees is the kernel's or the window's own
    # (flushes, marks, each process's pace): the null windows (clock_null_window) remove the latter. The raw
    # clock was -7.7 % at ~11 us and -2.7 % at ~70 us on an H100, less its null windows -1.4 % and -0.4 %
    # (witness_diag, 2026-12-06); the raw net-of-flushes figure failed 5 % on 2 of the 3 runs before.
    out = ab("honest", "honest", SIZES, clock_null_window=True)
    for w, c in zip(SIZES, show("A/A one kernel", out, SIZES)):
        assert c["status"] == Status.PASSED and isinstance(c.get("witness_null_us"), float), c
        print(f"NULL-CORRECTED n={w['axes']['n']}: claims {c['latency_us']} us, clock less null windows "
              f"{c['witness_null_us']} us")
        if c["latency_us"] >= 10:  # within 5 % of CUPTI from 10 us up
            assert abs(c["witness_null_us"] / c["latency_us"] - 1) < 0.05, c
            assert abs(c["ratio_vs_parent"] - 1) < 0.05, c


def test_figures_rewritten_in_the_kernel_process_are_refused_on_the_gpu():
    # The figures are divided by 3 through the frames above the kernel's host-latency calls: no hook the
    # seal could see. They are frozen (bytes) before those calls and the reply is made from that copy, so
    # the rewrite no longer reaches the reply (an H100, 2026-12-06: PASSED at 1.004x, its honest time); if
    # it ever did, the judge's clock refuses it.
    out = ab("torch_honest", "rewrites_its_reply_gpu", SIZES[1:])
    for c in show("rewrites", out, SIZES[1:]):
        if c["status"] == Status.TAMPERED:
            assert "judge's own clock" in c["message"] and c.get("ratio_vs_parent") is None, c
        else:
            assert c["status"] == Status.PASSED and c["ratio_vs_parent"] > 0.9, c  # a third would be 0.33


def test_outputs_computed_before_the_window_fail_on_the_gpu():
    out = ab("torch_honest", "precomputes_in_warmup_gpu", SIZES[1:])
    for c in show("precompute", out, SIZES[1:]):
        assert c["status"] in (Status.INCORRECT_NUMERICAL, Status.STREAM_ORDER), c
        assert c.get("ratio_vs_parent") is None


def test_gpu_work_left_running_after_a_request_is_no_speedup():
    # leaves_gpu_work.py queues its spin from a profile hook, which the seal now refuses at import.
    out = ab("torch_honest", "leaves_gpu_work", SIZES[1:2])
    for c in show("leaves work", out, SIZES[1:2]):
        assert c["status"] in (Status.TAMPERED, Status.TIMEOUT, Status.HARNESS_ERROR) or (c.get("ratio_vs_parent") or 0) > 0.95, c


def test_another_context_busy_on_the_gpu_before_the_parents_windows_is_tampering():
    # The candidate's child process (a CUDA context of its own) keeps the GPU busy with spin kernels
    # through the whole job. The judge's sleep before each window then takes longer than its cycles
    # (the two contexts take turns on the GPU): in two of the parent's windows that is the candidate's
    # doing, TAMPERED. If this fails with PASSED, the printed line's `interfered` counts say whether
    # the sleep saw the other context at all.
    out = ab("torch_honest", "busies_the_gpu_from_a_child", SIZES[1:2])
    for c in show("busy child", out, SIZES[1:2]):
        # Whatever the judge sees, the child's work is no speedup.
        assert c["status"] == Status.TAMPERED or (c.get("ratio_vs_parent") or 0) > 0.95, c
        if c["status"] != Status.TAMPERED:
            # On the H200 (2026-12-01, benchmarks/results/clock_h200/) the sleep did not see the child's
            # context (interfered 0/0) and the pair came out PASSED at 1.001: the positive path of the
            # interference check is still unshown there.
            pytest.xfail(f"interference not seen: {c['status']}, interfered "
                         f"{c.get('interfered_parent', 0)}/{c.get('interfered_candidate', 0)}")
        # Either the sleep saw the child's context at work, or the judge's watch saw the context itself
        # (a process of the kernel's own on the GPU, tenants.Watch): both TAMPERED.
        assert ("busy with another process right before the parent's" in c["message"]
                or "a process of its own" in c["message"]), c
        assert c.get("ratio_vs_parent") is None


@pytest.mark.parametrize("judge_start", ["exec", "fork"])
def test_a_window_whose_gpu_work_never_ends_costs_its_bound_not_the_job_limit(judge_start):
    # The candidate's first timed call queues a spin of ~15 minutes; the end mark behind it never comes.
    # The judge waits window_min_s + window_ratio x the longest request seen (~10 s here), kills the
    # kernel's process and fails the workload: TIMEOUT, or, should its own stream stay blocked on the
    # killed process's end mark, RUNTIME_ERROR from the runner with the same message ("the judge
    # process died"); either way long before the workload's share of the job (200 s).
    # From session 39 (judges forked from a template) to 2026-12-04 this test never ended within its
    # file's share of a device call (38-42 s before): the trace says, every 5 s, which of the job's
    # processes are alive and in which state and kernel wait, so a cut run still shows where it stood.
    t0 = time.monotonic()
    # Both ways a judge starts: afresh (as through d0e96b3) and forked from the template.
    with _trace(f"never_ends_{judge_start}", t0) as progress:
        out = ab("torch_honest", "never_ends_its_window_gpu", SIZES[1:2], timeout_s=400, on_progress=progress,
                 judge_start=judge_start)
    took = time.monotonic() - t0
    for c in show("never ends", out, SIZES[1:2]):
        assert c["status"] in (Status.TIMEOUT, Status.RUNTIME_ERROR), c
        assert "did not end within" in c["message"], c
    print(f"WITNESS never ends: the job took {took:.1f} s")
    assert took < 150, took


@pytest.mark.parametrize("timer", ["cupti", "events"])
def test_the_timers_own_objects_changed_inside_the_window_are_tampering(timer):
    # An instance attribute on the profiler (`prof.events`) or on the CUDA events (`elapsed_time`), set
    # through the frames during the kernel's calls: the seal holds modules and classes, not these objects.
    # The timer holds their attributes from before the first call and checks them after the last one.
    out = ab("torch_honest", "patches_the_timers_objects_gpu", SIZES[1:2], timer=timer)
    for c in show(f"patches the {timer} timer's objects", out, SIZES[1:2]):
        assert c["status"] == Status.TAMPERED and "what times it" in c["message"], c
        assert c.get("ratio_vs_parent") is None


@pytest.mark.parametrize("timer", ["cupti", "cudagraph", "events"])
def test_a_flush_shrunk_between_the_kernels_calls_and_put_back_is_tampering(timer):
    # The timer's bound flush holds its length in a closure cell: set to one element during the calls and
    # back in the last one, it leaves the L2 warm and nothing changed after the window. The flush's bound
    # values and the timer's attributes are checked between calls (outside each pair of events; capture
    # is untimed); under cupti each flush's device time is also held to half the timer's own fastest.
    # Not yet run on a GPU (session 55 wrote it after its device time).
    out = ab("torch_honest", "shrinks_the_flush_gpu", SIZES[1:2], timer=timer)
    for c in show(f"shrinks the flush under {timer}", out, SIZES[1:2]):
        assert c["status"] == Status.TAMPERED and "L2 flush" in c["message"], c
