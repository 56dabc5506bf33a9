"""Figures out of one result note, timed or not: per-workload latency, the ratio against the parent."""
from __future__ import annotations

import math
from typing import Any


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if _num(v) and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def latencies(result: dict[str, Any], label: str = "candidate") -> dict[str, float]:
    """{workload uuid: latency_us} of one label, from the most paired stage that has any."""
    stages = result.get("stages") or {}
    for name in ("ab", "stride", *stages):
        wls = ((stages.get(name) or {}).get("workloads") or {}).get(label) or {}
        lat = {u: float(w["latency_us"]) for u, w in wls.items() if _num(w.get("latency_us"))}
        if lat:
            return lat
    return {}


RATIO_KEYS = ("geomean_ratio", "ratio", "ratio_geomean", "ratio_median")


def ratio_vs_parent(result: dict[str, Any]) -> float | None:
    """Candidate/parent geomean latency ratio: the verdict's figure when it has one, else computed."""
    v = result.get("verdict") or {}
    for k in RATIO_KEYS:
        if _num(v.get(k)):
            return float(v[k])
    ab = (((result.get("stages") or {}).get("ab") or {}).get("workloads") or {}).get("candidate") or {}
    r = geomean([w.get("ratio_vs_parent") for w in ab.values()])
    if r is not None:
        return r
    cand, par = latencies(result), latencies(result, "parent")
    common = [u for u in cand if u in par and par[u] > 0]
    return geomean([cand[u] / par[u] for u in common]) if common else None


def judged_all(res: dict[str, Any]) -> bool:
    """Whether a result judged its kernel on every workload of the target (checked, and timed where timed).

    Read from the verdict's coverage (loop/verdict.py); a result from before coverage was recorded
    judged at most a subset, so it does not count."""
    cov = (res.get("verdict") or {}).get("coverage") or {}
    return bool(cov.get("complete")) and bool(res.get("correct"))


def coverage_text(res: dict[str, Any]) -> str:
    cov = (res.get("verdict") or {}).get("coverage") or {}
    if not cov:
        return "coverage not recorded (an older result)"
    text = f"{cov.get('checked', 0)} of {cov.get('total', 0)} workloads checked"
    if "timed" in cov:
        text += f", {cov['timed']} timed"
    return text
