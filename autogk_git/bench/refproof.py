"""A target's fast reference, proven equal to its definition's reference before the judge uses it.

A definition's reference is the truth, but it is often a Python loop (DSA's loop over tokens or rows,
a host sync in each), and the judge calls it on every input set: on the H200 it was most of a DSA
experiment's time (37-49 s, 2026-12-01). A target may ship a faster one: `reference.py` beside
definition.json, defining `run` with the reference's signature and outputs. It is part of the target
(read from the trunk like inputs.py, never editable by an experiment: project.JUDGE_FILES).

It is trusted only once proven: both references run on the real inputs of every workload (two input
sets from the target's generator or random data, the judge's stress sets, an unlisted shape by the
judge's rule: its midpoint, where the judge draws its own from a secret seed) and the fast one's outputs
must pass the target's own compare rules against the definition's (inputs.py's COMPARE, else by dtype,
bench/judge/rules.py), with the same shapes and dtypes. The proof runs in a process of its own, on the
GPU when this machine has one; on the CPU, a workload above the size limit is skipped as the interpret
backend skips it, and the record says so.

The record (read back by bench/proofs.py) is cached by the content hash of the definition, reference.py, the workloads and inputs.py
(any change to one proves again), under ~/.cache/autogk/reference-proofs: content-addressed, so any
project holding the same target files reuses it. A job (bench/job.py) carries the fast reference only
when every one of its workloads is proven and none disagreed; otherwise the judge runs the definition's
reference, slower and still right. A fast reference that disagrees is never used, and `check` warns, naming
the workload and the next command (a warning, not a refusal: the definition's reference still judges
every experiment correctly, only slower).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from autogk_git.bench import isolated
from autogk_git.bench.job import numel
from autogk_git.bench.proofs import FILE, VERSION, device_kind, key, proof_dir, records, source_in, standing
from autogk_git.errors import TargetError
from autogk_git.procs import no_gc
SEEDS = (1234, 4321)  # two input sets a workload: the second catches state kept between calls


def check(definition: dict[str, Any], workloads: list[dict[str, Any]], folder: Path, generator: str | None,
          where: str, timeout_s: float, cpu_max_numel: int, cache: bool = True, isolate: bool = True,
          say=None) -> str:
    """Prove the target's fast reference (when it has one) and return a line saying what the judge will
    use: a warning naming the workload and the fix when it disagrees with the definition's.

    cache: a record of this content on this device kind stands (it is made again only when one of the
    files changes). isolate=False runs in this process (tests of the comparison itself)."""
    fast = source_in(folder)
    if fast is None:
        return ""
    k = key(definition, workloads, fast, generator)
    device = device_kind()
    path = proof_dir() / f"{k}-{device}.json"
    rec = None
    if cache and path.exists():
        rec = next((r for r in records(k) if r.get("device") == device), None)
    if rec is None:
        if say:
            say(f"proving {where_fast(where)} equal to the definition's reference on {len(workloads)} workload(s) "
                f"({device})")
        job = {"definition": definition, "workloads": workloads, "fast": fast, "generator": generator,
               "blob_root": str(folder), "limit_s": timeout_s, "cpu_max_numel": cpu_max_numel}
        try:
            rec = _isolated(job, where, timeout_s * 2 * len(SEEDS) * max(1, len(workloads))) if isolate else prove(job)
        except TargetError as e:  # nothing recorded: the next check tries again; meanwhile the definition's judges
            return f"warning: {e.message}; the judge uses the definition's reference ({e.hint})"
        rec.update(key=k, made=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(rec, indent=1) + "\n")
        tmp.replace(path)
    return verdict_line(rec, records(k), workloads, where, path)


def where_fast(where: str) -> str:
    """The fast reference's name beside the definition file named by where."""
    return where[: -len("definition.json")] + FILE if where.endswith("definition.json") else FILE


