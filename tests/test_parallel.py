"""`autogk iterate --parallel K` on CPU with the tune agent: worktrees, serialized verdicts, and no merge
on stale numbers (a keep that arrives after the trunk moved is replayed and measured again)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from conftest import autogk_in, git, notes_json

from autogk_git.record import refs
from autogk_git.loop import experiment as ex
from autogk_git.loop.parallel import make_slots
from autogk_git.loop.replay import refresh_if_stale
from autogk_git.project import Project

NO_MLFLOW = {"AUTOGK_TRACKING_ENABLED": "false", "AUTOGK_BENCH_BACKEND": "interpret"}


@pytest.fixture
def project(small_project):
    """Two workloads, both in the quick stage (conftest.small_project): these tests are not about workloads."""
    return small_project


def _merges(root):
    """(merge, first parent, second parent) of every merge on the trunk's first-parent line."""
    out = git(root, "log", "--first-parent", "--merges", "--format=%H %P", "main").split("\n")
    return [tuple(line.split()) for line in out if line]


def _check_history(root, exps):
    # Every kept experiment was measured against the commit it merged onto: nothing stale.
    merges = _merges(root)
    assert len(merges) == sum(e["decision"] == "keep" for e in exps)
    for _, first, second in merges:
        assert notes_json(root, second)["parent"] == first
    # The tuner never measured one configuration twice, in flight or not.
    configs = [json.dumps(notes_json(root, e["commit"])["tunables"], sort_keys=True) for e in exps]
    configs.append(json.dumps({"BLOCK": 64, "MASK": True}, sort_keys=True))
    assert len(set(configs)) == len(configs)
    # Nothing left behind.
    assert git(root, "branch", "--list", "autogk/*").strip() == ""
    assert len(git(root, "worktree", "list").splitlines()) == 1
    assert not list((root / ".git/autogk/worktrees").glob("*"))


@pytest.mark.slow(12)
@pytest.mark.parametrize("k,n,mlflow", [(4, 4, True)])  # more slots than one-step moves: a rebase happens
def test_parallel_runs_k_experiments_and_merges_only_fresh_keeps(project, k, n, mlflow, monkeypatch):
    start = git(project, "rev-parse", "main").strip()
    env = {"AUTOGK_BENCH_BACKEND": "interpret"} if mlflow else NO_MLFLOW
    measured, real = [], ex.assess  # (commit, whether the loop's own thread measured it)

    def spy(p, target, number, sha, *args, **kwargs):
        measured.append((sha, threading.current_thread() is threading.main_thread()))
        return real(p, target, number, sha, *args, **kwargs)
    monkeypatch.setattr(ex, "assess", spy)
    out = autogk_in(project, "iterate", "-n", str(n), "--parallel", str(k), "--json", env=env)
    report = json.loads(out.stdout)
    exps = report["experiments"]
    assert len(exps) == n and report["stop_reason"] == f"ran {n} experiment(s) (limit {n})"
    _check_history(project, exps)
    # The first wave ran at once: one per slot (the tuner has 3 one-step moves), all from one tip.
    wave = sorted(exps, key=lambda e: e["number"])[:min(k, 3)]
    assert sorted(e["slot"] for e in wave) == list(range(min(k, 3)))
    for e in wave:
        note = notes_json(project, e["commit"])
        assert (note.get("rebased") or {}).get("from_parent", note["parent"]) == start
    # Each experiment has its own number and its own worktree-born commit.
    assert len({e["number"] for e in exps}) == len(exps)
    if k == 4:  # 3 from one tip: BLOCK 64->128 and 64->32 both keep, so one arrives after the trunk moved
        rebased = [e for e in exps if e["rebased_from"]]
        assert rebased
        for e in rebased:
            note = notes_json(project, e["commit"])
            assert note["rebased"]["from_commit"] == e["rebased_from"]
            assert note["rebased"]["stale_verdict"]["decision"] == "keep"
            assert note["rebased"]["from_parent"] != note["parent"]
            body = git(project, "log", "-1", "--format=%B", e["commit"])
            assert f"Autogk-Rebased-From: {e['rebased_from']}" in body
            assert git(project, "notes", "--ref", "autogk/plans", "show", e["commit"]).strip()
            # Measured again on its slot, not in the loop's thread (which goes on proposing and concluding).
            assert [on_loop for sha, on_loop in measured if sha == e["commit"]] == [False]
            assert e["phases"]["benchmarks"] == 2
    assert not any(on_loop for _, on_loop in measured)
    assert len(measured) == sum(e["phases"]["benchmarks"] for e in exps)
    for e in exps:  # where each one's time went
        ph = e["phases"]
        assert ph["bench_s"] > 0 and min(ph["open_s"], ph["wait_s"], ph["conclude_s"]) >= 0
    if mlflow:  # one MLflow run per experiment, with the final (fresh) verdict
        code = (
            "import json\n"
            "from mlflow.tracking import MlflowClient\n"
            f"c = MlflowClient(tracking_uri='sqlite:///{project}/mlruns/mlflow.db')\n"
            "e = c.get_experiment_by_name('autogk/scale')\n"
            "print(json.dumps({r.data.tags['autogk.number']: r.data.tags['autogk.verdict'] "
            "for r in c.search_runs([e.experiment_id])}))\n")
        seen = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                         check=True).stdout.strip().splitlines()[-1])
        assert {int(k): v for k, v in seen.items()} == {e["number"]: e["decision"] for e in exps}


