"""What one run holds, read from a result note alone: its name, tags, params, metrics and time window
(no MLflow and no git here: the note is the source of truth)."""
from __future__ import annotations

from typing import Any

from autogk_git.bench.judge.status import Status

TAG_COMMIT = "autogk.commit"


def _metric_key(text: str) -> str:
    return "".join(c if c.isalnum() or c in "_-./ " else "_" for c in text)


def metrics_of(result: dict[str, Any]) -> dict[str, float]:
    """Flat metrics: per-workload errors (and latencies where timed), plus summary figures."""
    out: dict[str, float] = {"correct": 1.0 if result.get("correct") else 0.0}
    for stage, res in result.get("stages", {}).items():
        for label, wls in res.get("workloads", {}).items():
            if label != "candidate":
                continue
            for uuid, w in wls.items():
                base = _metric_key(f"{stage}.{uuid[:8]}")
                out[f"{base}.passed"] = 1.0 if w.get("status") == Status.PASSED.value else 0.0
                for k in ("max_abs_err", "max_rel_err", "latency_us", "speedup_vs_reference"):
                    if isinstance(w.get(k), (int, float)):
                        out[f"{base}.{k}"] = float(w[k])
    for k, v in (result.get("verdict") or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[f"verdict.{k}"] = float(v)
    drift = (result.get("verdict") or {}).get("parent_drift")
    if isinstance(drift, dict) and isinstance(drift.get("ratio"), (int, float)):
        out["verdict.parent_drift_ratio"] = float(drift["ratio"])  # the trunk's kernel now / at its keep
    for k, v in (result.get("cost") or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[f"cost.{k}"] = float(v)
    out.update(key_figures(result))
    return out


def key_figures(result: dict[str, Any]) -> dict[str, float]:
    """The few figures the runs table shows as columns: workloads passed, and latency where timed."""
    from autogk_git.record import ledger
    cand = {}
    for res in (result.get("stages") or {}).values():
        cand.update((res.get("workloads") or {}).get("candidate") or {})
    out = {"workloads_checked": float(len(cand)),
           "workloads_passed": float(sum(1 for w in cand.values() if w.get("status") == Status.PASSED.value))}
    lat = ledger.geomean(list(ledger.latencies(result).values()))
    if lat is not None:
        out["geomean_latency_us"] = lat
    ratio = ledger.ratio_vs_parent(result)
    if ratio is not None:
        out["ratio_vs_parent"] = ratio
    from autogk_git.record import floor
    fl = floor.of(result)  # how far from the limit: the lowest share of the floor, and each workload's
    if fl and "min_share" in fl:
        out["floor_share_min"] = float(fl["min_share"])
        for u, r in fl["workloads"].items():
            if "share" in r:
                out[f"floor_share.{_metric_key(u[:8])}"] = float(r["share"])
    for w in (result.get("profile") or {}).get("workloads") or []:  # Nsight Compute: the first kernel of each
        k = (w.get("kernels") or [{}])[0]
        for name in ("duration_us", "sm_pct", "dram_pct", "achieved_occupancy_pct"):
            if isinstance(k.get(name), (int, float)):
                out[f"profile.{_metric_key(w['uuid'][:8])}.{name}"] = float(k[name])
    return out


def run_name(result: dict[str, Any]) -> str:
    """`0003 KEEP 1a2b3c4 tune: BLOCK 64 -> 128`: number, verdict and commit read in any runs view."""
    decision = ((result.get("verdict") or {}).get("decision") or "pending").upper()
    if result.get("kind") or not isinstance(result.get("experiment"), int):
        # `pick #0001 onto other-branch: ...` is the hypothesis of a pick; a bisect's names its commit
        what = result.get("hypothesis") or f"{result.get('kind') or 'result'} of {result['commit'][:10]}"
        return f"{decision} {result['commit'][:7]} {what}"[:250]
    return f"{result['experiment']:04d} {decision} {result['commit'][:7]} {result.get('hypothesis', '')}"[:250]


def run_tags(result: dict[str, Any], judged_here: bool = True) -> dict[str, str]:
    """judged_here: whether this clone wrote the result note (repo.own_noted); `autogk.judged_here` false
    marks a run `autogk sync` logged from a note fetched from a remote, judged in another clone."""
    verdict = result.get("verdict") or {}
    return {
        "autogk.judged_here": "true" if judged_here else "false",
        TAG_COMMIT: result["commit"], "autogk.branch": result.get("branch") or "",
        "autogk.parent": result.get("parent") or "", "autogk.verdict": verdict.get("decision", ""),
        "autogk.agent": result.get("agent", ""), "autogk.backend": result.get("backend", ""),
        "autogk.number": f"{result['experiment']:04d}" if isinstance(result.get("experiment"), int) else "",
        "autogk.target": result["target"], "autogk.kind": result.get("kind") or "experiment",
        "autogk.rule": verdict.get("rule", ""), "autogk.figures": verdict.get("figures", ""),
        "mlflow.runName": run_name(result), "autogk.commit_short": result["commit"][:10],
        "mlflow.note.content": f"{verdict.get('decision', '').upper()}: {verdict.get('reason', '')}",
        **_slurm_tags(result),
    }


def _slurm_tags(result: dict[str, Any]) -> dict[str, str]:
    """Where each stage's SLURM job ran (slurm backend): `autogk.slurm.<stage>` = 'job 12 on node, GPU 0'."""
    out = {}
    for stage, res in (result.get("stages") or {}).items():
        info = res.get("slurm") or {}
        if info.get("job_id"):
            out[f"autogk.slurm.{stage}"] = (f"job {info['job_id']} on {info.get('node') or '?'}"
                                            + (f", GPU {info['gpus']}" if info.get("gpus") else "")
                                            + (f", {info['state']}" if info.get("state") not in (None, "COMPLETED") else ""))
    return out


def run_params(result: dict[str, Any]) -> dict[str, str]:
    params = {f"tunable.{k}": str(v) for k, v in (result.get("tunables") or {}).items()}
    params["hypothesis"] = (result.get("hypothesis") or "")[:500]
    return params


def bench_window(result: dict[str, Any]) -> tuple[int, int] | None:
    """(start, end) of the benchmark in epoch milliseconds, from the note: the run's Duration in the UI
    is the benchmark's wall time, not the moment it was logged (a sync after a clone logs years later)."""
    import datetime as dt
    try:
        end = dt.datetime.fromisoformat(str(result["created"])).timestamp()
    except (KeyError, ValueError):
        return None
    wall = (result.get("cost") or {}).get("bench_wall_s")
    wall = float(wall) if isinstance(wall, (int, float)) and not isinstance(wall, bool) and wall >= 0 else 0.0
    return int((end - wall) * 1000), int(end * 1000)


def trace_of(result: dict[str, Any]) -> str | None:
    """The id of the agent's conversation trace (tracking/traces.py), which the agent put in its usage."""
    tid = (result.get("cost") or {}).get("trace_id")
    return tid if isinstance(tid, str) and tid else None
