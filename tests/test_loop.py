"""The loop end to end on CPU: iterate -> commits -> notes -> merge or archive -> MLflow -> log."""
from __future__ import annotations

import json
import subprocess
import sys

from conftest import autogk, autogk_in, git, notes_json
from review_support import copy_project, iterate_report, iterated_template


def test_iterate_keeps_and_reverts_and_leaves_a_readable_history(template_project, tmp_path_factory, tmp_path):
    # The session's iterated project: `autogk iterate -n 3 --json` run once, end to end, in a process
    # of its own (review_support); this test reads what it left, on a copy with its MLflow store.
    project = copy_project(iterated_template(template_project, tmp_path_factory), tmp_path / "proj",
                           keep_mlruns=True)
    report = iterate_report(project)
    exps = report["experiments"]
    assert [e["number"] for e in exps] == [1, 2, 3] and report["stop_reason"] == "ran 3 experiment(s) (limit 3)"
    decisions = {e["hypothesis"]: e["decision"] for e in exps}
    # MASK False leaves the tail unwritten: the poisoned output must catch it.
    assert decisions["tune: MASK True -> False"] == "revert"
    assert decisions["tune: BLOCK 64 -> 128"] == "keep"
    # The tuner never measures a configuration twice (the starting one included).
    configs = [json.dumps(notes_json(project, e["commit"])["tunables"], sort_keys=True) for e in exps]
    configs.append(json.dumps({"BLOCK": 64, "MASK": True}, sort_keys=True))
    assert len(set(configs)) == len(configs)

    # One --no-ff merge per kept experiment on the trunk, with the figures in the message.
    merges = git(project, "log", "--first-parent", "--merges", "--format=%s%n%b%x00", "main").split("\x00")
    merges = [m.strip() for m in merges if m.strip()]
    kept = [e for e in exps if e["decision"] == "keep"]
    assert len(merges) == len(kept)
    assert all("correct" in m and "Autogk-Verdict: keep" in m for m in merges)

    # Reverted experiments survive gc under the archive refs, notes included.
    git(project, "gc", "--prune=now", "-q")
    archived = git(project, "for-each-ref", "--format=%(refname) %(objectname)", "refs/autogk/archive").split("\n")
    archived = [a.split() for a in archived if a]
    assert len(archived) == len(exps) - len(kept)
    for _, sha in archived:
        note = notes_json(project, sha)
        assert note["verdict"]["decision"] == "revert"
        assert "INCORRECT_NUMERICAL" in note["verdict"]["reason"]
        assert git(project, "notes", "--ref", "autogk/plans", "show", sha).strip()
    # No branches or worktrees left behind.
    assert git(project, "branch", "--list", "autogk/*").strip() == ""
    assert len(git(project, "worktree", "list").splitlines()) == 1

    # autogk log agrees.
    rows = json.loads(autogk_in(project, "log", "--json").stdout)
    assert [(r["number"], r["decision"]) for r in rows] == [(e["number"], e["decision"]) for e in exps]

    # A separate process reading the MLflow store sees the same experiments and verdicts.
    code = (
        "import json, sys\n"
        "from mlflow.tracking import MlflowClient\n"
        f"c = MlflowClient(tracking_uri='sqlite:///{project}/mlruns/mlflow.db')\n"
        "e = c.get_experiment_by_name('autogk/scale')\n"
        "runs = c.search_runs([e.experiment_id])\n"
        "arts = sorted(a.path for a in c.list_artifacts(runs[0].info.run_id))\n"
        "print(json.dumps([{int(r.data.tags['autogk.number']): r.data.tags['autogk.verdict'] for r in runs},\n"
        "                  arts, sorted(k for k in runs[0].data.metrics if k.startswith('quick.'))]))\n")
    seen, arts, metrics = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                                    check=True).stdout.strip().splitlines()[-1])
    assert {int(k): v for k, v in seen.items()} == {e["number"]: e["decision"] for e in exps}
    assert {"diff.patch", "kernel.py", "result.json", "plan.md"} <= set(arts)
    assert any(m.endswith(".max_abs_err") for m in metrics)  # per-workload metrics


def test_show_prints_plan_diff_and_workloads(template_project, tmp_path_factory, tmp_path):
    # The session's iterated project (review_support): its #1 is the tuner's first move.
    iterated = copy_project(iterated_template(template_project, tmp_path_factory), tmp_path / "proj")
    out = autogk_in(iterated, "show", "1").stdout
    assert "tune: BLOCK 64 -> 128" in out
    assert "--- plan ---" in out and "--- diff ---" in out
    assert "-BLOCK = 64" in out and "+BLOCK = 128" in out
    assert "PASSED" in out
    assert "no latency measured" in out


def test_mlflow_down_keeps_the_note_and_sync_catches_up_and_the_loop_benchmarks_its_own_commits_once(project):
    # In background mode a hook run would leave a log; the loop's commits must not trigger one.
    out = autogk(project, "iterate", "-n", "1", env={"AUTOGK_TRACKING_URI": "bogus-scheme://nowhere",
                                                     "AUTOGK_BENCH_HOOK_MODE": "background"})
    assert not (project / ".git" / "autogk" / "logs").exists()
    assert "MLflow logging failed" in out.stdout and "autogk sync" in out.stdout
    sha = git(project, "rev-parse", "refs/autogk/kept/scale/0001").strip()
    assert notes_json(project, sha)["verdict"]["decision"] == "keep"
    synced = json.loads(autogk_in(project, "sync", "--json").stdout.strip().splitlines()[-1])
    assert synced == {"notes": 1, "logged": 1, "already_logged": 0}
    again = json.loads(autogk_in(project, "sync", "--json").stdout.strip().splitlines()[-1])
    assert again == {"notes": 1, "logged": 0, "already_logged": 1}
