"""CPU backend: Triton's interpreter (TRITON_INTERPRET=1). Correctness only: latency is absent, never invented."""
from __future__ import annotations

import os
from typing import Any

from autogk_git.bench import runner
from autogk_git.bench.job import EXTRA_KEY, numel, over_limit, start_setting


class InterpretBackend:
    name = "interpret"
    timing = False

    def __init__(self, config) -> None:
        self.max_numel = config.bench.cpu_max_numel
        self.extra_max_numel = config.bench.cpu_extra_checks_max_numel
        self.settings = {"device": "cpu", **start_setting(config)}

    def eligible(self, definition: dict[str, Any], workloads: list[dict[str, Any]]
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        keep, skipped = [], []
        for wl in workloads:
            n = numel(definition, wl)
            if n > self.max_numel:
                skipped.append({"uuid": wl["uuid"], "reason": over_limit(n, self.max_numel)})
            else:
                keep.append(wl)
        return keep, skipped

    def run(self, job: dict[str, Any], timeout_s: float,
            on_progress: runner.OnProgress | None = None) -> dict[str, Any]:
        job = dict(job, settings={**job["settings"], **self.settings,
                                  "light_checks": light_checks(job, self.extra_max_numel),
                                  "unlisted_max_numel": unlisted_cap(job, self.extra_max_numel)})
        env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
        return runner.run_worker(job, env, timeout_s, on_progress=on_progress)


def unlisted_cap(job: dict[str, Any], limit: int) -> int:
    """Input elements an unlisted shape may have here: a quarter more than the extra checks' limit (or the
    job's smallest workload, which always gets them). The judge's own cap, a quarter more than the largest
    listed workload, would let a small workload's shape take a large one's pool into the interpreter."""
    sizes = [numel(job["definition"], w) for w in job["workloads"]] or [0]
    return int(1.25 * max(limit, min(sizes)))


def light_checks(job: dict[str, Any], limit: int) -> dict[str, str]:
    """{uuid: why} of the job's workloads the judge checks on one N(0,1) set only (checks.check_workload).

    The interpreter runs a kernel's programs one after another in Python: a workload's full battery (three
    fresh sets, the repeat, new values in the same buffers, four stress sets and an unlisted shape: ten
    calls; nine, with three stress sets, took 8 s of README command 1's 15 s an experiment at batch 250 of
    the bundled RMSNorm). What the
    extra calls catch (a kernel that remembers, one fitted to N(0,1) values, one specialised to the listed
    shapes) does not need the largest workloads: they run on every workload up to `limit` input elements
    and always on the job's smallest, and a GPU backend runs them on every workload."""
    definition, wls = job["definition"], job["workloads"]
    if not wls:
        return {}
    sizes = {w["uuid"]: numel(definition, w) for w in wls}
    smallest = min(wls, key=lambda w: sizes[w["uuid"]])["uuid"]
    return {u: f"over {EXTRA_KEY} ({n} > {limit}): one N(0,1) set, no repeat, stress sets or unlisted shape"
            for u, n in sizes.items() if n > limit and u != smallest}
