"""Which of the timed calls the judge reads, and how it checks the ones it does not.

Per round, every workload gets `calls_per_round` timed calls, each on its own input set. `verify_plan`
draws (from the judge's secret randomness, after nothing a kernel can see) how many of them have their
outputs compared with the reference's; `cross_check` compares every other timed call with the parent's
output for the same inputs, and with the reference's only where the two differ. rounds.py runs them."""
from __future__ import annotations

import random

from .calls import KernelFailure
from .checks import check_outputs, read_flags, relabel, same_bits_flag
from .inputs import reference_outputs, resolve_axes, tensor_bytes


# What the timed sets of a round may take of the device's free memory (read when the rounds start). The
# judge holds every workload's sets of a round until the next (the parent is timed on the candidate's sets
# of the round before: rounds.py), and the workload being timed holds about HELD_COPIES more of its own
# (the parent's sets, the values saved to check them unchanged, the blank copies a kernel's process fills).
# `timing_mem_mb` is a budget a workload; without this cap a large one ran the GPU out of memory on every
# experiment (H100, 2026-12-07: 8192 MB on the 23 sparse-attention workloads of ~624 MB a set).
MEM_SHARE = 0.8
HELD_COPIES = 3


def set_bytes(job: dict, wl: dict) -> int:
    """Bytes of one input set and its outputs."""
    axes = resolve_axes(job["definition"], wl)
    return sum(tensor_bytes(job["definition"], axes, "inputs").values()) + \
        sum(tensor_bytes(job["definition"], axes, "outputs").values())


def calls_per_round(job: dict, wl: dict) -> int:
    """Timed calls per round, each on its own input set, within the `timing_mem_mb` budget a workload."""
    settings = job.get("settings", {})
    budget = int(settings.get("timing_mem_bytes", 1 << 30))
    return max(2, min(int(settings.get("reps", 30)), budget // max(1, set_bytes(job, wl))))


def calls_within(job: dict, wls: list[dict], free_bytes: int | None) -> dict[str, tuple[int, int]]:
    """Per workload uuid: (timed calls a round, the calls `calls_per_round` asked for). With the device's free
    memory known, calls are taken back, one at a time from the workload whose sets hold the most, until a
    round's sets (a set and a warm-up set a call, every workload's held until the next round, HELD_COPIES
    more of the largest) fit MEM_SHARE of it; never below 2 calls, which the judge needs (rounds.py)."""
    asked = {wl["uuid"]: calls_per_round(job, wl) for wl in wls}
    calls = dict(asked)
    if free_bytes is None or not wls:
        return {u: (calls[u], asked[u]) for u in calls}
    size = {wl["uuid"]: set_bytes(job, wl) for wl in wls}
    held = {u: (calls[u] + 1) * size[u] for u in calls}
    while _peak(held.values()) > MEM_SHARE * free_bytes:
        u = max((u for u in calls if calls[u] > 2), key=lambda u: held[u], default=None)
        if u is None:
            break
        calls[u] -= 1
        held[u] -= size[u]
    return {u: (calls[u], asked[u]) for u in calls}


def _peak(held) -> int:
    """A round's most bytes from each workload's held sets: all of them, and HELD_COPIES more of the largest."""
    held = list(held)
    return sum(held) + HELD_COPIES * max(held) if held else 0


def round_bytes(job: dict, wls: list[dict], calls: dict[str, int]) -> int:
    """What a round's sets hold at most under `calls` (the sum calls_within fits): where even 2 calls a
    workload exceed MEM_SHARE of the free memory, the judge says so before it runs out of it."""
    return _peak((calls[wl["uuid"]] + 1) * set_bytes(job, wl) for wl in wls)


def verify_plan(settings: dict, uuids: list[str], rng: random.Random) -> dict:
    """How many of each round's timed calls have their outputs compared with the reference's, per
    workload: `verify_sets` in all over the first `min_rounds` rounds (rounds and calls drawn at
    random, so a kernel cannot know which of its timed calls are read), then one in every later round
    (a kernel that goes wrong after some number of calls is still read after it). Each verified call
    costs a reference call, which for a reference that loops in Python (the DSA definitions) cost
    more than the timing itself when every round verified two (H200, 2026-11-30)."""
    early = max(1, int(settings.get("min_rounds", 5)))
    plan: dict = {"early": early}
    for u in uuids:
        per_round: dict[int, int] = {}
        for _ in range(max(1, int(settings.get("verify_sets", 2)))):
            r = rng.randrange(early)
            per_round[r] = per_round.get(r, 0) + 1
        plan[u] = per_round
    return plan


def cross_check(definition: dict, base: list, cand: list, sets: list, checked: list[int], ref_cache: dict,
                reference, tolerances: dict, axes: dict) -> KernelFailure | None:
    """Every timed call the sample did not read, compared with the parent's output for the same inputs (by
    the target's own rules, the parent's output standing for the reference's); where they differ, the
    candidate's is compared with the reference's itself. So a kernel wrong on a share of its timed calls
    (right on the few a sample reads) is caught on the first such call, not with the sample's luck. Costs a
    comparison a call (and a reference call only where the two kernels disagree)."""
    rest = [k for k in range(len(sets)) if k not in checked]
    flags = read_flags([same_bits_flag(a, b) for k in rest for a, b in zip(cand[k], base[k])])
    n_out = len(definition["outputs"])
    for i, k in enumerate(rest):
        if all(flags[i * n_out:(i + 1) * n_out]):
            continue  # the very bits the parent wrote (the same code path): no rule needed
        try:
            check_outputs(definition, cand[k], base[k], tolerances, sets[k], axes)
            continue
        except KernelFailure:
            pass
        try:
            if k not in ref_cache:
                ref_cache[k] = reference_outputs(reference, sets[k])
            check_outputs(definition, cand[k], ref_cache[k], tolerances, sets[k], axes)
        except KernelFailure as e:
            return relabel(e, f"in the timed calls: timed call {k}, which the sample did not read, differs "
                              "from the parent's output for the same inputs and from the reference's")
    return None
