"""The bench judge: runs ON the benchmark machine, in its own process, one job at a time.

It imports only the standard library, torch and triton (safetensors when a workload needs a blob),
so the same file runs on this machine's CPU (Triton interpreter), on a local CUDA GPU and inside a
Modal container. It is never edited by an agent, and it never imports a kernel: each kernel label
gets its own process (`candidate.py`, started once per job and reused across workloads), which
receives the inputs and poisoned outputs the judge made, runs the kernel, and answers "done" (and,
when timed, its timings). Inputs, reference outputs, comparisons, statuses and the progress record
stay here, out of the kernel's reach.

    python worker.py JOB.json OUT_DIR [--only LABEL:UUID,...] [--deadline S] [--workload-limit S]

The first line of stdin is the job's key: every line of OUT_DIR/progress.jsonl carries an HMAC of
the record under it, so the runner ignores lines a kernel forged (it runs as the same user and can
write any file the judge can). For every (label, workload) there is a "start" line before the
kernel is called and a "done" line after, so the parent can tell which workload a crash or a hang
happened in and restart the judge on what is left.
"""
from __future__ import annotations

import hashlib
import hmac
import importlib
import importlib.util
import json
import math
import os
import platform
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch


def _sibling(name: str, package_name: str = "autogk_git.bench"):
    """A helper module shipped beside this file (autogk_<name>.py), else the package's own."""
    try:
        return importlib.import_module(f"autogk_{name}")
    except ImportError:
        return importlib.import_module(f"{package_name}.{name}")


Status = _sibling("status").Status
hygiene = _sibling("hygiene")

DPS_HINT = ("run() must write its results into the output tensors it is given (the arguments after the "
            "inputs, e.g. `output.copy_(y)` or a Triton kernel storing through the output's pointer) and "
            "return None")

rules = _sibling("rules")  # how outputs are judged: exact, tolerance, top-k set by score
TOLERANCES = rules.TOLERANCES

DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float64": torch.float64, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool,
    "float8_e4m3fn": getattr(torch, "float8_e4m3fn", None), "float8_e5m2": getattr(torch, "float8_e5m2", None),
}


class KernelFailure(Exception):
    """A failure that is the kernel's, carried with its status."""

    def __init__(self, status: Status, message: str) -> None:
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
            provided = self.gen_module.generate(dict(axes), self.definition, seed, self.device) or {}
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


# The target's inputs.py (generator and compare rules) and its declared rules; set once by main().
TARGET = None
TARGET_RULES: dict = {}


def set_target(module) -> None:
    global TARGET, TARGET_RULES
    TARGET, TARGET_RULES = module, rules.declared(module)


def sync(device: str) -> None:
    """Device-wide synchronize: for the harness's own work only, never between a kernel and the read
    of its outputs (that would let work on another stream finish first; see stream_wait)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def warm_profiler() -> None:
    """Start and stop torch.profiler (CUPTI) once: its first start in a process costs seconds, which
    would otherwise land inside the first timed round."""
    try:
        from torch.profiler import ProfilerActivity, profile
        x = torch.zeros(1, device="cuda")
        with profile(activities=[ProfilerActivity.CUDA]):
            x.add_(1)
            torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - a profiler that cannot start fails again, visibly, when timing
        pass


def stream_wait(device: str) -> None:
    """Wait for what is queued on the caller's (current) stream, and for nothing else: a kernel's
    outputs must be ready in its caller's stream order, as a consumer on that stream would read them."""
    if device.startswith("cuda"):
        ev = torch.cuda.Event()
        ev.record(torch.cuda.current_stream())
        ev.synchronize()


def is_dps_return(returned, outs: list) -> bool:
    """run() returned None, or the very output tensors it was given (writing them and returning them
    is still destination passing); anything else is a result handed back instead of written."""
    if returned is None:
        return True
    got = list(returned) if isinstance(returned, (tuple, list)) else [returned]
    if len(got) != len(outs):
        return False
    return all(isinstance(g, torch.Tensor) and g.data_ptr() == o.data_ptr() and g.shape == o.shape
               and g.dtype == o.dtype for g, o in zip(got, outs))


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
    if outs is None:
        outs = alloc_outputs(definition, axes, device, poison_seed)
    else:
        poison(outs, poison_seed)
    saved = [bits(x).clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    seen = invoke(run, inputs, outs, device)
    check_inputs(definition, inputs, saved)
    return check_outputs(definition, seen, ref_out, tolerances, inputs, axes)


def poison(outs: list, poison_seed: int) -> None:
    for t in outs:
        if t.dtype.is_floating_point:
            t.fill_(float("nan"))
        elif t.dtype == torch.bool:
            t.fill_(poison_seed % 2 == 0)
        else:
            info = torch.iinfo(t.dtype)
            t.fill_(info.min if poison_seed % 2 == 0 else info.max)


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


def reference_outputs(reference, args: list) -> tuple:
    try:
        with torch.no_grad():
            return as_tuple(reference(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args]))
    except Exception as e:  # the harness's fault, not the kernel's
        raise HarnessFailure(f"the reference raised: {short_tb(e)}") from e


def refill(args: list, fresh: list) -> bool:
    """Overwrite args' tensors in place with fresh's values (same pointers, new data)."""
    pairs = [(a, f) for a, f in zip(args, fresh) if isinstance(a, torch.Tensor)]
    if any(a.shape != f.shape or a.dtype != f.dtype for a, f in pairs):
        return False
    for a, f in pairs:
        a.copy_(f)
    return True


def relabel(e: KernelFailure, when: str) -> KernelFailure:
    return KernelFailure(e.status, f"{when}: {e}")


# ---------------------------------------------------------------------------------------------
# The job
# ---------------------------------------------------------------------------------------------

