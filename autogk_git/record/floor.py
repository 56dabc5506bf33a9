"""How far from the limit: each workload's floor and a kernel's share of it, out of one result note.

The judge times every workload against a floor: the bytes a correct kernel must move over the
device-to-device copy bandwidth it measured that day. The bytes are the target's own formula when its
inputs.py declares `floor(inputs, axes, definition)` (computed from an actual input set: the rows a
gathering kernel's indices touch, the FLOPs it cannot skip), else the generic rule (outputs once,
inputs once, or only the integer inputs of a gathering definition); bench/judge/inputs.floor_of, and
each workload's `floor_rule` says which. FLOPs are recorded (`floor_flops`), not turned into time: the
judge measures no matmul rate. It writes `floor_us` beside each timed
candidate's latency. A kernel's share of its floor is floor_us / latency_us: 1.0 would be a kernel
that moves its bytes as fast as a plain copy; 0.5 takes twice that long. Untimed results (the CPU
interpreter) have no floor, and say so by returning None.
"""
from __future__ import annotations

import math
from typing import Any


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def of(result: dict[str, Any]) -> dict[str, Any] | None:
    """{workloads: {uuid: {floor_us, floor_bytes, floor_flops, latency_us, share, parent_latency_us,
    parent_share}}, min_share, worst, parent_min_share, parent_worst, bandwidth_gbs, rule} from the ab
    stage (rule: the workloads' floor rules, distinct ones joined by " | "); None without a floor."""
    ab = ((result.get("stages") or {}).get("ab") or {})
    labels = ab.get("workloads") or {}
    cand, par = labels.get("candidate") or {}, labels.get("parent") or {}
    rows: dict[str, dict[str, Any]] = {}
    rules: list[str] = []
    for u, c in cand.items():
        if not _num(c.get("floor_us")):
            continue
        row: dict[str, Any] = {"floor_us": round(float(c["floor_us"]), 4)}
        for k in ("floor_bytes", "floor_flops"):
            if _num(c.get(k)):
                row[k] = int(c[k])
        if c.get("floor_rule") and str(c["floor_rule"]) not in rules:
            rules.append(str(c["floor_rule"]))
        if _num(c.get("latency_us")):
            row.update(latency_us=float(c["latency_us"]), share=round(c["floor_us"] / c["latency_us"], 4))
        p = par.get(u) or {}
        if _num(p.get("latency_us")):
            row.update(parent_latency_us=float(p["latency_us"]), parent_share=round(c["floor_us"] / p["latency_us"], 4))
        rows[u] = row
    if not rows:
        return None
    out: dict[str, Any] = {"workloads": rows, "bandwidth_gbs": (ab.get("ab") or {}).get("bandwidth_gbs"),
                           "rule": " | ".join(rules)}
    for key, prefix in (("share", ""), ("parent_share", "parent_")):
        have = {u: r[key] for u, r in rows.items() if key in r}
        if have:
            worst = min(have, key=have.get)
            out[f"{prefix}min_share"], out[f"{prefix}worst"] = have[worst], worst
    return out


def line(fl: dict[str, Any] | None, axes: dict[str, dict] | None = None, label: str = "") -> str:
    """`floor: 62.0% .. 93.1% of the floor over 5 workload(s), lowest on ab12cd34 (n=4096)`; "" without one."""
    if not fl or "min_share" not in fl and "parent_min_share" not in fl:
        return ""
    key = "parent_share" if label == "parent" else "share"
    shares = [r[key] for r in fl["workloads"].values() if key in r]
    if not shares:
        return ""
    worst = fl.get("parent_worst" if label == "parent" else "worst", "")
    ax = (axes or {}).get(worst) or {}
    name = f"{worst[:8]}" + (f" ({', '.join(f'{k}={v}' for k, v in ax.items())})" if ax else "")
    bw = f", copy bandwidth {fl['bandwidth_gbs']:.0f} GB/s" if _num(fl.get("bandwidth_gbs")) else ""
    return (f"{min(shares):.1%} .. {max(shares):.1%} of the floor over {len(shares)} workload(s), lowest on "
            f"{name}{bw}")


def trunk_shares(history: list[dict[str, Any]], tip: str | None = None, merged: str | None = None
                 ) -> dict[str, Any] | None:
    """The trunk's share of each workload's floor, as last measured: {shares, min_share, worst, experiment}.

    From the newest experiment with a floor: a keep's candidate is the trunk since (when `merged`, the
    tip's merged commit, is given it must be that keep), any other's parent is the trunk it was timed
    against (when `tip` is given it must be the tip). None when nothing measured the trunk's kernel."""
    for r in reversed(history):
        fl = r.get("floor") or of(r)
        if not fl:
            continue
        kept = (r.get("verdict") or {}).get("decision") == "keep"
        if kept and (merged is None or r.get("commit") == merged):
            key = "share"
        elif not kept and (tip is None or (r.get("against") or r.get("parent")) == tip):
            key = "parent_share"
        else:
            continue
        shares = {u: w[key] for u, w in fl["workloads"].items() if key in w}
        if shares:
            worst = min(shares, key=shares.get)
            return {"shares": shares, "min_share": shares[worst], "worst": worst, "experiment": r.get("experiment"),
                    "workloads": fl["workloads"], "bandwidth_gbs": fl.get("bandwidth_gbs"), "rule": fl.get("rule", "")}
    return None


def prompt_lines(history: list[dict[str, Any]]) -> list[str]:
    """What an agent is told of how far the trunk's kernel is from the limit, per workload."""
    tr = trunk_shares(history)
    if not tr:
        return []
    bw = f" over the measured copy bandwidth ({tr['bandwidth_gbs']:.0f} GB/s)" if _num(tr.get("bandwidth_gbs")) else ""
    rule = f" (floor rule: {tr['rule']})" if tr.get("rule") else ""
    lines = [f"How far from the limit (the trunk's kernel as last measured, experiment #{tr['experiment']}): each "
             f"workload's floor is the bytes it must move{bw}; share = floor / latency (1.0 = copy speed){rule}.",
             "| workload | floor_us | trunk latency_us | share of floor |", "| --- | --- | --- | --- |"]
    for u, s in sorted(tr["shares"].items(), key=lambda kv: kv[1])[:20]:
        w = tr["workloads"][u]
        lat = w.get("latency_us") if tr["shares"][u] == w.get("share") else w.get("parent_latency_us")
        lines.append(f"| {u[:8]} | {w['floor_us']:.2f} | {lat if lat is None else f'{lat:.2f}'} | {s:.1%} |")
    return lines + [""]
