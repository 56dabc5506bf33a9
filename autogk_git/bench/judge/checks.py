"""Correctness, judged in the judge's process: poisoned outputs, one call, its outputs against the
reference's by the output's rule, inputs unchanged; then the calls that catch kernels that remember."""
from __future__ import annotations

import random
import secrets

import torch

from . import rules, stress
from .calls import (
    DPS_HINT,
    KernelFailure,
    is_dps_return,
    short_tb,
    stream_wait,
)
from .inputs import (
    DTYPES,
    HarnessFailure,
    Inputs,
    make_inputs,
    reference_outputs,
    refill,
    resolve_axes,
    shape_of,
    trial_seed,
)
from .kernels import RemoteKernel
from .status import Status

TOLERANCES = rules.TOLERANCES


# The target's inputs.py (generator and compare rules) and its declared rules; set once by main().
TARGET = None


TARGET_RULES: dict = {}


def set_target(module) -> None:
    global TARGET, TARGET_RULES
    TARGET, TARGET_RULES = module, rules.declared(module)


def alloc_outputs(definition: dict, axes: dict, device: str, poison_seed: int,
                  garbage: bool = False) -> list[torch.Tensor]:
    """Fresh outputs filled with poison (see poison), so a kernel that skips part of them cannot pass."""
    outs = [torch.empty(shape_of(spec, axes) or [], dtype=DTYPES[spec["dtype"]], device=device)
            for spec in definition["outputs"].values()]
    poison(outs, poison_seed, garbage)
    return outs


def poison(outs: list, poison_seed: int, garbage: bool = False) -> None:
    """Fill outputs so that a kernel that skips part of them cannot pass: floats with NaN, or with
    `garbage`, random values of a few hundred to thousands (what an uninitialised buffer may hold)."""
    for t in outs:
        if t.dtype.is_floating_point and garbage:
            g = torch.Generator(device=t.device).manual_seed(secrets.randbits(62))  # drawn where t lives
            scale = min(1e3, torch.finfo(t.dtype).max / 64)
            t.copy_(torch.randn(t.shape, generator=g, device=t.device).mul_(scale).to(t.dtype))
        elif t.dtype.is_floating_point:
            t.fill_(float("nan"))
        elif t.dtype == torch.bool:
            t.fill_(poison_seed % 2 == 0)
        else:
            info = torch.iinfo(t.dtype)
            t.fill_(info.min if poison_seed % 2 == 0 else info.max)


def bits(t: torch.Tensor) -> torch.Tensor:
    """A view that compares exactly, NaN payloads included."""
    if t.dtype.is_floating_point and t.element_size() in (1, 2, 4, 8):
        return t.contiguous().view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def read_flags(flags: list[torch.Tensor]) -> list[bool]:
    """Boolean scalars made on the device, read back with one synchronization for all of them (a Python
    bool per tensor costs one each: thousands a job when every timed call's outputs are compared)."""
    if not flags:
        return []
    return [bool(v) for v in torch.stack([f.reshape(()).to(flags[0].device) for f in flags]).tolist()]


