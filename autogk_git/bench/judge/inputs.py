"""Fresh inputs for a workload (the target's generator, safetensors blobs, scalars, random data), the
reference's outputs, and the bytes a workload must move (the physical floor)."""
from __future__ import annotations

import math
from pathlib import Path

import torch

from .calls import short_tb

DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float64": torch.float64, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool,
    "float8_e4m3fn": getattr(torch, "float8_e4m3fn", None), "float8_e5m2": getattr(torch, "float8_e5m2", None),
}


class HarnessFailure(Exception):
    """The harness could not make inputs or the reference's outputs."""


def shape_of(spec: dict, axes: dict) -> list[int] | None:
    shape = spec.get("shape")
    if shape is None:
        return None
    return [int(axes[d]) for d in shape]


def resolve_axes(definition: dict, workload: dict) -> dict:
    axes = {}
    for name, ax in definition["axes"].items():
        if ax.get("type") == "const":
            axes[name] = ax["value"]
        elif name in workload.get("axes", {}):
            axes[name] = workload["axes"][name]
    return axes


def random_tensor(shape: list[int], dtype_name: str, gen: torch.Generator, device: str) -> torch.Tensor:
    """Random data, drawn where gen lives (on the GPU for timed sets: CPU draws are too slow there)."""
    dtype = DTYPES.get(dtype_name)
    if dtype is None:
        raise HarnessFailure(f"dtype {dtype_name} is not supported by this torch")
    where = gen.device
    if dtype.is_floating_point:
        t = torch.randn(shape, generator=gen, dtype=torch.float32, device=where)
        return t.to(dtype).to(device)
    if dtype == torch.bool:
        return (torch.rand(shape, generator=gen, device=where) < 0.5).to(device)
    return torch.randint(0, 64, shape, generator=gen, dtype=dtype, device=where).to(device)


class Inputs:
    """Makes fresh inputs for one workload: generator, safetensors blobs, scalars, random data."""

    def __init__(self, job: dict, device: str, gen_module) -> None:
        self.definition = job["definition"]
        self.blob_root = Path(job.get("blob_root") or ".")
        self.device = device
        self.gen_module = gen_module
        self._blobs: dict[str, dict] = {}

    def _blob(self, path: str, key: str) -> torch.Tensor:
        if path not in self._blobs:
            from safetensors.torch import load_file
            p = Path(path)
            self._blobs[path] = load_file(str(p if p.is_absolute() else self.blob_root / p))
        try:
            return self._blobs[path][key]
        except KeyError:
            raise HarnessFailure(f"safetensors file {path} has no tensor '{key}'") from None

    def make(self, workload: dict, seed: int, on_device: bool = True) -> list:
        """One fresh input set; on_device draws random data on the device it is used on (on a GPU a
        CPU draw of the largest sets took most of the correctness phase: H200, 2026-11-30)."""
        axes = resolve_axes(self.definition, workload)
        gen = torch.Generator(device=self.device if on_device else "cpu").manual_seed(seed)
        provided = {}
        if self.gen_module is not None:
            # A generator that takes the workload reads its own fields (a `layout` the axes cannot carry).
            more = {"workload": dict(workload)} if takes_workload(self.gen_module.generate) else {}
            provided = self.gen_module.generate(dict(axes), self.definition, seed, self.device, **more) or {}
        values = []
        for name, spec in self.definition["inputs"].items():
            wspec = workload.get("inputs", {}).get(name, {"type": "random"})
            # The workload's own data (a literal, a blob) wins over the generator, which fills the rest.
            if wspec.get("type") == "scalar":
                v = wspec["value"]
            elif wspec.get("type") == "safetensors":
                v = self._blob(wspec["path"], wspec["tensor_key"]).to(self.device)
            elif name in provided:
                v = provided[name]
            else:
                shape = shape_of(spec, axes)
                if shape is None:
                    v = torch.randn((), generator=gen, device=gen.device).item()
                else:
                    v = random_tensor(shape, spec["dtype"], gen, self.device)
            values.append(v)
        return values


def takes_workload(generate) -> bool:
    """generate(axes, definition, seed, device, workload): the workload object as a fifth argument."""
    import inspect
    try:
        return "workload" in inspect.signature(generate).parameters
    except (TypeError, ValueError):
        return False


def make_inputs(inputs: Inputs, wl: dict, seed: int, on_device: bool = True) -> list:
    try:
        return inputs.make(wl, seed, on_device)
    except HarnessFailure:
        raise
    except Exception as e:  # the harness's fault, not the kernel's
        raise HarnessFailure(f"could not make inputs: {short_tb(e)}") from e


def trial_seed(job: dict, wl_index: int, trial: int) -> int:
    return int(job.get("seed", 0)) * 1_000_003 + wl_index * 1009 + trial


