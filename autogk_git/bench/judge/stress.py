"""Inputs a model would produce, and shapes the workloads do not list: the correctness check's stress sets.

Every float input the judge draws is N(0,1); a model's activations are not. A kernel fitted to unit
rows (an fp16 sum of squares in an RMSNorm passes every N(0,1) set, and gives zeros at RMS 8) is
caught by input sets whose values a model does produce:

    scaled_rows   each row (along the last axis) scaled by 10**e, e spread over [-3, 3] across the
                  rows (stratified: the largest and smallest scales always occur); a 1-D tensor (a
                  weight, a bias) scaled up by one 10**e, e in [0, 3]
    outliers      N(0,1) with one large value (+-300) in about one row in eight, at least one
    zero_rows     a quarter of the rows all zero (tensors of two rows or more)
    past_fp16     bf16 tensors only, every row scaled by 10**e, e in [4.85, 5.15]: about half the values
                  past fp16's largest (65504): a kernel that loads bf16 as fp16, or keeps a value in
                  fp16 on the way, gives inf or NaN there and is right below it. Not on fp32 tensors:
                  there an honest kernel's own rounding at 10^5-10^6 (an FMA where the reference
                  multiplies, then adds) is past an fp32 output's tolerance wherever terms cancel
                  (an H100, 2026-12-06: an honest fp32 x * scale + bias failed it, max abs err 0.125)

    other_scalars every float scalar input (a workload's literal, the generator's or the judge's draw)
                  times 2^u, |u| in [0.25, 1] drawn from the judge's seed: a kernel that folds the value
                  every listed workload gives a scalar (a scale, a softmax scale) into its code, and
                  ignores the argument, is right on the workloads and wrong for any other caller

Only tensors the judge draws itself are changed (other_scalars apart: a scalar is an argument any caller
may pass, not data a target's generator shapes): a workload's literal or blob, and what the target's
generator makes, are the target's own valid data (indices, packed caches); a generator opts its float
tensors in with `STRESS_INPUTS = ("name", ...)` in its inputs.py, and may add its own sets with
`stress(axes, definition, seed, device) -> {set name: {input name: tensor}}` (inputs it leaves out
are the set's usual draw). Integer inputs are never touched: they are indices and lengths.

Values are clipped to what the dtype holds, and a set whose reference output is not finite where the
usual draw's is (the reference itself overflows) is shrunk: the scale range halves, up to three
times, then the set is skipped and the record says why.

Unlisted shapes: for a workload, one var axis (in turn by workload index) moves to a value the
workloads do not list: between the workload's value and the next listed one, or past the largest (up
to twice it, or a quarter more where twice costs too many elements). The moved workload drops its
`layout` (a target's per-workload detail, such as the DSA sets' run lengths, made for the listed axes):
the generator makes the shape from its axes alone. The judge draws that value at random from its secret
seed, so a kernel that works out the value from the listed ones (and is right there alone) cannot know
it, and makes it odd where the range and the constraints allow (an even value may be a multiple of the
kernel's block, where an unmasked tail goes unseen), else an odd multiple of the smallest power of two
they allow; without a draw (the fast reference's proof) the midpoint, or one past the largest.
Checked for correctness only, when every input is drawn by the judge (or the generator opts in with
`EXTRA_SHAPES = True`), the definition's constraints hold, and it costs no more input elements than
the largest listed workload (plus a quarter), so the interpreter on a CPU stays fast.
"""
from __future__ import annotations

import inspect
import math
import random
from types import SimpleNamespace
from typing import Any

import torch

from .axes import listed_axes  # noqa: F401 - named here too: the judge's checks ask stress for it
from .inputs import DTYPES, resolve_axes, shape_of

SETS = ("scaled_rows", "outliers", "zero_rows", "past_fp16", "shifted_rows")
WHAT = {
    "scaled_rows": "rows scaled by 10^-3..10^3",
    "outliers": "a few values of +-300",
    "zero_rows": "a quarter of the rows zero",
    "past_fp16": "bf16 rows scaled by 10^4.85..10^5.15, past fp16's range",
    "shifted_rows": "each row shifted by +-1..4 (rows whose mean is not 0)",
}
SCALARS = "other_scalars"  # run after SETS, by the same loop (stress_set); not in SETS, whose index seeds each set
WHAT[SCALARS] = "float scalar inputs other than the listed values (x 2^-1..2^1)"
SCALE_EXP = 3.0
OUTLIER = 300.0
SHRINKS = 3
# Values stay this far inside the dtype's range: the reference may add or scale them.
HEADROOM = 16.0


