"""The bench worker: runs ON the benchmark machine, in its own process, one job at a time.

It imports only the standard library, torch and triton (safetensors when a workload needs a blob),
so the same file runs on this machine's CPU (Triton interpreter), on a local CUDA GPU and inside a
Modal container. It is never edited by an agent.

    python worker.py JOB.json OUT_DIR [--only LABEL:UUID,...]

For every (label, workload) it appends one JSON line to OUT_DIR/progress.jsonl: a "start" line
before touching the kernel and a "done" line after, so the parent can tell which workload a crash
or a hang happened in and restart the worker on what is left.
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

# Tolerances by output dtype: |out - ref| <= atol + rtol * |ref|. One bf16 ulp is 2^-8 relative.
TOLERANCES = {
    "float32": (1e-4, 1e-4),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
    "float8_e4m3fn": (1.25e-1, 1.25e-1),
    "float8_e5m2": (2.5e-1, 2.5e-1),
}

DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float64": torch.float64, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool,
    "float8_e4m3fn": getattr(torch, "float8_e4m3fn", None), "float8_e5m2": getattr(torch, "float8_e5m2", None),
}


class KernelFailure(Exception):
    """A failure that is the kernel's, carried with its status."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class HarnessFailure(Exception):
    """The harness could not make inputs or the reference's outputs."""


# ---------------------------------------------------------------------------------------------
# Inputs and reference
# ---------------------------------------------------------------------------------------------

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
    dtype = DTYPES.get(dtype_name)
    if dtype is None:
        raise HarnessFailure(f"dtype {dtype_name} is not supported by this torch")
    if dtype.is_floating_point:
        t = torch.randn(shape, generator=gen, dtype=torch.float32)
        return t.to(dtype).to(device)
    if dtype == torch.bool:
        return (torch.rand(shape, generator=gen) < 0.5).to(device)
    return torch.randint(0, 64, shape, generator=gen, dtype=dtype).to(device)


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

    def make(self, workload: dict, seed: int) -> list:
        axes = resolve_axes(self.definition, workload)
        gen = torch.Generator().manual_seed(seed)
        provided = {}
        if self.gen_module is not None:
            provided = self.gen_module.generate(dict(axes), self.definition, seed, self.device) or {}
        values = []
        for name, spec in self.definition["inputs"].items():
            wspec = workload.get("inputs", {}).get(name, {"type": "random"})
            if name in provided:
                v = provided[name]
            elif wspec.get("type") == "scalar":
                v = wspec["value"]
            elif wspec.get("type") == "safetensors":
                v = self._blob(wspec["path"], wspec["tensor_key"]).to(self.device)
            else:
                shape = shape_of(spec, axes)
                if shape is None:
                    v = torch.randn((), generator=gen).item()
                else:
                    v = random_tensor(shape, spec["dtype"], gen, self.device)
            values.append(v)
        return values


def load_reference(definition: dict):
    ns: dict = {"__name__": "autogk_reference"}
    exec(compile(definition["reference"], "<reference>", "exec"), ns)
    return ns["run"]


def as_tuple(out) -> tuple:
    if isinstance(out, (tuple, list)):
        return tuple(out)
    if isinstance(out, dict):
        return tuple(out.values())
    return (out,)


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------

def alloc_outputs(definition: dict, axes: dict, device: str, poison_seed: int) -> list[torch.Tensor]:
    """Fresh outputs filled with poison, so a kernel that skips part of them cannot pass."""
    outs = []
    for spec in definition["outputs"].values():
        shape = shape_of(spec, axes) or []
        dtype = DTYPES[spec["dtype"]]
        t = torch.empty(shape, dtype=dtype, device=device)
        if dtype.is_floating_point:
            t.fill_(float("nan"))
        elif dtype == torch.bool:
            t.fill_(poison_seed % 2 == 0)
        else:
            info = torch.iinfo(dtype)
            t.fill_(info.min if poison_seed % 2 == 0 else info.max)
        outs.append(t)
    return outs


