"""The parent held to its own past (loop/drift.py): an experiment whose parent, the trunk's kernel, ran
slower than when that kernel was kept is no keep, whatever slowed it. A real project and git history (a
kept experiment merged into the trunk, its result note, the next experiment on top); the benchmark is a
timed one's result as a GPU backend returns it, since the CPU interpreter times nothing."""
from __future__ import annotations

import json

import pytest

from autogk_git.loop import experiment
from autogk_git.project import Project
from autogk_git.record import notes
from autogk_git.record.experiments import ensure_trunk
from conftest import autogk_in, git

KERNEL = "kernels/scale/kernel.py"
ENV = {"gpu": "NVIDIA H200", "driver": "580.159.04"}
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")


@pytest.fixture
def project(small_project):
    return small_project


def commit_kernel(root, branch: str, start: str, line: str) -> str:
    git(root, "checkout", "-q", "-b", branch, start)
    (root / KERNEL).write_text((root / KERNEL).read_text() + f"# {line}\n")
    git(root, *NO_HOOKS, "commit", "-qam", line)
    return git(root, "rev-parse", "HEAD").strip()


def workloads(root) -> list[str]:
    return [json.loads(ln)["workload"]["uuid"] for ln in (root / "kernels/scale/workloads.jsonl").read_text().splitlines()]


def timed_bench(uuids: list[str], parent_us: float | dict, candidate_us: float, gpu: str = "NVIDIA H200") -> dict:
    """What a GPU backend's ab stage returns, cut to what the verdict and the note read. parent_us: one
    latency for every workload, or {uuid: latency}."""
    at = parent_us if isinstance(parent_us, dict) else dict.fromkeys(uuids, parent_us)
    wl = {u: {"status": "PASSED", "latency_us": candidate_us, "method": "cupti"} for u in uuids}
    par = {u: {"status": "PASSED", "latency_us": at[u], "method": "cupti"} for u in uuids}
    return {"backend": "local", "timing": {"method": "cupti"}, "correct": True, "environment": dict(ENV, gpu=gpu),
            "stages": {"ab": {"ab": {"timer": "cupti", "rounds": 5,
                                     "workloads": [{"uuid": u, "base_latency_us": at[u]} for u in uuids]},
                              "workloads": {"candidate": wl, "parent": par}}},
            "cost": {"gpu_s": 1.0}}


class Keep:
    """The paired-ratio rule's keep, as it would read these figures."""

    def decide(self, bench, config):
        return {"rule": "paired-ratio", "decision": "keep", "outcome": "keep", "figures": "",
                "reason": "faster than its parent by 30.0%"}


def kept_then_next(root, then_us: float, trunk_change: bool = False) -> tuple[str, str]:
    """A kept experiment (its note: candidate at then_us on every workload) merged into the trunk, and
    the next experiment committed on top of that merge; returns (kept commit, next commit). trunk_change:
    the trunk moved first (its kernel's first line), so the merge combines the two changes."""
    p = Project.find(root)
    start = ensure_trunk(p, lambda s: None)
    kept = commit_kernel(root, "autogk/scale/0001-kept", start, "kept")
    note = {"commit": kept, "target": "scale", "experiment": 1, "backend": "local", "environment": ENV,
            "verdict": {"decision": "keep", "reason": "faster"}, "correct": True,
            "stages": timed_bench(workloads(root), then_us * 1.4, then_us)["stages"]}
    git(root, "notes", "--ref", "autogk/results", "add", "-m", notes.format_result(note), kept)
    git(root, "checkout", "-q", p.trunk)
    if trunk_change:
        (root / KERNEL).write_text("# the trunk's own change\n" + (root / KERNEL).read_text())
        git(root, *NO_HOOKS, "commit", "-qam", "trunk: a change of its own")
    git(root, *NO_HOOKS, "merge", "-q", "--no-ff", "-m", "autogk: keep scale #0001", kept)
    assert len(git(root, "log", "-1", "--format=%P").split()) == 2
    merge = git(root, "rev-parse", "HEAD").strip()
    nxt = commit_kernel(root, "autogk/scale/0002-next", merge, "next")
    return kept, nxt


