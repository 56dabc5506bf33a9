"""The parent held to its own past: a keep needs the trunk's kernel to run as fast, as the parent, as it
ran when it was kept.

Every verdict compares a candidate with its parent timed in the same rounds, so anything that slows the
parent's windows alone (a clock lock, slow binaries left in a cache the parent loads, another process on
the GPU during its windows, work left running into them) reads as the candidate's speedup, and every timer
agrees, the judge's clock too. The parent's own code can do it as well: a kernel that runs fast in its
own experiment and slowly afterwards (a marker in /dev/shm, which its sandbox leaves writable for CUDA, or
a clock it reads: "slow after T") is kept, then makes a no-op candidate look faster as its parent. The
judge closes each way it knows of; this check closes them together, after the fact, for the trunk's
kernels: the trunk's tip is the merge of a kept experiment, whose note
holds that kernel's per-workload latency as the candidate then. When the same kernel now runs slower as
the parent, on any one workload timed both times, by more than `[bench] parent_drift` (same backend, GPU,
driver and timer), the keep is blocked as a harness error: the comparison says nothing about the
candidate. Each workload, not only the geometric mean (which is recorded too): a parent slowed on its
largest workload alone moves the mean little and hands the candidate that workload's gain. On the H200,
over 86 experiments after a keep in 19 tuner and DSA runs (2026-11-30 to 12-04,
`benchmarks/parent_drift_history.py`), the trunk's kernel as the parent ran at most 5.1 % slower than at
its own keep on any one workload and 1.6 % as the mean, so 10 % leaves a margin for an honest machine.
Under the limit, a parent that runs slower than at its keep must not carry the whole gain: the candidate
must also beat the parent's latency then by `min_effect` (geometric mean over the same workloads), or the
keep is blocked the same way; none of the 14 keeps after a keep in those runs would have been.

Not covered: a trunk start with no kept experiment behind it (the first keep of a run), a merge whose
kernel is not the kept experiment's own (changes combined), a keep measured elsewhere (another GPU,
driver or timer: the figures are not comparable), and a parent slowed by less than the limit on every
workload under a candidate with a real gain of at least `min_effect` besides (kept, with a figure that
overstates its gain).
"""
from __future__ import annotations

from typing import Any, Callable

from autogk_git.git import repo
from autogk_git.project import Project
from autogk_git.record import figures
from autogk_git.record.experiments import load_result

DRIFT = 0.10
"""`[bench] parent_drift`'s default: how much slower than at its keep the trunk's kernel may run as the parent."""


def kept_latencies(project: Project, trunk_commit: str) -> tuple[str, dict[str, Any], dict[str, float]] | None:
    """(experiment commit, its result, {workload: latency_us}) of the kept experiment whose merge is
    `trunk_commit`, as that experiment's candidate; None where the commit is no such merge."""
    info = repo.commit_info(project.root, [trunk_commit]).get(trunk_commit) or {}
    parents = (info.get("parents") or "").split()
    if len(parents) < 2:
        return None
    prev = load_result(project, parents[1])
    if not prev or (prev.get("verdict") or {}).get("decision") != "keep":
        return None
    lat = {u: t for u, t in figures.latencies(prev).items() if t > 0}
    return (parents[1], prev, lat) if lat else None


def _where(result: dict[str, Any]) -> tuple:
    """What must match for two latencies to compare: backend, GPU, driver and the ab stage's timer."""
    env = result.get("environment") or {}
    ab = (((result.get("stages") or {}).get("ab") or {}).get("ab") or {})
    return result.get("backend"), env.get("gpu"), env.get("driver"), ab.get("timer")


def check(project: Project, against: str | None, bench: dict[str, Any], verdict: dict[str, Any],
          parent_now: dict[str, float], same_kernel: Callable[[str], bool], limit: float = DRIFT,
          min_effect: float = 0.01) -> dict[str, Any]:
    """The verdict, with `parent_drift` recorded wherever the parent's past was found (whatever the
    decision: the figures show how steady the trunk's kernels are), and a keep blocked (a harness error)
    where the parent ran more than `limit` slower than at its own keep.

    same_kernel(commit): whether the kept experiment's commit holds the parent's kernel files (a merge
    that combined changes holds another kernel, whose past says nothing about this one)."""
    if not against or limit <= 0 or not parent_now:
        return verdict
    found = kept_latencies(project, against)
    if found is None or not same_kernel(found[0]):
        return verdict
    sha, prev, then = found
    common = sorted(u for u in parent_now if u in then and parent_now[u] > 0)
    if not common or _where(prev) != _where(bench):
        return verdict
    each = {u: parent_now[u] / then[u] for u in common}
    ratio = figures.geomean(list(each.values()))
    worst = max(common, key=lambda u: each[u])
    info = {"ratio": round(ratio, 4), "worst": {"uuid": worst, "ratio": round(each[worst], 4)},
            "kept_commit": sha, "workloads": len(common), "limit": limit}
    cand = figures.latencies(bench)
    timed = [u for u in common if cand.get(u, 0) > 0]  # all of them wherever the rule could keep
    if timed:
        info["candidate_vs_then"] = round(figures.geomean([cand[u] / then[u] for u in timed]), 4)
    if verdict.get("decision") != "keep":
        return {**verdict, "parent_drift": info}
    # Each workload against the limit, not only their mean: a parent slowed on one workload alone (2x on
    # one of eleven is a mean of 1.065) hands the candidate that workload's "gain" whole.
    if each[worst] > 1.0 + limit:
        why = (f"ran {each[worst] - 1:.1%} slower on workload {worst[:8]} than when it was kept ({sha[:10]}; "
               f"{ratio - 1:+.1%} as the geometric mean over {len(common)} workload(s) timed both times), beyond "
               f"[bench] parent_drift = {limit:g}")
    # Under the limit, a parent that drifted slower must not carry the whole gain: the candidate must
    # also beat the parent's latency at its keep by min_effect (a parent 9 % slower on every workload and
    # a candidate that is the same kernel without the slowdown "gains" 8 % against it, 0 % against then).
    elif ratio > 1.0 and info.get("candidate_vs_then", 0) > 1.0 - min_effect:
        why = (f"ran {ratio - 1:.1%} slower than when it was kept ({sha[:10]}; geometric mean over {len(common)} "
               f"workload(s) timed both times), and the candidate is {info['candidate_vs_then']:.4f}x the parent's "
               f"latency at its keep, not below 1 - min_effect = {1 - min_effect:.3f}: its gain is the parent's drift")
    else:
        return {**verdict, "parent_drift": info}
    reason = (f"harness error: the parent (the trunk's kernel) {why}: something slowed the parent's windows "
              f"(another process on the GPU, the GPU's clocks, a kernel that left its mark), so the candidate's "
              f"ratio says nothing; the keep is blocked. The comparison said: {verdict.get('reason', '')}")
    return {**verdict, "decision": "revert", "outcome": "harness_error", "reason": reason, "parent_drift": info,
            "overruled_decision": "keep"}
