"""The stages of one experiment's benchmark: quick (correctness gate), stride (timed screen), ab or full.

Each stage is one job on the backend, but for the untimed quick and full, which share one (and so
share one `[bench] timeout_s`). A stage that finds the candidate incorrect ends the run: no
time is spent timing a wrong kernel. Timed against a parent (objective not `contest`), the whole
benchmark is the ab job alone, which screens the candidate on the quick workloads itself first. The subsets (quick, stride) only screen; what a verdict rests on
covers every workload the backend can run: the ab stage checks and times all of them against the
parent, and where nothing is timed the full stage checks the ones quick did not. `coverage` in the
result says which workloads were checked and timed, and why any other was not.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from autogk_git.bench.job import make_job, quick_subset, settings_for, stride_subset, workload_label
from autogk_git.bench.judge.status import HARNESS, Status
from autogk_git.bench.judge.axes import listed_axes
from autogk_git.project import Target

Progress = Callable[[str], None]
Sources = dict[str, str]  # {file name beside kernel.py: text}: one kernel's files (record/kernels.sources_at)


# Statuses that say the harness, not the kernel, failed (inputs or the reference could not be made).
# Not the kernel's fault, but never a pass: a candidate nobody could check is not a correct one.
HARNESS_STATUSES = tuple(s.value for s in HARNESS)


def is_harness(status: str) -> bool:
    return status in HARNESS_STATUSES or status.startswith("HARNESS")


def summarize(workloads: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Counts of one label's statuses; correct only when every workload PASSED."""
    statuses = [w["status"] for w in workloads.values()]
    passed = statuses.count(Status.PASSED.value)
    harness = sum(is_harness(s) for s in statuses)
    not_run = statuses.count(Status.NOT_RUN.value)
    return {"n": len(statuses), "passed": passed, "failed": len(statuses) - passed - harness - not_run,
            "harness_errors": harness, "not_run": not_run, "correct": passed == len(statuses)}


