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
    # And a new template for the next job. Its first answer waits for its imports (torch, triton): seconds,
    # more on a loaded machine, so the 2 s above would send that job afresh too (CI, 2026-12-05).
    monkeypatch.setattr(forks.Template, "answer_s", 60.0)
    assert seen(env)["parent"] not in (tpl, os.getpid())



def _children(pid: int) -> list[int]:
    from autogk_git.bench.judge import hygiene
    return [c for c, parent in hygiene._proc_table().items() if parent == pid]


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_killed_runner_ends_its_forked_judge_even_while_the_template_is_stopped(tmp_path, tmp_env):
    # The forked judge's parent is the template, so PR_SET_PDEATHSIG alone ties it to the template, not
    # to the runner: a runner killed while the template is stopped (or a judge whose SIGTERM handler
    # waits on its main thread) left the judge running its whole job, busy on the GPU under later jobs
    # (seen on the H200, 2026-12-03). The runner's end of the judge's stdin is its lifeline.
    import subprocess
    import sys
    slow = "import time\nimport torch\n\ndef run(x, bias, scale, out):\n    time.sleep(0.05)\n    torch.add(x * scale, bias, out=out)\n"
    job = {"version": 1, "stage": "ab", "definition": DEF, "workloads": [WL], "generator": None,
           "blob_root": ".", "seed": 7, "settings": {"device": "cpu", "trials": 2000, "stress": False},
           "sources": {"candidate": {"kernel.py": slow}, "parent": {"kernel.py": slow}}}
    script = tmp_path / "drive.py"
    script.write_text(f"import json, os, sys\nsys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
                      "from autogk_git.bench import runner\n"
                      f"runner.run_worker(json.loads({json.dumps(json.dumps(job))}), dict(os.environ), 300)\n")
    drive = subprocess.Popen([sys.executable, str(script)], env=dict(tmp_env, AUTOGK_SANDBOX="0"))
    tpl = judge = None
    try:
        deadline = time.monotonic() + 120
        while judge is None and time.monotonic() < deadline and drive.poll() is None:
            time.sleep(0.3)
            tpls = [p for p in _children(drive.pid) if "autogk_judge.forks" in cmdline(p)]
            judges = [c for t in tpls for c in _children(t)]
            if judges and _children(judges[0]):  # the judge has started its kernels' starter
                tpl, judge = tpls[0], judges[0]
        assert judge is not None, "the judge never started"
        os.kill(tpl, signal.SIGSTOP)
        os.kill(drive.pid, signal.SIGKILL)
        drive.wait()
        gone = time.monotonic() + 20
        while _running(judge) and time.monotonic() < gone:
            time.sleep(0.2)
        assert not _running(judge), "the judge outlived its runner"
    finally:
        for pid in (judge, tpl):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if drive.poll() is None:
            drive.kill()


def test_a_process_forked_with_a_stdin_writes_its_stdout_and_stderr_to_its_log(tmp_path, tmp_env):
    # A judge is forked from the template with a stdin (its key and job) and a log for stdout and stderr.
    # The template holds no descriptor 0, so the log was opened as 0, replaced by stdin, and 1 and 2 became
    # the stdin pipe: a forked judge's stderr went nowhere (an empty stderr file), and a write to it
    # raised. On a GPU the write before the judge's self-SIGTERM (its stream blocked for good) raised,
    # so that judge went on and hung until the test's limit (tests/test_witness_gpu.py, since 2b00b45).
    from autogk_git.bench.judge import forks, launch
    d = tmp_path / "job"
    d.mkdir()
    runner._write_judge(d, None)
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "autogk_probe.py").write_text(
        "import sys\n"
        "def entry(args):\n"
        "    line = sys.stdin.readline().strip()\n"
        "    print('on stdout: ' + line, flush=True)\n"
        "    print('on stderr: ' + line, file=sys.stderr, flush=True)\n"
        "    return 0\n")
    tpl = forks.Template(launch.command("forks", [], package=runner.SHIPPED, root=d), tmp_env, str(d),
                         str(d / "template.log"))
    try:
        r, w = os.pipe()
        log = tmp_path / "probe.log"
        proc = tpl.spawn("autogk_probe", [], str(d), tmp_env, str(log), stdin_fd=r, root=str(mods))
        os.close(r)
        os.write(w, b"the job\n")
        os.close(w)
        assert proc.wait(timeout=60) == 0, log.read_text() if log.exists() else "no log"
        assert log.read_text().splitlines() == ["on stdout: the job", "on stderr: the job"]
    finally:
        tpl.close()


def test_an_exit_reported_for_an_earlier_process_under_the_same_pid_is_not_the_new_ones(tmp_path, tmp_env):
    """CI, 2026-12-06: `bench worker exited with code 0 outside any kernel`, its stderr empty. A template
    keeps the exit codes its forks reported by pid for the whole of its life (a test worker's: thousands of
    processes, pid_max 32,768), so a new judge that got an ended one's pid read that exit as its own at
    once. Here the template is told of exits under every pid the next forks may take."""
    from autogk_git.bench.judge import forks, launch
    d = tmp_path / "job"
    d.mkdir()
    runner._write_judge(d, None)
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "autogk_probe.py").write_text("import time\ndef entry(args):\n    time.sleep(1.0)\n    return 7\n")
    tpl = forks.Template(launch.command("forks", [], package=runner.SHIPPED, root=d), tmp_env, str(d),
                         str(d / "template.log"))
    try:
        last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
        top = int(Path("/proc/sys/kernel/pid_max").read_text())
        tpl.exits.update({p % top: 0 for p in range(last + 1, last + 5000)})  # ended earlier, code 0
        tpl.exits.update({p: 0 for p in range(300, 2000)})  # past a wrap
        proc = tpl.spawn("autogk_probe", [], str(d), tmp_env, str(tmp_path / "probe.log"), root=str(mods))
        assert proc.poll() is None, proc.returncode  # it sleeps for a second
        assert proc.wait(timeout=60) == 7
    finally:
        tpl.close()
