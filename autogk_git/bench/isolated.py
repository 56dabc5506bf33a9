"""A check of the target's reference in a process of its own (the reference may call os._exit, crash or
hang): the one way `refcheck` and `refproof` start, feed, limit and kill that process, and the per-call
limit inside it.

The process starts from an empty temp folder with sys.path[0] the package's parent, so no file of the
user's project can stand in for torch or for autogk in it; API tokens stay out of its environment; it
runs `autogk_git.bench.<module>.entry([record path])`, reads its job as JSON on stdin and writes its
record as JSON to that path.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

STARTUP_S = 120  # starting the check's process and importing torch, on top of the reference's own limit
SECRET_PREFIXES = ("ANTHROPIC_", "MODAL_TOKEN")  # never handed to code of the user's target


@dataclass
class Ended:
    """How the process ended: its record (None when it wrote none), its merged output, its exit code
    (negative: the signal that ended it), and whether it was killed at the limit."""
    record: dict[str, Any] | None
    logs: str
    returncode: int
    timed_out: bool = False

    def last_line(self) -> str:
        return " ".join(self.logs.strip().splitlines()[-1:])[:300]


def run(module: str, job: dict[str, Any], limit_s: float) -> Ended:
    """Run `autogk_git.bench.<module>.entry` on job in a process of its own, killed (with its process
    group) after limit_s + STARTUP_S."""
    boot = (f"import sys; sys.path[0] = sys.argv[1]; from autogk_git.bench import {module}; "
            f"sys.exit({module}.entry(sys.argv[2:]))")
    with tempfile.TemporaryDirectory(prefix=f"autogk-{module}-") as tmp:
        out = Path(tmp) / "record.json"
        package_parent = str(Path(__file__).resolve().parents[2])
        env = {k: v for k, v in os.environ.items() if not k.startswith(SECRET_PREFIXES)}
        proc = subprocess.Popen([sys.executable, "-c", boot, package_parent, str(out)], cwd=tmp, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, text=True)
        try:
            logs, _ = proc.communicate(json.dumps(job), timeout=limit_s + STARTUP_S)
        except subprocess.TimeoutExpired:
            kill(proc)
            return Ended(None, "", proc.returncode, timed_out=True)
        return Ended(json.loads(out.read_text()) if out.exists() else None, logs, proc.returncode)


def kill(proc: subprocess.Popen) -> None:
    """End proc and everything it started (its own session), and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


@contextmanager
def call_limit(job: dict[str, Any], error: Callable[[float], BaseException]) -> Iterator[None]:
    """The job's per-call limit (`limit_s`) as a process timer: error(limit) is raised in the block when it
    runs out. Only in the check's own process (`isolated` set by its entry): an alarm belongs to the whole
    process, so a check run in-process has no limit."""
    limit = job.get("limit_s")
    if not limit or not job.get("isolated"):
        yield
        return

    def expired(signum, frame):  # noqa: ARG001
        raise error(limit)
    signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, float(limit))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
