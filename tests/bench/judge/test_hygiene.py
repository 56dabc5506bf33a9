"""The judge's process helpers (bench/judge/hygiene.py) on real processes."""
from __future__ import annotations

import subprocess
import time

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
        assert {hygiene.command_name(p) for p in below} == {"sleep", "sh"}
        assert hygiene.tree(proc.pid + 10_000_000) == []  # no such process: nothing below it
    finally:
        hygiene.kill_tree(proc.pid)
        proc.wait(timeout=10)
