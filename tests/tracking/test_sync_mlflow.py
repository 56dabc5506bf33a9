"""MLflow mirrors the notes: one active run per experiment after an amend, and a broken store is a clear
error (sync) or a warning (iterate), never a traceback."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import autogk, autogk_in, git


@pytest.fixture
def project(small_project):
    """Two workloads, both in the quick stage (conftest.small_project): these tests are not about workloads."""
    return small_project


KERNEL = "kernels/scale/kernel.py"


def runs(root: Path) -> list[dict]:
    """Every run of autogk/scale (deleted ones too), as a separate process sees the store."""
    code = ("import json\nfrom mlflow.tracking import MlflowClient\nfrom mlflow.entities import ViewType\n"
            f"c = MlflowClient(tracking_uri='sqlite:///{root}/mlruns/mlflow.db')\n"
            "e = c.get_experiment_by_name('autogk/scale')\n"
            "rs = c.search_runs([e.experiment_id], run_view_type=ViewType.ALL) if e else []\n"
            "print(json.dumps([{'number': r.data.tags.get('autogk.number'), 'commit': r.data.tags.get('autogk.commit'),"
            " 'stage': r.info.lifecycle_stage, 'superseded_by': r.data.tags.get('autogk.superseded_by')} for r in rs]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow(15)
def test_an_amended_experiment_has_one_active_run(project):
    git(project, "checkout", "-qb", "autogk/scale/0001-by-hand")
    k = project / KERNEL
    k.write_text(k.read_text().replace("BLOCK = 64 ", "BLOCK = 128 "))
    git(project, "commit", "-qam", "BLOCK 128")          # the hook benchmarks it and logs a run
    old = git(project, "rev-parse", "HEAD").strip()
    git(project, "commit", "-q", "--amend", "-m", "BLOCK 128, better said")   # and again for the new commit
    new = git(project, "rev-parse", "HEAD").strip()
    active = [r for r in runs(project) if r["stage"] == "active" and r["number"] == "0001"]
    assert [r["commit"] for r in active] == [new], runs(project)
    [gone] = [r for r in runs(project) if r["commit"] == old]
    assert gone["stage"] == "deleted" and gone["superseded_by"] == new
    # The old commit still exists (reflog) with its note; a full re-sync logs only the live one.
    out = json.loads(autogk_in(project, "sync", "--full", "--json").stdout)
    assert out["logged"] == 1, out
    active = [r for r in runs(project) if r["stage"] == "active" and r["number"] == "0001"]
    assert [r["commit"] for r in active] == [new]


def test_a_corrupt_store_is_a_clear_error_in_sync_and_a_warning_in_iterate(project):
    db = project / "mlruns" / "mlflow.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"this is not an sqlite database" * 100)
    out = autogk(project, "sync", check=False)
    assert out.returncode == 1 and "Traceback" not in out.stderr and "crashed" not in out.stderr
    assert "could not be used" in out.stderr and f"mv {db} {db}.bad && autogk sync --full" in out.stderr
    doc = autogk_in(project, "doctor", check=False)
    assert doc.returncode != 0 and "problem: the MLflow store" in doc.stdout and "autogk sync --full" in doc.stdout
    it = autogk(project, "iterate", "-n", "1", "--agent", "tune", "--json")
    [exp] = json.loads(it.stdout)["experiments"]
    assert "MLflow logging failed" in it.stderr and "autogk sync" in it.stderr
    assert git(project, "notes", "--ref", "autogk/results", "show", exp["commit"]).strip()


def test_doctor_warns_of_notes_without_runs_and_sync_catches_up(project):
    autogk_in(project, "iterate", "-n", "1", "--agent", "tune")   # a note and its run
    assert "no MLflow run" not in autogk_in(project, "doctor", check=False).stdout
    # A note whose run is missing: a loop killed between the two, or an MLflow outage.
    sha = git(project, "rev-parse", "HEAD").strip()
    git(project, "notes", "--ref", "autogk/results", "add", "-f", "-m",
        json.dumps({"schema": 1, "target": "scale", "experiment": 9, "commit": sha, "verdict": {}}), sha)
    doc = autogk_in(project, "doctor", check=False)
    assert "1 experiment(s) have a result note but no MLflow run (e.g. scale #0009): autogk sync" in doc.stdout
    autogk_in(project, "sync")
    assert "no MLflow run" not in autogk_in(project, "doctor", check=False).stdout


def test_a_bogus_tracking_uri_is_a_clear_error(project):
    out = autogk(project, "sync", check=False, env={"AUTOGK_TRACKING_URI": "bogus-scheme://nowhere/x"})
    assert out.returncode == 1 and "Traceback" not in out.stderr and "crashed" not in out.stderr
    assert "bogus-scheme://nowhere/x" in out.stderr and "[tracking] uri" in out.stderr


def test_a_locked_store_is_a_clear_error(project):
    autogk(project, "sync")  # create the store
    db = project / "mlruns" / "mlflow.db"
    assert db.exists()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, time\n"
        f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
        "c.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\ntime.sleep(120)\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        # A new note for sync to log, so it must write.
        sha = git(project, "rev-parse", "HEAD").strip()
        git(project, "notes", "--ref", "autogk/results", "add", "-m",
            json.dumps({"schema": 1, "target": "scale", "experiment": 7, "commit": sha, "verdict": {}}), sha)
        t0 = time.time()
        out = autogk(project, "sync", check=False, timeout=300)
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
        assert "locked" in out.stderr and "autogk sync" in out.stderr
        assert time.time() - t0 < 240
    finally:
        holder.kill()
        holder.wait()
