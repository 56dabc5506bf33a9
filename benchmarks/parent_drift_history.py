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
                    out.append({"run": str(f.relative_to(RESULTS)), "experiment": e.get("experiment"),
                                "geomean": math.exp(sum(map(math.log, rs.values())) / len(rs)),
                                "worst": rs[worst], "worst_uuid": worst})
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