def _open_and_measure(p: Project, new_block: str, say, measure: bool = True):
    """An experiment measured (keep on CPU) and left open, as a killed loop leaves it."""
    base = ex.ensure_trunk(p, say)
    number = ex.next_number(p, "scale")
    wt, branch = ex.open_worktree(p, "scale", number, base)
    k = wt / "kernels/scale/kernel.py"
    k.write_text(k.read_text().replace("BLOCK = 64 ", f"BLOCK = {new_block} "))
    target = p.target("scale")
    from autogk_git.project import Target
    sha, branch = ex.commit_change(p, wt, target.at(wt), number, branch,
                                   f"tune: BLOCK 64 -> {new_block}", "why", "tune", base)
    if measure:
        result = ex.evaluate(p, "scale", number, sha, branch, say, track=False)
        assert result["verdict"]["decision"] == "keep"
    return number, sha, branch, base


def _a_kept_experiment(project, monkeypatch):
    """(project, its said lines, (number, sha, branch, base)) of one experiment measured, kept and left open."""
    monkeypatch.setenv("AUTOGK_BENCH_BACKEND", "interpret")
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "false")
    p = Project(project)
    lines = []
    return p, lines, _open_and_measure(p, "128", lines.append)


def _person_commits(root, text_from, text_to, path="kernels/scale/kernel.py"):
    f = root / path
    f.write_text(f.read_text().replace(text_from, text_to))
    git(root, "commit", "-qam", "a person's change on the trunk")
    return git(root, "rev-parse", "HEAD").strip()


def test_a_stale_keep_left_by_a_crash_is_replayed_and_measured_again_on_resume(project, monkeypatch):
    p, lines, (number, sha, branch, base) = _a_kept_experiment(project, monkeypatch)
    git(project, "checkout", "-q", "main")
    tip = _person_commits(project, "out = x * scale + bias (fp32)", "out = x * scale + bias (float32)")
    # A crashed replay leaves a detached worktree behind; resume must still finish the experiment.
    wt = ex.worktree_path(p, "scale", number)
    ex.remove_worktree(p, wt)
    git(project, "worktree", "add", "-q", "--detach", str(wt), tip)
    from autogk_git.loop.iterate import resume
    done = resume(Project(project), "scale", lines.append)
    assert [(d["number"], d["decision"]) for d in done] == [(number, "keep")]
    assert any("replaying it there and measuring again" in ln for ln in lines)
    merges = _merges(project)[::-1]  # oldest first
    assert merges[0][1] == tip  # the first merge is #1, onto the person's commit
    fresh = notes_json(project, merges[0][2])
    assert fresh["experiment"] == number and fresh["parent"] == tip
    assert fresh["rebased"]["from_commit"] == sha and fresh["rebased"]["from_parent"] == base
    assert "BLOCK = 128 " in git(project, "show", f"{merges[0][2]}:kernels/scale/kernel.py")
    assert git(project, "branch", "--list", "autogk/*").strip() == ""
    assert len(git(project, "worktree", "list").splitlines()) == 1