def same_bits_flag(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A device scalar: a and b hold the very same bits (shape and dtype included), as torch.equal on bits()."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return torch.zeros((), dtype=torch.bool, device=a.device)
    return (bits(a) == bits(b)).all()


def compare(name: str, dtype_name: str, out: torch.Tensor, ref: torch.Tensor, tolerances: dict,
            inputs: list | None = None, axes: dict | None = None, definition: dict | None = None) -> dict:
    """Error statistics by the output's rule (the target's COMPARE, else by dtype); raises KernelFailure."""
    named = dict(zip(definition["inputs"], inputs)) if definition and inputs is not None else None
    try:
        return rules.judge(name, dtype_name, out, ref, TARGET_RULES.get(name), named, axes, TARGET, tolerances)
    except rules.Mismatch as e:
        raise KernelFailure(Status(e.status), str(e)) from None
    except rules.BadReference as e:
        raise HarnessFailure(str(e)) from None


def invoke(run, inputs: list, outs: list, device: str) -> list:
    """One call of a destination-passing kernel; returns the outputs as its caller's stream sees them.

    For a kernel in its own process on a GPU that is a snapshot copied on the caller's stream right
    after run() returns: work the kernel left on another stream lands in `outs` later, but never in
    what is judged (waiting for the caller's stream from here could not stop such work finishing first).
    """
    if isinstance(run, RemoteKernel):
        return run.call(inputs, outs)
    returned = run(*inputs, *outs)
    stream_wait(device)
    if not is_dps_return(returned, outs):
        raise KernelFailure(Status.NOT_DESTINATION_PASSING,
                            f"run() returned a {type(returned).__name__} instead of writing its outputs: {DPS_HINT}")
    return outs


def check_once(run, inputs: list, ref_out: tuple, definition: dict, axes: dict, device: str,
               poison_seed: int, tolerances: dict, outs: list | None = None) -> dict:
    """Call the kernel once on poisoned outputs; check outputs, and that inputs are unchanged.

    outs: output buffers to reuse (they are poisoned again here); None allocates fresh ones.
    """
    return checked_call(run, inputs, ref_out, definition, axes, device, poison_seed, tolerances, outs)[0]


def checked_call(run, inputs: list, ref_out: tuple, definition: dict, axes: dict, device: str,
                 poison_seed: int, tolerances: dict, outs: list | None = None) -> tuple[dict, list]:
    """check_once, also returning the outputs as judged (for comparing two calls).

    The float outputs hold NaN in one checked call of four and random values in the others, drawn here
    from the OS (nothing the kernel can read predicts which): a kernel that computes only when its outputs
    come NaN-filled, as every checked call's did, is caught. Values of hundreds are no fresh buffer's
    usual content either, so this closes that one tell, not the class: a kernel can still tell it runs
    in the judge's process (README, "Not defended")."""
    garbage = secrets.randbelow(4) != 0
    if outs is None:
        outs = alloc_outputs(definition, axes, device, poison_seed, garbage)
    else:
        poison(outs, poison_seed, garbage)
    fill = [bits(t).clone() for t in outs] if garbage else None
    saved = [bits(x).clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    seen = invoke(run, inputs, outs, device)
    check_inputs(definition, inputs, saved)
    try:
        return check_outputs(definition, seen, ref_out, tolerances, inputs, axes), seen
    except KernelFailure as e:
        if fill is None:
            raise
        left = sum(int((bits(y) == f).sum()) for y, f in zip(seen, fill)
                   if isinstance(y, torch.Tensor) and y.dtype.is_floating_point and y.shape == f.shape)
        if not left:
            raise
        raise KernelFailure(e.status, f"{e}; {left} element(s) still held the random values the judge filled "
                            "the outputs with (never written: the NaN fill of other calls shows the same)") from None


def check_inputs(definition: dict, inputs: list, saved: list) -> None:
    for i, (name, x) in enumerate(zip(definition["inputs"], inputs)):
        if isinstance(x, torch.Tensor) and not torch.equal(bits(x), saved[i]):
            raise KernelFailure(Status.INPUT_MODIFIED, f"input {name} was changed by the kernel")


def check_outputs(definition: dict, outs: list, ref_out: tuple, tolerances: dict, inputs: list | None = None,
                  axes: dict | None = None) -> dict:
    """The one comparison entry point: every output against the reference's, by its declared rule."""
    stats = {"max_abs_err": 0.0, "max_rel_err": 0.0}
    for (name, spec), out, ref in zip(definition["outputs"].items(), outs, ref_out):
        ref = ref if isinstance(ref, torch.Tensor) else torch.tensor(ref)
        s = compare(name, spec["dtype"], out, ref.to(out.device), tolerances, inputs, axes, definition)
        stats = {k: max(stats[k], s[k]) for k in stats}
    return stats


def relabel(e: KernelFailure, when: str) -> KernelFailure:
    return KernelFailure(e.status, f"{when}: {e}")


OWN_SETS = 500
"""The parent's check sets are drawn this many trial numbers past the candidate's (which use 0 to 113): sets
the candidate never gets. A trunk kernel made to leave its outputs somewhere (a buffer shared through
/dev/shm) for the next candidate to copy has nothing to leave, so both labels are checked side by side."""


def first_trial(label: str) -> int:
    """The trial number a label's check sets start from: the parent's are its own (OWN_SETS)."""
    return OWN_SETS if label == "parent" else 0


def check_workload(run, wl_index: int, wl: dict, job: dict, inputs: Inputs, reference, device: str,
                   light: bool = False, ran: dict | None = None, first: int = 0) -> dict:
    """Correctness on several fresh input sets for one (kernel, workload), then the calls that catch
    kernels that remember: the last inputs again (right only once, early return on inputs seen before;
    its outputs must also match the first call's: `repeat`), new values in the same buffers (a cache
    keyed by pointer); then the stress sets and one unlisted shape (stress.py).

    ran: filled with {"stress": [names of the extra checks that ran], "stress_skipped": {name: why}},
    also when a check fails, so the record says what was tried. first: the trial number its sets start
    from (first_trial)."""
    definition = job["definition"]
    settings = job.get("settings", {})
    tolerances = settings.get("tolerances", {})
    axes = resolve_axes(definition, wl)
    ran = ran if ran is not None else {}
    ran.setdefault("stress", [])
    stats = {"max_abs_err": 0.0, "max_rel_err": 0.0}
    # light: one input set, no repeat calls; for an ab job's parent, the trunk's tip, which was judged
    # in full when it was kept (its timed calls' outputs are still checked like the candidate's); and on
    # the CPU interpreter, a workload its backend names in `light_checks` (too large for nine
    # interpreted calls: backends/interpret.py), the record saying why as `extra_checks`.
    why_light = (settings.get("light_checks") or {}).get(wl["uuid"])
    if why_light:
        light = True
        ran["extra_checks"] = "skipped: " + why_light
    trials = 1 if light else int(settings.get("trials", 3))
    args, ref_out, outs, first_outs = None, None, None, None
    for trial in range(trials):
        seed = trial_seed(job, wl_index, first + trial)
        args = make_inputs(inputs, wl, seed)
        ref_out = reference_outputs(reference, args)
        outs = alloc_outputs(definition, axes, device, trial)
        try:
            s, seen = checked_call(run, args, ref_out, definition, axes, device, trial, tolerances, outs=outs)
        except KernelFailure as e:
            if trial == 0:
                raise
            # Right on the first set, wrong on a later one: it remembers earlier calls (a cache keyed
            # by a reused address, state kept between calls) or depends on the data.
            raise relabel(e, f"on fresh input set {trial + 1} of {trials}, after earlier sets passed") from None
        first_outs = [t.clone() for t in seen]
        stats = {k: max(stats[k], s[k]) for k in stats}
    if settings.get("repeat_checks", True) and not light:
        try:
            _, again = checked_call(run, args, ref_out, definition, axes, device, trials + 1, tolerances)
        except KernelFailure as e:
            raise relabel(e, "called again on inputs it had already seen (fresh output buffers)") from None
        ran["deterministic"] = same_outputs(definition, again, first_outs, tolerances, args, axes)
        ran["stress"].append("repeat")
        fresh = make_inputs(inputs, wl, trial_seed(job, wl_index, first + trials + 7))
        if refill(args, fresh):
            ref_out = reference_outputs(reference, args)
            try:
                check_once(run, args, ref_out, definition, axes, device, trials + 2, tolerances, outs=outs)
            except KernelFailure as e:
                raise relabel(e, "called on new values in the same input and output buffers") from None
    if settings.get("stress", True) and not light:
        check_stress(run, wl_index, wl, job, inputs, reference, device, ref_out, ran, first)
        check_unlisted_shape(run, wl_index, wl, job, inputs, reference, device, ran, first)
    return stats


def same_outputs(definition: dict, again: list, first: list, tolerances: dict, args: list, axes: dict) -> bool:
    """Two calls on the same inputs: True when bitwise equal. Otherwise the second must still meet
    each output's own rule with the first call's outputs standing for the reference's, or it fails.

    Not bitwise: a reduction split across programs and summed with atomics (split-K) legitimately
    differs in its last bits from call to call; the rule that judges an output against the
    reference is the bar a second call must meet against the first. Beyond it, the kernel gives
    different answers to one question (a race, an unsynchronised read), which no single comparison
    with the reference is sure to see."""
    if all(torch.equal(bits(a), bits(b)) for a, b in zip(again, first)):
        return True
    try:
        check_outputs(definition, again, tuple(first), tolerances, args, axes)
    except (KernelFailure, HarnessFailure) as e:
        raise KernelFailure(Status.INCORRECT_NUMERICAL,
                            f"not deterministic: called twice on the same inputs, the second call's outputs "
                            f"differ from the first's beyond the output's rule: {e}") from None
    return False


def check_stress(run, wl_index: int, wl: dict, job: dict, inputs: Inputs, reference, device: str,
                 usual_ref: tuple, ran: dict, first: int = 0) -> None:
    """The stress input sets (stress.SETS, then the target's own), each judged like a fresh set."""
    definition = job["definition"]
    tolerances = job.get("settings", {}).get("tolerances", {})
    axes = resolve_axes(definition, wl)
    seed = trial_seed(job, wl_index, first + 101)
    try:
        base = make_inputs(inputs, wl, seed)
        extra = stress.target_sets(definition, wl, base, seed, TARGET, device)
    except Exception as e:  # the harness's (or the target's inputs.py's) fault, not the kernel's
        raise HarnessFailure(f"could not make the stress input sets: {short_tb(e)}") from e
    sets: list[tuple[str, list | None, tuple | None]] = []
    for name in (*stress.SETS, stress.SCALARS):
        values = ref = None
        for exp in stress.shrunk(stress.SCALE_EXP) if name not in ("zero_rows", stress.SCALARS) else [stress.SCALE_EXP]:
            values = stress.stress_set(name, definition, wl, base, seed, TARGET, device, exp)
            if values is None:
                break
            ref = reference_outputs(reference, values)
            if usual_ref is None or stress.finite_where(ref, usual_ref):
                break
            values = ref = None
            ran.setdefault("stress_skipped", {})[name] = "the reference's outputs are not finite on it"
        if values is not None:
            ran.get("stress_skipped", {}).pop(name, None)
            sets.append((name, values, ref))
    sets += [(name, values, None) for name, values in extra.items()]
    for k, (name, values, ref) in enumerate(sets):
        ref = ref if ref is not None else reference_outputs(reference, values)
        try:
            check_once(run, values, ref, definition, axes, device, k, tolerances)
        except KernelFailure as e:
            what = stress.WHAT.get(name, "the target's own")
            raise relabel(e, f"on stress input set {name} ({what}), after the N(0,1) sets passed") from None
        ran["stress"].append(name)


TIMED_STRESS = ("scaled_rows", "outliers", "shifted_rows", "zero_rows", "past_fp16")
"""The stress sets one timed call a window may get (stress_a_timed_set): values only, no shape or count."""


def stress_a_timed_set(job: dict, wl: dict, sets: list, reference, device: str, rng: random.Random,
                       ref_cache: dict) -> int | None:
    """One of a window's input sets, drawn at random, made a stress set in place (stress.py: rows scaled
    over orders of magnitude, outliers, rows off a zero mean, zero rows, bf16 values past fp16's range; the
    first of them in a random order that applies to the workload's inputs), its reference outputs put in
    ref_cache: the timed calls hold inputs a model would produce too. The stress sets were in the checks
    alone, so a kernel that tells its timed calls from the checks (its caller's frames name the timer) could
    compute them in a precision fitted to N(0,1), right on every timed set and faster there. Returns the
    set's index, for the reference's sample; None where no set applies (no float input the judge draws) or
    the reference's outputs are not finite on any, or `[bench] timed_stress` is off."""
    if not job.get("settings", {}).get("timed_stress", True) or not sets:
        return None
    k, seed = rng.randrange(len(sets)), rng.randrange(1 << 30)
    usual = None  # the usual set's reference outputs: made only where a stressed set's are not all finite
    for name in rng.sample(TIMED_STRESS, len(TIMED_STRESS)):
        for exp in stress.shrunk(stress.SCALE_EXP) if name != "zero_rows" else [stress.SCALE_EXP]:
            values = stress.stress_set(name, job["definition"], wl, sets[k], seed, TARGET, device, exp)
            if values is None:
                break  # this set does not apply here: the next one
            ref = reference_outputs(reference, values)
            if not stress.all_finite(ref):
                usual = usual if usual is not None else reference_outputs(reference, sets[k])
                if not stress.finite_where(ref, usual):
                    continue
            sets[k], ref_cache[k] = values, ref
            return k
    return None


def check_unlisted_shape(run, wl_index: int, wl: dict, job: dict, inputs: Inputs, reference, device: str,
                         ran: dict, first: int = 0) -> None:
    """One shape the workloads do not list (stress.unlisted_shape), checked for correctness only."""
    definition = job["definition"]
    listed = job.get("settings", {}).get("listed_axes") or stress.listed_axes(definition, job["workloads"])
    # the value drawn from the job's secret seed: not one a kernel can work out from the listed ones
    got = stress.unlisted_shape(definition, wl, wl_index, listed, TARGET,
                                random.Random(trial_seed(job, wl_index, first + 127)),
                                job.get("settings", {}).get("unlisted_max_numel"))
    if got is None:
        return
    other, what = got
    axes = resolve_axes(definition, other)
    args = make_inputs(inputs, other, trial_seed(job, wl_index, first + 113))
    ref_out = reference_outputs(reference, args)
    try:
        check_once(run, args, ref_out, definition, axes, device, 1,
                   job.get("settings", {}).get("tolerances", {}))
    except KernelFailure as e:
        raise relabel(e, f"on a shape the workloads do not list ({what}), after the listed one passed") from None
    ran["stress"].append("shape:" + what.split(",")[0])
