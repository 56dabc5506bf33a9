"""The judge's process (bench/judge/process.py): what it writes as it goes, and what it waits on."""
from __future__ import annotations

import json
import os
from pathlib import Path

from autogk_git.bench import runner

DATA = Path(__file__).resolve().parents[2] / "data" / "scale"
DEFINITION = json.loads((DATA / "definition.json").read_text())
WORKLOAD = json.loads((DATA / "workloads.jsonl").read_text().splitlines()[0])["workload"]

# Every process that starts with this on its path finds os.fsync taking a minute: a disk busy with others'
# writes (on this project's loaded 2-core machine a judge sat over 20 s in one fsync of its progress file).
SLOW_SYNC = "import os, time\nos.fsync = lambda fd: time.sleep(60)\n"


def test_a_judge_waits_on_no_disk_sync_for_its_progress_lines(tmp_path):
    # The progress file is read on the judge's own machine (the runner, or a SLURM job's backend beside it),
    # from the page cache a flush reaches; a sync only waited for the disk. On the old code, which synced
    # each line, this job spent its 45 s limit in the first one and every workload was a TIMEOUT.
    (tmp_path / "sitecustomize.py").write_text(SLOW_SYNC)
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    job = {"stage": "quick", "definition": DEFINITION, "workloads": [WORKLOAD], "generator": None,
           "sources": {"candidate": {"kernel.py": (DATA / "kernel.py").read_text()}}, "blob_root": str(DATA),
           "settings": {"trials": 1, "device": "cpu"}, "seed": 7}
    seen = []
    out = runner.run_worker(job, env, 45, on_progress=lambda *a: seen.append(a))
    assert out["labels"]["candidate"][WORKLOAD["uuid"]]["status"] == "PASSED", out["labels"]
    assert seen, "the progress lines reached the runner as the job went"