def write_files(label: str, files: dict, root: Path) -> Path:
    """Write a kernel's files to root/label (Triton's @jit needs a real file); returns the folder."""
    d = root / label
    d.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return d


def import_files(label: str, files: dict, root: Path, main: str = "kernel.py"):
    """Write a kernel's files to disk and import the main one (in this process: trusted code only)."""
    return load_module(label, write_files(label, files, root), main)


def load_module(label: str, d: Path, main: str = "kernel.py"):
    """Import d/main as a fresh module, with d on sys.path for its sibling imports."""
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
    """Import a kernel into THIS process: for tools that time a known kernel by hand (benchmarks/,
    the profiler), never for the judge, which runs kernels in a RemoteKernel."""
    mod = import_files(label, files, root)
    if not callable(getattr(mod, "run", None)):
        raise KernelFailure(Status.COMPILE_ERROR, "kernel.py defines no run() function")
    return mod


def classify(exc: BaseException) -> Status:
    mod = type(exc).__module__ or ""
    if "triton" in mod and "compil" in (mod + type(exc).__name__).lower():
        return Status.COMPILE_ERROR
    return Status.RUNTIME_ERROR


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


# ---------------------------------------------------------------------------------------------
# Kernel processes: the judge's side
# ---------------------------------------------------------------------------------------------

HERE = Path(__file__).resolve().parent
_CHILDREN: list = []  # every RemoteKernel started, so a SIGTERM can end them all


def _death(rc: int | None) -> str:
    if rc is None:
        return "still running"
    if rc < 0:
        try:
            return f"killed by signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit code {rc}"


class RemoteKernel:
    """One kernel label, run in its own process (candidate.py): started once per job, reused across
    workloads, started again only after it died or was killed at a limit.

    The judge allocates every tensor; the process gets them shared (CPU shared memory or CUDA IPC),
    writes the outputs in place and answers. `deadline` (monotonic seconds) bounds every answer: past
    it the process group is killed and the call is a TIMEOUT."""

    dps = True

    def __init__(self, label: str, files: dict, root: Path, device: str, env: dict, mem_limit: int,
                 emit, startup_s: float = 300.0, warm_profiler: bool = False, timer: str = "") -> None:
        self.label, self.device, self.env, self.mem_limit = label, device, env, int(mem_limit or 0)
        self.warm_profiler = warm_profiler
        self.timer = timer  # the device timer's method, made (and sealed) before the kernel is imported
        # What the kernel's process can see (its folder, file, module name, arguments, the logs beside
        # it) names a random alias, never the label: a kernel that knew it ran as the parent could run
        # slowly there and make every candidate look faster.
        self.alias = "k" + secrets.token_hex(6)
        self.dir = write_files(self.alias, files, root)
        self.log = root / f"{self.alias}.log"
        self.emit = emit
        self.startup_s = startup_s
        self.proc: subprocess.Popen | None = None
        self.conn = None
        self.load_error: tuple[Status, str] | None = None
        self.deadline = math.inf
        self.starts = 0
        _CHILDREN.append(self)

    # -- process life ------------------------------------------------------------------------------

    def start(self) -> None:
        from multiprocessing.connection import Connection
        a, b = socket.socketpair()
        script = HERE / "candidate.py"
        cmd = [sys.executable, str(script), str(b.fileno()), str(self.dir), self.alias, self.device,
               str(self.mem_limit), "1" if self.warm_profiler else "0", self.timer]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=str(self.dir), env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, pass_fds=[b.fileno()], start_new_session=True)
        b.close()
        self.conn = Connection(a.detach())
        self.starts += 1
        self.emit(event="child", label=self.label, pid=self.proc.pid)

    def ready(self) -> tuple[Status, str] | None:
        """Wait for the import; returns why it failed (a raise, no run(), a death, a hang), or None."""
        if self.proc is None:
            self.start()
        deadline = min(self.deadline, time.monotonic() + self.startup_s)
        try:
            reply = self._recv(deadline, "importing kernel.py")
        except KernelFailure as e:
            return (e.status, str(e))
        if reply[0] == "load_error":
            self.stop()
            return (Status(reply[1]), reply[2])
        return None

    def ensure(self) -> None:
        """A live process with the kernel imported: started again after a death or a kill."""
        if self.load_error:
            raise KernelFailure(*self.load_error)
        if self.proc is None or self.proc.poll() is not None:
            self.stop()
            self.start()
            err = self.ready()
            if err:
                raise KernelFailure(*err)

    def stop(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
            self.conn = None
        if self.proc is not None:
            hygiene.kill_tree(self.proc.pid)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None and self.conn is not None:
            try:
                self.conn.send(("exit",))
                self.proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.stop()

    def _tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-800:].strip()
        except OSError:
            return ""

    def _recv(self, deadline: float, doing: str):
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise KernelFailure(Status.TIMEOUT, timeout_message(doing))
            try:
                if self.conn.poll(min(left, 0.5)):
                    return self.conn.recv()
            except (EOFError, OSError):
                pass
            else:
                if self.proc.poll() is None:
                    continue
            try:
                rc = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                rc = None
            tail = self._tail()
            self.stop()
            raise KernelFailure(Status.COMPILE_ERROR if doing.startswith("importing") else Status.RUNTIME_ERROR,
                                f"the kernel's process died while {doing} ({_death(rc)})" +
                                (f": {tail}" if tail else ""))

    def _send(self, msg: tuple, doing: str):
        if self.device.startswith("cuda"):
            torch.cuda.current_stream().synchronize()  # the poison and inputs are written before it reads
        try:
            self.conn.send(msg)
        except (OSError, ValueError):
            pass  # it died: _recv says how
        return self._recv(self.deadline, doing)

    # -- requests ----------------------------------------------------------------------------------

    def call(self, inputs: list, outs: list) -> list:
        """Run the kernel once; returns what its caller's stream saw (see invoke)."""
        self.ensure()
        snaps = [torch.empty_like(o) for o in outs] if self.device.startswith("cuda") else None
        reply = self._send(("call", inputs, outs, snaps), "running the kernel")
        if reply[0] == "not_dps":
            raise KernelFailure(Status.NOT_DESTINATION_PASSING,
                                f"run() returned a {reply[1]} instead of writing its outputs: {DPS_HINT}")
        if reply[0] == "error":
            raise KernelFailure(Status(reply[1]), reply[2])
        return snaps if snaps is not None else outs

    def time(self, sets: list, outs: list, warm: list, warm_outs: list, method: str, settings: dict) -> dict:
        self.ensure()
        reply = self._send(("time", sets, outs, warm, warm_outs, method, settings), "timing the kernel")
        if reply[0] == "timer_error":
            raise _sibling("timing").TimerError(reply[1])
        if reply[0] == "error":
            raise KernelFailure(Status(reply[1]), reply[2])
        return reply[1]


