"""A kernel that raises, hangs, crashes, fails to compile or cheats becomes a status, never a crash of autogk."""
from __future__ import annotations

import json
import re
import os
from pathlib import Path

import pytest

from autogk_git.bench import runner

DATA = Path(__file__).resolve().parents[2] / "data" / "scale"
DEFINITION = json.loads((DATA / "definition.json").read_text())
WORKLOADS = [json.loads(line)["workload"] for line in (DATA / "workloads.jsonl").read_text().splitlines()][:3]
GOOD = (DATA / "kernel.py").read_text()


def run_kernel(source: str, timeout: float = 120, workloads=WORKLOADS, whole: bool = False) -> dict:
    job = {"stage": "quick", "definition": DEFINITION, "workloads": workloads,
           "sources": {"candidate": {"kernel.py": source}}, "generator": None, "blob_root": str(DATA),
           "settings": {"trials": 2, "device": "cpu"}, "seed": 7}
    out = runner.run_worker(job, dict(os.environ, TRITON_INTERPRET="1"), timeout)
    return out if whole else out["labels"]["candidate"]


def statuses(res: dict) -> list[str]:
    return [res[w["uuid"]]["status"] for w in WORKLOADS]


def test_correct_kernel_passes():
    assert statuses(run_kernel(GOOD)) == ["PASSED"] * 3


def test_syntax_error_is_compile_error():
    res = run_kernel(GOOD + "\ndef broken(:\n")
    assert statuses(res) == ["COMPILE_ERROR"] * 3
    assert "SyntaxError" in res[WORKLOADS[0]["uuid"]]["message"]


def test_raising_kernel_is_runtime_error():
    res = run_kernel(GOOD.replace("    n = x.numel()", "    raise ValueError('boom')"))
    assert statuses(res) == ["RUNTIME_ERROR"] * 3
    assert "boom" in res[WORKLOADS[0]["uuid"]]["message"]


def test_unwritten_tail_is_caught_by_the_poison():
    res = run_kernel(GOOD.replace("MASK = True", "MASK = False"))
    # n=100 and n=333 are not multiples of 64: their tails stay NaN.
    assert res[WORKLOADS[0]["uuid"]]["status"] == "INCORRECT_NUMERICAL"
    # NaN where the judge filled the outputs with NaN, else its random fill (checks.checked_call)
    assert re.search("NaN|still held the random values", res[WORKLOADS[0]["uuid"]]["message"])


def test_kernel_that_changes_an_input_is_caught():
    src = GOOD.replace("    n = x.numel()", "    bias.zero_()\n    n = x.numel()")
    assert statuses(run_kernel(src)) == ["INPUT_MODIFIED"] * 3


def test_wrong_values_are_incorrect():
    src = GOOD.replace("x * scale + b", "x * scale - b")
    res = run_kernel(src)
    assert statuses(res) == ["INCORRECT_NUMERICAL"] * 3
    assert "outside atol" in res[WORKLOADS[0]["uuid"]]["message"]


def test_process_crash_costs_only_its_workload():
    # Dies hard (no exception, no cleanup) on the second workload only; the others still run.
    src = GOOD.replace("    n = x.numel()", "    import os\n    if x.numel() == 1000:\n        os._exit(9)\n    n = x.numel()")
    res = run_kernel(src)
    assert statuses(res) == ["PASSED", "RUNTIME_ERROR", "PASSED"]
    assert "exit code 9" in res[WORKLOADS[1]["uuid"]]["message"]


def test_hang_becomes_timeout_within_the_limit():
    src = GOOD.replace("    n = x.numel()", "    import time\n    time.sleep(3600)\n    n = x.numel()")
    # A short limit: the test waits for all of it (the point is that the hang does not outlive it). 20 s,
    # not less: on a loaded 2-core machine the kernel's process took over 10 s to start, and the job's
    # limit was spent before the first workload was in flight.
    out = run_kernel(src, timeout=20, whole=True)
    res = out["labels"]["candidate"]
    assert statuses(res) == ["TIMEOUT"] * 3
    assert "20 s limit" in res[WORKLOADS[0]["uuid"]]["message"]
    # Before ending a judge past its limit the runner asks for its stacks (SIGUSR1, faulthandler): where
    # it waited is in the result. (A judge that hung on the GPU left only "no result within ..." before.)
    [stacks] = [r for r in out["records"] if r.get("event") == "judge_stacks"]
    assert stacks["why"] == "the job's limit" and "most recent call first" in stacks["stacks"], stacks
    assert "kernels.py" in stacks["stacks"], stacks["stacks"]  # waiting on the kernel's answer


def test_missing_run_is_compile_error():
    assert statuses(run_kernel("x = 1\n")) == ["COMPILE_ERROR"] * 3
