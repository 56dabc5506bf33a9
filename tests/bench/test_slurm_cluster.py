"""bench/backends/slurm/cluster.py without a cluster: how its commands are started."""
from __future__ import annotations

import os
import stat
import sys

import pytest

from autogk_git.bench.backends.slurm import cluster
from autogk_git.errors import BenchError


def fake_slurm(tmp_path, monkeypatch, bins: dict[str, str]) -> None:
    """SLURM commands (name -> Python body) in tmp_path, first on PATH; no waiting between tries."""
    for name, body in bins.items():
        f = tmp_path / name
        f.write_text(f"#!{sys.executable}\n{body}")
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(cluster.shutil, "which", lambda name, *a, **k: str(tmp_path / name)
                        if (tmp_path / name).exists() else None)
    monkeypatch.setattr("time.sleep", lambda s: None)


def test_slurm_commands_are_out_of_reach_of_the_terminals_ctrl_c(tmp_path, monkeypatch):
    # Ctrl-C signals the terminal's whole foreground process group. A squeue started in autogk's group
    # died with it mid-answer, its job read as "no longer known", and the parallel loop's Ctrl-C left
    # that job in the queue (seen once in the suite under load). Started in a session of their own, the
    # commands answer, and autogk cancels its jobs itself.
    squeue = tmp_path / "squeue"
    squeue.write_text(f"#!{sys.executable}\nimport os\nprint(os.getsid(0), os.getpgid(0))\n")
    squeue.chmod(squeue.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    sid, pgid = map(int, cluster._run(["squeue"]).stdout.split())
    assert sid != os.getsid(0) and pgid != os.getpgid(0), "squeue ran in autogk's own session and group"


def test_a_scancel_the_controller_times_out_is_tried_again_until_the_job_is_gone(tmp_path, monkeypatch):
    # Under load slurmctld may time out a scancel's RPC ("Socket timed out"): one try, its exit code
    # ignored, left the job queued after a Ctrl-C (the parallel loop's test, beside a CPU hog).
    state = tmp_path / "state"
    state.write_text("PENDING")
    tries = tmp_path / "tries"
    tries.write_text("")
    bins = {
        "scancel": f"import sys, pathlib\nt = pathlib.Path({str(tries)!r})\nt.write_text(t.read_text() + 'x')\n"
                   f"if len(t.read_text()) == 1:\n    print('scancel: error: Socket timed out', file=sys.stderr)\n"
                   f"    sys.exit(1)\npathlib.Path({str(state)!r}).write_text('CANCELLED')\n",
        "squeue": f"import pathlib\nprint('7|' + pathlib.Path({str(state)!r}).read_text() + '|None|(null)|autogk:k|0|')\n",
    }
    fake_slurm(tmp_path, monkeypatch, bins)
    cluster.cancel("7")
    assert state.read_text() == "CANCELLED" and tries.read_text() == "xx"
    assert not cluster.query("7").live


def test_a_result_written_by_an_earlier_submissions_job_is_not_taken(tmp_path):
    """A job SLURM reported ended (its node set down) may run on and write into the folder its job shares
    with the submission that replaced it, and a later identical job then returned that late result at once,
    never submitted (one possible cause of the node-down test's two minutes without a job, once in the suite
    under load). A result or error counts only from the job last submitted."""
    import json

    from autogk_git.bench.backends.slurm import backend
    d = tmp_path / "key"
    d.mkdir()
    (d / "result.json").write_text(json.dumps({"labels": {}, "slurm": {"job_id": "11"}}))
    (d / "error.json").write_text(json.dumps({"job_id": "11", "error": "late"}))
    (d / backend.SUBMITTED).write_text(json.dumps({"job_id": "12"}))
    assert backend._left_by_earlier_run(d) is None
    assert backend._ours(d, "result.json", "12") is None
    backend._raise_job_error(d, "12")  # not raised: job 11's
    assert backend._ours(d, "result.json", "11") is not None
    (d / "result.json").write_text(json.dumps({"labels": {}, "slurm": {"job_id": "12"}}))
    assert backend._left_by_earlier_run(d) == {"labels": {}, "slurm": {"job_id": "12"}}
    (d / backend.SUBMITTED).unlink()  # killed between sbatch and its record: the result is taken
    (d / "result.json").write_text(json.dumps({"labels": {}, "slurm": {"job_id": "11"}}))
    assert backend._left_by_earlier_run(d) is not None


COUNTED = "import pathlib, sys\nt = pathlib.Path({tries!r})\nt.write_text(t.read_text() + 'x')\nn = len(t.read_text())\n"
TIMED_OUT = "print('sbatch: error: Batch job submission failed: Socket timed out on send/recv operation', file=sys.stderr)"


@pytest.mark.parametrize("queued_anyway", [False, True])
def test_an_sbatch_the_controller_timed_out_is_tried_again_unless_its_job_was_queued(tmp_path, monkeypatch,
                                                                                     queued_anyway):
    # A busy controller times out sbatch's RPC as it does scancel's: the job was lost to one try (a harness
    # error for the experiment), or, when the controller had queued it after all, a second try would
    # queue it twice. The job's comment tells the two apart.
    tries = tmp_path / "tries"
    tries.write_text("")
    sbatch = COUNTED.format(tries=str(tries)) + f"if n == 1:\n    {TIMED_OUT}\n    sys.exit(1)\nprint('42')\n"
    listed = "print('41|PENDING|Priority|(null)|autogk:k|0|')" if queued_anyway else "pass"
    fake_slurm(tmp_path, monkeypatch, {"sbatch": sbatch, "squeue": listed})
    got = cluster.submit("#!/bin/sh\n", ["--comment=autogk:k", "--time=5"], dict(os.environ))
    assert (got, tries.read_text()) == (("41", "x") if queued_anyway else ("42", "xx"))


def test_an_sbatch_refused_is_raised_at_once(tmp_path, monkeypatch):
    tries = tmp_path / "tries"
    tries.write_text("")
    sbatch = COUNTED.format(tries=str(tries)) + (
        "print('sbatch: error: Batch job submission failed: Invalid partition name specified', file=sys.stderr)\n"
        "sys.exit(1)\n")
    fake_slurm(tmp_path, monkeypatch, {"sbatch": sbatch, "squeue": "pass"})
    with pytest.raises(BenchError, match="Invalid partition name"):
        cluster.submit("#!/bin/sh\n", ["--comment=autogk:k"], dict(os.environ))
    assert tries.read_text() == "x"
