"""bench/judge/tenants.py: the processes that share the judge's GPU, named in a failure of the judge's clock.

The parser reads NVML's CSV as nvidia-smi prints it (the first case is the H200 device's own output,
benchmarks/results/session37_h200/call2/nvml_probe.txt); the job's own processes are found in /proc by
the job's tag, as the runner finds them. The GPU case (a process outside the job busy on the GPU while
an honest pair is timed) is in tests/test_judge_gpu.py."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from autogk_git.bench.judge import hygiene, tenants
from autogk_git.bench.judge.calls import KernelFailure
from autogk_git.bench.judge.status import Status

H200_PROBE = "pid, process_name, used_gpu_memory [MiB]\n483, python3, 612 MiB\n"


def test_the_h200s_own_listing_is_read():
    assert tenants.parse_compute_apps(H200_PROBE) == [{"pid": 483, "name": "python3", "memory": "612 MiB", "gpu": ""}]


def test_a_listing_with_gpus_keeps_only_this_gpus_strangers_and_plain_names():
    text = ("101, python3, 612 MiB, GPU-aaaa\n"
            "102, /usr/bin/my app; the parent was slow, 50 MiB, GPU-aaaa\n"
            "103, python3, 70 MiB, GPU-bbbb\n"
            "[Not Supported]\n")
    rows = tenants.parse_compute_apps(text)
    assert [r["pid"] for r in rows] == [101, 102, 103]
    assert rows[1]["name"] == "/usr/bin/my?app??the?parent?was?slow" and rows[1]["memory"] == "50 MiB"
    assert [r["pid"] for r in tenants.strangers(rows, {101}, "GPU-aaaa")] == [102]
    assert [r["pid"] for r in tenants.strangers(rows, {101}, "")] == [102, 103]  # own GPU unknown: all count


def test_a_clock_failure_names_the_strangers_and_keeps_its_status():
    e = KernelFailure(Status.TAMPERED, "the judge's own clock saw the candidate take 52.780 us a call")
    assert tenants.named(e, []) is e
    others = [{"pid": 200 + i, "name": "python3", "memory": "612 MiB", "gpu": ""} for i in range(7)]
    got = tenants.named(e, others)
    assert got.status == Status.TAMPERED and str(got).startswith(str(e))
    assert "pid 200 (python3, 612 MiB)" in str(got) and "pid 204" in str(got) and "pid 205" not in str(got)
    assert "and 2 more" in str(got) and "give the judge a GPU of its own" in str(got)


def test_the_jobs_own_processes_are_the_judge_its_kernels_and_whatever_carries_its_tag(monkeypatch):
    tag = "t" * 32
    monkeypatch.setenv(hygiene.TAG_VAR, tag)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             env={**os.environ, hygiene.TAG_VAR: tag})
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             env={k: v for k, v in os.environ.items() if k != hygiene.TAG_VAR})
    try:
        own = tenants.own_pids([12345])
        assert {os.getpid(), 12345, child.pid} <= own and other.pid not in own
    finally:
        for p in (child, other):
            p.kill()
            p.wait()


def test_failures_are_left_alone_where_nvml_says_nothing():
    if shutil.which("nvidia-smi"):
        pytest.skip("nvidia-smi is here: the GPU test covers this machine")
    assert tenants.gpu_processes() is None
    e = KernelFailure(Status.TAMPERED, "x")
    failures = {"u": ("candidate", e)}
    tenants.name_strangers(failures, {"u"}, [])
    assert failures["u"][1] is e


KERNEL = r"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(child.pid, flush=True)
time.sleep(60)
"""


def test_a_process_a_kernel_started_that_holds_a_gpu_context_is_its_kernels_tampering(monkeypatch):
    # A helper process of the kernel's (here a child of a stand-in kernel process) listed by NVML with a
    # context: its work would be counted by no timer and by the judge's clock only past its slack. The
    # kernel process itself, and processes outside the job, are not held against anyone.
    kernel = subprocess.Popen([sys.executable, "-c", KERNEL], stdout=subprocess.PIPE, text=True)
    helper = None
    try:
        helper = int(kernel.stdout.readline())
        outsider = os.getppid()  # pytest's parent: not of this job
        monkeypatch.setattr(tenants, "nvml_pids", lambda lib: {kernel.pid, helper, outsider, os.getpid()})
        monkeypatch.setattr(tenants, "cuda_loaded", lambda pid: True)  # no CUDA driver on this machine
        watch = tenants.Watch(lambda: {kernel.pid: "candidate"}, "candidate")
        watch.look(None, os.getpid())
        bad = watch.found("candidate")
        assert bad is not None and bad.status == Status.TAMPERED and f"pid {helper} (" in str(bad), watch.seen
        assert watch.found("parent") is None and list(watch.seen) == ["candidate"], watch.seen
    finally:
        if helper:
            os.kill(helper, 9)
        kernel.kill()
        kernel.wait()


def test_an_orphan_the_judge_took_in_is_charged_to_the_candidate(monkeypatch):
    # A kernel's helper that left its parent (reparented to the judge, its subreaper) names no kernel: the
    # candidate, the kernel under judgment, answers for it. Here the "judge" is this test's process and the
    # orphan its direct child.
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        monkeypatch.setattr(tenants, "nvml_pids", lambda lib: {orphan.pid})
        monkeypatch.setattr(tenants, "cuda_loaded", lambda pid: True)
        watch = tenants.Watch(lambda: {}, "candidate")
        watch.look(None, os.getpid())
        assert watch.found("candidate") is not None and watch.found("parent") is None, watch.seen
    finally:
        orphan.kill()
        orphan.wait()


def test_the_watch_says_why_it_could_not_look_and_judges_nothing(monkeypatch):
    monkeypatch.setattr(tenants, "nvml", lambda: (None, "no NVML: not here"))
    watch = tenants.Watch(lambda: {}, "candidate")
    watch.start()
    watch.stop()
    assert watch.unavailable == "no NVML: not here" and watch.found("candidate") is None


def test_a_pid_of_the_job_without_cuda_mapped_is_not_held_against_it(monkeypatch):
    # In a container with a pid namespace of its own NVML's pids are the machine's and could name another
    # process here: only one with the CUDA driver mapped (or its maps hidden) counts.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        monkeypatch.setattr(tenants, "nvml_pids", lambda lib: {child.pid})
        assert not tenants.cuda_loaded(child.pid)
        watch = tenants.Watch(lambda: {}, "candidate")
        watch.look(None, os.getpid())
        assert watch.seen == {}
    finally:
        child.kill()
        child.wait()
