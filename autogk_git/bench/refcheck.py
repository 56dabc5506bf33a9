"""The definition's reference, checked on its own before any kernel is judged against it.

A reference that raises, returns the wrong shape, dtype or number of outputs, returns None or NaN, gives
two answers for one input, loops forever or ends its process is the target's fault. Found by the judge
during an experiment, it would be reported against a kernel (every candidate reverted as INCORRECT_SHAPE,
or "the judge process died while this kernel ran"); found here it is one error naming the definition file,
said once, at `init`, at `bench` and when the trunk's definition changes.

The reference runs in a process of its own (it may call os._exit, crash or hang), on the smallest workload,
under a limit of its own ([bench] reference_timeout_s), far shorter than a benchmark job's.

A pass is remembered for every project of the user, by content (the definition, the smallest workload and
inputs.py) and device kind, under ~/.cache/autogk/reference-checks beside the fast reference's proofs: the
first `iterate` after `init`, or a second project of the same target, does not start a process again to
learn what is known (~1.3 CPU-s each, mostly torch's import, on this project's 2-core machine). The device
kind is told without importing torch in the asking process (bench/proofs.py: likely_device_kind), and a
pass is kept only where the check's own process ran on that kind (a driver that does not load is no
CUDA pass). A workload with data files (a blob) is checked every time: its files can change under the
same name.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from autogk_git.bench import isolated
from autogk_git.bench.job import numel
from autogk_git.bench.proofs import cache_root, content_key, likely_device_kind
from autogk_git.errors import TargetError
from autogk_git.procs import no_gc

# Above this many input elements the check would measure the CPU, not the reference: say it was skipped.
MAX_CHECK_NUMEL = 1 << 24


def smallest(definition: dict[str, Any], workloads: list[dict[str, Any]]) -> dict[str, Any]:
    return min(workloads, key=lambda w: numel(definition, w))


def check(definition: dict[str, Any], workloads: list[dict[str, Any]], where: str, timeout_s: float,
          generator: str | None = None, blob_root: Path | None = None, isolate: bool = True) -> str:
    """Run the reference on the smallest workload and check what it returns; a TargetError naming `where`
    (the definition file) when it is broken; else a line saying what was checked.

    isolate=False runs it in this process (no limit, no protection from os._exit): for tests of the
    checks themselves on references known to return."""
    wl = smallest(definition, workloads)
    size = numel(definition, wl)
    if size > MAX_CHECK_NUMEL:
        return (f"reference not checked ahead: the smallest workload ({wl['uuid'][:8]}) has {size} input elements, "
                "too many for a quick check")
    line = f"reference checked on workload {wl['uuid'][:8]} ({_axes(definition, wl)}): shapes, dtypes, finite, deterministic"
    kind = likely_device_kind()  # no torch here: a CLI process (init, bench, iterate) would pay its import
    mark = _mark(definition, wl, generator, kind) if isolate else None
    if mark is not None and mark.exists():
        return line
    job = {"definition": definition, "workload": wl, "generator": generator,
           "blob_root": str(blob_root) if blob_root else None, "limit_s": timeout_s}
    result = _isolated(job, where, timeout_s, definition, wl) if isolate else _verdict(job)
    if result.get("error"):
        raise TargetError(f"{where}: {result['error']}", result.get("hint") or "fix the definition's reference")
    if mark is not None and result.get("device") == kind:  # what the check's own process saw
        try:
            mark.parent.mkdir(parents=True, exist_ok=True)
            tmp = mark.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(line + "\n")
            tmp.replace(mark)
        except OSError:  # a cache that cannot be written costs the next check its process, nothing else
            pass
    return line


VERSION = 1  # of the check: a pass of another version is checked again


def _mark(definition: dict[str, Any], wl: dict[str, Any], generator: str | None, kind: str) -> Path | None:
    """Where a pass of this content on device kind `kind` is remembered; None for a workload with data files."""
    if any(not isinstance(v, dict) or v.get("type") not in ("random", "scalar") for v in wl.get("inputs", {}).values()):
        return None
    return cache_root() / "reference-checks" / f"{content_key(VERSION, definition, wl, generator)}-{kind}"


def _isolated(job: dict[str, Any], where: str, timeout_s: float, definition: dict[str, Any],
              wl: dict[str, Any]) -> dict[str, Any]:
    """The check's verdict from a process of its own, killed at timeout_s."""
    # The process keeps the reference's own limit (a timer around its calls, so starting Python and
    # importing torch on a busy machine does not count); this one is the backstop for a reference stuck
    # where no timer reaches it (inside a C call).
    ended = isolated.run("refcheck", job, timeout_s)
    if ended.timed_out:
        raise TargetError(f"{where}: the reference did not finish within {timeout_s:g} s on the smallest "
                          f"workload ({_axes(definition, wl)})",
                          "fix the reference (a loop that never ends?); if it is only slow, raise "
                          "[bench] reference_timeout_s in .autogk.toml")
    if ended.record is None:
        tail = ended.last_line()
        how = f"killed by signal {-ended.returncode}" if ended.returncode < 0 else f"exit code {ended.returncode}"
        raise TargetError(f"{where}: the reference ended the check's process ({how}) before returning"
                          + (f": {tail}" if tail else ""),
                          "the reference must return its outputs; remove os._exit / sys.exit / crashing calls from it")
    return ended.record


def _axes(definition: dict[str, Any], wl: dict[str, Any]) -> str:
    var = [n for n, a in definition["axes"].items() if a.get("type") == "var"]
    return ", ".join(f"{n}={wl.get('axes', {}).get(n)}" for n in var) or "no variable axes"


