"""How steady the trunk's kernel is as the parent, from the loop runs kept under benchmarks/results/.

    python benchmarks/parent_drift_history.py [--json]

For every experiment that followed a keep in a `loop_gpu.py` run (its `loop_*.json`), each workload's
parent latency now over the kept experiment's candidate latency then: the figures `[bench] parent_drift`
(loop/drift.py) is set against. Prints the count, the worst single workload and the worst geometric mean.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _geomean(xs) -> float:
    xs = list(xs)
    return math.exp(sum(map(math.log, xs)) / len(xs))


def drifts() -> list[dict]:
    out, seen = [], set()
    for f in sorted(RESULTS.rglob("loop_*.json")):
        try:
            exps = json.loads(f.read_text()).get("experiments") or []
        except (OSError, ValueError, AttributeError):
            continue
        kept = None
        for e in exps:
            lat = e.get("latency_us") or {}
            if kept is not None and lat and e.get("commit") not in seen:
                then = kept.get("latency_us") or {}
                rs = {u: lat[u]["parent"] / then[u]["candidate"] for u in lat
                      if u in then and (lat[u] or {}).get("parent") and (then[u] or {}).get("candidate")}
                if rs:
                    seen.add(e.get("commit"))
                    worst = max(rs, key=rs.get)
                    cand = [lat[u]["candidate"] / then[u]["candidate"] for u in rs if lat[u].get("candidate")]
                    out.append({"run": str(f.relative_to(RESULTS)), "experiment": e.get("experiment"),
                                "geomean": _geomean(rs.values()), "worst": rs[worst], "worst_uuid": worst,
                                "decision": e.get("decision"), "ratio": e.get("ratio"),
                                "candidate_vs_then": _geomean(cand) if len(cand) == len(rs) else None})
            if e.get("decision") == "keep":
                kept = e
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    d = drifts()
    if a.json:
        print(json.dumps(d, indent=1))
        return 0
    if not d:
        print("no experiment after a keep with per-workload latencies")
        return 1
    w = max(d, key=lambda r: r["worst"])
    g = max(d, key=lambda r: r["geomean"])
    print(f"{len(d)} experiments after a keep, {len({r['run'] for r in d})} runs")
    print(f"worst single workload: {w['worst']:.4f}x its latency at the keep ({w['run']}, experiment {w['experiment']})")
    print(f"worst geometric mean: {g['geomean']:.4f}x ({g['run']}, experiment {g['experiment']})")
    # The keeps among them, against loop/drift.py's second test: a parent slower than at its keep, and a
    # candidate not 1 % faster than the parent was then (min_effect's default).
    keeps = [r for r in d if r["decision"] == "keep" and r["candidate_vs_then"] is not None]
    blocked = [r for r in keeps if r["geomean"] > 1.0 and r["candidate_vs_then"] > 0.99]
    print(f"keeps after a keep: {len(keeps)}; candidate against the parent at its keep: "
          + ", ".join(f"{r['candidate_vs_then']:.4f} (ratio {r['ratio']:.4f}, drift {r['geomean']:.4f})" for r in keeps))
    print(f"of them blocked by the drift rule (parent slower, candidate not below 0.99 of the parent then): "
          f"{len(blocked)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
