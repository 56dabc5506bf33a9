"""The workloads' axis values, without torch: what the loop's process (bench/stages.py) asks of the judge's
rooms before a job starts, so `autogk iterate`, the hooks and `autogk bisect` import no torch for it."""
from __future__ import annotations


def listed_axes(definition: dict, workloads: list[dict]) -> dict[str, list[int]]:
    """Every var axis's values over the workloads, sorted."""
    out: dict[str, set[int]] = {}
    for name, ax in definition["axes"].items():
        if ax.get("type") == "const":
            continue
        for w in workloads:
            v = w.get("axes", {}).get(name)
            if isinstance(v, int) and not isinstance(v, bool):
                out.setdefault(name, set()).add(v)
    return {k: sorted(v) for k, v in out.items()}
