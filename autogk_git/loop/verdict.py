"""Verdict rules, chosen by what the backend measured. A rule reads the bench result, returns a decision."""
from __future__ import annotations

from typing import Any, Protocol


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


def rule_for(bench: dict[str, Any]) -> VerdictRule:
    if bench.get("timing"):
        from autogk_git.loop.paired import PairedRatioRule
        return PairedRatioRule()
    return CorrectnessOnly()