def run_stage(backend, target: Target, stage: str, sources: dict[str, dict[str, str]],
              workloads: list[dict[str, Any]], config, seed: int,
              progress: Progress | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return run_stages(backend, target, {stage: workloads}, sources, config, seed, progress, extra)[stage]


def run_stages(backend, target: Target, parts: dict[str, list[dict[str, Any]]], sources: dict[str, dict[str, str]],
               config, seed: int, progress: Progress | None = None,
               extra: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """One job over the workloads of every part (stage name -> its workloads, in order), split back into
    one record per part. Several parts: the untimed quick gate and full check as one job, the judge
    checking the first part's workloads first (the job's `screen`) and marking the rest NOT_RUN when one
    of them fails; a part whose workloads were all NOT_RUN that way gets no record, as a stage never run.
    The first part's record carries the job's figures (attempts, GPU seconds); each names where it ran
    (the GPU, the SLURM job)."""
    t0 = time.time()
    names = list(parts)
    workloads = [w for wls in parts.values() for w in wls]
    part_of = {w["uuid"]: name for name, wls in parts.items() for w in wls}
    settings = {**settings_for(config), **(extra or {})}
    if len(parts) > 1:
        settings["screen"] = [w["uuid"] for w in parts[names[0]]]
    job = make_job(target, names[0], sources, workloads, settings, seed)
    on_progress = None
    ended: dict[str, float] = {}  # part -> when its last workload ended
    if progress is not None:
        total = {name: len(wls) * len(sources) for name, wls in parts.items()}
        done = dict.fromkeys(names, 0)
        axes = {w["uuid"]: w.get("axes") or {} for w in target.workloads}

        def on_progress(label: str, uuid: str, status: str, elapsed_s: float) -> None:
            stage = part_of.get(uuid, names[0])
            name = workload_label(uuid, axes)
            if status.startswith("checked:"):  # a timed job's check, before its rounds
                progress(f"  {stage}: {label} checked on {name}: {status.split(':', 1)[1]} ({elapsed_s:.1f} s)")
                return
            if label in ("round", "queue"):  # a timed job's round; a queued job's state (slurm)
                progress(f"  {stage}: {status} ({elapsed_s:.1f} s)")
                return
            if status == Status.NOT_RUN.value:  # after a failed screen: said once, by the verdict
                return
            if stage != names[0] and not done[stage]:
                progress(f"{stage}: the other {len(parts[stage])} runnable workload(s) on {backend.name}")
            done[stage] += 1
            ended[stage] = time.time()
            progress(f"  {stage} {done[stage]}/{total[stage]}: {label} on {name}: {status} ({elapsed_s:.1f} s)")
    out = backend.run(job, config.bench.timeout_s, on_progress=on_progress)
    t_end = time.time()
    res: dict[str, dict[str, Any]] = {}
    start = t0
    for i, name in enumerate(names):
        mine = {u for u, p in part_of.items() if p == name}
        labels = {label: {u: r for u, r in w.items() if u in mine} for label, w in out["labels"].items()}
        if i and all(r.get("status") == Status.NOT_RUN.value for w in labels.values() for r in w.values()):
            continue  # never reached: the screen failed
        stop = t_end if i == len(names) - 1 or name not in ended else max(ended[name], start)
        stage_res = {"workloads": labels, "environment": out["environment"],
                     "attempts": out["attempts"] if i == 0 else 0, "elapsed_s": round(stop - start, 3)}
        start = stop
        for key in ("timing", "ab", "gpu_s", "gpu", "slurm", "spent_s", "kernel_starts"):
            if key in out and (i == 0 or key in ("gpu", "slurm")):  # where it ran: every part; figures: once
                stage_res[key] = out[key]
        stage_res["summary"] = {label: summarize(w) for label, w in labels.items()}
        res[name] = stage_res
    return res


def benchmark(target: Target, backend, candidate: Sources, parent: Sources | None,
              config, seed: int, progress: Progress = lambda s: None) -> dict[str, Any]:
    """Run the stages for candidate (against parent where the backend times) and return them.

    A keep is decided on every workload the backend can run; the subsets only screen early:
      quick   the smallest and the largest workload: a cheap correctness gate;
      stride  (timed backends without a parent, or `objective = "contest"`, whose score needs the
              reference's time on each workload) every k-th (under contest: every) workload timed
              against the reference: a screen that may reject, never keep;
      ab      (timed, with a parent) parent and candidate checked and timed, paired, on EVERY runnable
              workload; without contest it is the only job: it runs the quick gate itself first, and
              checks the parent (judged in full when it was kept) on one input set;
      full    (otherwise) correctness on every runnable workload the stages above did not check;
              untimed, in the quick gate's own job (run_stages), reached only when the gate passed.

    The caller hands both kernels' sources: bench never reads git (the loop resolves them).
    """
    definition, all_wl = target.definition, target.workloads
    usable, skipped = backend.eligible(definition, all_wl)
    stages: dict[str, Any] = {}
    result: dict[str, Any] = {"backend": backend.name, "timing": backend.timing, "skipped": skipped,
                              "stages": stages, "workload_axes": {w["uuid"]: w.get("axes", {}) for w in all_wl}}
    if not usable:
        result.update(correct=False, error="no workload can run on this backend", environment={},
                      checked_workloads=[], coverage=coverage(all_wl, usable, skipped, stages, backend.timing))
        return result
    cand = {"candidate": candidate}
    contest = getattr(config.bench, "objective", "geomean") == "contest"
    quick = quick_subset(definition, usable)
    # Timed against a parent (and no reference times needed): ONE job. The judge screens the candidate
    # on the quick workloads first and stops there if it fails; the parent, the trunk's tip judged in
    # full when it was kept, is checked on one input set. Each separate stage would cost another
    # judge, two kernel processes, their imports and compiles.
    # Every stage's judge tries shapes between and past the values of every runnable workload, not
    # only those of its own subset (judge/stress.py).
    listed = {"listed_axes": listed_axes(definition, usable)}
    one_job = bool(backend.timing and parent and not contest)
    correct = True
    if not backend.timing:
        # Untimed: the quick gate and the full check are ONE job (one judge, one kernel process, one import
        # of torch and of the kernel, instead of two); the judge stops at the quick workloads when one fails.
        qids = {w["uuid"] for w in quick}
        rest = [w for w in usable if w["uuid"] not in qids]
        progress(f"quick: {len(quick)} workload(s) on {backend.name}")
        parts = {"quick": quick, **({"full": rest} if rest else {})}
        stages.update(run_stages(backend, target, parts, cand, config, seed, progress, listed))
        correct = all(st["summary"]["candidate"]["correct"] for st in stages.values())
    plan = [] if one_job or not backend.timing else [("quick", quick)]
    if backend.timing and not one_job:
        plan.append(("stride", list(usable) if contest else stride_subset(usable, config.bench.stride)))
    for name, wls in plan:
        progress(f"{name}: {len(wls)} workload(s) on {backend.name}")
        stages[name] = run_stage(backend, target, name, cand, wls, config, seed, progress, listed)
        correct = stages[name]["summary"]["candidate"]["correct"]
        if not correct:
            break
    if correct and backend.timing and parent:
        sources = {"parent": parent, **cand}
        extra = {**listed, **({"screen": [w["uuid"] for w in quick], "parent_light": True} if one_job else {})}
        progress(f"ab: parent vs candidate on all {len(usable)} runnable workload(s)"
                 + (f", the candidate screened on {len(quick)} first" if one_job else ""))
        stages["ab"] = run_stage(backend, target, "ab", sources, usable, config, seed, progress, extra)
        correct = stages["ab"]["summary"]["candidate"]["correct"]
    elif correct and backend.timing:
        seen = _checked(stages)
        rest = [w for w in usable if w["uuid"] not in seen]
        if rest:
            progress(f"full: the other {len(rest)} runnable workload(s) on {backend.name}")
            stages["full"] = run_stage(backend, target, "full", cand, rest, config, seed, progress, listed)
            correct = stages["full"]["summary"]["candidate"]["correct"]
    result["correct"] = correct
    gpu_s = sum(s.get("gpu_s", 0.0) for s in stages.values())
    result["cost"] = {"gpu_s": round(gpu_s, 3)} if backend.timing else {}
    result["environment"] = next(iter(stages.values()))["environment"] if stages else {}
    result["checked_workloads"] = sorted(_checked(stages))
    result["coverage"] = coverage(all_wl, usable, skipped, stages, backend.timing)
    return result


def _checked(stages: dict[str, Any]) -> set[str]:
    return {u for s in stages.values() for u, w in s["workloads"].get("candidate", {}).items()
            if w.get("status") != Status.NOT_RUN.value}


def coverage(all_wl: list[dict[str, Any]], usable: list[dict[str, Any]], skipped: list[dict[str, Any]],
             stages: dict[str, Any], timed: bool) -> dict[str, Any]:
    """Which workloads the candidate was checked (and timed) on, and why the others were not."""
    checked = _checked(stages)
    unchecked = [{"uuid": s["uuid"], "reason": s["reason"]} for s in skipped]
    unchecked += [{"uuid": w["uuid"], "reason": "not reached: an earlier stage found the candidate incorrect"}
                  for w in usable if w["uuid"] not in checked]
    cov: dict[str, Any] = {"total": len(all_wl), "runnable": len(usable), "checked": len(checked),
                           "unchecked": unchecked}
    # Checked on one N(0,1) set only (the CPU interpreter's largest workloads: backends/interpret.py).
    light = sorted({u for s in stages.values() for u, w in s["workloads"].get("candidate", {}).items()
                    if w.get("extra_checks")})
    if light:
        cov["light"] = light
    if timed:
        ab_stage = stages.get("ab") or {}
        timed_ids = {w["uuid"] for w in (ab_stage.get("ab") or {}).get("workloads", [])}
        parent = ab_stage.get("workloads", {}).get("parent", {})
        cand = ab_stage.get("workloads", {}).get("candidate", {})
        untimed = []
        for w in usable:
            u = w["uuid"]
            if u in timed_ids:
                continue
            if parent.get(u, {}).get("status", Status.PASSED.value) != Status.PASSED.value:
                why = f"the parent is {parent[u]['status']} here: nothing to pair against"
            elif cand.get(u, {}).get("status", Status.PASSED.value) != Status.PASSED.value:
                why = f"the candidate is {cand[u]['status']} here"
            else:
                why = "no paired timing (no ab stage: no parent, or an earlier stage stopped the run)"
            untimed.append({"uuid": u, "reason": why, "parent_failed": u in parent and parent[u]["status"] != Status.PASSED.value})
        cov.update(timed=len(timed_ids), untimed=untimed)
    return cov