def start_kernels(job: dict, root: Path, device: str, emit, only) -> dict[str, RemoteKernel]:
    """One process per label, all importing at once (their start-up costs overlap with each other's
    and with the judge's own); `ready_kernels` waits for the imports."""
    settings = job.get("settings", {})
    extra = list(settings.get("scrub_env", [])) + list(job.get("scrub_env", []))
    env = hygiene.bytecode_cache(hygiene.scrub_env(os.environ, extra), "kernels")
    env["TMPDIR"] = str(root)  # the kernel's scratch files land in the judge's folder, removed with it
    kernels = {}
    for label, files in job["sources"].items():
        if only is not None and not any(k.startswith(f"{label}:") for k in only):
            continue
        timed = bool(settings.get("timed")) and job.get("stage") in ("stride", "ab")
        method = settings.get("timer", "cupti") if timed and device.startswith("cuda") else ""
        kernels[label] = RemoteKernel(label, files, root, device, env, int(settings.get("memory_limit_bytes", 0)),
                                      emit, warm_profiler=method == "cupti", timer=method)
    for k in kernels.values():
        k.start()
    return kernels


def ready_kernels(kernels: dict[str, RemoteKernel]) -> None:
    for k in kernels.values():
        k.load_error = k.ready()  # an import that fails once fails for every workload: not retried


