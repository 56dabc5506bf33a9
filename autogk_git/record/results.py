"""The one builder of a result note: what a benchmark found about a commit, and the verdict on it.

The loop (an experiment), `autogk pick` (a picked commit on another branch) and `autogk bisect` (a
commit on the trunk) all write results built here, so every note has the same fields and a reader
(`log`, `show`, `sync`, the research agent) never guesses which writer made it. `kind` tells them
apart: absent for experiments (the first and most common writer), "pick" or "bisect" otherwise.
"""
from __future__ import annotations

import datetime as dt
import time
from typing import Any

from autogk_git import tunables
from autogk_git.record import floor

SCHEMA = 1


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def build_result(*, target: str, commit: str, parent: str | None, bench: dict[str, Any],
                 verdict: dict[str, Any] | None, kernel_src: str, parent_src: str = "",
                 experiment: int | None = None, branch: str | None = None, hypothesis: str = "",
                 agent: str = "", started: float | None = None, usage: dict[str, Any] | None = None,
                 kind: str | None = None, **extra: Any) -> dict[str, Any]:
    """A result note's JSON from a bench result (bench/stages.benchmark) and the verdict on it.

    `started` (time.time() before the benchmark) gives the wall time; `usage` (an agent's tokens and
    cost) is added to the cost; `extra` holds the writer's own fields (picked_from, why)."""
    result: dict[str, Any] = {"schema": SCHEMA}
    if kind:
        result["kind"] = kind
    result.update({
        "target": target,
        "experiment": experiment,
        "commit": commit,
        "parent": parent,
        "branch": branch,
        "hypothesis": hypothesis,
        "agent": agent,
        "tunables": tunables.values(kernel_src),
        "parent_tunables": tunables.values(parent_src),
        "backend": bench["backend"],
        "timing": bench["timing"],
        "timing_note": None if bench["timing"] else
        f"{bench['backend']} backend: correctness only, no latency measured",
        "environment": bench.get("environment", {}),
        "skipped": bench.get("skipped", []),
        "workload_axes": bench.get("workload_axes", {}),  # {uuid: axes}: readers name workloads by them
        "checked_workloads": bench.get("checked_workloads", []),
        "stages": bench["stages"],
        "correct": bench.get("correct", False),
        "verdict": verdict,
        "cost": {**({"bench_wall_s": round(time.time() - started, 3)} if started is not None else {}),
                 **bench.get("cost", {}), **(usage or {})},
        "created": now_iso(),
    })
    if bench.get("error"):
        result["error"] = bench["error"]
    fl = floor.of(result)
    if fl:
        result["floor"] = fl  # how far from the limit (record/floor.py): read by show, log, MLflow, agents
    result.update(extra)
    return result


def was_measured(result: dict[str, Any]) -> bool:
    """Whether any stage ran: False when no workload could run on the backend (over its size limit).

    Such a result says nothing about the kernel, so it does not make its configuration "tried": after
    the limit is raised, or on a GPU, the same kernel deserves a measurement."""
    return bool(result.get("stages") or result.get("checked_workloads"))
