"""The stages of one experiment's benchmark: quick (correctness gate), stride, ab.

Each stage is one job on the backend. A stage that finds the candidate incorrect ends the run: no
time is spent timing a wrong kernel. Backends without timing run quick and stride as correctness
checks and say so; timed stages (stride against the reference, ab against the parent) belong to
backends with `timing = True`.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from autogk_git.bench.job import make_job, quick_subset, settings_for, stride_subset
from autogk_git.bench.status import Status
from autogk_git.project import Target

Progress = Callable[[str], None]
Sources = dict[str, str]  # {file name beside kernel.py: text}: one kernel's files (record/kernels.sources_at)


def summarize(workloads: dict[str, dict[str, Any]]) -> dict[str, Any]:
    statuses = [w["status"] for w in workloads.values()]
    failures = [s for s in statuses if s not in (Status.PASSED.value, Status.REFERENCE_ERROR.value)]
    return {"n": len(statuses), "passed": statuses.count(Status.PASSED.value), "failed": len(failures),
            "harness_errors": statuses.count(Status.REFERENCE_ERROR.value), "correct": not failures}


def run_stage(backend, target: Target, stage: str, sources: dict[str, dict[str, str]],
              workloads: list[dict[str, Any]], config, seed: int) -> dict[str, Any]:
    t0 = time.time()
    job = make_job(target, stage, sources, workloads, settings_for(config), seed)
    out = backend.run(job, config.bench.timeout_s)
    stage_res = {"workloads": {label: w for label, w in out["labels"].items()},
                 "environment": out["environment"], "attempts": out["attempts"],
                 "elapsed_s": round(time.time() - t0, 3)}
    for key in ("timing", "ab", "gpu_s", "gpu"):
        if key in out:
            stage_res[key] = out[key]
    stage_res["summary"] = {label: summarize(w) for label, w in out["labels"].items()}
    return stage_res


def benchmark(target: Target, backend, candidate: Sources, parent: Sources | None,
              config, seed: int, progress: Progress = lambda s: None) -> dict[str, Any]:
    """Run the stages for candidate (against parent where the backend times) and return them.

    The caller hands both kernels' sources: bench never reads git (the loop resolves them)."""
    definition, all_wl = target.definition, target.workloads
    usable, skipped = backend.eligible(definition, all_wl)
    stages: dict[str, Any] = {}
    result: dict[str, Any] = {"backend": backend.name, "timing": backend.timing, "skipped": skipped,
                              "stages": stages}
    if not usable:
        result.update(correct=False, error="no workload can run on this backend", environment={})
        return result
    cand = {"candidate": candidate}
    plan = [("quick", quick_subset(definition, usable))]
    stride = stride_subset(usable, config.bench.stride)
    quick_ids = {w["uuid"] for w in plan[0][1]}
    if backend.timing:
        plan.append(("stride", stride))
    elif any(w["uuid"] not in quick_ids for w in stride):  # untimed: check only what quick did not
        plan.append(("stride", [w for w in stride if w["uuid"] not in quick_ids]))
    correct = True
    for name, wls in plan:
        progress(f"{name}: {len(wls)} workload(s) on {backend.name}")
        stages[name] = run_stage(backend, target, name, cand, wls, config, seed)
        correct = stages[name]["summary"]["candidate"]["correct"]
        if not correct:
            break
    if correct and backend.timing and parent:
        sources = {"parent": parent, **cand}
        progress(f"ab: parent vs candidate on {len(stride)} workload(s)")
        stages["ab"] = run_stage(backend, target, "ab", sources, stride, config, seed)
    result["correct"] = correct
    gpu_s = sum(s.get("gpu_s", 0.0) for s in stages.values())
    result["cost"] = {"gpu_s": round(gpu_s, 3)} if backend.timing else {}
    result["environment"] = next(iter(stages.values()))["environment"] if stages else {}
    result["checked_workloads"] = sorted({u for s in stages.values() for u in s["workloads"].get("candidate", {})})
    return result
