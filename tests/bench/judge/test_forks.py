"""Kernel processes forked from the judge's copy made before it read its job (bench/judge/forks.py):
what a kernel's process can see there, against a freshly started one."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from autogk_git.bench import runner
from autogk_git.bench.judge import forks

DATA = Path(__file__).resolve().parents[2] / "data"
DEF = json.loads((DATA / "scale" / "definition.json").read_text())
WL = json.loads((DATA / "scale" / "workloads.jsonl").read_text().splitlines()[0])["workload"]

# At import the kernel reports what its process holds, as its import error: its open descriptors and
# stdin, the judge's modules it can import by name, and whether the job's key or seed reached it.
LOOKS = r'''
import os, sys, json
fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
seen = {
    "stdin": os.readlink("/proc/self/fd/0"),
    "fds": len(fds),
    "files": [t for t in (os.readlink(f"/proc/self/fd/{f}") for f in fds if f > 2 and os.path.exists(f"/proc/self/fd/{f}"))
              if t.startswith("/") and not t.startswith(("/dev/", "/proc/"))],
    "judge_modules": sorted(m.split(".")[-1] for m in sys.modules if m.startswith("autogk_judge.")),
    "stdin_data": sys.stdin.read(),
    "forked": "autogk_judge.kernel_process" not in open("/proc/self/cmdline").read(),
    "env_tag": "AUTOGK_JOB_TAG" in os.environ,
}
raise RuntimeError("SEEN " + json.dumps(seen))
'''


def looks(how: str, **env) -> dict:
    job = {"version": 1, "stage": "quick", "definition": DEF, "workloads": [WL], "generator": None,
           "blob_root": ".", "seed": 7, "settings": {"device": "cpu", "trials": 1, "stress": False,
                                                       "kernel_start": how},
           "sources": {"candidate": {"kernel.py": LOOKS}}}
    out = runner.run_worker(job, dict(os.environ, CUDA_VISIBLE_DEVICES="", **env), 240)
    rec = out["labels"]["candidate"][WL["uuid"]]
    assert rec["status"] == "COMPILE_ERROR" and "SEEN " in rec["message"], rec
    return json.loads(rec["message"].split("SEEN ", 1)[1].split("}", 1)[0] + "}")


@pytest.mark.parametrize("how", ["fork", "exec"])
def test_a_kernels_process_holds_neither_the_job_nor_the_judges_code_however_it_started(how):
    seen = looks(how)
    assert seen["forked"] == (how == "fork"), seen
    assert seen["stdin"] == "/dev/null" and seen["stdin_data"] == "", seen
    # stdin, stdout, stderr, the judge's socket, and the listing's own descriptor.
    assert seen["fds"] <= 5 and seen["files"] == [], seen
    # Only what kernel_process imports: the judge's inputs, checks, rounds and the job's process are not there.
    assert not {"process", "rounds", "checks", "inputs", "kernels", "forks", "witness"} & set(seen["judge_modules"]), seen
    assert {"calls", "seal", "sandbox", "kernel_process"} <= set(seen["judge_modules"]), seen
    assert seen["env_tag"], seen


def test_cpu_and_gpu_jobs_fork_unless_told_to_start_afresh():
    assert forks.how({"settings": {"device": "cpu"}}) == "fork"
    assert forks.how({"settings": {"device": "cuda"}}) == "fork"
    assert forks.how({"settings": {"device": "cuda", "kernel_start": "exec"}}) == "exec"


def test_a_profiled_judge_starts_its_kernel_processes_afresh(tmp_path):
    # A fork would carry the judge's cProfile into the kernel's process: the judge itself says no.
    seen = looks("fork", AUTOGK_PROFILE_DIR=str(tmp_path))
    assert seen["forked"] is False, seen
    assert list(tmp_path.glob("judge-*.prof")), list(tmp_path.iterdir())


def test_the_kernel_start_setting_reaches_every_backends_job():
    from types import SimpleNamespace
    from autogk_git.bench.backends.interpret import InterpretBackend
    from autogk_git.bench.job import timed_settings
    from autogk_git.config import SCHEMA
    bench = {k: key.default for k, key in SCHEMA["bench"].items()}
    assert bench["kernel_start"] == "auto" and "kernel_start" not in timed_settings(SimpleNamespace(bench=SimpleNamespace(**bench)))
    for start in ("fork", "exec"):
        cfg = SimpleNamespace(bench=SimpleNamespace(**dict(bench, kernel_start=start)))
        assert timed_settings(cfg)["kernel_start"] == start
        assert InterpretBackend(cfg).settings == {"device": "cpu", "kernel_start": start}


HONEST = "import torch\n\ndef run(x, bias, scale, out):\n    torch.add(x * scale, bias, out=out)\n"


@pytest.mark.gpu
@pytest.mark.skipif(not os.path.exists("/dev/nvidiactl"), reason="needs a CUDA GPU")
def test_on_a_gpu_forked_kernel_processes_are_judged_as_fresh_ones():
    job = {"version": 1, "stage": "quick", "definition": DEF, "workloads": [WL], "generator": None,
           "blob_root": ".", "seed": 7, "settings": {"device": "cuda", "trials": 1, "stress": False,
                                                       "kernel_start": "fork"},
           "sources": {"candidate": {"kernel.py": LOOKS}}}
    rec = runner.run_worker(job, dict(os.environ), 240)["labels"]["candidate"][WL["uuid"]]
    seen_fork = json.loads(rec["message"].split("SEEN ", 1)[1].split("}", 1)[0] + "}")
    # The GPU's own device files may be open by now (CUDA starts before the kernel is imported); no file is.
    assert seen_fork["forked"] and seen_fork["stdin"] == "/dev/null" and seen_fork["files"] == [], seen_fork
    timed = {"device": "cuda", "timed": True, "trials": 2, "reps": 10, "warmup": 2, "min_rounds": 3,
             "max_rounds": 6, "min_effect": 0.01, "confidence": 0.95, "kernel_start": "fork"}
    job = dict(job, stage="ab", settings=timed, sources={"parent": {"kernel.py": HONEST}, "candidate": {"kernel.py": HONEST}})
    out = runner.run_worker(job, dict(os.environ), 300)
    for label in ("parent", "candidate"):
        r = out["labels"][label][WL["uuid"]]
        assert r["status"] == "PASSED" and r.get("latency_us"), (label, r)


def test_a_forked_process_ends_with_its_exit_handlers_but_not_torchs_operator_deregistration(tmp_path):
    # forks._exit ends every forked judge and kernel process: the process's own exit handlers and
    # finalizers run, as at a fresh interpreter's end; torch.library's (its operators taken out of the
    # dispatcher, ~30 ms of CPU a process) do not, as nothing outside the ending process sees them.
    import weakref

    def marker(name):
        def write():
            (tmp_path / name).write_text("ran")
        return write
    torchs = marker("torch")
    torchs.__module__ = "torch.library"  # as torch.library's own finalizers, _del_library, are
    pid = os.fork()
    if pid == 0:
        import atexit

        class Held:
            pass
        held = Held()
        weakref.finalize(held, torchs)
        weakref.finalize(held, marker("finalizer"))
        atexit.register(marker("atexit"))
        forks._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atexit", "finalizer"]