def _rows(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(1, -1) if t.dim() <= 1 else t.reshape(-1, t.shape[-1])


def _stressed(name: str, t: torch.Tensor, gen: torch.Generator, exp: float) -> torch.Tensor | None:
    """t (an N(0,1) draw) as stress set `name` at scale range exp; None when the set does not apply."""
    if t.numel() == 0:
        return None
    x = _rows(t.detach().to(torch.float32)).clone()
    n_rows, dev = x.shape[0], gen.device
    if name == "scaled_rows" and t.dim() <= 1:
        # A vector (a weight, a bias) is scaled up only: scaled down, every error in what it
        # multiplies would shrink under the output's absolute tolerance.
        x *= 10.0 ** (float(torch.rand(1, generator=gen, device=dev)) * exp)
    elif name == "scaled_rows":
        strata = torch.randperm(n_rows, generator=gen, device=dev).to(torch.float32)
        e = (strata + torch.rand(n_rows, generator=gen, device=dev)) / n_rows * (2 * exp) - exp
        x *= (10.0 ** e).to(x.device)[:, None]
    elif name == "outliers":
        k = max(1, n_rows // 8)
        rows = torch.randperm(n_rows, generator=gen, device=dev)[:k].to(x.device)
        cols = torch.randint(0, x.shape[1], (k,), generator=gen, device=dev).to(x.device)
        sign = torch.where(torch.rand(k, generator=gen, device=dev) < 0.5, -1.0, 1.0).to(x.device)
        x[rows, cols] = OUTLIER ** (exp / SCALE_EXP) * sign  # shrunk with the range when the reference overflows
    elif name == "zero_rows":
        if n_rows < 2:
            return None
        x[torch.randperm(n_rows, generator=gen, device=dev)[:max(1, n_rows // 4)].to(x.device)] = 0.0
    elif name == "past_fp16":
        # e in [4.85, 5.15] x exp / 3, lower as the range shrinks where the reference overflows
        if t.dtype != torch.bfloat16:
            return None  # fp16 holds nothing past its range; fp32's own rounding there is the kernel's
        e = (4.85 + 0.3 * torch.rand(n_rows, generator=gen, device=dev)) * exp / 3.0
        x *= (10.0 ** e).to(x.device)[:, None]
    elif name == "shifted_rows":
        # Every other set keeps N(0,1)'s zero mean, which a model's activations do not have: a kernel that
        # takes the variance for the mean of squares (or drops any term a zero mean cancels) was right on
        # all of them (a red-team plant, 2026-12-06).
        sign = torch.where(torch.rand(n_rows, generator=gen, device=dev) < 0.5, -1.0, 1.0)
        c = sign * (1.0 + 3.0 * torch.rand(n_rows, generator=gen, device=dev)) * exp / SCALE_EXP
        x += c.to(x.device)[:, None]
    limit = torch.finfo(t.dtype).max / HEADROOM
    return x.clamp(-limit, limit).reshape(t.shape).to(t.dtype)


def by_generator(module: Any) -> bool:
    return module is not None and callable(getattr(module, "generate", None))


def drawn_floats(definition: dict, workload: dict, module: Any) -> list[str]:
    """The float tensor inputs the judge draws itself (or the target's generator opts in)."""
    opted = set(getattr(module, "STRESS_INPUTS", ()) or ()) if module is not None else set()
    names = []
    for name, spec in definition["inputs"].items():
        wspec = workload.get("inputs", {}).get(name, {"type": "random"})
        dtype = DTYPES.get(spec["dtype"])
        if spec.get("shape") is None or dtype is None or not dtype.is_floating_point:
            continue
        if wspec.get("type", "random") == "random" and (not by_generator(module) or name in opted):
            names.append(name)
    return names


def stress_set(name: str, definition: dict, workload: dict, base: list, seed: int, module: Any,
               device: str, exp: float = SCALE_EXP) -> list | None:
    """The input values of stress set `name` made from the usual draw `base`; None when it changes nothing."""
    if name == SCALARS:
        return scalar_set(definition, base, seed)
    names = list(definition["inputs"])
    gen = torch.Generator(device=device).manual_seed(seed * 31 + SETS.index(name))
    values, changed = list(base), False
    for input_name in drawn_floats(definition, workload, module):
        j = names.index(input_name)
        s = _stressed(name, base[j], gen, exp)
        if s is not None:
            values[j], changed = s, True
    return values if changed else None


def scalar_set(definition: dict, base: list, seed: int) -> list | None:
    """The usual draw with each float scalar input (no shape) times 2^u, |u| in [0.25, 1]; None without one."""
    rng = random.Random(seed * 31 + 97)
    values, changed = list(base), False
    for j, (name, spec) in enumerate(definition["inputs"].items()):
        dtype = DTYPES.get(spec["dtype"])
        if spec.get("shape") is not None or dtype is None or not dtype.is_floating_point:
            continue
        factor = 2.0 ** (rng.choice((-1.0, 1.0)) * rng.uniform(0.25, 1.0))
        v = base[j]
        if isinstance(v, torch.Tensor) and v.dim() == 0:
            values[j], changed = v * factor, True
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v != 0:
            values[j], changed = float(v) * factor, True
    return values if changed else None


def target_sets(definition: dict, workload: dict, base: list, seed: int, module: Any, device: str
                ) -> dict[str, list]:
    """The sets the target's inputs.py adds with stress(axes, definition, seed, device), or with
    stress(axes, definition, seed, device, usual) where it takes the usual draw ({input name: value}),
    to make a set from it (the DSA sparse attention's scattered indices keep each row's count)."""
    hook = getattr(module, "stress", None) if module is not None else None
    if not callable(hook):
        return {}
    names = list(definition["inputs"])
    args = [dict(resolve_axes(definition, workload)), definition, seed, device]
    if "usual" in inspect.signature(hook).parameters:
        args.append(dict(zip(names, base)))
    out = {}
    for set_name, given in (hook(*args) or {}).items():
        unknown = set(given) - set(names)
        if unknown:
            raise ValueError(f"stress() set {set_name!r} names inputs the definition lacks: {sorted(unknown)}")
        out[str(set_name)] = [given.get(n, v) for n, v in zip(names, base)]
    return out


def all_finite(ref: tuple) -> bool:
    """Whether every float output is finite."""
    return all(bool(torch.isfinite(r).all()) for r in ref if isinstance(r, torch.Tensor) and r.dtype.is_floating_point)


def finite_where(ref: tuple, usual: tuple) -> bool:
    """Whether the reference's outputs on a stress set are finite wherever the usual draw's are."""
    for r, u in zip(ref, usual):
        if isinstance(r, torch.Tensor) and r.dtype.is_floating_point:
            if isinstance(u, torch.Tensor) and u.shape == r.shape:
                if (~torch.isfinite(r) & torch.isfinite(u)).any():
                    return False
            elif not torch.isfinite(r).all():
                return False
    return True


def shrunk(exp: float) -> list[float]:
    """The scale ranges tried for a set whose reference overflows: exp, exp/2, ... (SHRINKS times)."""
    return [exp / 2 ** k for k in range(SHRINKS + 1)]


# ---- unlisted shapes -------------------------------------------------------------------------------

ALIGN_BITS = 8  # a drawn value is tried as an odd multiple of 1, 2, 4, ... 128, in that order


def input_numel(definition: dict, axes: dict) -> int:
    return sum(math.prod(shape_of(s, axes) or [1]) for s in definition["inputs"].values()
               if s.get("shape") is not None)


def constraints_hold(definition: dict, axes: dict) -> bool:
    """The definition's constraints (`topk <= max_num_pages * page_size`) on these axes; False when one
    cannot be read (then the shape is not tried: the judge cannot vouch it is valid)."""
    ns: dict[str, Any] = dict(axes)
    for section in ("inputs", "outputs"):
        for name, spec in definition.get(section, {}).items():
            ns[name] = SimpleNamespace(shape=tuple(shape_of(spec, axes) or ()), dtype=spec.get("dtype"))
    for expr in definition.get("constraints") or ():
        try:
            if not eval(compile(str(expr), "<constraint>", "eval"), {"__builtins__": {}}, ns):  # noqa: S307
                return False
        except Exception:  # noqa: BLE001 - an unreadable constraint: do not guess
            return False
    return True


def reach(module: Any, name: str, v: int, interpreted: bool) -> int:
    """How far past the largest listed value v of axis `name` an unlisted shape may go: the target's
    `AXIS_REACH` (inputs.py: the values its real callers use, e.g. the sparse attention's prefill of up to
    4096 tokens beside a contest set of at most 8, whose own path from 264 tokens on was never run when the
    reach was twice the largest), else twice v. Under the interpreter twice v at most: its cap on input
    elements is small and its time grows with the programs."""
    top = 2 * v
    declared = getattr(module, "AXIS_REACH", None) if module is not None else None
    if isinstance(declared, dict) and isinstance(declared.get(name), int) and not interpreted:
        top = max(top, int(declared[name]))
    return max(top, v + 1)


def within_cap(definition: dict, axes: dict, name: str, lo: int, top: int, cap: float) -> int:
    """The largest value of axis `name` in [lo, top] whose input elements stay within cap (lo if none):
    input elements grow with every axis, so a bisection finds it."""
    if input_numel(definition, {**axes, name: lo}) > cap:
        return lo
    while lo < top:
        mid = (lo + top + 1) // 2
        if input_numel(definition, {**axes, name: mid}) <= cap:
            lo = mid
        else:
            top = mid - 1
    return lo


def unlisted_shape(definition: dict, workload: dict, wl_index: int, listed: dict[str, list[int]],
                   module: Any, draw: random.Random | None = None, max_numel: int | None = None
                   ) -> tuple[dict, str] | None:
    """(a workload with one var axis moved to an unlisted value, its description), or None.

    draw: the value is drawn from it (a few tries inside the range, then the fixed candidates).
    max_numel: a lower cap on its input elements (the interpreter's, backends/interpret.py)."""
    if any(w.get("type") == "safetensors" for w in workload.get("inputs", {}).values()):
        return None  # a blob's shape is fixed
    if by_generator(module) and not getattr(module, "EXTRA_SHAPES", False):
        return None
    axes = resolve_axes(definition, workload)
    var = [n for n in listed if n in workload.get("axes", {})]
    if not var:
        return None
    cap = 1.25 * max(input_numel(definition, {**axes, n: max(listed[n])}) for n in var)
    if max_numel:
        cap = min(cap, max_numel)
    for k in range(len(var)):
        name = var[(wl_index + k) % len(var)]
        v, values = int(axes[name]), listed[name]
        later = [x for x in values if x > v]
        if later:
            nxt = later[0]
            lo, hi = v + 1, nxt - 1
            cands = [(v + nxt) // 2 | 1, (v + nxt) // 2, v + 1]
            why = f"between the listed {v} and {nxt}"
        else:
            lo = v + 1
            hi = within_cap(definition, axes, name, lo, reach(module, name, v, bool(max_numel)), cap)
            cands = [v + 1]
            why = f"past the largest listed, {v}"
        if draw is not None and hi >= lo:  # two draws up to hi, two in its first quarter (within the cap more often)
            near = lo + (hi - lo) // 4
            drawn = [draw.randint(lo, h) for h in (hi, hi, near, near)]
            # each made odd first: a multiple of a kernel's block hides an unmasked tail (n = 1792 = 28 x 64
            # passed a kernel right only on whole blocks of 64); where the constraints want a multiple of
            # 2^k (or the range holds no odd value), an odd multiple of the smallest such 2^k
            cands = [((d >> k) | 1) << k for k in range(ALIGN_BITS) for d in drawn] + drawn + cands
        cands = [c for c in dict.fromkeys(cands) if lo <= c <= hi and c not in values]
        for c in cands:
            new_axes = {**axes, name: c}
            if input_numel(definition, new_axes) <= cap and constraints_hold(definition, new_axes):
                wl = {k: x for k, x in workload.items() if k != "layout"}
                wl["axes"] = {**workload.get("axes", {}), name: c}
                return wl, f"{name}={c}, {why}"
    return None
