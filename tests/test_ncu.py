"""Nsight Compute in every agent's view: ncu's CSV read into a short summary per kernel (a recorded CSV
written by hand in ncu's `--csv --page details` layout: tests/data/ncu/details.csv), the profile taken
after a keep and stored in the result note and MLflow's metrics, and, where there is no ncu (this CPU
machine), one line saying so in the prompt, the command agent's prompt, workloads.md and the tuner's plan.
The real ncu on the H200 is tests/test_ncu_gpu.py."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from conftest import autogk_in, git, notes_json

CSV = Path(__file__).resolve().parent / "data" / "ncu" / "details.csv"


@pytest.fixture(autouse=True)
def no_tracking(monkeypatch):
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "0")


def test_the_csv_is_read_into_a_summary_per_kernel():
    from autogk_git.bench import ncu

    rms, tail = ncu.parse_csv(CSV.read_text())
    assert rms["name"] == "_rms_fwd" and rms["grid"] == "(8192, 1, 1)" and rms["block"] == "(256, 1, 1)"
    assert rms["duration_us"] == 31.75 and rms["sm_pct"] == 22.1 and rms["dram_pct"] == 87.9
    assert rms["memory_pct"] == 88.4 and rms["dram_gbs"] == 4220.0 and rms["l2_hit_pct"] == 3.1
    assert rms["achieved_occupancy_pct"] == 70.5 and rms["theoretical_occupancy_pct"] == 75.0
    assert rms["registers"] == 40.0 and rms["spill_requests"] == 0.0
    assert rms["limiter"] == "memory" and rms["advice"] == ["AchievedOccupancy (est. 6%)"]
    # ns and thousands separators, a rate in Gbyte/s, "no data", and a kernel neither unit keeps busy
    assert tail["duration_us"] == 2.816 and tail["dram_gbs"] == 35.5 and tail["l2_hit_pct"] is None
    assert tail["spill_requests"] == 1024.0 and tail["limiter"] == "latency"
    assert tail["advice"] == ["LaunchConfiguration (est. 97%)", "AchievedOccupancy (est. 48%)"]
    line = ncu.kernel_line(tail)
    assert "2.82 us" in line and "SM 1%" in line and "1024 spill requests" in line and "limiter: latency" in line
    assert ncu.parse_csv("==PROF== error: no kernels were profiled\n") == []


def _fake_ncu(tmp_path: Path) -> Path:
    """An `ncu` that records its arguments, makes the report file and prints the recorded CSV on --import."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "ncu-args.log"
    script = bindir / "ncu"
    script.write_text(f"""#!/bin/sh
echo "$@" >> {log}
case "$1" in
  --version) echo "NVIDIA (R) Nsight Compute Command Line Profiler"; echo "Version 2025.3.1.0 (build 1) (public-release)";;
  --import) cat {CSV};;
  *) while [ "$#" -gt 0 ]; do if [ "$1" = "-o" ]; then touch "$2.ncu-rep"; fi; shift; done;;
esac
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bindir


def test_a_keep_is_profiled_outside_the_timing_and_the_figures_reach_the_note_mlflow_and_the_prompt(
        project, tmp_path, monkeypatch):
    from autogk_git.agents import prompts
    from autogk_git.agents.base import Context
    from autogk_git.loop import profile
    from autogk_git.project import Project
    from autogk_git.tracking.mlflow_store import metrics_of

    monkeypatch.setenv("PATH", f"{_fake_ncu(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    from autogk_git.bench import ncu
    p = Project.find(project)
    target = p.target("scale")
    sha = git(project, "rev-parse", "HEAD").strip()
    uuids = [w["uuid"] for w in target.workloads]
    # The candidate's share of each workload's floor: the two lowest are the ones profiled.
    shares = {uuids[0]: 0.9, uuids[1]: 0.2, uuids[2]: 0.5, uuids[3]: 0.95}
    cand = {u: {"floor_us": 10 * s, "latency_us": 10.0, "status": "PASSED"} for u, s in shares.items()}
    result = {"experiment": 3, "commit": sha, "backend": "local", "verdict": {"decision": "keep"},
              "stages": {"ab": {"workloads": {"candidate": cand, "parent": {}}}}}
    said = []
    assert profile.after_verdict(p, "scale", result, said.append)
    prof = result["profile"]
    assert prof["commit"] == sha and prof["ncu_version"] == "2025.3.1.0" and "#0003's candidate" in prof["kernel"]
    assert [w["uuid"] for w in prof["workloads"]] == [uuids[1], uuids[2]], prof["workloads"]
    assert prof["workloads"][0]["why"] == "20.0% of its floor"
    assert prof["workloads"][0]["kernels"][0]["dram_pct"] == 87.9
    args = (tmp_path / "ncu-args.log").read_text().splitlines()
    run = next(a for a in args if "--profile-from-start off" in a)
    assert "--clock-control none" in run and "--section SpeedOfLight" in run and "--section MemoryWorkloadAnalysis" in run
    assert "ncu.py run" in run and any(a.startswith("--import") and "--csv --page details" in a for a in args)
    assert "profiling the new trunk kernel with ncu on 2 workload(s), outside the timed runs" in said[0]
    m = metrics_of(result)
    assert m[f"profile.{uuids[1][:8]}.dram_pct"] == 87.9 and m[f"profile.{uuids[1][:8]}.duration_us"] == 31.75
    # Every agent's view: the Anthropic agent's prompt and the command agent's prompt.
    ctx = Context(worktree=project, target=target, number=4, history=[result], config=p.config)
    for text in (prompts.task_message(ctx, "kernel", None), prompts.command_prompt(ctx, None, "/tmp/h")):
        assert "Nsight Compute profile of #0003's candidate, now the trunk's kernel" in text
        assert "_rms_fwd: 31.75 us; SM 22%; DRAM 88% (4220 GB/s); occupancy 70% achieved / 75% theoretical" in text
        assert "limiter: memory" in text and "20.0% of its floor" in text
    # Not a reverted candidate, and not twice the same trunk kernel.
    later = dict(result, experiment=4, commit="f" * 40, against=sha, verdict={"decision": "revert"})
    monkeypatch.setattr(profile, "results", lambda project, target: [result])
    assert not profile.after_verdict(p, "scale", later, said.append)
    assert not profile.after_verdict(p, "scale", dict(result, backend="interpret"), said.append)
    # Nor again once the keep is merged: the trunk then holds the merge commit, another sha with the same
    # kernel (on the H200 each revert after a keep profiled the trunk again, 17 s an experiment).
    git(project, "commit", "-q", "--allow-empty", "-m", "merge of the kept experiment (same kernel)")
    merged = git(project, "rev-parse", "HEAD").strip()
    after_merge = dict(later, experiment=5, against=merged)
    assert not profile.after_verdict(p, "scale", after_merge, said.append), said[-1]
    # A trunk whose kernel did change is profiled.
    (target.dir / "kernel.py").write_text(target.kernel_path.read_text() + "\n# moved by a person\n")
    git(project, "commit", "-qam", "a person edits the trunk's kernel")
    moved = git(project, "rev-parse", "HEAD").strip()
    assert profile.after_verdict(p, "scale", dict(later, experiment=6, against=moved), said.append)


def test_without_ncu_every_view_says_so_in_one_line(project, monkeypatch):
    import shutil
    keep = [d for d in os.environ["PATH"].split(os.pathsep) if d and not shutil.which("ncu", path=d)]
    monkeypatch.setenv("PATH", os.pathsep.join(keep))  # as on a machine without Nsight Compute
    out = json.loads(autogk_in(project, "iterate", "-n", "1", "--agent", "tune", "--json").stdout)
    (one,) = out["experiments"]
    plan = git(project, "notes", "--ref", "autogk/plans", "show", one["commit"])
    assert "Profile: no profile: ncu not found." in plan, plan  # the tuner's log
    assert "profile" not in notes_json(project, one["commit"]), "nothing taken, nothing stored"
    md = (project / ".git" / "autogk" / "artifacts" / "scale" / "workloads.md").read_text()
    assert md.count("no profile: ncu not found") == 1, md

    from autogk_git.agents import prompts
    from autogk_git.agents.base import Context
    from autogk_git.project import Project
    p = Project.find(project)
    ctx = Context(worktree=project, target=p.target("scale"), number=2, history=[], config=p.config)
    for text in (prompts.task_message(ctx, "kernel", md), prompts.command_prompt(ctx, md, "/tmp/h"),
                 prompts.task_message(ctx, "kernel", None)):
        assert text.count("no profile: ncu not found") == 1, text
    from autogk_git.bench import ncu
    monkeypatch.setenv("AUTOGK_BENCH_PROFILE", "off")
    assert ncu.view_lines([], Project.find(project).config)[0] == 'no profile: [bench] profile = "off"'