def assess(root, sha: str, bench: dict, monkeypatch) -> dict:
    monkeypatch.setattr("autogk_git.bench.stages.benchmark", lambda *a, **k: bench)
    monkeypatch.setattr("autogk_git.loop.verdict.rule_for", lambda b: Keep())
    return experiment.assess(Project.find(root), "scale", 2, sha, "autogk/scale/0002-next", lambda s: None)


def blocked(project, monkeypatch, parent_us, candidate_us: float) -> tuple[str, dict]:
    """(the kept commit, the verdict) of the next experiment, which must be a keep blocked as a harness error."""
    kept, nxt = kept_then_next(project, then_us=10.0)
    v = assess(project, nxt, timed_bench(workloads(project), parent_us, candidate_us), monkeypatch)["verdict"]
    assert v["decision"] == "revert" and v["outcome"] == "harness_error", v
    assert kept[:10] in v["reason"] and v["overruled_decision"] == "keep", v
    return kept, v


def test_a_parent_slower_than_at_its_own_keep_blocks_the_keep(project, monkeypatch):
    # The trunk's kernel ran at 10 us as the kept candidate; as this experiment's parent it runs at 13 us
    # (a lock on the GPU's clocks, slow binaries it loaded, another process in its windows): the
    # candidate's 7 us "30 % faster" is measured against a slowed parent. Without the check: kept.
    _, v = blocked(project, monkeypatch, 13.0, 7.0)
    assert "30.0% slower on workload" in v["reason"], v["reason"]
    assert v["parent_drift"]["ratio"] == pytest.approx(1.3)


def test_a_parent_as_fast_as_at_its_keep_lets_the_keep_stand_and_says_so(project, monkeypatch):
    kept, nxt = kept_then_next(project, then_us=10.0)
    result = assess(project, nxt, timed_bench(workloads(project), parent_us=10.2, candidate_us=7.0), monkeypatch)
    v = result["verdict"]
    assert v["decision"] == "keep", v
    assert v["parent_drift"]["ratio"] == pytest.approx(1.02) and v["parent_drift"]["workloads"] == 2
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "0")
    experiment.record(Project.find(project), result, lambda s: None)
    out = autogk_in(project, "show", "2").stdout
    assert (f"the parent against its own keep: 1.0200x its latency then ({kept[:10]}, 2 workload(s); at most "
            f"1.0200x, on ") in out and "; limit 1.10x on each); the candidate 0.7000x the parent then" in out, out


def test_figures_from_another_gpu_are_not_compared(project, monkeypatch):
    _, nxt = kept_then_next(project, then_us=10.0)
    result = assess(project, nxt, timed_bench(workloads(project), 13.0, 7.0, gpu="NVIDIA B200"), monkeypatch)
    assert result["verdict"]["decision"] == "keep" and "parent_drift" not in result["verdict"]


def test_a_trunk_kernel_that_is_not_the_kept_experiments_own_is_not_compared(project, monkeypatch):
    # The merge combined the kept experiment with a change already on the trunk: its kernel is neither
    # side's, and the kept experiment's figures are another kernel's.
    _, nxt = kept_then_next(project, then_us=10.0, trunk_change=True)
    result = assess(project, nxt, timed_bench(workloads(project), 13.0, 7.0), monkeypatch)
    assert result["verdict"]["decision"] == "keep" and "parent_drift" not in result["verdict"]


