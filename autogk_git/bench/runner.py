"""Runs the bench worker in a subprocess with a time limit, restarting it past crashes.

A kernel that raises, hangs, fails to compile or kills its process becomes a status in the result;
the worker is restarted on what is left, so one bad workload never costs the others.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autogk_git.errors import BenchError

WORKER = Path(__file__).with_name("worker.py")
# Shipped beside the worker: it imports them by these names wherever it runs (stdlib + torch + triton).
HELPERS = {"autogk_stats.py": Path(__file__).with_name("stats.py"),
           "autogk_timing.py": Path(__file__).with_name("timing.py"),
           "autogk_rules.py": Path(__file__).with_name("rules.py")}


def _read_progress(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by a crash
            pass
    return out


def run_worker(job: dict[str, Any], env: dict[str, str], timeout_s: float,
               extra_files: dict[str, Path] | None = None) -> dict[str, Any]:
    """Run `job` to completion; return {labels, environment, attempts, stderr_tail}."""
    keys = [f"{label}:{wl['uuid']}" for label in job["sources"] for wl in job["workloads"]]
    results: dict[str, dict[str, Any]] = {}
    records: list[dict[str, Any]] = []
    summaries: dict[str, dict[str, Any]] = {}
    environment: dict[str, Any] = {}
    deadline = time.monotonic() + timeout_s
    attempts = 0
    stderr_tail = ""
    with tempfile.TemporaryDirectory(prefix="autogk-job-") as d:
        d = Path(d)
        (d / "job.json").write_text(json.dumps(job))
        worker = d / "worker.py"
        worker.write_text(WORKER.read_text())
        for name, src in {**HELPERS, **(extra_files or {})}.items():
            (d / name).write_text(src.read_text())
        while len(results) < len(keys):
            attempts += 1
            pending = [k for k in keys if k not in results]
            out = d / f"attempt{attempts}"
            out.mkdir()
            left = deadline - time.monotonic()
            cmd = [sys.executable, str(worker), str(d / "job.json"), str(out), "--only", ",".join(pending)]
            proc = subprocess.Popen(cmd, cwd=str(d), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)
            timed_out = False
            try:
                _, err = proc.communicate(timeout=max(left, 0.1))
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc)
                _, err = proc.communicate()
            stderr_tail = err.decode(errors="replace")[-3000:]
            current = None
            for rec in _read_progress(out / "progress.jsonl"):
                ev = rec.get("event")
                if ev == "env":
                    environment = rec["environment"]
                elif ev in ("start", "at"):  # "at": timing rounds moved on to this kernel and workload
                    current = f"{rec['label']}:{rec['uuid']}"
                elif ev == "done":
                    key = f"{rec['label']}:{rec['uuid']}"
                    results[key] = {k: v for k, v in rec.items() if k not in ("event", "label", "uuid")}
                    current = None
                elif ev in ("ab", "timing"):  # a timed stage's summary
                    summaries[ev] = {k: v for k, v in rec.items() if k != "event"}
                elif ev == "fatal":
                    raise BenchError(f"bench worker: {rec['message']}", "fix the target's inputs.py")
                else:
                    records.append(rec)
            if len(results) == len(keys):
                break
            if timed_out:
                why = f"no result within the job's {timeout_s:.0f} s limit"
                for k in keys:
                    if k not in results:
                        results[k] = {"status": "TIMEOUT", "message": why if k == current else
                                      "not run: the job's time limit was spent"}
                break
            if current is None:
                # The worker died outside any kernel: infrastructure, not a kernel verdict.
                raise BenchError(f"bench worker exited with code {proc.returncode} outside any kernel:\n"
                                 f"{stderr_tail}", "run `autogk doctor` to check torch and triton")
            results[current] = {"status": "RUNTIME_ERROR",
                                "message": f"worker process died (exit code {proc.returncode}): "
                                           f"{stderr_tail[-800:].strip()}"}
    labels: dict[str, dict[str, Any]] = {}
    for label in job["sources"]:
        labels[label] = {wl["uuid"]: results[f"{label}:{wl['uuid']}"] for wl in job["workloads"]}
    return {"labels": labels, "environment": environment, "attempts": attempts, "records": records,
            "stderr_tail": stderr_tail if attempts > 1 else "", **summaries}


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
