"""The judge template (bench/judge/forks.Template): each job's judge forked from one fresh interpreter per
runner thread that has imported torch and nothing of any job, instead of an interpreter started afresh."""
from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

from autogk_git.bench import runner

DATA = Path(__file__).resolve().parents[1] / "data"
DEF = json.loads((DATA / "scale" / "definition.json").read_text())
WL = json.loads((DATA / "scale" / "workloads.jsonl").read_text().splitlines()[0])["workload"]

# At import the kernel reports its judge (its process's grandparent: kernel <- starter <- judge) and the
# judge's parent, as its import error.
LOOKS = r'''
import json
def ppid(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
judge = ppid(ppid(__import__("os").getpid()))
raise RuntimeError("SEEN " + json.dumps({"judge": judge, "parent": ppid(judge)}))
'''


@pytest.fixture
def tmp_env(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="", TMPDIR=str(tmp_path))


def seen(env: dict, warm: bool = True) -> dict:
    job = {"version": 1, "stage": "quick", "definition": DEF, "workloads": [WL], "generator": None,
           "blob_root": ".", "seed": 7, "settings": {"device": "cpu", "trials": 1, "stress": False},
           "sources": {"candidate": {"kernel.py": LOOKS}}}
    out = runner.run_worker(job, env, 240, warm=warm)
    rec = out["labels"]["candidate"][WL["uuid"]]
    assert rec["status"] == "COMPILE_ERROR" and "SEEN " in rec["message"], rec
    return json.loads(rec["message"].split("SEEN ", 1)[1].split("}", 1)[0] + "}")


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_each_judge_is_a_fork_of_one_template_that_holds_no_job_and_no_secret(tmp_env):
    env = dict(tmp_env, CUDA_VISIBLE_DEVICES="", MY_SERVICE_API_KEY="do-not-leak-4711")
    a, b = seen(env), seen(env)
    assert a["judge"] != b["judge"], (a, b)  # a judge per job
    tpl = a["parent"]
    assert b["parent"] == tpl and tpl != os.getpid(), (a, b)  # forked from one template, not this process
    assert "autogk_judge.forks" in cmdline(tpl)
    try:
        tpl_env = Path(f"/proc/{tpl}/environ").read_bytes()
    except PermissionError:  # undumpable: only root reads it
        tpl_env = b""
    assert b"do-not-leak-4711" not in tpl_env and b"MY_SERVICE_API_KEY" not in tpl_env
    # Started afresh when asked: the judge is this process's own child.
    assert seen(env, warm=False)["parent"] == os.getpid()


def test_a_template_killed_between_jobs_is_replaced_and_the_job_still_runs(tmp_env):
    env = dict(tmp_env, CUDA_VISIBLE_DEVICES="")
    tpl = seen(env)["parent"]
    os.kill(tpl, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{tpl}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # reaped by this process (its parent) on the next poll
        for t in runner._TEMPLATES.values():
            t.proc.poll()
    again = seen(env)
    assert again["parent"] not in (tpl, os.getpid()) and "autogk_judge.forks" in cmdline(again["parent"]), again


def test_a_stopped_template_costs_one_job_its_answer_time_not_the_loop(tmp_env, monkeypatch):
    # A kernel that found the template's pid and stopped it (SIGSTOP) would leave the next job waiting on
    # its answer: the runner waits answer_s, ends it, and starts that job's judge afresh.
    from autogk_git.bench.judge import forks
    monkeypatch.setattr(forks.Template, "answer_s", 2.0)
    env = dict(tmp_env, CUDA_VISIBLE_DEVICES="")
    tpl = seen(env)["parent"]
    os.kill(tpl, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        assert seen(env)["parent"] == os.getpid()  # afresh
        assert time.monotonic() - t0 < 60
    finally:
        try:
            os.kill(tpl, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert seen(env)["parent"] not in (tpl, os.getpid())  # and a new template for the next

