"""MLflow's runs table, one row per experiment: a pick is its own clearly named run beside the target's
experiment and is tagged on the run it copied, whether logged by `pick` or rebuilt by `autogk sync`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import autogk_in, git
from review_support import copy_project, iterated_template

from autogk_git.project import Project


@pytest.fixture
def iterated(template_project, tmp_path_factory, tmp_path):
    return copy_project(iterated_template(template_project, tmp_path_factory), tmp_path / "proj")


def runs(root, name):
    from mlflow import MlflowClient
    c = MlflowClient(tracking_uri=Project(root).tracking_uri())
    exp = c.get_experiment_by_name(name)
    return [] if exp is None else c.search_runs([exp.experiment_id], max_results=100)


def numbers(rs):
    return sorted(r.data.tags.get("autogk.number", "") for r in rs)


def test_a_pick_is_its_own_run_and_tags_the_run_it_copied(iterated, monkeypatch):
    root = iterated
    autogk_in(root, "sync")  # the store, from the notes (the copy came without one)
    rows = {r["number"]: r for r in json.loads(autogk_in(root, "log", "--json").stdout)}
    kept = next(n for n, r in rows.items() if r["state"] == "kept")
    before = numbers(runs(root, "autogk/scale"))
    assert len(before) == len(set(before)) == len(rows)

    # the trunk's starting point (the first parent of its first merge): the kept change applies there
    first_merge = git(root, "log", "--first-parent", "--merges", "--reverse", "--format=%H", "main").split()[0]
    git(root, "branch", "gpu2", f"{first_merge}^1")
    out = json.loads(autogk_in(root, "pick", str(kept), "--onto", "gpu2", "--json").stdout)

    def check():
        exps = runs(root, "autogk/scale")
        assert numbers(exps) == before, "a pick added a row to the target's experiments"
        [src] = [r for r in exps if r.data.tags["autogk.commit"] == rows[kept]["commit"]]
        assert src.data.tags["autogk.picked_onto"] == f"gpu2 {out['commit'][:10]}"
        [p] = runs(root, "autogk/scale/picks")
        assert p.data.tags["autogk.commit"] == out["commit"] and p.data.tags["autogk.kind"] == "pick"
        assert p.info.run_name.split(" ", 2)[2].startswith(f"pick #{kept:04d} onto gpu2: ")

    check()                 # logged by `pick` itself
    autogk_in(root, "sync")
    check()                 # a sync neither duplicates it nor moves it into the experiments
    monkeypatch.setenv("AUTOGK_TRACKING_URI", f"sqlite:///{root / 'mlruns' / 'rebuilt.db'}")
    autogk_in(root, "sync")
    check()                 # a store rebuilt from the notes alone (after a clone) reads the same


def test_the_loops_runs_carry_the_kernel_diff_and_plan_git_holds(template_project, tmp_path_factory, tmp_path):
    # The loop hands tracking the kernel it committed; what lands in MLflow is what git holds, byte for
    # byte, as when tracking read all three itself (and as `autogk sync` logs them from the notes).
    import subprocess

    from mlflow import MlflowClient
    root = copy_project(iterated_template(template_project, tmp_path_factory), tmp_path / "proj", keep_mlruns=True)
    c = MlflowClient(tracking_uri=Project(root).tracking_uri())
    rel = Project(root).target_rel("scale")
    rs = runs(root, "autogk/scale")
    assert rs
    plans = 0
    for r in rs:
        commit, dl = r.data.tags["autogk.commit"], tmp_path / "dl" / r.info.run_id
        dl.mkdir(parents=True)
        got = {a.path: Path(c.download_artifacts(r.info.run_id, a.path, str(dl))).read_text()
               for a in c.list_artifacts(r.info.run_id)}
        parent = json.loads(got["result.json"])["parent"]
        assert got["kernel.py"] == git(root, "show", f"{commit}:{rel}/kernel.py")
        assert got["diff.patch"] == git(root, "diff", parent, commit, "--", rel)
        plan = subprocess.run(["git", "notes", "--ref", "autogk/plans", "show", commit], cwd=root,
                              capture_output=True, text=True).stdout
        assert got.get("plan.md", "") == plan
        plans += bool(plan)
    assert plans, "no run had a plan to compare"
