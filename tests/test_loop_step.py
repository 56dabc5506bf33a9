"""The loop's edges a new user meets: nothing to try, a tunable that does not parse, a revert that
measured nothing; and the record read back at scale (summaries beside results, sync in batches)."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import REPO, autogk_in, git, notes_json

sys.path.insert(0, str(REPO / "benchmarks"))
import log_scale  # noqa: E402

KERNEL = Path("kernels") / "scale" / "kernel.py"


@pytest.fixture
def project(small_project):
    """Two workloads, both in the quick stage (conftest.small_project): these tests are not about workloads."""
    return small_project


def _commit_kernel(project: Path, old: str, new: str, message: str) -> None:
    k = project / KERNEL
    k.write_text(k.read_text().replace(old, new))
    git(project, "commit", "-qam", message)


# ------------------------------------------------------------------------------------------------
# Tunables and the tuner
# ------------------------------------------------------------------------------------------------

def test_a_tunable_comment_that_does_not_parse_names_its_line():
    from autogk_git import tunables
    src = ('"""Declare tunables as `NAME = value  # autogk: tune [choices]`."""\n\n'
           "BLOCK = 64  # autogk: tune [32, 64]\nMASK = True  # autogk: tune [True, False] (try off)\n")
    assert set(tunables.parse(src)) == {"BLOCK"}  # lenient: results record what they can
    with pytest.raises(tunables.TunableError) as e:
        tunables.parse(src, strict=True, where="kernels/t/kernel.py")
    assert "kernels/t/kernel.py line 4" in e.value.message and "MASK = True" in e.value.message
    assert "# autogk: tune [64, 128, 256]" in e.value.hint
    with pytest.raises(tunables.TunableError, match="line 1"):
        tunables.parse("BLOCK = 6 4  # autogk: tune [32, 64]\n", strict=True)
    with pytest.raises(tunables.TunableError, match="line 2.*module-level UPPER_CASE"):
        tunables.parse("def f():\n    block = 64  # autogk: tune [32, 64]\n", strict=True)


def _tune(tmp_path: Path, source: str, history: list[dict]):
    from autogk_git.agents.base import Context
    from autogk_git.agents.tune import TuneAgent
    (tmp_path / "t").mkdir(exist_ok=True)
    (tmp_path / "t" / "kernel.py").write_text(source)
    ctx = Context(worktree=tmp_path, target=SimpleNamespace(rel="t"), number=9, history=history)
    return TuneAgent().propose(ctx)


def test_the_tuner_does_not_count_a_revert_that_measured_nothing_as_tried(tmp_path):
    src = "BLOCK = 64  # autogk: tune [64, 128]\n"
    nothing_ran = {"experiment": 1, "tunables": {"BLOCK": 128}, "parent_tunables": {"BLOCK": 64},
                   "stages": {}, "checked_workloads": [], "correct": False,
                   "verdict": {"decision": "revert", "reason": "no workload can run on this backend"}}
    prop = _tune(tmp_path, src, [nothing_ran])
    assert prop.changed and prop.hypothesis == "tune: BLOCK 64 -> 128"
    measured = dict(nothing_ran, stages={"quick": {}}, checked_workloads=["u1"])
    prop = _tune(tmp_path, src, [measured])
    assert not prop.changed and prop.hypothesis == "tuning exhausted"


def test_the_tuner_tries_moves_no_trunk_measured_before_those_that_lost_from_an_earlier_one(tmp_path):
    # The flagship's tuner run (sparse attention, an H100, 2026-12-06): after a keep changed one parameter,
    # the tuner went back to the nearest moves of the others, every one already measured from the trunk
    # before and lost by 4-25 %, before the untried move that was then kept.
    src = ("BLOCK_N = 64  # autogk: tune [32, 64, 128]\nSTAGES = 2  # autogk: tune [1, 2, 3]\n"
           "MERGE_D = 256  # autogk: tune [128, 256, 512]\nMERGE_H = 2  # autogk: tune [1, 2, 4]\n")
    old = {"BLOCK_N": 64, "STAGES": 2, "MERGE_D": 128, "MERGE_H": 2}
    now = dict(old, MERGE_D=256)

    def res(n, parent, ratio, decision="revert", **change):
        return {"experiment": n, "parent_tunables": parent, "tunables": dict(parent, **change),
                "stages": {"quick": {}}, "checked_workloads": ["u"], "correct": True,
                "verdict": {"decision": decision, "ratio": ratio}}
    history = [res(1, old, 1.22, BLOCK_N=128), res(2, old, 1.009, STAGES=3), res(3, old, 1.007, MERGE_H=4),
               res(4, old, 0.97, "keep", MERGE_D=256), res(5, old, 1.04, BLOCK_N=32),
               res(6, old, 1.09, STAGES=1)]
    order = []
    for n in range(7):
        prop = _tune(tmp_path, src, history)
        assert prop.changed
        order.append(prop.hypothesis.removeprefix("tune: "))
        name, change = order[-1].split(" ", 1)
        value = int(change.split(" -> ")[1])
        history.append(res(7 + n, now, 1.5, **{name: value}))
    # never measured first (nearest first among them), then the rest by the ratio they had
    assert order[:2] == ["MERGE_D 256 -> 512", "MERGE_H 2 -> 1"], order
    assert order[2:7] == ["MERGE_H 2 -> 4", "STAGES 2 -> 3", "BLOCK_N 64 -> 32", "STAGES 2 -> 1",
                          "BLOCK_N 64 -> 128"], order
    first_retry = _tune(tmp_path, src, history[:8])
    assert first_retry.hypothesis == "tune: MERGE_H 2 -> 4"
    assert "experiment 3" in first_retry.rationale and "1.0070" in first_retry.rationale, first_retry.rationale


def test_the_repeat_check_does_not_count_a_revert_that_measured_nothing(project):
    from autogk_git.git import repo
    from autogk_git.record import kernels
    base = repo.rev(project, "HEAD")
    git(project, "checkout", "-qb", "side")
    _commit_kernel(project, "BLOCK = 64 ", "BLOCK = 128 ", "bigger block")
    sha = repo.rev(project, "HEAD")
    result = {"experiment": 1, "commit": sha, "parent": base, "stages": {}, "checked_workloads": []}
    assert kernels.tried(project, "kernels/scale", [result]) == {}
    trees = kernels.trees(project, [sha, base], "kernels/scale")
    measured = dict(result, stages={"quick": {}}, checked_workloads=["u"])
    assert kernels.tried(project, "kernels/scale", [measured]) == {trees[sha]: 1, trees[base]: 1}
    # In flight (parallel loop): counted, unless it is the experiment being replayed.
    assert kernels.tried(project, "kernels/scale", [], also={2: sha}) == {trees[sha]: 2}
    assert kernels.tried(project, "kernels/scale", [], also={2: sha}, exclude=2) == {}


# ------------------------------------------------------------------------------------------------
# iterate with nothing to try
# ------------------------------------------------------------------------------------------------

def test_iterate_with_nothing_to_try_exits_non_zero_and_names_the_three_ways_forward(project):
    k = project / KERNEL
    k.write_text(k.read_text().replace("  # autogk: tune [32, 64, 128]", "").replace(
        "  # autogk: tune [True, False]", ""))
    git(project, "commit", "-qam", "no tunables")
    proc = autogk_in(project, "iterate", "-n", "3", "--agent", "tune", check=False,
                     env={"AUTOGK_TRACKING_ENABLED": "false"})
    assert proc.returncode == 1
    assert "nothing to tune" in proc.stdout and "done: 0 experiment(s) concluded" in proc.stdout
    for way in ("# autogk: tune [64, 128, 256]", "ANTHROPIC_API_KEY", "--agent anthropic", "--agent command",
                "kernels/scale/kernel.py"):
        assert way in proc.stderr
    report = json.loads(autogk_in(project, "iterate", "--agent", "tune", "--json", check=False,
                                  env={"AUTOGK_TRACKING_ENABLED": "false"}).stdout)
    assert report["nothing_to_try"] and report["experiments"] == []
    assert git(project, "branch", "--list", "autogk/*").strip() == ""  # the empty experiment was closed


def test_a_tunable_that_does_not_parse_stops_iterate_with_its_line(project):
    _commit_kernel(project, "MASK = True  # autogk: tune [True, False]",
                   "MASK = True  # autogk: tune [True, False]  keep on", "note on MASK")
    proc = autogk_in(project, "iterate", "-n", "1", "--agent", "tune", check=False,
                     env={"AUTOGK_TRACKING_ENABLED": "false"})
    assert proc.returncode == 1
    assert "kernels/scale/kernel.py line 7" in proc.stdout and "keep on" in proc.stdout


# ------------------------------------------------------------------------------------------------
# The record at scale
# ------------------------------------------------------------------------------------------------

def test_log_reads_the_summaries_and_an_old_history_without_them_alike(tmp_path):
    from autogk_git.record import ledger
    with_s, without = tmp_path / "with", tmp_path / "without"
    log_scale.build(with_s, 12, 2, 2)
    log_scale.build(without, 12, 2, 2, summaries=False)
    assert git(with_s, "notes", "--ref", "autogk/summaries", "list").count("\n") == 12
    a = [r.as_dict() for r in ledger.rows(with_s)]
    b = [r.as_dict() for r in ledger.rows(without)]
    for r in a + b:
        r.pop("commit"), r.pop("parent"), r.pop("created")  # the two builds differ in time only
    assert a == b and len(a) == 12 and sum(r["decision"] == "keep" for r in a) == 2
    # A summary is trusted only for the note it was made from: a copy onto another commit is not.
    first = ledger.rows(with_s)[0]
    other = git(with_s, "commit-tree", f"{first.commit}^{{tree}}", "-p", first.commit, "-m", "x").strip()
    git(with_s, "notes", "--ref", "autogk/summaries", "copy", first.commit, other)
    git(with_s, "notes", "--ref", "autogk/results", "copy", first.commit, other)
    assert other not in ledger.notes_index(with_s)  # the copied result was measured on first.commit


def test_sync_in_batches_logs_what_one_by_one_logging_logs(tmp_path, monkeypatch):
    from autogk_git.project import Project
    from autogk_git.record import ledger
    from autogk_git.tracking import mlflow_store
    root = tmp_path / "p"
    log_scale.build(root, 4, 2, 2)
    _, results = ledger.rows(root, with_results=True)
    git(root, "notes", "--ref", "autogk/plans", "add", "-m", "the plan", next(iter(results)))
    results = sorted(results.values(), key=lambda r: r["experiment"])

    def store(uri: str):
        monkeypatch.setenv("AUTOGK_TRACKING_URI", uri)
        project = Project(root)
        return project, mlflow_store._client(project)

    batch_p, batch = store(f"sqlite:///{tmp_path}/a/mlflow.db")
    assert mlflow_store.log_results(batch_p, results) == 4
    single_p, single = store(f"sqlite:///{tmp_path}/b/mlflow.db")
    for r in results:
        mlflow_store.log_result(single_p, r, known_new=True)

    def runs(client):
        exp = client.get_experiment_by_name("autogk/scale")
        out = {}
        for run in client.search_runs([exp.experiment_id]):
            arts = {}
            for a in client.list_artifacts(run.info.run_id):
                arts[a.path] = Path(client.download_artifacts(run.info.run_id, a.path, str(tmp_path))).read_text()
            out[run.data.tags["autogk.commit"]] = (run.info.status, run.info.run_name, run.data.tags,
                                                   run.data.params, run.data.metrics, arts)
        return out

    a, b = runs(batch), runs(single)
    assert len(a) == 4 and a == b
    assert any("plan.md" in v[5] for v in a.values()) and all("diff.patch" in v[5] for v in a.values())


def test_bench_never_reads_git():
    # git -> record -> loop -> job -> bench: the benchmark gets kernel sources, it never fetches them.
    from test_architecture import imports, modules
    known = modules()
    for name, path in known.items():
        if name.startswith("autogk_git.bench"):
            reach = imports(path, name, set(known))
            assert not [m for m in reach if m.startswith("autogk_git.git")], name


def test_the_parallel_loop_fires_research_and_follows_the_plan_like_the_serial_one(project, monkeypatch):
    # One step for both schedulers: plans, artifacts and research triggers reach parallel experiments too.
    from agents.test_agent_research import Scripted  # tests/ is on sys.path (its conftest); agents/ maybe not

    from autogk_git.loop import iterate as it
    from autogk_git.project import Project
    for k, v in {"AUTOGK_TRACKING_ENABLED": "false", "AUTOGK_RESEARCH_WALL": "1",
                 "AUTOGK_RESEARCH_FOLLOW": "1"}.items():
        monkeypatch.setenv(k, v)
    agent = Scripted([[("mask = offs < n", "mask = offs < n - 1")],   # 1 and 2 in flight together,
                      [("mask = offs < n", "mask = offs < n - 2")],   # both incorrect: a wall of one
                      [("BLOCK = 64 ", "BLOCK = 128 ")]])             # 3 opens after a result: the plan
    monkeypatch.setattr(it, "get_agent", lambda kind, cfg: agent)
    report = it.iterate(Project(project), "scale", 3, "tune", lambda s: None, parallel=2)
    assert [e["decision"] for e in sorted(report.experiments, key=lambda e: e["number"])] == \
        ["revert", "revert", "keep"]
    assert report.research and report.research[0]["trigger"].startswith("correctness wall")
    assert agent.seen[0]["plan"] is None and agent.seen[1]["plan"] is None
    assert agent.seen[2]["plan_id"] == report.research[0]["commit"] and all(s["artifact"] for s in agent.seen)
    third = next(e for e in report.experiments if e["number"] == 3)["commit"]
    assert f"Autogk-Plan: {report.research[0]['commit']}" in git(project, "log", "-1", "--format=%B", third)


def test_the_tuner_tries_pairs_of_changes_once_every_single_change_was_tried(tmp_path):
    src = "BLOCK = 64  # autogk: tune [32, 64]\nWARPS = 4  # autogk: tune [4, 8]\n"

    def tried(cfg):
        return {"experiment": 1, "tunables": cfg, "parent_tunables": {"BLOCK": 64, "WARPS": 4},
                "stages": {"quick": {}}, "checked_workloads": ["u1"], "verdict": {"decision": "revert"}}
    prop = _tune(tmp_path, src, [])
    assert prop.hypothesis == "tune: WARPS 4 -> 8"  # an upward step first, as before
    singles = [tried({"BLOCK": 32, "WARPS": 4}), tried({"BLOCK": 64, "WARPS": 8})]
    prop = _tune(tmp_path, src, singles)
    assert prop.changed and prop.hypothesis == "tune: WARPS 4 -> 8, BLOCK 64 -> 32"
    assert (tmp_path / "t" / "kernel.py").read_text().startswith("BLOCK = 32  # autogk: tune [32, 64]\nWARPS = 8 ")
    assert "none was kept" in prop.rationale
    prop = _tune(tmp_path, src, singles + [tried({"BLOCK": 32, "WARPS": 8})])
    assert not prop.changed and prop.hypothesis == "tuning exhausted"


def test_the_tuner_tries_the_pairs_its_single_changes_predict_best_first(tmp_path):
    # The H200's indexer: the nearest pairs joined two clear slowdowns (1.12 x 1.12) while two neutral
    # changes waited; the singles' measured ratios now order the pairs, nearest first among equals.
    src = ("A = 2  # autogk: tune [1, 2, 3]\nB = 4  # autogk: tune [4, 8]\nC = 1  # autogk: tune [1, 2]\n")
    start = {"A": 2, "B": 4, "C": 1}

    def single(cfg, ratio=None, correct=True):
        verdict = {"decision": "revert"} if ratio is None else {"decision": "revert", "ratio": ratio}
        return {"experiment": 1, "tunables": dict(start, **cfg), "parent_tunables": start, "correct": correct,
                "stages": {"ab": {}}, "checked_workloads": ["u1"], "verdict": verdict}
    singles = [single({"A": 3}, 1.0006), single({"A": 1}, 0.9994), single({"B": 8}, 1.12),
               single({"C": 2}, 0.9988)]
    prop = _tune(tmp_path, src, singles)
    assert prop.hypothesis == "tune: C 1 -> 2, A 2 -> 1"        # predicted 0.9982, the best
    assert "Predicted ratio from the single changes: 0.9982" in prop.rationale
    done = singles + [single({"A": 1, "C": 2})]
    assert _tune(tmp_path, src, done).hypothesis == "tune: A 2 -> 3, C 1 -> 2"  # 0.9994 next
    # A single that failed its checks puts its pairs last, after the clear slowdowns.
    singles[3] = single({"C": 2}, None, correct=False)
    order = []
    hist = list(singles)
    while True:
        p = _tune(tmp_path, src, hist)
        if not p.changed:
            break
        order.append(p.hypothesis)
        moved = dict(start)
        for part in p.hypothesis.removeprefix("tune: ").split(", "):
            name, _, _, value = part.split(" ")
            moved[name] = int(value)
        hist.append(single({k: v for k, v in moved.items() if v != start[k]}))
    assert order[:2] == ["tune: B 4 -> 8, A 2 -> 1", "tune: A 2 -> 3, B 4 -> 8"]
    assert all("C 1 -> 2" in h for h in order[2:]) and len(order) == 5
    # With no measured ratio (the CPU interpreter times nothing) the order is the nearest pairs' as before.
    assert _tune(tmp_path, src, [single({"A": 3}), single({"A": 1}), single({"B": 8}), single({"C": 2})]
                 ).hypothesis == "tune: A 2 -> 3, B 4 -> 8"


def test_the_loop_does_not_wait_for_mlflow_and_every_run_is_logged_before_iterate_returns(project, monkeypatch):
    # MLflow's logging of a concluded experiment (~0.5 s here, more against a remote server) runs on a
    # thread of its own: the loop's thread goes on to the next proposal, and iterate waits for the queue.
    import threading
    import time

    from autogk_git.tracking import mlflow_store
    real, logged = mlflow_store.log_result, []

    def slow_log(p, result, **kwargs):
        time.sleep(1.5)
        logged.append((result["experiment"], threading.current_thread() is threading.main_thread()))
        return real(p, result, **kwargs)
    monkeypatch.setattr(mlflow_store, "log_result", slow_log)
    report = json.loads(autogk_in(project, "iterate", "-n", "2", "--agent", "tune", "--json").stdout)
    exps = report["experiments"]
    assert [e["number"] for e in exps] == [1, 2]
    assert all(e["phases"]["conclude_s"] < 1.5 for e in exps), [e["phases"] for e in exps]
    assert sorted(logged) == [(1, False), (2, False)]  # both logged, off the loop's thread, before it returned
    from autogk_git.project import Project
    assert all(mlflow_store.is_logged(Project(project), notes_json(project, e["commit"])) for e in exps)


def test_the_run_summary_says_where_the_time_went_and_when_proposing_limits_the_slots():
    from autogk_git.commands.iterate import time_line
    bench = {"open_s": 0.1, "bench_s": 10.0, "wait_s": 0.0, "conclude_s": 0.2, "benchmarks": 1}
    assert time_line([{"decision": "repeat"}]) == ""  # nothing measured: no line
    one = time_line([{"phases": bench}, {"phases": bench}])
    assert one == "time: proposing 0.2 s, benchmarks 20.0 s (2), concluding 0.4 s"
    # Two slots fed by an agent that takes 30 s a proposal: the slots wait for it, not for the GPU.
    slow = dict(bench, open_s=30.0, wait_s=1.0)
    text = time_line([{"phases": slow, "slot": 0}, {"phases": slow, "slot": 1}])
    assert "finished benchmarks waiting for the loop 2.0 s" in text
    assert "more --parallel slots will not make this run faster" in text
    assert "--parallel" not in time_line([{"phases": bench, "slot": 0}, {"phases": bench, "slot": 1}])
    # An agent asked for each slot at once (the anthropic agent): its conversations overlap, no hint.
    beside = dict(slow, proposed_beside=True)
    assert "--parallel" not in time_line([{"phases": beside, "slot": 0}, {"phases": beside, "slot": 1}])