def test_the_drift_is_recorded_on_a_revert_too_and_blocks_nothing_more(project, monkeypatch):
    class Revert(Keep):
        def decide(self, bench, config):
            return dict(super().decide(bench, config), decision="revert", outcome="inconclusive", reason="inconclusive")

    _, nxt = kept_then_next(project, then_us=10.0)
    monkeypatch.setattr("autogk_git.bench.stages.benchmark",
                        lambda *a, **k: timed_bench(workloads(project), parent_us=13.0, candidate_us=13.0))
    monkeypatch.setattr("autogk_git.loop.verdict.rule_for", lambda b: Revert())
    v = experiment.assess(Project.find(project), "scale", 2, nxt, "autogk/scale/0002-next", lambda s: None)["verdict"]
    assert v["outcome"] == "inconclusive" and v["parent_drift"]["ratio"] == pytest.approx(1.3), v


def test_a_parent_slowed_on_one_workload_alone_blocks_the_keep(project, monkeypatch):
    # The trunk's kernel slows itself, as the parent, on one workload only (its largest, say, where the
    # geometric mean's guard is weakest): 20 % there and none elsewhere is a geometric mean of 1.095 over
    # the two workloads here (2x on one of the rmsnorm target's 11 is 1.065), under the 10 % limit, so a
    # mean alone lets the candidate's "gain" there through. Across the H200's tuner and DSA runs the
    # trunk's kernel ran at most 5.1 % slower than at its keep on any one workload (2026-11-30 to 12-04),
    # so each workload is held to the limit.
    slow, other = workloads(project)
    _, v = blocked(project, monkeypatch, {slow: 12.0, other: 10.0}, 7.0)
    assert f"20.0% slower on workload {slow[:8]}" in v["reason"], v["reason"]
    d = v["parent_drift"]
    assert d["ratio"] == pytest.approx(1.2 ** 0.5, abs=1e-4) and d["worst"] == {"uuid": slow, "ratio": 1.2}, d


def test_a_gain_that_is_all_the_parents_drift_is_no_keep(project, monkeypatch):
    # The trunk's kernel runs 9 % slower than at its keep on every workload (under the 10 % limit): the
    # candidate, the same kernel without what slows it, "gains" 8.7 % against the parent now and 0.5 %
    # against the parent then (10.0 us then, 9.95 us now as the candidate). Without this check: kept.
    _, v = blocked(project, monkeypatch, 10.9, 9.95)
    assert "0.9950x the parent's latency at its keep" in v["reason"], v["reason"]
    assert v["parent_drift"]["candidate_vs_then"] == pytest.approx(0.995), v["parent_drift"]


def test_a_real_gain_over_a_parent_a_little_slower_than_at_its_keep_stands(project, monkeypatch):
    # 3 % faster than the parent, whose kernel runs 1.5 % slower than at its keep (more than any mean of
    # the H200's 86 experiments after a keep): 0.985x the parent then, still past 1 - min_effect.
    kept, nxt = kept_then_next(project, then_us=10.0)
    result = assess(project, nxt, timed_bench(workloads(project), parent_us=10.15, candidate_us=9.85), monkeypatch)
    v = result["verdict"]
    assert v["decision"] == "keep", v
    assert v["parent_drift"]["candidate_vs_then"] == pytest.approx(0.985), v["parent_drift"]


def test_a_workload_the_candidate_has_no_figure_on_does_not_excuse_the_rest(project, monkeypatch):
    # The drift's second test reads the candidate's latency on every workload it compares; one missing
    # (no figure there: the rule here keeps whatever it is given) left candidate_vs_then out, and the
    # keep on a drifted parent stood. It is taken over the workloads the candidate has figures on.
    kept, nxt = kept_then_next(project, then_us=10.0)
    bench = timed_bench(workloads(project), parent_us=10.9, candidate_us=9.95)
    del bench["stages"]["ab"]["workloads"]["candidate"][workloads(project)[0]]["latency_us"]
    v = assess(project, nxt, bench, monkeypatch)["verdict"]
    assert v["decision"] == "revert" and v["outcome"] == "harness_error", v
    assert v["parent_drift"]["candidate_vs_then"] == pytest.approx(0.995), v["parent_drift"]