def bits(t: torch.Tensor) -> torch.Tensor:
    """A view that compares exactly, NaN payloads included."""
    if t.dtype.is_floating_point and t.element_size() in (1, 2, 4, 8):
        return t.contiguous().view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def compare(name: str, dtype_name: str, out: torch.Tensor, ref: torch.Tensor, tolerances: dict) -> dict:
    """Error statistics; raises KernelFailure when out is not ref within tolerance."""
    if tuple(out.shape) != tuple(ref.shape):
        raise KernelFailure("INCORRECT_SHAPE", f"output {name}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    if not out.dtype.is_floating_point:
        mism = (out != ref.to(out.dtype)).sum().item()
        if mism:
            raise KernelFailure("INCORRECT_NUMERICAL", f"output {name}: {mism} of {out.numel()} elements differ")
        return {"max_abs_err": 0.0, "max_rel_err": 0.0}
    o = out.detach().to("cpu", torch.float32)
    r = ref.detach().to("cpu", torch.float32)
    nan_out = torch.isnan(o) & ~torch.isnan(r)
    if nan_out.any():
        raise KernelFailure("INCORRECT_NUMERICAL",
                            f"output {name}: {int(nan_out.sum())} of {o.numel()} elements NaN "
                            "(not written, or computed as NaN)")
    atol, rtol = tolerances.get(dtype_name, TOLERANCES.get(dtype_name, (1e-3, 1e-3)))
    both = torch.isfinite(r)
    diff = (o - r).abs()
    diff = torch.where(both, diff, torch.where(o == r, torch.zeros_like(diff), torch.full_like(diff, math.inf)))
    rel = diff / r.abs().clamp_min(1e-12)
    bad = diff > atol + rtol * r.abs().nan_to_num(0.0)
    stats = {"max_abs_err": float(diff.max()) if diff.numel() else 0.0,
             "max_rel_err": float(torch.where(both, rel, torch.zeros_like(rel)).max()) if rel.numel() else 0.0}
    if bad.any():
        raise KernelFailure("INCORRECT_NUMERICAL",
                            f"output {name}: {int(bad.sum())} of {o.numel()} elements outside atol={atol}, "
                            f"rtol={rtol} (max abs err {stats['max_abs_err']:.3g})")
    return stats


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def check_once(run, inputs: list, ref_out: tuple, definition: dict, axes: dict, device: str,
               poison_seed: int, tolerances: dict) -> dict:
    """Call the kernel once on poisoned outputs; check outputs, and that inputs are unchanged."""
    outs = alloc_outputs(definition, axes, device, poison_seed)
    saved = [bits(x).clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    returned = run(*inputs, *outs)
    sync(device)
    if returned is not None:
        returned = as_tuple(returned)
        if len(returned) != len(outs) or any(not isinstance(r, torch.Tensor) for r in returned):
            raise KernelFailure("INCORRECT_SHAPE", "run() must write its outputs in place and return None "
                                "(destination-passing style)")
        outs = list(returned)
    for i, (name, x) in enumerate(zip(definition["inputs"], inputs)):
        if isinstance(x, torch.Tensor) and not torch.equal(bits(x), saved[i]):
            raise KernelFailure("INPUT_MODIFIED", f"input {name} was changed by the kernel")
    stats = {"max_abs_err": 0.0, "max_rel_err": 0.0}
    for (name, spec), out, ref in zip(definition["outputs"].items(), outs, ref_out):
        ref = ref if isinstance(ref, torch.Tensor) else torch.tensor(ref)
        s = compare(name, spec["dtype"], out, ref.to(out.device), tolerances)
        stats = {k: max(stats[k], s[k]) for k in stats}
    return stats


# ---------------------------------------------------------------------------------------------
# The job
# ---------------------------------------------------------------------------------------------

def import_files(label: str, files: dict, root: Path, main: str = "kernel.py"):
    """Write a kernel's files to disk (Triton's @jit needs a real file) and import the main one."""
    d = root / label
    d.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    name = f"autogk_{label}_{os.getpid()}"
    spec = importlib.util.spec_from_file_location(name, d / main)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(d))
    try:
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(d))
    return mod


def import_kernel(label: str, files: dict, root: Path):
    mod = import_files(label, files, root)
    if not callable(getattr(mod, "run", None)):
        raise KernelFailure("COMPILE_ERROR", "kernel.py defines no run() function")
    return mod


