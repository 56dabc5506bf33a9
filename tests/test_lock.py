"""The loop lock is taken atomically: with a stale lock present, racing takers never both win."""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import threading

import pytest

from autogk_git.errors import LockHeld
from autogk_git.loop.lock import RepoLock


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def write_stale(path, pid: int) -> None:
    path.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "since": 0}))


def _taker(state_dir: str, rounds: int, barrier, results) -> None:
    from pathlib import Path
    for _ in range(rounds):
        barrier.wait()                      # the stale lock is in place: go
        lock = RepoLock(Path(state_dir))
        try:
            lock.acquire()
            won = True
        except LockHeld:
            won = False
        results.put(won)
        barrier.wait()                      # everyone has tried; the winner still holds it
        if won:
            lock.release()
        barrier.wait()                      # released: the next round may begin


def test_processes_racing_over_a_stale_lock_have_one_winner_per_round(tmp_path):
    takers, rounds = 4, 200
    ctx = mp.get_context("fork")
    barrier, results = ctx.Barrier(takers + 1), ctx.Queue()
    procs = [ctx.Process(target=_taker, args=(str(tmp_path), rounds, barrier, results)) for _ in range(takers)]
    for p in procs:
        p.start()
    gone = dead_pid()
    winners = []
    try:
        for _ in range(rounds):
            write_stale(tmp_path / "loop.lock", gone)
            barrier.wait(timeout=60)
            barrier.wait(timeout=60)
            winners.append(sum(results.get(timeout=60) for _ in range(takers)))
            barrier.wait(timeout=60)
    finally:
        for p in procs:
            p.join(timeout=30)
    assert winners == [1] * rounds, f"rounds with a winner count other than 1: {[w for w in winners if w != 1]}"
    assert not (tmp_path / "loop.lock").exists()


def test_200_threads_racing_over_a_stale_lock_have_one_winner(tmp_path):
    write_stale(tmp_path / "loop.lock", dead_pid())
    n = 200
    barrier, won, locks = threading.Barrier(n), [], []
    guard = threading.Lock()

    def take() -> None:
        lock = RepoLock(tmp_path)
        barrier.wait()
        try:
            lock.acquire()
        except LockHeld:
            return
        with guard:
            won.append(lock)

    threads = [threading.Thread(target=take) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    assert won[0].recovered and won[0].recovered["host"] == socket.gethostname()
    won[0].release()


def test_a_live_holder_is_named_and_a_dead_one_recovered(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from autogk_git.loop.lock import RepoLock\n"
        f"RepoLock(Path({str(tmp_path)!r})).acquire(); print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LockHeld, match=f"pid {holder.pid}") as e:
            RepoLock(tmp_path).acquire()
        assert f"kill {holder.pid}" in (e.value.hint or "")
    finally:
        holder.kill()
        holder.wait()
    # killed with SIGKILL: the kernel dropped its flock, the record it left is reported as recovered
    lock = RepoLock(tmp_path).acquire()
    assert lock.recovered and lock.recovered["pid"] == holder.pid
    lock.release()
    assert not (tmp_path / "loop.lock").exists()


def test_a_lock_from_another_host_is_refused(tmp_path):
    (tmp_path / "loop.lock").write_text(json.dumps({"pid": 1, "host": "elsewhere", "since": 0}))
    with pytest.raises(LockHeld, match="host elsewhere"):
        RepoLock(tmp_path).acquire()
