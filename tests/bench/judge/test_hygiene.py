"""The judge's process helpers (bench/judge/hygiene.py) on real processes."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from autogk_git.bench.judge import hygiene


def test_tree_walks_a_process_tree_as_the_full_table_does():
    # sh -> (sleep, sh -> sleep): children and a grandchild, found through /proc/PID/task/TID/children
    # from the root down, the same set as the scan of every process's stat.
    proc = subprocess.Popen(["sh", "-c", "sleep 30 & sh -c 'sleep 30 & wait' & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(hygiene.descendants(proc.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        below = hygiene.descendants(proc.pid)
        assert len(below) == 3, below
        assert sorted(hygiene.tree(proc.pid)) == sorted(below)
        assert sorted(os.path.basename(hygiene.program(p)) for p in below).count("sleep") == 2, below
        assert hygiene.tree(proc.pid + 10_000_000) == []  # no such process: nothing below it
    finally:
        hygiene.kill_tree(proc.pid)
        proc.wait(timeout=10)


def test_a_process_table_read_with_a_loop_in_it_is_walked_once(monkeypatch):
    # /proc is read file by file: a pid reused between two reads can make a table where 20 and 21 are each
    # other's parent. The walk below 10 names each process once and ends (it went round forever before).
    monkeypatch.setattr(hygiene, "_proc_table", lambda: {20: 10, 21: 20, 22: 21, 23: 99})
    assert sorted(hygiene.descendants(10)) == [20, 21, 22]
    monkeypatch.setattr(hygiene, "_proc_table", lambda: {20: 21, 21: 20, 22: 21})
    assert sorted(hygiene.descendants(20)) == [21, 22]  # 20 itself is not its own descendant
    assert hygiene.subtree([(20, 21), (21, 20)], 21) == [(20, 21)]


FORKER = r"""
import os, subprocess, sys, time
from autogk_git.bench.judge import hygiene, kernels
# A process that forks a child every millisecond (each sleeps 50 ms): a child forked between a listing of the
# processes to stop and its parent's stop would run on through the block.
src = "import os, signal, time\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\nwhile True:\n    if os.fork() == 0:\n        time.sleep(0.05); os._exit(0)\n    time.sleep(0.001)\n"
p = subprocess.Popen([sys.executable, "-c", src], start_new_session=True)
time.sleep(0.1)
bad = 0
for _ in range(20):
    with kernels.others_stopped():
        below = hygiene.tree(os.getpid())
        running = [q for q in below if not hygiene.stopped(q)]
        bad += bool(running)
    time.sleep(0.01)
hygiene.kill_tree(p.pid)
print("blocks with a process running:", bad, "of 20; processes at the end:", len(below))
"""


def test_nothing_below_the_judge_runs_inside_others_stopped_even_while_it_forks():
    # This script stands for the judge (others_stopped lists what is below the calling process).
    out = subprocess.run([sys.executable, "-c", FORKER], capture_output=True, text=True, timeout=120,
                         cwd=str(Path(__file__).resolve().parents[3]))
    assert out.returncode == 0, out.stderr[-2000:]
    assert "blocks with a process running: 0 of 20" in out.stdout, out.stdout


TRACER = r"""
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_CONT, PTRACE_SEIZE = 7, 0x4206
child = os.fork()
if child == 0:  # the burner
    while True:
        pass
if libc.ptrace(PTRACE_SEIZE, child, None, None) != 0:
    print("no-ptrace", flush=True)
    sys.exit(0)
print(child, flush=True)
while True:  # every stop the burner gets, its signal withheld: the burner runs on
    pid, status = os.waitpid(child, 0)
    if os.WIFSTOPPED(status):
        libc.ptrace(PTRACE_CONT, child, None, None)
