"""Verdict rules, chosen by what the backend measured. A rule reads the bench result, returns a decision."""
from __future__ import annotations

import math
from typing import Any, Protocol

from autogk_git.bench import stats


class VerdictRule(Protocol):
    name: str

    def decide(self, bench: dict[str, Any], config) -> dict[str, Any]:
        """{decision: keep|revert, reason, rule, figures}"""


def first_failure(bench: dict[str, Any]) -> tuple[str, str, str] | None:
    """(stage, workload uuid, status: message) of the first incorrect workload, if any."""
    for stage, res in bench.get("stages", {}).items():
        for label, wls in res.get("workloads", {}).items():
            if label != "candidate":
                continue
            for uuid, w in wls.items():
                if w["status"] not in ("PASSED", "REFERENCE_ERROR"):
                    return stage, uuid, f"{w['status']}: {w.get('message', '')}"
    return None


class CorrectnessOnly:
    """No timing on this backend: keep a correct candidate, revert an incorrect one, and say so."""

    name = "correctness-only"

    def decide(self, bench: dict[str, Any], config) -> dict[str, Any]:
        n = len(bench.get("checked_workloads", []))
        fail = first_failure(bench)
        if bench.get("error"):
            return {"decision": "revert", "rule": self.name, "reason": bench["error"], "figures": ""}
        if fail:
            stage, uuid, why = fail
            return {"decision": "revert", "rule": self.name,
                    "reason": f"incorrect in {stage} on workload {uuid[:8]}: {why[:300]}", "figures": ""}
        return {"decision": "keep", "rule": self.name,
                "reason": f"correct on {n} workload(s); no timing on the {bench['backend']} backend, "
                          "so this verdict rests on correctness alone",
                "figures": f"correct {n}/{n}, untimed"}


class PairedRatioRule:
    """The verdict for timed backends: paired candidate/parent ratios from the ab stage, with an interval.

    keep:          correct on every checked workload, and the interval's upper bound on the candidate/parent
                   geometric-mean latency ratio is below 1 - min_effect;
    regression:    the interval's lower bound is above 1 (revert);
    inconclusive:  anything else; `[bench] inconclusive` says what to do (revert by default).
    The interval comes from bench/stats.py (Student t over rounds, Bonferroni over the looks); the rule
    re-derives the outcome from the bounds rather than trusting the worker's label.
    """

    name = "paired-ratio"

    def decide(self, bench: dict[str, Any], config) -> dict[str, Any]:
        b = config.bench
        gpu_s = float((bench.get("cost") or {}).get("gpu_s", 0.0))
        base = {"rule": self.name, "gpu_s": round(gpu_s, 3), "min_effect": b.min_effect,
                "confidence": b.confidence}
        if bench.get("error"):
            return {**base, "decision": "revert", "outcome": "error", "reason": bench["error"], "figures": ""}
        fail = first_failure(bench)
        if fail:
            stage, uuid, why = fail
            return {**base, "decision": "revert", "outcome": "incorrect",
                    "reason": f"incorrect in {stage} on workload {uuid[:8]}: {why[:300]}",
                    "figures": f"{gpu_s:.1f} GPU-s"}
        ab = (bench.get("stages", {}).get("ab") or {}).get("ab")
        if not ab or not ab.get("rounds"):
            decision = b.inconclusive
            return {**base, "decision": decision, "outcome": "inconclusive",
                    "reason": "correct, but no paired timing against a parent (first experiment, or the ab "
                              f"stage did not run); [bench] inconclusive = {b.inconclusive}",
                    "figures": f"untimed against parent, {gpu_s:.1f} GPU-s"}
        lo, hi, ratio = float(ab["ci_low"]), float(ab["ci_high"]), float(ab["ratio"])
        rounds, n_wl = int(ab["rounds"]), len(ab.get("workloads", []))
        outcome = stats.classify(lo, hi, b.min_effect)
        level = float(ab.get("level", b.confidence))
        figures = (f"ratio {ratio:.4f} [{lo:.4f}, {_fmt(hi)}] at {b.confidence:.0%} "
                   f"(per-look {level:.2%}), {rounds} rounds, {n_wl} workload(s), "
                   f"timer {ab.get('timer')}, {gpu_s:.1f} GPU-s")
        speed = (1 - ratio) * 100
        if outcome == stats.KEEP:
            decision = "keep"
            reason = (f"faster than its parent by {speed:.1f}% (geomean over {n_wl} workload(s)); the whole "
                      f"interval is below 1 - min_effect = {1 - b.min_effect:.3f}")
        elif outcome == stats.REGRESSION:
            decision = "revert"
            reason = f"slower than its parent by {-speed:.1f}%; the whole interval is above 1"
        else:
            decision = b.inconclusive
            reason = (f"inconclusive: ratio {ratio:.4f}, interval [{lo:.4f}, {_fmt(hi)}] does not clear "
                      f"1 - min_effect = {1 - b.min_effect:.3f} (stopped: {ab.get('stopped')}); "
                      f"[bench] inconclusive = {b.inconclusive}")
        return {**base, "decision": decision, "outcome": outcome, "reason": reason, "figures": figures,
                "ratio": ratio, "ci_low": lo, "ci_high": hi if math.isfinite(hi) else 1e9,
                "rounds": rounds, "n_workloads": n_wl}


def _fmt(x: float) -> str:
    return f"{x:.4f}" if math.isfinite(x) else "inf"


def rule_for(bench: dict[str, Any]) -> VerdictRule:
    if bench.get("timing"):
        return PairedRatioRule()
    return CorrectnessOnly()
