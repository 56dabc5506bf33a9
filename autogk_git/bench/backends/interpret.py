"""CPU backend: Triton's interpreter (TRITON_INTERPRET=1). Correctness only: latency is absent, never invented."""
from __future__ import annotations

import os
from typing import Any

from autogk_git.bench import runner
from autogk_git.bench.job import numel, over_limit, start_setting


class InterpretBackend:
    name = "interpret"
    timing = False

    def __init__(self, config) -> None:
        self.max_numel = config.bench.cpu_max_numel
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
        job = dict(job, settings={**job["settings"], **self.settings})
        env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
        return runner.run_worker(job, env, timeout_s, on_progress=on_progress)
