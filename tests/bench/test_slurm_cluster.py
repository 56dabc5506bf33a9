"""bench/backends/slurm/cluster.py without a cluster: how its commands are started."""
from __future__ import annotations

import os
import stat
import sys

from autogk_git.bench.backends.slurm import cluster


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