def verdict_line(rec: dict[str, Any], recs: list[dict[str, Any]], workloads: list[dict[str, Any]], where: str,
                 path: Path) -> str:
    name = where_fast(where)
    proven, differs = standing(recs)
    if differs:
        # Said, not raised: the definition's reference is the truth and still judges, only slower; a
        # broken accelerator should not stop a loop that can run without it.
        uuid, why = next(iter(differs.items()))
        return (f"warning: fast reference {name} disagrees with the definition's reference on workload "
                f"{uuid[:8]}: {why}; it is NOT used: every job is judged with the definition's reference "
                f"(record: {path}). Fix {name} (or delete it) and commit it on the trunk; `autogk bench` (and "
                "`autogk iterate`, at its start) proves it again")
    missing = [w for w in workloads if w["uuid"] not in proven]
    errs = [v["max_abs_err"] for v in rec.get("workloads", {}).values() if v.get("max_abs_err") is not None]
    worst = f", max abs difference {max(errs):.3g}" if errs else ""
    if not missing:
        return (f"fast reference {name} proven equal to the definition's on all {len(workloads)} workload(s) "
                f"({rec.get('device')}{worst}): the judge uses it")
    skipped = ", ".join(f"{w['uuid'][:8]}" for w in missing[:4]) + (" ..." if len(missing) > 4 else "")
    return (f"note: fast reference {name} proven on {len(workloads) - len(missing)} of {len(workloads)} workload(s) "
            f"({rec.get('device')}{worst}); not on {skipped} ({_why_skipped(rec, missing)}): a job with any of "
            "those is judged with the definition's reference. To prove them: `autogk bench` on a machine with a "
            "GPU (`autogk iterate` there proves them at its start)")


def _why_skipped(rec: dict[str, Any], missing: list[dict[str, Any]]) -> str:
    got = rec.get("workloads", {})
    whys = {got.get(w["uuid"], {}).get("reason") or got.get(w["uuid"], {}).get("why", "not proven yet") for w in missing}
    return "; ".join(sorted(whys))[:200]


def _isolated(job: dict[str, Any], where: str, timeout_s: float) -> dict[str, Any]:
    """The proof's record from a process of its own (a reference may crash or hang), killed at timeout_s."""
    ended = isolated.run("refproof", job, timeout_s)
    if ended.timed_out:
        raise TargetError(f"{where_fast(where)}: the proof against the definition's reference did not finish "
                          f"within {timeout_s + isolated.STARTUP_S:g} s",
                          "raise [bench] reference_timeout_s in .autogk.toml, or delete reference.py to judge "
                          "with the definition's reference")
    if ended.record is None:
        tail = ended.last_line()
        raise TargetError(f"{where_fast(where)}: the proof's process ended (exit code {ended.returncode}) before "
                          f"writing its record" + (f": {tail}" if tail else ""),
                          "a reference must return its outputs; fix reference.py (or the definition's reference)")
    return ended.record


# ------------------------------------------------------------------------------------------------
# The proof's own process: torch and the judge's input maker and rules, never the project's files.
# ------------------------------------------------------------------------------------------------

def entry(argv: list[str]) -> int:
    Path(argv[0]).write_text(json.dumps(prove({**json.loads(sys.stdin.read()), "isolated": True})))
    return 0


def prove(job: dict[str, Any]) -> dict[str, Any]:
    """Both references on every workload this device can run; the record ({"device", "workloads": {uuid:
    {"status": agrees | differs | error | skipped, "why", "sets", "max_abs_err", "slow_s", "fast_s"}}})."""
    import types

    with no_gc():
        import torch

        from autogk_git.bench.judge import rules, stress
        from autogk_git.bench.judge.inputs import Inputs, load_reference

    definition, workloads = job["definition"], job["workloads"]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = None
    if job.get("generator"):
        gen = types.ModuleType("autogk_inputs")
        exec(compile(job["generator"], "inputs.py", "exec"), gen.__dict__)
    slow = load_reference(definition)
    fast = load_reference(definition, {"file": FILE, "source": job["fast"]})
    compare = rules.declared(gen)
    maker = Inputs({"definition": definition, "blob_root": job.get("blob_root")}, device, gen)
    limit = int(job.get("cpu_max_numel") or 0)
    runnable = [w for w in workloads if device != "cpu" or not limit or numel(definition, w) <= limit]
    listed = stress.listed_axes(definition, runnable) if runnable else {}
    out: dict[str, Any] = {}
    for i, wl in enumerate(workloads):
        if wl not in runnable:
            out[wl["uuid"]] = {"status": "skipped", "reason": "over the CPU size limit, as the interpret backend skips it",
                               "why": f"{numel(definition, wl)} input elements > [bench] cpu_max_numel {limit}"}
            continue
        out[wl["uuid"]] = _one(job, wl, i, maker, slow, fast, compare, gen, listed, device, torch, rules, stress)
    return {"device": device, "method": VERSION, "workloads": out}


