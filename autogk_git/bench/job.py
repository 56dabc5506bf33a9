"""The job: plain JSON that every backend takes. Built here from a target and kernel sources."""
from __future__ import annotations

import math
from typing import Any

from autogk_git.bench import proofs
from autogk_git.project import Target

SCHEMA_VERSION = 1


LIMIT_KEY = "[bench] cpu_max_numel"
EXTRA_KEY = "[bench] cpu_extra_checks_max_numel"  # backends/interpret.py: light_checks


def over_limit(n: int, limit: int) -> str:
    """Why one workload is skipped on the CPU interpreter: the one wording every summary repeats."""
    return f"over {LIMIT_KEY} ({n} > {limit})"


def over_limit_summary(sizes: list[int], limit: int) -> str:
    """`3 workload(s) over [bench] cpu_max_numel (up to 4096 > 500)`: the largest is the limit that admits all."""
    return f"{len(sizes)} workload(s) over {LIMIT_KEY} ({'up to ' if len(sizes) > 1 else ''}{max(sizes)} > {limit})"


def workload_label(uuid: str, axes: dict[str, dict[str, Any]] | None) -> str:
    """A workload as a person reads it: its axes (`batch_size=250`), from {uuid: axes} of the target's
    workloads; with the uuid's head where another workload has the same axes; the head alone without axes."""
    mine = (axes or {}).get(uuid)
    if not mine:
        return uuid[:8]
    text = ", ".join(f"{k}={v}" for k, v in mine.items())
    twins = [u for u, a in (axes or {}).items() if a == mine and u != uuid]
    return f"{text} ({uuid[:8]})" if twins else text


def numel(definition: dict[str, Any], workload: dict[str, Any]) -> int:
    """Input elements of one workload: its size, for picking smallest/largest and CPU limits."""
    axes = {n: a["value"] for n, a in definition["axes"].items() if a.get("type") == "const"}
    axes.update(workload.get("axes", {}))
    total = 0
    for spec in definition["inputs"].values():
        shape = spec.get("shape")
        if shape:
            total += math.prod(int(axes.get(d, 1)) for d in shape)
    return total


def quick_subset(definition: dict[str, Any], workloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The smallest and the largest workload."""
    ordered = sorted(workloads, key=lambda w: numel(definition, w))
    return ordered[:1] if len(ordered) == 1 else [ordered[0], ordered[-1]]


def stride_subset(workloads: list[dict[str, Any]], stride: int) -> list[dict[str, Any]]:
    """Every stride-th workload in file order: deterministic, so it is the same for every experiment."""
    return workloads[::max(1, stride)]


def settings_for(config) -> dict[str, Any]:
    """The timing and checking settings every job carries, from the config."""
    b = config.bench
    return {"trials": b.trials, "reps": b.reps, "warmup": b.warmup, "timer": b.timer,
            "min_rounds": b.min_rounds, "max_rounds": b.max_rounds, "wide_rounds": b.wide_rounds,
            "min_effect": b.min_effect, "confidence": b.confidence, "guard": b.guard,
            "timing_mem_bytes": b.timing_mem_mb << 20, "clock_null_window": b.clock_null_window,
            "timed_stress": b.timed_stress}


def start_setting(config) -> dict[str, Any]:
    """The job's `kernel_start` and `judge_start`, where the config chose them (auto: the judge's own
    default, forks.how; the runner's, a judge template)."""
    b = config.bench
    return {k: v for k, v in (("kernel_start", b.kernel_start), ("judge_start", b.judge_start)) if v != "auto"}


def timed_settings(config) -> dict[str, Any]:
    """What every timed backend adds to a job, from the config, so their results compare."""
    b = config.bench
    return {"timed": True, "device": "cuda", "min_rounds": b.min_rounds, "max_rounds": b.max_rounds,
            "wide_rounds": b.wide_rounds, "min_effect": b.min_effect, "confidence": b.confidence,
            "timer": b.timer, "guard": b.guard,
            **start_setting(config)}


def make_job(target: Target, stage: str, sources: dict[str, dict[str, str]],
             workloads: list[dict[str, Any]], settings: dict[str, Any], seed: int) -> dict[str, Any]:
    generator = target.generator_source()
    # The target's fast reference, only where it was proven equal to the definition's on every workload
    # of this job (bench/refproof.py); otherwise the judge runs the definition's own.
    fast = proofs.for_job(target.definition, target.workloads, target.dir, generator, workloads)
    return {
        "version": SCHEMA_VERSION,
        "stage": stage,
        "definition": target.definition,
        "workloads": workloads,
        "sources": sources,
        "generator": generator,
        **({"fast_reference": fast} if fast else {}),
        "blob_root": str(target.dir),
        "settings": settings,
        "seed": seed,
    }



