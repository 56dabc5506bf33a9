"""Wall seconds by phase of this job: the ab summary's `phases`, so a slow experiment says where its time went.
start, check, inputs, timed and verify partition the judge's time; `stop` (stopping every other process of
the job's kernels for a time request, and continuing them after: kernels.others_stopped) is part of
`timed` and `inputs`, shown apart."""
from __future__ import annotations

import time

PHASES: dict[str, float] = {}


def phase(name: str, since: float) -> float:
    now = time.perf_counter()
    PHASES[name] = PHASES.get(name, 0.0) + now - since
    return now