def _one(job, wl, i, maker, slow, fast, compare, gen, listed, device, torch, rules, stress) -> dict[str, Any]:
    definition = job["definition"]
    rec: dict[str, Any] = {"sets": [], "max_abs_err": 0.0, "slow_s": 0.0, "fast_s": 0.0}
    try:
        sets = []
        for seed in SEEDS:
            base = maker.make(wl, seed)
            sets.append((f"seed {seed}", wl, base))
        for name in stress.SETS:  # the judge's stress sets, made as it makes them
            values = stress.stress_set(name, definition, wl, sets[0][2], SEEDS[0], gen, device)
            if values is not None:
                sets.append((name, wl, values))
        for name, values in stress.target_sets(definition, wl, sets[0][2], SEEDS[0], gen, device).items():
            sets.append((name, wl, values))
        other = stress.unlisted_shape(definition, wl, i, listed, gen)
        if other is not None:
            sets.append((f"shape:{other[1]}", other[0], maker.make(other[0], SEEDS[0])))
    except Exception as e:  # noqa: BLE001 - the inputs' fault: nothing proven here, said as such
        return {"status": "skipped", "why": f"its inputs could not be made: {type(e).__name__}: {e}"[:300]}
    for name, w, values in sets:
        try:
            want, t_slow = _timed(job, lambda: _call(slow, values, torch), torch, device)
        except Exception as e:  # noqa: BLE001 - refcheck judges the definition's reference; unproven here
            return {"status": "skipped", "why": f"the definition's reference failed on set {name}: "
                    f"{type(e).__name__}: {e}"[:300]}
        try:
            got, t_fast = _timed(job, lambda: _call(fast, values, torch), torch, device)
        except Exception as e:  # noqa: BLE001
            return {"status": "error", "why": f"{FILE} raised on set {name}: {type(e).__name__}: {e}"[:300]}
        rec["slow_s"] += t_slow
        rec["fast_s"] += t_fast
        why = _differs(definition, w, values, got, want, compare, gen, rules, torch, rec, job.get("tolerances") or {})
        if why:
            return {**rec, "status": "differs", "why": f"on input set {name}: {why}"}
        rec["sets"].append(name)
    rec["slow_s"], rec["fast_s"] = round(rec["slow_s"], 4), round(rec["fast_s"], 4)
    return {**rec, "status": "agrees"}


def _differs(definition, wl, values, got, want, compare, gen, rules, torch, rec, tolerances) -> str:
    """Why got (the fast reference's outputs) fails the target's rules against want; "" when it passes."""
    from autogk_git.bench.judge.inputs import resolve_axes
    names = list(definition["outputs"])
    if len(got) != len(want):
        return f"{len(got)} output(s), the definition's reference returns {len(want)}"
    named = dict(zip(definition["inputs"], values))
    axes = resolve_axes(definition, wl)
    for name, g, r in zip(names, got, want):
        g = g if isinstance(g, torch.Tensor) else torch.tensor(g)
        r = r if isinstance(r, torch.Tensor) else torch.tensor(r)
        if g.dtype != r.dtype or tuple(g.shape) != tuple(r.shape):
            return (f"output {name} is {str(g.dtype).replace('torch.', '')} {list(g.shape)}, the definition's "
                    f"reference gives {str(r.dtype).replace('torch.', '')} {list(r.shape)}")
        try:
            s = rules.judge(name, definition["outputs"][name]["dtype"], g, r, compare.get(name), named, axes, gen,
                            tolerances)
        except (rules.Mismatch, rules.BadReference) as e:
            return str(e)[:300]
        rec["max_abs_err"] = max(rec["max_abs_err"], float(s.get("max_abs_err", 0.0)))
    return ""


def _timed(job, fn, torch, device):
    """(fn(), its seconds), under the job's per-call limit in the proof's own process."""
    def expired(limit: float) -> TimeoutError:
        return TimeoutError(f"did not finish within {limit:g} s ([bench] reference_timeout_s)")
    with isolated.call_limit(job, expired):
        t0 = time.perf_counter()
        out = fn()
        if device == "cuda":
            torch.cuda.synchronize()
        return out, time.perf_counter() - t0


def _call(reference, values: list, torch) -> tuple:
    from autogk_git.bench.judge.inputs import as_tuple
    with torch.no_grad():
        return as_tuple(reference(*[a.clone() if isinstance(a, torch.Tensor) else a for a in values]))