def classify(exc: BaseException) -> str:
    mod = type(exc).__module__ or ""
    if "triton" in mod and "compil" in (mod + type(exc).__name__).lower():
        return "COMPILE_ERROR"
    return "RUNTIME_ERROR"


def short_tb(exc: BaseException, limit: int = 1500) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text[-limit:]


def environment(device: str) -> dict:
    import triton
    env = {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
           "device": device, "interpret": os.environ.get("TRITON_INTERPRET") == "1",
           "host": platform.node(), "platform": platform.platform()}
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.update(gpu=p.name, cuda=torch.version.cuda, capability=f"{p.major}.{p.minor}",
                   driver=_driver_version())
    return env


def _driver_version() -> str:
    try:
        import subprocess
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0]
    except Exception:
        return ""


def check_workload(run, wl_index: int, wl: dict, job: dict, inputs: Inputs, reference, device: str) -> dict:
    """Correctness on several fresh input sets for one (kernel, workload)."""
    definition = job["definition"]
    settings = job.get("settings", {})
    tolerances = settings.get("tolerances", {})
    axes = resolve_axes(definition, wl)
    stats = {"max_abs_err": 0.0, "max_rel_err": 0.0}
    for trial in range(int(settings.get("trials", 3))):
        seed = int(job.get("seed", 0)) * 1_000_003 + wl_index * 1009 + trial
        try:
            args = inputs.make(wl, seed)
            with torch.no_grad():
                ref_out = as_tuple(reference(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args]))
        except Exception as e:  # the harness's fault, not the kernel's
            raise HarnessFailure(f"could not make inputs or reference outputs: {short_tb(e)}") from e
        s = check_once(run, args, ref_out, definition, axes, device, trial, tolerances)
        stats = {k: max(stats[k], s[k]) for k in stats}
    return stats


def main(argv: list[str]) -> int:
    job_path, out_dir = Path(argv[0]), Path(argv[1])
    only = None
    if len(argv) > 3 and argv[2] == "--only":
        only = set(argv[3].split(",")) if argv[3] else set()
    job = json.loads(job_path.read_text())
    device = job.get("settings", {}).get("device", "cpu")
    progress = open(out_dir / "progress.jsonl", "a", buffering=1)

    def emit(**rec) -> None:
        progress.write(json.dumps(rec) + "\n")
        progress.flush()
        os.fsync(progress.fileno())

    emit(event="env", environment=environment(device))
    tmp = Path(tempfile.mkdtemp(prefix="autogk-worker-"))
    gen_module = None
    if job.get("generator"):
        try:
            gen_module = import_files("generator", {"inputs.py": job["generator"]}, tmp, main="inputs.py")
        except Exception as e:
            emit(event="fatal", message=f"the target's inputs.py failed to import: {short_tb(e)}")
            return 2
    inputs = Inputs(job, device, gen_module)
    reference = load_reference(job["definition"])
    for label, files in job["sources"].items():
        try:
            run = import_kernel(label, files, tmp).run
            load_error = None
        except KernelFailure as e:
            load_error = (e.status, str(e))
        except BaseException as e:  # noqa: BLE001 - any import failure is the kernel's
            load_error = ("COMPILE_ERROR", short_tb(e))
        for i, wl in enumerate(job["workloads"]):
            key = f"{label}:{wl['uuid']}"
            if only is not None and key not in only:
                continue
            emit(event="start", label=label, uuid=wl["uuid"])
            t0 = time.perf_counter()
            rec = {"event": "done", "label": label, "uuid": wl["uuid"]}
            if load_error:
                rec.update(status=load_error[0], message=load_error[1])
            else:
                try:
                    rec.update(status="PASSED", **check_workload(run, i, wl, job, inputs, reference, device))
                except KernelFailure as e:
                    rec.update(status=e.status, message=str(e))
                except HarnessFailure as e:
                    rec.update(status="REFERENCE_ERROR", message=str(e))
                except Exception as e:  # noqa: BLE001
                    rec.update(status=classify(e), message=short_tb(e))
            rec["check_s"] = round(time.perf_counter() - t0, 4)
            emit(**rec)
    emit(event="end")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
