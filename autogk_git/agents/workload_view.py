"""The workload inspector: plain statistics of a target's workloads, written as an artifact agents read.

No LLM and no GPU: axis ranges, input sizes in elements and bytes, and a size regime per workload.
The regimes are rough guides for a kernel writer, not measurements:
    launch-bound   < 1 MiB moved: the launch path dominates; fewer, fatter programs help
    cache-resident < 64 MiB moved: fits a large GPU's L2 (H100/H200 ~50 MiB, B200 ~126 MiB)
    memory-bound   otherwise: DRAM bandwidth decides; coalescing and vector width matter
"""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
               "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1}
REGIMES = ((1 << 20, "launch-bound"), (64 << 20, "cache-resident"), (math.inf, "memory-bound"))


def _axes_of(definition: dict[str, Any], wl: dict[str, Any]) -> dict[str, int]:
    axes = {n: int(a["value"]) for n, a in definition["axes"].items() if a.get("type") == "const" and "value" in a}
    axes.update({k: int(v) for k, v in wl.get("axes", {}).items()})
    return axes


def _size(definition: dict[str, Any], section: str, axes: dict[str, int]) -> tuple[int, int]:
    elems = nbytes = 0
    for spec in definition.get(section, {}).values():
        shape = spec.get("shape")
        n = math.prod(axes.get(d, 1) for d in shape) if shape else 1
        elems += n
        nbytes += n * DTYPE_BYTES.get(spec.get("dtype", ""), 4)
    return elems, nbytes


def regime(nbytes: int) -> str:
    return next(name for limit, name in REGIMES if nbytes < limit)


def inspect_target(target) -> dict[str, Any]:
    """Statistics of a Target's definition and workloads (a JSON-able dict)."""
    definition, workloads = target.definition, target.workloads
    rows = []
    for wl in workloads:
        axes = _axes_of(definition, wl)
        in_e, in_b = _size(definition, "inputs", axes)
        out_e, out_b = _size(definition, "outputs", axes)
        kinds = {k: v.get("type", "random") for k, v in (wl.get("inputs") or {}).items()}
        rows.append({"uuid": wl["uuid"], "axes": {k: v for k, v in axes.items()
                                                 if definition["axes"].get(k, {}).get("type") != "const"},
                     "input_elements": in_e, "bytes_moved": in_b + out_b, "regime": regime(in_b + out_b),
                     "input_kinds": kinds})
    var_axes = {}
    for name, spec in definition["axes"].items():
        if spec.get("type") == "const":
            continue
        vals = [r["axes"][name] for r in rows if name in r["axes"]]
        if vals:
            var_axes[name] = {"min": min(vals), "max": max(vals), "median": statistics.median(vals),
                              "distinct": len(set(vals)),
                              "powers_of_two": sum(v > 0 and v & (v - 1) == 0 for v in vals)}
    const_axes = {n: a.get("value") for n, a in definition["axes"].items() if a.get("type") == "const"}
    regimes: dict[str, int] = {}
    for r in rows:
        regimes[r["regime"]] = regimes.get(r["regime"], 0) + 1
    sizes = [r["bytes_moved"] for r in rows]
    return {"target": target.name, "definition": definition.get("name"), "workloads": len(rows),
            "const_axes": const_axes, "var_axes": var_axes,
            "inputs": {k: {"shape": v.get("shape"), "dtype": v.get("dtype")} for k, v in definition["inputs"].items()},
            "outputs": {k: {"shape": v.get("shape"), "dtype": v.get("dtype")} for k, v in definition["outputs"].items()},
            "bytes_moved": {"min": min(sizes), "max": max(sizes), "median": statistics.median(sizes)},
            "regimes": regimes, "per_workload": rows}


def _mib(n: float) -> str:
    return f"{n / (1 << 20):.3g} MiB" if n >= 1 << 20 else f"{n / 1024:.3g} KiB"


def render(stats: dict[str, Any]) -> str:
    """The report as markdown, short enough to put in a prompt."""
    lines = [f"# Workloads of {stats['target']} ({stats['workloads']} workloads)", ""]
    if stats["const_axes"]:
        lines.append("Constant axes: " + ", ".join(f"{k}={v}" for k, v in stats["const_axes"].items()))
    for name, a in stats["var_axes"].items():
        lines.append(f"Axis {name}: {a['min']} .. {a['max']} (median {a['median']}, {a['distinct']} distinct, "
                     f"{a['powers_of_two']} powers of two)")
    b = stats["bytes_moved"]
    lines.append(f"Bytes moved per call (inputs + outputs): {_mib(b['min'])} .. {_mib(b['max'])} "
                 f"(median {_mib(b['median'])})")
    lines.append("Regimes: " + ", ".join(f"{k} {v}" for k, v in sorted(stats["regimes"].items())) +
                 "  (launch-bound < 1 MiB, cache-resident < 64 MiB, else memory-bound; rough guides)")
    lines += ["", "| workload | axes | bytes moved | regime |", "| --- | --- | --- | --- |"]
    for r in stats["per_workload"][:40]:
        axes = ", ".join(f"{k}={v}" for k, v in r["axes"].items())
        lines.append(f"| {r['uuid'][:8]} | {axes} | {_mib(r['bytes_moved'])} | {r['regime']} |")
    if len(stats["per_workload"]) > 40:
        lines.append(f"| ... | {len(stats['per_workload']) - 40} more | | |")
    return "\n".join(lines) + "\n"


def write_artifact(project, target) -> Path:
    """Write workloads.json and workloads.md under .git/autogk/artifacts/<target>/; returns the .md path."""
    stats = inspect_target(target)
    d = project.artifact_dir(target.name)
    d.mkdir(parents=True, exist_ok=True)
    (d / "workloads.json").write_text(json.dumps(stats, indent=1))
    md = d / "workloads.md"
    # How far the trunk is from each workload's floor, as last measured (record/floor.py): a GPU fact
    # only a timed run gives, so it is absent until one has been.
    from autogk_git.record import floor
    from autogk_git.record.experiments import results
    history = results(project, target.name, own_only=True)
    near = floor.prompt_lines(history)
    # Why the kernel is slow where it is slowest: the newest Nsight Compute profile in the notes, or one line
    # saying why there is none (bench/ncu.py).
    from autogk_git.bench import ncu
    prof = ncu.view_lines(history, project.config, {r["uuid"]: r["axes"] for r in stats["per_workload"]})
    md.write_text(render(stats) + ("\n" + "\n".join(near) if near else "") + "\n" + "\n".join(prof))
    return md