def test_a_keep_whose_change_the_trunk_already_has_is_reverted_not_merged(project, monkeypatch):
    p, lines, (number, sha, branch, base) = _a_kept_experiment(project, monkeypatch)
    tip = _person_commits(project, "BLOCK = 64 ", "BLOCK = 128 ")
    result = ex.load_result(p, sha)
    new_sha, result = refresh_if_stale(p, "scale", number, branch, sha, result, lines.append)
    assert new_sha == sha
    assert result["verdict"]["decision"] == "revert" and result["verdict"]["rule"] == "stale-parent"
    assert result["stale_verdict"]["decision"] == "keep"
    assert notes_json(project, sha)["verdict"]["rule"] == "stale-parent"  # the note says so too
    ex.conclude(p, refs.ExperimentRef.parse(branch)[1], sha, result, lines.append)
    assert git(project, "rev-parse", "main").strip() == tip  # nothing merged
    assert git(project, "rev-parse", f"refs/autogk/archive/scale/{number:04d}").strip() == sha


def test_slots_spread_over_gpus_and_share_them_when_k_exceeds_them(project, monkeypatch):
    monkeypatch.setenv("AUTOGK_BENCH_BACKEND", "local")
    monkeypatch.setenv("AUTOGK_BENCH_GPU", "3,5")
    p = Project(project)
    said = []
    slots = make_slots(p, 3, said.append)
    assert [s.device for s in slots] == ["3", "5", "3"]
    assert [s.project.config.bench.gpu for s in slots] == ["3", "5", "3"]
    assert p.config.bench.gpu == "3,5"  # the project's own config is untouched
    assert "take turns" in said[0]
    # Without [bench] gpu: every GPU this process may see, counted as CUDA (and the local backend) count them.
    monkeypatch.delenv("AUTOGK_BENCH_GPU")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert [s.device for s in make_slots(Project(project), 2, said.append)] == ["0", "1"]
    monkeypatch.setenv("AUTOGK_BENCH_BACKEND", "modal")
    slots = make_slots(Project(project), 2, said.append)
    assert [s.device for s in slots] == [None, None] and "Modal container (B200)" in said[-1]


def test_a_replay_that_gives_a_kernel_in_flight_is_not_measured_twice(project, monkeypatch):
    p, lines, (number, sha, branch, base) = _a_kept_experiment(project, monkeypatch)
    git(project, "checkout", "-q", "main")
    tip = _person_commits(project, "out = x * scale + bias (fp32)", "out = x * scale + bias (float32)")
    # Another experiment, branched from the moved trunk, makes the same change: the replay would equal it.
    other, other_sha, _, _ = _open_and_measure(p, "128", lines.append, measure=False)
    result = ex.load_result(p, sha)
    new_sha, result = refresh_if_stale(p, "scale", number, branch, sha, result, lines.append,
                                       in_flight={other: other_sha})
    assert new_sha == sha and result["verdict"]["decision"] == "revert"
    assert f"same kernel as #{other:04d}" in result["verdict"]["reason"]
    assert git(project, "rev-parse", branch).strip() == sha  # the branch did not move
    ex.conclude(p, refs.ExperimentRef.parse(branch)[1], sha, result, lines.append)
    assert git(project, "rev-parse", "main").strip() == tip  # nothing merged


def test_a_keep_whose_trunk_moves_during_every_remeasurement_is_reverted_not_merged_stale(project, monkeypatch):
    # In the parallel loop other slots' keeps move the trunk while a replayed keep is measured again (a
    # person's commits do here): after the last allowed measurement it is still stale, so it must not merge.
    p, lines, (number, sha, branch, base) = _a_kept_experiment(project, monkeypatch)
    git(project, "checkout", "-q", "main")
    real, said = ex.assess, ["fp32"]

    def a_person_commits():
        said.append(f"fp32, v{len(said)}")
        _person_commits(project, f"bias ({said[-2]})", f"bias ({said[-1]})")

    def assess_then_a_person_commits(*args, **kwargs):
        out = real(*args, **kwargs)
        a_person_commits()
        return out
    a_person_commits()
    monkeypatch.setattr(ex, "assess", assess_then_a_person_commits)
    result = ex.load_result(p, sha)
    new_sha, result = refresh_if_stale(p, "scale", number, branch, sha, result, lines.append)
    assert sum("replaying it there and measuring again" in ln for ln in lines) == 3
    assert result["verdict"]["decision"] == "revert" and result["verdict"]["rule"] == "stale-parent", result["verdict"]
    assert result["stale_verdict"]["decision"] == "keep"
    assert notes_json(project, new_sha)["verdict"]["rule"] == "stale-parent"  # the note says so too
    tip = git(project, "rev-parse", "main").strip()
    ex.conclude(p, refs.ExperimentRef.parse(branch)[1], new_sha, result, lines.append)
    assert git(project, "rev-parse", "main").strip() == tip  # nothing merged