# ------------------------------------------------------------------------------------------------
# The check's own process: imports torch and the judge's input maker, never anything of the project.
# ------------------------------------------------------------------------------------------------

def entry(argv: list[str]) -> int:
    out = Path(argv[0])
    out.write_text(json.dumps(_verdict({**json.loads(sys.stdin.read()), "isolated": True})))
    return 0


def _verdict(job: dict[str, Any]) -> dict[str, Any]:
    try:
        return _run(job)
    except _Broken as e:
        return {"error": e.args[0], "hint": e.args[1]}


class _Broken(Exception):
    """What is wrong with the reference, and the fix."""


def _raised(e: BaseException, when: str) -> "_Broken":
    import traceback
    line = next((f" (line {fr.lineno} of the reference)" for fr in reversed(traceback.extract_tb(e.__traceback__))
                 if fr.filename == "<reference>"), "")
    msg = f"{type(e).__name__}: {e}".strip()[:300]
    return _Broken(f"the reference raised {when}{line}: {msg}", "fix the definition's reference")


def _run(job: dict[str, Any]) -> dict[str, Any]:
    import types

    with no_gc():
        import torch

        from autogk_git.bench.judge.inputs import (DTYPES, Inputs, as_tuple, load_reference, resolve_axes,
                                                   shape_of)

    definition, wl = job["definition"], job["workload"]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        reference = load_reference(definition)
    except BaseException as e:  # noqa: BLE001 - SystemExit at import is the reference's fault too
        raise _raised(e, "when loaded") from None
    gen = None
    if job.get("generator"):
        gen = types.ModuleType("autogk_inputs")
        try:
            exec(compile(job["generator"], "inputs.py", "exec"), gen.__dict__)
        except BaseException as e:  # noqa: BLE001
            raise _Broken(f"inputs.py (the target's input generator) raised when loaded: {type(e).__name__}: {e}"[:400],
                          "fix inputs.py") from None
    maker = Inputs({"definition": definition, "blob_root": job.get("blob_root")}, device, gen)
    try:
        args = maker.make(wl, seed=1234)
    except BaseException as e:  # noqa: BLE001
        raise _Broken(f"the inputs of workload {wl['uuid'][:8]} could not be made: {type(e).__name__}: {e}"[:400],
                      "fix the workload line, its blobs or inputs.py") from None
    first, again = (_timed(job, wl, definition, lambda: _call(reference, args, torch, as_tuple)) for _ in range(2))
    axes = resolve_axes(definition, wl)
    names = list(definition["outputs"])
    if len(first) != len(names):
        got = "None" if first == (None,) else f"{len(first)} value(s)"
        raise _Broken(f"the reference returned {got}; the definition declares {len(names)} output(s) "
                      f"({', '.join(names)})", "return the outputs, in the order the definition lists them")
    for name, value, value2 in zip(names, first, again):
        spec = definition["outputs"][name]
        want = shape_of(spec, axes)
        if want is None and not isinstance(value, torch.Tensor):
            if not isinstance(value, (int, float)):
                raise _Broken(f"the reference's output {name} is {type(value).__name__}, not a number",
                              "return a number or a 0-d tensor for a scalar output")
            continue
        if not isinstance(value, torch.Tensor):
            raise _Broken(f"the reference's output {name} is {type(value).__name__}, not a tensor",
                          "return a torch tensor for each output")
        if want is not None and list(value.shape) != want:
            raise _Broken(f"the reference's output {name} has shape {list(value.shape)}; the definition says "
                          f"{spec['shape']} = {want} on workload {wl['uuid'][:8]}",
                          "fix the reference or the output's shape in the definition")
        if value.dtype != DTYPES.get(spec["dtype"]):
            raise _Broken(f"the reference's output {name} is {str(value.dtype).replace('torch.', '')}; the definition "
                          f"says {spec['dtype']}", "cast it in the reference (.to(...)) or fix the definition's dtype")
        if value.dtype.is_floating_point:
            v = value.float()
            if torch.isnan(v).any():
                raise _Broken(f"the reference's output {name} holds NaN on random inputs of workload "
                              f"{wl['uuid'][:8]}", "fix the reference (a division by zero? a log of a negative?)")
            if v.numel() and not torch.isfinite(v).any():
                raise _Broken(f"the reference's output {name} is infinite everywhere on workload {wl['uuid'][:8]}",
                              "fix the reference")
        if not torch.equal(value, value2):
            raise _Broken(f"the reference gives different outputs for the same inputs ({name} differs between two "
                          "calls): a kernel cannot be judged against it",
                          "make the reference deterministic (no unseeded random draws, no state kept between calls)")
    return {"ok": True, "device": device}


def _timed(job: dict[str, Any], wl: dict[str, Any], definition: dict[str, Any], fn):
    """fn() under the job's limit (a process timer: the check's own process only, never in-process)."""
    def expired(limit: float) -> _Broken:
        return _Broken(f"the reference did not finish within {limit:g} s on the smallest workload "
                       f"({_axes(definition, wl)})",
                       "fix the reference (a loop that never ends?); if it is only slow, raise "
                       "[bench] reference_timeout_s in .autogk.toml")
    with isolated.call_limit(job, expired):
        return fn()


def _call(reference, args: list, torch, as_tuple) -> tuple:
    try:
        with torch.no_grad():
            return as_tuple(reference(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args]))
    except _Broken:  # its time limit
        raise
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt raised by it are its fault too
        raise _raised(e, "on random inputs") from None
