"""A benchmark running in the background for a person's commit: its pid file, and the loop's marker.

The post-commit hook starts the benchmark detached and writes its pid here; the loop reads it to wait
for (rather than skip, or run twice) an experiment whose benchmark is still running.
"""
from __future__ import annotations

from pathlib import Path

from autogk_git import env
from autogk_git.procs import pid_alive

LOOP_ENV = env.LOOP
"""Set on the loop's own commits: the hooks leave those to the loop, which benchmarks them itself."""


def pid_file(state_dir: Path, sha: str) -> Path:
    d = state_dir / "bench"
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{sha}.pid"


def running_bench_pid(state_dir: Path, sha: str) -> int | None:
    """The pid of the live background benchmark of sha, if any."""
    p = state_dir / "bench" / f"{sha}.pid"
    try:
        pid = int(p.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if pid_alive(pid) else None