def load_reference(definition: dict, fast: dict | None = None):
    """The definition's reference `run`; with fast ({"file", "source"}: what a job carries once the host
    proved the target's fast reference equal to it, bench/refproof.py), that one's `run` instead."""
    if fast:
        ns: dict = {"__name__": "autogk_fast_reference"}
        exec(compile(fast["source"], fast.get("file", "reference.py"), "exec"), ns)
        run = ns["run"]
        run.autogk_what = f"the fast reference ({fast.get('file', 'reference.py')}, proven equal to the definition's)"
        return run
    ns = {"__name__": "autogk_reference"}
    exec(compile(definition["reference"], "<reference>", "exec"), ns)
    return ns["run"]


def as_tuple(out) -> tuple:
    if isinstance(out, (tuple, list)):
        return tuple(out)
    if isinstance(out, dict):
        return tuple(out.values())
    return (out,)


def reference_outputs(reference, args: list) -> tuple:
    try:
        with torch.no_grad():
            return as_tuple(reference(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args]))
    except Exception as e:  # the harness's fault, not the kernel's
        what = getattr(reference, "autogk_what", "the reference")
        raise HarnessFailure(f"{what} raised: {short_tb(e)}") from e


def refill(args: list, fresh: list) -> bool:
    """Overwrite args' tensors in place with fresh's values (same pointers, new data)."""
    pairs = [(a, f) for a, f in zip(args, fresh) if isinstance(a, torch.Tensor)]
    if any(a.shape != f.shape or a.dtype != f.dtype for a, f in pairs):
        return False
    for a, f in pairs:
        a.copy_(f)
    return True


def tensor_bytes(definition: dict, axes: dict, section: str) -> dict[str, int]:
    out = {}
    for name, spec in definition[section].items():
        shape = shape_of(spec, axes)
        if shape is None:
            continue
        dtype = DTYPES.get(spec["dtype"])
        out[name] = math.prod(shape) * (torch.empty((), dtype=dtype).element_size() if dtype else 4)
    return out


def floor_bytes(definition: dict, axes: dict) -> tuple[int, str]:
    """Bytes a correct kernel must move at least, and the rule used: the generic rule, for targets whose
    inputs.py declares no floor (see floor_of).

    Every output is written once. Inputs are read once, unless the definition has integer inputs
    (indices, page tables): then the kernel may gather only part of its float inputs, so only the
    integer inputs are counted. FLOPs are not counted: a definition carries no FLOP formula."""
    ins = tensor_bytes(definition, axes, "inputs")
    outs = sum(tensor_bytes(definition, axes, "outputs").values())
    ints = {n: b for n, b in ins.items() if not DTYPES[definition["inputs"][n]["dtype"]].is_floating_point}
    if ints:
        return outs + sum(ints.values()), "outputs + integer inputs (gathering definition)"
    return outs + sum(ins.values()), "outputs + inputs, each once"


def floor_of(definition: dict, axes: dict, gen_module=None, make=None) -> dict:
    """{bytes, flops, rule} a correct kernel cannot avoid on one workload.

    A target's inputs.py may declare `floor(inputs, axes, definition)` -> {"bytes", "flops", "rule"},
    computed from an actual input set ({name: value}, which make() returns as a list in the
    definition's order): a gathering kernel's bytes are the rows its indices touch, which only the
    inputs say. Its layout is fixed per workload, so any one input set gives the same floor. Without
    one (or when it fails: the failure is named in the rule) the generic floor_bytes rule applies;
    `rule` says which was used. FLOPs are None under the generic rule."""
    declared = getattr(gen_module, "floor", None) if gen_module is not None else None
    failed = ""
    if callable(declared) and make is not None:
        try:
            got = declared(dict(zip(definition["inputs"], make())), dict(axes), definition)
            nbytes, flops = int(got["bytes"]), got.get("flops")
            if nbytes < 0 or flops is not None and int(flops) < 0:
                raise ValueError(f"negative floor {got!r:.80}")
            return {"bytes": nbytes, "flops": None if flops is None else int(flops),
                    "rule": f"inputs.py floor: {got.get('rule') or 'declared by the target'}"}
        except Exception as e:  # noqa: BLE001 - a broken formula must not stop the judge: the generic rule stands
            failed = f" (inputs.py floor failed: {short_tb(e)[:200]})"
    nbytes, rule = floor_bytes(definition, axes)
    return {"bytes": nbytes, "flops": None, "rule": rule + failed}


def floor_record(job: dict, inputs: Inputs, wl_index: int, wl: dict, bandwidth: float) -> dict:
    """One timed workload's floor fields: floor_us (its bytes over the measured copy bandwidth, B/s),
    floor_rule, floor_bytes, floor_flops. A declared formula reads an input set drawn as trial 0's."""
    fl = floor_of(job["definition"], resolve_axes(job["definition"], wl), inputs.gen_module,
                  lambda: make_inputs(inputs, wl, trial_seed(job, wl_index, 0)))
    return {"floor_us": fl["bytes"] / bandwidth * 1e6, "floor_rule": fl["rule"], "floor_bytes": fl["bytes"],
            "floor_flops": fl["flops"]}