"""


def test_a_process_whose_tracer_withholds_its_stop_is_stopped_once_the_tracer_is():
    # A kernel's burner traced by another of its processes: SIGSTOP reaches the burner as a stop its tracer
    # sees first, and a tracer not yet stopped (listed later, or found in a later pass of the listing)
    # continues it with the signal withheld. The burner spun on beside the other label's timed window
    # (the stop's wait gave up after its second). A stop sent again once the tracer is stopped holds.
    import pytest
    proc = subprocess.Popen([sys.executable, "-c", TRACER], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        first = proc.stdout.readline().strip()
        if first == "no-ptrace":
            pytest.skip("ptrace is not allowed here")
        burner = int(first)
        time.sleep(0.2)
        listings = iter([[burner], [burner, proc.pid]])  # the tracer shows in the second pass
        sent = hygiene.stop_all(lambda: next(listings, [burner, proc.pid]), 5)
        assert sorted(sent) == sorted([burner, proc.pid])
        assert hygiene.stopped(proc.pid)
        ticks = lambda: sum(map(int, hygiene.stat_fields(burner)[11:13]))  # noqa: E731 - utime + stime
        before = ticks()
        time.sleep(0.5)
        assert hygiene.stopped(burner) and ticks() - before <= 1, (hygiene.stat_fields(burner)[:1], ticks() - before)
    finally:
        hygiene.kill_tree(proc.pid)
        proc.wait(timeout=10)


DISGUISED = r"""
import os, subprocess, sys, time
import torch, torch.multiprocessing
from autogk_git.bench.judge import hygiene, kernels
# This script stands for the judge: its own shared-memory manager, noted before any kernel runs.
torch.multiprocessing.set_sharing_strategy("file_system")
torch.zeros(1).share_memory_()
kernels.note_helpers()
shm = os.path.join(os.path.dirname(torch.__file__), "bin", "torch_shm_manager")
# A kernel's burner: torch's own manager program, with a library preloaded that spins from its start.
burner = subprocess.Popen([shm], env={**os.environ, "LD_PRELOAD": sys.argv[1]}, start_new_session=True)
time.sleep(0.3)
with kernels.others_stopped():
    print("judge's manager running:", any(not hygiene.stopped(p) for p in kernels._HELPERS), flush=True)
    print("burner stopped:", hygiene.stopped(burner.pid), flush=True)
burner.kill()
"""


def test_a_burner_that_runs_as_torchs_shared_memory_manager_is_stopped(tmp_path):
    # The stop left running every process whose program was torch_shm_manager (the judge's helper): a kernel
    # could exec that program itself, with LD_PRELOAD (or ptrace its own manager), and burn the cores in it.
    # The judge's own helpers are now the processes below it before any kernel ran.
    import shutil

    import pytest
    if shutil.which("cc") is None:
        pytest.skip("no C compiler to build the preloaded library")
    (tmp_path / "spin.c").write_text("__attribute__((constructor)) static void spin(void) { for (;;) {} }\n")
    lib = tmp_path / "libspin.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "spin.c")], check=True, timeout=60)
    out = subprocess.run([sys.executable, "-c", DISGUISED, str(lib)], capture_output=True, text=True, timeout=120,
                         cwd=str(Path(__file__).resolve().parents[3]))
    assert out.returncode == 0, out.stderr[-2000:]
    assert "judge's manager running: True" in out.stdout and "burner stopped: True" in out.stdout, out.stdout


STOP_TIMED = r"""
import subprocess, sys
from autogk_git.bench.judge import hygiene, kernels
from autogk_git.bench.judge.phases import PHASES
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with kernels.others_stopped():
    print("stopped while inside:", hygiene.stopped(child.pid), flush=True)
child.kill()
print("stop phase s:", PHASES.get("stop"), flush=True)
"""


def test_the_time_spent_stopping_the_other_processes_is_a_phase_of_its_own():
    # The stop around each time request (stop every other process of the job's kernels, wait until each
    # is, continue them after) costs the judge's timed phase; its own figure in the job's `phases` says
    # how much (the timed phase of an A/A comparison went from 3.9-5.1 s to 7.0-8.2 s a comparison when
    # the stop came, on an H100, 2026-12-06, not yet told apart from a slower host).
    out = subprocess.run([sys.executable, "-c", STOP_TIMED], capture_output=True, text=True, timeout=120,
                         cwd=str(Path(__file__).resolve().parents[3]))
    assert out.returncode == 0, out.stderr[-2000:]
    assert "stopped while inside: True" in out.stdout, out.stdout
    got = float(out.stdout.split("stop phase s:")[1])
    assert 0 < got < 30, out.stdout
