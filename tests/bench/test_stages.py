"""bench/stages.py: which jobs an experiment's benchmark runs on the untimed (interpret) backend.

The quick gate and the full check are one job (one judge, one kernel process, one import of torch and
of the kernel): the judge checks the quick workloads first and stops there when one fails. The result
keeps its two stages. Real Triton interpreter, the small `scale` test target of the template project."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

from autogk_git import config as config_mod  # noqa: E402
from autogk_git.bench import stages  # noqa: E402
from autogk_git.bench.backends.interpret import InterpretBackend  # noqa: E402
from autogk_git.bench.job import quick_subset  # noqa: E402
from autogk_git.project import Project  # noqa: E402


class Counting(InterpretBackend):
    """The interpret backend, counting its jobs."""

    def __init__(self, config) -> None:
        super().__init__(config)
        self.jobs: list[list[str]] = []

    def run(self, job, timeout_s, on_progress=None):
        self.jobs.append([w["uuid"] for w in job["workloads"]])
        return super().run(job, timeout_s, on_progress=on_progress)


def bench(project, kernel: str):
    target = Project.find(project).target(None)
    config = config_mod.load(project)
    backend = Counting(config)
    lines: list[str] = []
    res = stages.benchmark(target, backend, {"kernel.py": kernel}, None, config, seed=7, progress=lines.append)
    return target, backend, res, lines


def test_a_correct_kernel_is_checked_in_one_job_with_its_quick_and_full_stages(project):
    target, backend, res, lines = bench(project, (project / "kernels/scale/kernel.py").read_text())
    assert len(backend.jobs) == 1, backend.jobs  # two before: quick, then full
    order = [w["uuid"] for w in quick_subset(target.definition, target.workloads)]
    assert backend.jobs[0][:2] == order  # the quick gate's workloads first
    quick = set(order)
    assert res["correct"] and sorted(res["stages"]) == ["full", "quick"]
    assert set(res["stages"]["quick"]["workloads"]["candidate"]) == quick
    assert set(res["stages"]["full"]["workloads"]["candidate"]) == {w["uuid"] for w in target.workloads} - quick
    assert res["stages"]["full"]["summary"]["candidate"] == {"n": 3, "passed": 3, "failed": 0, "harness_errors": 0,
                                                             "not_run": 0, "correct": True}
    assert res["coverage"]["checked"] == 5 and not res["coverage"]["unchecked"]
    # The progress reads as two stages, in order, each counted on its own.
    head = [ln for ln in lines if not ln.startswith("  ")]
    assert head == ["quick: 2 workload(s) on interpret", "full: the other 3 runnable workload(s) on interpret"], lines
    assert lines[1].startswith("  quick 1/2: candidate on n=50: PASSED") and lines[-1].startswith("  full 3/3: ")


def test_a_kernel_wrong_on_a_quick_workload_is_not_checked_on_the_others(project):
    wrong = (project / "kernels/scale/kernel.py").read_text().replace("MASK = True", "MASK = False")
    target, backend, res, lines = bench(project, wrong)
    assert len(backend.jobs) == 1
    assert not res["correct"] and list(res["stages"]) == ["quick"]  # no full stage: it was never reached
    cand = res["stages"]["quick"]["workloads"]["candidate"]
    assert {w["status"] for w in cand.values()} <= {"INCORRECT_NUMERICAL", "PASSED"}
    assert "INCORRECT_NUMERICAL" in {w["status"] for w in cand.values()}
    assert res["coverage"]["checked"] == 2
    assert [u["reason"] for u in res["coverage"]["unchecked"]] == \
        ["not reached: an earlier stage found the candidate incorrect"] * 3
    assert not any(ln.startswith("full") or "NOT_RUN" in ln for ln in lines), lines