def check_all(kernels: dict, job: dict, inputs: Inputs, reference, device: str, only, emit,
              emit_done: bool, refs: SharedRefs | None = None) -> dict[str, dict]:
    """Correctness records for every (label, workload) asked for. Labels in their own processes are
    checked side by side (one judge thread each: the judge mostly waits on them); in-process ones
    one after the other. refs: the first set's reference outputs shared between labels (one is made
    here when None)."""
    import threading
    refs = refs if refs is not None else SharedRefs(len(kernels))
    recs: dict[str, dict] = {}
    errors: list[BaseException] = []

    def one(label: str, run, load_error) -> None:
        try:
            for i, wl in enumerate(job["workloads"]):
                key = f"{label}:{wl['uuid']}"
                if only is not None and key not in only:
                    continue
                emit(event="start", label=label, uuid=wl["uuid"])
                recs[key] = correctness_record(label, run, load_error, i, wl, job, inputs, reference, device,
                                               refs)
                if emit_done:
                    emit(**recs[key])
                else:  # final after the timed rounds; meanwhile the user sees the checks go by
                    emit(event="checked", label=label, uuid=wl["uuid"], status=str(recs[key]["status"]))
        except BaseException as e:  # noqa: BLE001 - re-raised in the judge's main thread
            errors.append(e)

    remote = [v for v in kernels.values() if isinstance(v[0], RemoteKernel) or v[1]]
    if len(kernels) > 1 and len(remote) == len(kernels):
        threads = [threading.Thread(target=one, args=(label, run, err), name=f"judge-{label}")
                   for label, (run, err) in kernels.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for label, (run, err) in kernels.items():
            one(label, run, err)
    if errors:
        raise errors[0]
    return recs


PHASES: dict[str, float] = {}
"""Wall seconds by phase of this job (start, check, inputs, timed, verify): the ab summary's `phases`,
so a slow experiment says where its time went."""


def phase(name: str, since: float) -> float:
    now = time.perf_counter()
    PHASES[name] = PHASES.get(name, 0.0) + now - since
    return now


LIMITS = {"job_deadline": math.inf, "workload_s": math.inf, "job_s": math.inf}
"""Set by main(): the job's end (monotonic) and one workload's share; in-process callers keep inf."""


def timeout_message(doing: str) -> str:
    w, j = LIMITS["workload_s"], LIMITS["job_s"]
    if time.monotonic() >= LIMITS["job_deadline"] - 0.5 or w >= j:
        return f"no result within the job's {j:.0f} s limit (while {doing})"
    return f"no result within {w:.0f} s, one workload's share of the job's {j:.0f} s limit (while {doing})"


def arm(*kernels) -> None:
    """Give each kernel process its time for the next workload (or round of one)."""
    end = min(LIMITS["job_deadline"], time.monotonic() + LIMITS["workload_s"])
    for k in kernels:
        if isinstance(k, RemoteKernel):
            k.deadline = end


def end_children() -> None:
    """Every kernel process, and anything they left behind (re-parented here: this is a subreaper)."""
    for k in _CHILDREN:
        k.stop()
    hygiene.kill_pids(hygiene.descendants(os.getpid()))
    hygiene.reap_children()


def trial_seed(job: dict, wl_index: int, trial: int) -> int:
    return int(job.get("seed", 0)) * 1_000_003 + wl_index * 1009 + trial


def make_inputs(inputs: Inputs, wl: dict, seed: int, on_device: bool = True) -> list:
    try:
        return inputs.make(wl, seed, on_device)
    except HarnessFailure:
        raise
    except Exception as e:  # the harness's fault, not the kernel's
        raise HarnessFailure(f"could not make inputs: {short_tb(e)}") from e


class SharedRefs:
    """Reference outputs of the first input set of each workload, made once for the labels checked
    side by side (an ab job's parent and candidate get the same first set): with a reference that
    loops in Python (the DSA definitions: 0.2-0.4 s a call on the H200) that call was made twice.
    Each entry goes after `uses` reads."""

    def __init__(self, uses: int) -> None:
        import threading
        self.uses = uses
        self._lock = threading.Lock()
        self._entries: dict = {}

    def get(self, key, make):
        import threading
        with self._lock:
            e = self._entries.setdefault(key, {"lock": threading.Lock(), "value": None, "left": self.uses})
        with e["lock"]:  # the other label waits for this one's reference instead of making its own
            if e["value"] is None:
                e["value"] = make()
            value = e["value"]
            e["left"] -= 1
            if e["left"] <= 0:
                with self._lock:
                    self._entries.pop(key, None)
        return value


def check_workload(run, wl_index: int, wl: dict, job: dict, inputs: Inputs, reference, device: str,
                   light: bool = False, refs: SharedRefs | None = None) -> dict:
    """Correctness on several fresh input sets for one (kernel, workload), then two calls that catch
    kernels that remember: the last inputs again (right only once, early return on inputs seen before)
    and new values in the same buffers (a cache keyed by pointer)."""
    definition = job["definition"]
    settings = job.get("settings", {})
    tolerances = settings.get("tolerances", {})
    axes = resolve_axes(definition, wl)
    stats = {"max_abs_err": 0.0, "max_rel_err": 0.0}
    # light: one input set, no repeat calls; for an ab job's parent, the trunk's tip, which was judged
    # in full when it was kept (its timed calls' outputs are still checked like the candidate's).
    trials = 1 if light else int(settings.get("trials", 3))
    args, ref_out, outs = None, None, None
    for trial in range(trials):
        seed = trial_seed(job, wl_index, trial)
        args = make_inputs(inputs, wl, seed)
        if trial == 0 and refs is not None:
            ref_out = refs.get(seed, lambda: reference_outputs(reference, args))
        else:
            ref_out = reference_outputs(reference, args)
        outs = alloc_outputs(definition, axes, device, trial)
        try:
            s = check_once(run, args, ref_out, definition, axes, device, trial, tolerances, outs=outs)
        except KernelFailure as e:
            if trial == 0:
                raise
            # Right on the first set, wrong on a later one: it remembers earlier calls (a cache keyed
            # by a reused address, state kept between calls) or depends on the data.
            raise relabel(e, f"on fresh input set {trial + 1} of {trials}, after earlier sets passed") from None
        stats = {k: max(stats[k], s[k]) for k in stats}
    if settings.get("repeat_checks", True) and not light:
        try:
            check_once(run, args, ref_out, definition, axes, device, trials + 1, tolerances)
        except KernelFailure as e:
            raise relabel(e, "called again on inputs it had already seen (fresh output buffers)") from None
        fresh = make_inputs(inputs, wl, trial_seed(job, wl_index, trials + 7))
        if refill(args, fresh):
            ref_out = reference_outputs(reference, args)
            try:
                check_once(run, args, ref_out, definition, axes, device, trials + 2, tolerances, outs=outs)
            except KernelFailure as e:
                raise relabel(e, "called on new values in the same input and output buffers") from None
    return stats


# ---------------------------------------------------------------------------------------------
# Timing: stride (candidate vs reference) and ab (candidate vs parent, paired rounds, sequential)
# ---------------------------------------------------------------------------------------------

class HostTimer:
    """The host clock around each call: for tests on CPU only. Recorded as method 'host'; the local
    backend never uses it."""

    method = "host"

    def time_calls(self, calls, replays: int = 3) -> dict:
        samples = []
        for c in calls:
            t0 = time.perf_counter()
            c()
            samples.append((time.perf_counter() - t0) * 1e6)
        s = sorted(samples)
        return {"us": s[len(s) // 2], "samples": samples, "method": self.method}

    def sync_latency(self, call, n: int = 3) -> float:
        return self.time_calls([call] * n)["us"]

    def bandwidth(self) -> float | None:
        return None


_DEVICE_TIMERS: dict = {}


def device_timer(method: str):
    """One DeviceTimer per method per process (its flush buffer and bandwidth are measured once)."""
    if method not in _DEVICE_TIMERS:
        _DEVICE_TIMERS[method] = _sibling("timing", "autogk_git.bench").DeviceTimer(method)
    return _DEVICE_TIMERS[method]


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
    """Bytes a correct kernel must move at least, and the rule used.

    Every output is written once. Inputs are read once, unless the definition has integer inputs
    (indices, page tables): then the kernel may gather only part of its float inputs, so only the
    integer inputs are counted. FLOPs are not counted: a definition carries no FLOP formula."""
    ins = tensor_bytes(definition, axes, "inputs")
    outs = sum(tensor_bytes(definition, axes, "outputs").values())
    ints = {n: b for n, b in ins.items() if not DTYPES[definition["inputs"][n]["dtype"]].is_floating_point}
    if ints:
        return outs + sum(ints.values()), "outputs + integer inputs (gathering definition)"
    return outs + sum(ins.values()), "outputs + inputs, each once"


class TimedKernel:
    """One label's way to be called on an input set: a DPS kernel, or the value-returning reference."""

    def __init__(self, label: str, fn, dps: bool) -> None:
        self.label, self.fn, self.dps = label, fn, dps


def time_batch(fn, sets: list, outs: list, warm_set: list, warm_outs: list, settings: dict, method_timer,
               device: str) -> dict:
    """Time one DPS kernel on one round's input sets, where the kernel lives (its own process, or here
    for tools): warm up, clear any persisting-L2 state, time, then check the kernel left the L2 and the
    caller's stream as the timer expects. Returns the timer's figures plus the host-inclusive latency."""
    warmup = int(settings.get("warmup", 5))
    for _ in range(max(1, warmup)):
        fn(*warm_set, *warm_outs)
    sync(device)
    reset = getattr(method_timer, "reset_persisting_l2", None)
    l2 = reset() if reset is not None else None
    t = method_timer.time_calls([lambda a=a, o=o: fn(*a, *o) for a, o in zip(sets, outs)])
    if l2 is not None:
        t["l2_reset"] = l2
    left = getattr(method_timer, "persisting_l2_left", None)
    msg = left() if left is not None else None
    if msg:
        if reset is not None:
            reset()
        raise KernelFailure(Status.L2_PERSISTING, f"while timed: {msg}: data pinned in L2 across calls makes "
                            "the time unreal; do not set cudaLimitPersistingL2CacheSize or access windows")
    if t.get("stream_gap"):
        raise KernelFailure(Status.STREAM_ORDER, f"while timed: {t['stream_gap']}")
    t["host_us"] = method_timer.sync_latency(lambda: fn(*sets[0], *outs[0]), int(settings.get("host_calls", 10)))
    return t


def time_label(tk: TimedKernel, sets: list, warm_set: list, job: dict, wl: dict, reference,
               device: str, rng: random.Random, method_timer, checked: list[int] | None = None,
               ref_cache: dict | None = None) -> dict:
    """Time one label on this round's input sets, then check (here, in the judge) what the timed calls wrote.

    checked: which sets' outputs are compared with the reference's (both labels of a round get the
    same ones, so `ref_cache` computes each reference output once); None: `verify_sets` at random."""
    definition = job["definition"]
    settings = job.get("settings", {})
    axes = resolve_axes(definition, wl)
    tolerances = settings.get("tolerances", {})
    warmup = int(settings.get("warmup", 5))
    if not tk.dps:  # the reference, timed here: it is trusted code
        for _ in range(max(1, warmup)):
            tk.fn(*warm_set)
        sync(device)
        t = method_timer.time_calls([lambda a=a: tk.fn(*a) for a in sets])
        t["host_us"] = method_timer.sync_latency(lambda: tk.fn(*sets[0]), int(settings.get("host_calls", 10)))
        return t
    warm_outs = alloc_outputs(definition, axes, device, 0)
    outs = [alloc_outputs(definition, axes, device, k) for k in range(len(sets))]
    if checked is None:
        checked = rng.sample(range(len(sets)), min(int(settings.get("verify_sets", 2)), len(sets)))
    ref_cache = {} if ref_cache is None else ref_cache
    saved = {k: [bits(x).clone() if isinstance(x, torch.Tensor) else x for x in sets[k]] for k in checked}
    t0 = time.perf_counter()
    if isinstance(tk.fn, RemoteKernel):
        t = tk.fn.time(sets, outs, warm_set, warm_outs, method_timer.method, settings)
    else:
        t = time_batch(tk.fn, sets, outs, warm_set, warm_outs, settings, method_timer, device)
    sync(device)
    t0 = phase("timed", t0)
    # What the timed calls wrote is what counts: a call that skipped its work leaves poison behind.
    where = "in the timed calls"
    for k, o in enumerate(outs):
        for (name, spec), x in zip(definition["outputs"].items(), o):
            if x.dtype.is_floating_point and torch.isnan(x).any():
                raise KernelFailure(Status.INCORRECT_NUMERICAL,
                                    f"{where}: output {name} of timed call {k} still holds the poison "
                                    "(the call skipped its work: cached or early return)")
    for k in checked:
        try:
            check_inputs(definition, sets[k], saved[k])
            if k not in ref_cache:
                ref_cache[k] = reference_outputs(reference, sets[k])
            check_outputs(definition, outs[k], ref_cache[k], tolerances, sets[k], axes)
        except KernelFailure as e:
            raise relabel(e, where) from None
    phase("verify", t0)
    return t


def calls_per_round(job: dict, wl: dict) -> int:
    """Timed calls per round, each on its own input set, within a memory budget."""
    settings = job.get("settings", {})
    axes = resolve_axes(job["definition"], wl)
    nbytes = sum(tensor_bytes(job["definition"], axes, "inputs").values()) + \
        sum(tensor_bytes(job["definition"], axes, "outputs").values())
    budget = int(settings.get("timing_mem_bytes", 1 << 30))
    return max(2, min(int(settings.get("reps", 30)), budget // max(1, nbytes)))


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


def timed_rounds(job: dict, base: TimedKernel, cand: TimedKernel, wls: list[tuple[int, dict]], inputs: Inputs,
                 reference, device: str, emit, seq, rounds: int) -> tuple[dict, dict, float | None]:
    """Paired rounds: per round, every workload, both labels in random order on the same fresh values.

    Returns (per-workload figures, failures {uuid: (label, KernelFailure)}, memory bandwidth B/s)."""
    settings = job.get("settings", {})
    seed = int(job.get("seed", 0))
    rng = random.Random(seed ^ 0x5EED)
    if device.startswith("cuda"):
        timing = _sibling("timing", "autogk_git.bench")
        timers = {"main": device_timer(settings.get("timer", "cupti"))}
        capture_error = timing.TimerError
    else:
        timers = {"main": HostTimer()}
        capture_error = ()
    method = {wl["uuid"]: timers["main"].method for _, wl in wls}
    timers[timers["main"].method] = timers["main"]
    fig = {wl["uuid"]: {base.label: [], cand.label: [], "host_" + base.label: [], "host_" + cand.label: [],
                        "log_ratio": [], "calls": calls_per_round(job, wl)} for _, wl in wls}
    failures: dict[str, tuple[str, KernelFailure]] = {}
    tried: dict[str, set] = {}
    verify = verify_plan(settings, [wl["uuid"] for _, wl in wls], rng)
    means: list[float] = []  # each round's mean log ratio over its workloads
    for r in range(rounds):
        round_logs = []
        for i, wl in wls:
            u = wl["uuid"]
            if u in failures:
                continue
            n = fig[u]["calls"]
            base_seed = seed * 7919 + i * 104729 + r * 1_000_003
            try:
                t_in = time.perf_counter()
                sets = [make_inputs(inputs, wl, base_seed + k, on_device=True) for k in range(n)]
                warm = make_inputs(inputs, wl, base_seed + n, on_device=True)
                phase("inputs", t_in)
            except HarnessFailure as e:
                failures[u] = (cand.label, KernelFailure(Status.HARNESS_ERROR, str(e)))
                continue
            order = [base, cand]
            rng.shuffle(order)
            # The same sets' outputs are compared for both labels, each reference output made once;
            # which sets, and in which rounds, is drawn at random (verify_plan). Every timed call's
            # outputs are checked for the poison.
            checked = rng.sample(range(n), min(verify[u].get(r, 1 if r >= verify["early"] else 0), n))
            ref_cache: dict = {}
            while True:
                if method[u] not in timers:
                    timers[method[u]] = device_timer(method[u])
                got = {}
                try:
                    for tk in order:
                        emit(event="at", label=cand.label if tk.label == "reference" else tk.label, uuid=u)
                        arm(tk.fn)
                        try:
                            got[tk.label] = time_label(tk, sets, warm, job, wl, reference, device, rng,
                                                       timers[method[u]], checked, ref_cache)
                        except capture_error:
                            raise
                        except KernelFailure as e:
                            failures[u] = (tk.label, e)
                            break
                        except HarnessFailure as e:
                            failures[u] = (cand.label, KernelFailure(Status.HARNESS_ERROR, str(e)))
                            break
                        except Exception as e:  # noqa: BLE001 - the kernel raised while being timed
                            die_if_context_lost(e, device)
                            failures[u] = (tk.label, KernelFailure(classify(e), f"while timed: {short_tb(e)}"))
                            break
                except capture_error as e:
                    # Both labels, from this round on, with the other timer: the method must be the same.
                    fig[u]["timer_error"] = f"{method[u]}: {e}"
                    tried.setdefault(u, set()).add(method[u])
                    other = [m for m in ("cupti", "cudagraph") if m not in tried[u]]
                    if other:
                        method[u] = other[0]
                        continue
                    failures[u] = (cand.label, KernelFailure(Status.RUNTIME_ERROR, f"could not be timed: {e}"))
                break
            if u in failures:
                continue
            for label in (base.label, cand.label):
                fig[u][label].append(got[label]["us"])
                fig[u]["host_" + label].append(got[label]["host_us"])
            fig[u]["method"] = got[cand.label]["method"]
            if got[cand.label].get("l2_reset"):
                fig[u]["l2_reset"] = got[cand.label]["l2_reset"]
            lr = math.log(max(got[cand.label]["us"], 1e-9) / max(got[base.label]["us"], 1e-9))
            fig[u]["log_ratio"].append(lr)
            round_logs.append(lr)
            del sets, warm, ref_cache
        if round_logs:
            means.append(math.fsum(round_logs) / len(round_logs))
            emit(event="round", message=f"round {r + 1}: {len(round_logs)} workload(s) timed, geomean "
                 f"{cand.label}/{base.label} so far {math.exp(math.fsum(means) / len(means)):.4f}")
        if seq is not None and round_logs:
            if seq.add(means[-1]):
                break
    return fig, failures, timers["main"].bandwidth()


def die_if_context_lost(e: BaseException, device: str) -> None:
    """A sticky CUDA error (illegal address, launch failure) poisons this process's context: every
    later call would fail too. Exit, so the runner records this workload and restarts on the rest."""
    text = str(e)
    if device.startswith("cuda") and any(m in text for m in (
            "illegal memory access", "unspecified launch failure", "illegal instruction", "misaligned address",
            "device-side assert", "CUDA error: an illegal", "uncorrectable ECC")):
        sys.stderr.write(f"CUDA context lost: {short_tb(e)}\n")
        sys.stderr.flush()
        os._exit(3)


def correctness_record(label: str, run, load_error, i: int, wl: dict, job: dict, inputs: Inputs, reference,
                       device: str, refs: SharedRefs | None = None) -> dict:
    t0 = time.perf_counter()
    rec = {"event": "done", "label": label, "uuid": wl["uuid"]}
    if load_error:
        rec.update(status=load_error[0], message=load_error[1])
    else:
        arm(run)
        try:
            light = label == "parent" and bool(job.get("settings", {}).get("parent_light"))
            rec.update(status=Status.PASSED, **check_workload(run, i, wl, job, inputs, reference, device, light,
                                                                     refs))
        except KernelFailure as e:
            rec.update(status=e.status, message=str(e))
        except HarnessFailure as e:  # never a pass: the kernel was not judged
            rec.update(status=Status.HARNESS_ERROR, message=str(e))
        except Exception as e:  # noqa: BLE001
            die_if_context_lost(e, device)
            rec.update(status=classify(e), message=short_tb(e))
    rec["check_s"] = round(time.perf_counter() - t0, 4)
    return rec


def screen_first(kernels: dict, job: dict, inputs: Inputs, reference, device: str, only,
                 emit, refs: SharedRefs | None = None) -> tuple[dict, bool]:
    """An ab job's cheap gate: the candidate alone on the `screen` workloads (the smallest and the
    largest) before anything else runs. Returns (their records, failed). When one failed, every
    other record is NOT_RUN, all are emitted with the (empty) timing summary, and the job is over."""
    screen = set(job.get("settings", {}).get("screen") or ())
    keys = {f"candidate:{u}" for u in screen if only is None or f"candidate:{u}" in only}
    if not keys:
        return {}, False
    recs = check_all(kernels, job, inputs, reference, device, keys, emit, emit_done=False, refs=refs)
    failed = [(k, r) for k, r in recs.items() if r.get("status") != Status.PASSED]
    if not failed:
        return recs, False
    k0, r0 = failed[0]
    why = f"not run: the candidate failed the screen on workload {k0.split(':', 1)[1][:8]} ({r0.get('status')})"
    for label in kernels:
        for wl in job["workloads"]:
            k = f"{label}:{wl['uuid']}"
            if k not in recs and (only is None or k in only):
                recs[k] = {"event": "done", "label": label, "uuid": wl["uuid"], "status": Status.NOT_RUN,
                           "message": why}
    for rec in recs.values():
        emit(**rec)
    emit(event="ab", baseline="parent", workloads=[], timing_s=0.0, bandwidth_gbs=None, rounds=0,
         stopped="screen failed", outcome="inconclusive")
    return recs, True


def run_timed(job: dict, kernels: dict, inputs: Inputs, reference, device: str, only, emit) -> None:
    """stride: candidate against the reference; ab: candidate against the parent (sequential)."""
    stage = job["stage"]
    settings = job.get("settings", {})
    for k in [k for k in PHASES if k != "start"]:  # in-process callers run several jobs: count this one's
        del PHASES[k]
    t_check = time.perf_counter()
    screened: dict = {}
    refs = SharedRefs(len(kernels))  # the screen's workloads too: the largest has the slowest reference
    if stage == "ab" and settings.get("screen"):
        screened, failed = screen_first(kernels, job, inputs, reference, device, only, emit, refs)
        if failed:
            return
    rest = only
    if screened:
        everything = {f"{label}:{wl['uuid']}" for label in kernels for wl in job["workloads"]}
        rest = (everything if only is None else set(only)) - set(screened)
    recs = {**screened, **check_all(kernels, job, inputs, reference, device, rest, emit, emit_done=False,
                                    refs=refs)}
    del refs
    phase("check", t_check)
    cand = TimedKernel("candidate", kernels.get("candidate", (None, None))[0], True)
    if stage == "ab":
        base = TimedKernel("parent", kernels.get("parent", (None, None))[0], True)
    else:
        base = TimedKernel("reference", reference, False)
    def ok(label: str, u: str) -> bool:
        return recs.get(f"{label}:{u}", {}).get("status") == Status.PASSED
    wls = [(i, wl) for i, wl in enumerate(job["workloads"])
           if ok("candidate", wl["uuid"]) and (base.label == "reference" or ok(base.label, wl["uuid"]))]
    seq = None
    rounds = int(settings.get("min_rounds", 5))
    if stage == "ab":
        stats = _sibling("stats", "autogk_git.bench")
        seq = stats.Sequential(rounds, int(settings.get("max_rounds", 40)), float(settings.get("confidence", 0.95)),
                               float(settings.get("min_effect", 0.01)))
        rounds = seq.max_rounds
    t0 = time.perf_counter()
    fig, failures, timer_bw = (timed_rounds(job, base, cand, wls, inputs, reference, device, emit, seq, rounds)
                               if wls else ({}, {}, None))
    timing_s = time.perf_counter() - t0
    per_wl = []
    for i, wl in wls:
        u = wl["uuid"]
        if u in failures:
            label, e = failures[u]
            recs[f"{label}:{u}"].update(status=e.status, message=str(e))
            continue
        f = fig[u]
        if not f["log_ratio"]:
            continue
        c = recs[f"candidate:{u}"]
        c.update(latency_us=_med(f["candidate"]), host_latency_us=_med(f["host_candidate"]),
                 samples_us=[round(x, 4) for x in f["candidate"]], method=f.get("method"),
                 calls_per_round=f["calls"], rounds=len(f["log_ratio"]))
        if "timer_error" in f:
            c["timer_error"] = f["timer_error"][:300]
        if "l2_reset" in f:
            c["l2_reset"] = f["l2_reset"][:200]
        base_lat = _med(f[base.label])
        if stage == "ab":
            p = recs[f"parent:{u}"]
            p.update(latency_us=base_lat, host_latency_us=_med(f["host_parent"]),
                     samples_us=[round(x, 4) for x in f["parent"]], method=f.get("method"))
            m = math.fsum(f["log_ratio"]) / len(f["log_ratio"])
            c["ratio_vs_parent"] = math.exp(m)
            if len(f["log_ratio"]) >= 2:
                stats = _sibling("stats", "autogk_git.bench")
                _, lo, hi = stats.mean_interval(f["log_ratio"], float(settings.get("confidence", 0.95)))
                c["ratio_ci"] = [math.exp(lo), math.exp(hi)]
        else:
            c.update(reference_latency_us=base_lat, reference_host_latency_us=_med(f["host_reference"]),
                     speedup_vs_reference=base_lat / max(c["latency_us"], 1e-9))
        if timer_bw:
            nb, rule = floor_bytes(job["definition"], resolve_axes(job["definition"], wl))
            floor_us = nb / timer_bw * 1e6
            c.update(floor_us=floor_us, floor_rule=rule)
            if c["latency_us"] < float(settings.get("floor_margin", 0.9)) * floor_us:
                c.update(status=Status.BELOW_FLOOR,
                         message=f"{c['latency_us']:.3f} us is below the physical floor {floor_us:.3f} us "
                                 f"({nb} bytes over the measured {timer_bw / 1e9:.0f} GB/s): the timing "
                                 "cannot be real (skipped work, or inputs cached)")
        per_wl.append({"uuid": u, "latency_us": c["latency_us"], "base_latency_us": base_lat,
                       "log_ratios": [round(x, 6) for x in f["log_ratio"]]})
    for key, rec in recs.items():
        emit(**rec)
    summary = {"event": stage if stage == "ab" else "timing", "baseline": base.label, "workloads": per_wl,
               "timing_s": round(timing_s, 3), "bandwidth_gbs": round(timer_bw / 1e9, 1) if timer_bw else None,
               "timer": settings.get("timer", "cupti") if device.startswith("cuda") else "host",
               "phases": {k: round(v, 3) for k, v in PHASES.items()}}
    if seq is not None:
        summary.update(seq.summary() if seq.log_ratios else {"rounds": 0, "stopped": "no data",
                                                              "outcome": "inconclusive"})
    emit(**summary)


def _med(xs: list) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _term(signum, frame) -> None:  # noqa: ARG001
    """The runner's SIGTERM (its limit) or its death (PR_SET_PDEATHSIG): end every kernel process first."""
    end_children()
    os._exit(128 + signum)


T_START = time.perf_counter()


def main(argv: list[str]) -> int:
    job_path, out_dir = Path(argv[0]), Path(argv[1])
    only = None
    opts = dict(zip(argv[2::2], argv[3::2]))
    if "--only" in opts:
        only = set(opts["--only"].split(",")) if opts["--only"] else set()
    if "--deadline" in opts:
        LIMITS["job_deadline"] = time.monotonic() + float(opts["--deadline"])
    if "--workload-limit" in opts:
        LIMITS["workload_s"] = float(opts["--workload-limit"])
    if "--job-limit" in opts:
        LIMITS["job_s"] = float(opts["--job-limit"])
    # The key comes on stdin (not argv or the environment, which other processes can read).
    key = sys.stdin.readline().strip().encode() if not sys.stdin.isatty() else b""
    sys.stdin.close()
    parent = os.getppid()
    import torch.multiprocessing
    torch.multiprocessing.set_sharing_strategy("file_system")  # as candidate.py: shm by name, no fd passing
    # Start torch's shm manager now: a signal that lands while it starts leaves libshm spinning.
    torch.zeros(1).share_memory_()
    hygiene.make_undumpable()
    hygiene.die_with_parent(signal.SIGTERM)
    hygiene.become_subreaper()
    signal.signal(signal.SIGTERM, _term)
    if os.getppid() != parent:  # the runner died before PR_SET_PDEATHSIG was set
        return 3
    job = json.loads(job_path.read_text())
    device = job.get("settings", {}).get("device", "cpu")
    progress = open(out_dir / "progress.jsonl", "a", buffering=1)
    seq = [0]
    import threading
    lock = threading.Lock()

    def emit(**rec) -> None:
        body = json.dumps(rec)
        with lock:
            seq[0] += 1
            mac = hmac.new(key, f"{seq[0]}:{body}".encode(), hashlib.sha256).hexdigest()
            progress.write(json.dumps({"seq": seq[0], "rec": rec, "mac": mac}) + "\n")
            progress.flush()
            os.fsync(progress.fileno())

    tmp = Path(tempfile.mkdtemp(prefix="autogk-worker-"))
    hygiene.mark_owner(tmp)
    try:
        remote = start_kernels(job, tmp / "kernels", device, emit, only)  # first: they import meanwhile
        emit(event="env", environment=environment(device))
        settings = job.get("settings", {})
        if (device.startswith("cuda") and settings.get("timed") and job.get("stage") == "stride"
                and settings.get("timer", "cupti") == "cupti"):
            warm_profiler()  # the judge times the reference itself
        gen_module = None
        if job.get("generator"):  # the target's own generator: trusted, not editable by agents
            try:
                gen_module = import_files("generator", {"inputs.py": job["generator"]}, tmp, main="inputs.py")
                set_target(gen_module)
            except Exception as e:
                emit(event="fatal", message=f"the target's inputs.py failed to import: {short_tb(e)}")
                return 2
        inputs = Inputs(job, device, gen_module)
        reference = load_reference(job["definition"])
        ready_kernels(remote)
        phase("start", T_START)
        kernels = {label: (k, k.load_error) for label, k in remote.items()}
        if job.get("settings", {}).get("timed") and job.get("stage") in ("stride", "ab"):
            run_timed(job, kernels, inputs, reference, device, only, emit)
        else:
            check_all(kernels, job, inputs, reference, device, only, emit, emit_done=True)
        profiling = bool(os.environ.get("AUTOGK_PROFILE_DIR"))
        for k in remote.values():
            # Killed, not asked to exit: a graceful exit (the CUDA context's teardown) cost ~0.75 s a
            # process on the H200. Asked only when profiling, so the process writes its profile.
            k.close() if profiling else k.stop()
        emit(event="end")
    finally:
        end_children()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def profiled(fn, argv: list[str], tag: str) -> int:
    """fn(argv), under cProfile when AUTOGK_PROFILE_DIR names a folder (benchmarks/profile_job.py):
    the judge and each kernel process write TAG-PID.prof there, wall seconds per function."""
    where = os.environ.get("AUTOGK_PROFILE_DIR")
    if not where:
        return fn(argv)
    import cProfile
    import threading
    thread_run = threading.Thread.run

    def run_profiled(self) -> None:  # the judge checks labels in threads of its own: each gets a file
        p = cProfile.Profile()
        p.enable()
        try:
            thread_run(self)
        finally:
            p.disable()
            p.dump_stats(os.path.join(where, f"{tag}-{os.getpid()}-{self.name}.prof"))
    if sys.version_info < (3, 12):  # from 3.12 one profile sees every thread, and a second one cannot start
        threading.Thread.run = run_profiled
    prof = cProfile.Profile()
    prof.enable()
    try:
        return fn(argv)
    finally:
        prof.disable()
        prof.dump_stats(os.path.join(where, f"{tag}-{os.getpid()}.prof"))


if __name__ == "__main__":
    sys.exit(profiled(main, sys.argv[1:], "judge"))
