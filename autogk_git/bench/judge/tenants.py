"""Who else runs on the judge's GPU: the processes NVML lists there that are neither the judge nor its
kernels, named in a failure of the judge's clock.

The judge's clock times the GPU's timeline (witness.py), so another process's kernels inside a
candidate's window, or just before the parent's, read as the candidate's doing: honest candidates come
out TAMPERED when the GPU is shared (60 of 126 with six jobs at once on one H200, 2026-12-03:
benchmarks/RESULTS.md). The status stays what the clock found (a process the candidate started and
stripped of the job's tag looks the same from here); the message names the other processes, so a
person can tell a shared GPU from a cheat. Asked only when the clock condemned a workload, after the
rounds: a process that came and went before then is not named.

Pids are NVML's, the machine's; in a container with its own pid namespace they would not be this
one's and nothing is named (on the H200 device they are: benchmarks/results/session37_h200/call2/)."""
from __future__ import annotations

import ctypes
import os
import re
import subprocess
import threading

from . import hygiene
from .calls import KernelFailure
from .status import Status

QUERY = ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory,gpu_uuid", "--format=csv,noheader"]
SHOWN = 5  # processes named in one message


def plain(name: str) -> str:
    """A process's name as a result may hold it (a process names itself): short, plain characters only."""
    return re.sub(r"[^A-Za-z0-9._/+-]", "?", name)[:40]


def parse_compute_apps(text: str) -> list[dict]:
    """Rows of `nvidia-smi --query-compute-apps=pid,process_name,used_memory[,gpu_uuid] --format=csv`
    (a header line, if any, is skipped): [{pid, name, memory, gpu}]; gpu is "" where not asked."""
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        gpu = parts[-1] if len(parts) >= 4 and parts[-1].startswith("GPU-") else ""
        rest = parts[1:-1] if gpu else parts[1:]
        # A process names itself: only a short, plain name goes into a result.
        name = plain(",".join(rest[:-1]))
        rows.append({"pid": int(parts[0]), "name": name, "memory": rest[-1][:20], "gpu": gpu})
    return rows


def gpu_processes(timeout_s: float = 10.0) -> list[dict] | None:
    """Every process NVML lists on the machine's GPUs; None where nvidia-smi is missing or fails."""
    try:
        out = subprocess.run(QUERY, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_compute_apps(out.stdout) if out.returncode == 0 else None


def device_uuid(device: str | None = None) -> str:
    """NVML's name (`GPU-...`) of `device` (a torch device string; the judge's current GPU where None), "" where
    torch cannot say."""
    try:
        import torch
        dev = torch.device(device) if device else torch.cuda.current_device()
        return "GPU-" + str(torch.cuda.get_device_properties(dev).uuid)
    except Exception:  # noqa: BLE001 - an older torch, no GPU: every GPU's processes count
        return ""


def strangers(rows: list[dict], own: set[int], gpu: str = "") -> list[dict]:
    """The rows on this GPU (all, where either side does not name it) whose pid is not one of `own`."""
    return [r for r in rows if r["pid"] not in own and not (gpu and r["gpu"] and r["gpu"] != gpu)]


def own_pids(kernel_pids: list[int]) -> set[int]:
    """The judge, its kernels' processes, and every process carrying the job's tag (their children)."""
    tag = os.environ.get(hygiene.TAG_VAR, "")
    return {os.getpid(), *kernel_pids, *(hygiene.tagged(tag) if tag else [])}


def named(e: KernelFailure, others: list[dict]) -> KernelFailure:
    """e, its message followed by the processes that share the GPU; e itself where there are none."""
    if not others:
        return e
    shown = ", ".join(f"pid {r['pid']} ({r['name'] or '?'}, {r['memory']})" for r in others[:SHOWN])
    more = f" and {len(others) - SHOWN} more" if len(others) > SHOWN else ""
    return KernelFailure(e.status, f"{e}. NVML lists process(es) on this GPU that are neither the judge nor its "
                         f"kernels: {shown}{more}; the judge's clock counts their work as the candidate's, so "
                         "unless they are the candidate's, give the judge a GPU of its own")


def name_strangers(failures: dict, clocked: set[str], kernel_pids: list[int]) -> None:
    """Rewrite, in place, the failures the judge's clock made (uuids in `clocked`) to name the GPU's
    other processes."""
    if not clocked:
        return
    try:
        rows = gpu_processes()
        others = strangers(rows, own_pids(kernel_pids), device_uuid()) if rows else []
    except Exception:  # noqa: BLE001 - naming is a courtesy: it never changes a verdict
        return
    for u in clocked:
        if u in failures:
            label, e = failures[u]
            failures[u] = (label, named(e, others))


# -- the job's own processes on the GPU ----------------------------------------------------------------

WATCH_EVERY_S = 0.02
"""How often the judge lists the GPU's compute processes while the rounds run (Watch). A process needs
~0.1 s or more to make a CUDA context, so one made for a window alone is listed."""


class _ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_t (v2 and v3 of the call)
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong), ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint)]


def nvml() -> tuple[object | None, str]:
    """(libnvidia-ml, initialised; "") or (None, why not)."""
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        rc = lib.nvmlInit_v2()
    except (OSError, AttributeError) as e:
        return None, f"no NVML: {e}"
    return (lib, "") if rc == 0 else (None, f"nvmlInit_v2 returned {rc}")


def nvml_pids(lib) -> set[int] | None:
    """The pids NVML lists with a compute context on any GPU of the machine; None where it cannot say."""
    n = ctypes.c_uint(0)
    if lib.nvmlDeviceGetCount_v2(ctypes.byref(n)) != 0:
        return None
    call = getattr(lib, "nvmlDeviceGetComputeRunningProcesses_v3", None) or \
        getattr(lib, "nvmlDeviceGetComputeRunningProcesses_v2", None)
    if call is None:
        return None
    pids: set[int] = set()
    for i in range(n.value):
        dev = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(i), ctypes.byref(dev)) != 0:
            return None
        size = 64
        while True:
            count, infos = ctypes.c_uint(size), (_ProcessInfo * size)()
            rc = call(dev, ctypes.byref(count), infos)
            if rc == 7 and size < 4096:  # NVML_ERROR_INSUFFICIENT_SIZE
                size *= 4
                continue
            if rc != 0:
                return None
            pids.update(int(infos[k].pid) for k in range(count.value))
            break
    return pids


class _Memory(ctypes.Structure):  # nvmlMemory_t
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def free_memory() -> dict[str, int]:
    """Each GPU's free memory in bytes by NVML's name of it (`GPU-...`, as device_uuid); {} where NVML cannot
    say. Read without a CUDA context, so the judge can read it before any kernel's process starts."""
    lib, _ = nvml()
    n = ctypes.c_uint(0)
    if lib is None or lib.nvmlDeviceGetCount_v2(ctypes.byref(n)) != 0:
        return {}
    free: dict[str, int] = {}
    for i in range(n.value):
        dev, name, mem = ctypes.c_void_p(), ctypes.create_string_buffer(96), _Memory()
        if (lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(i), ctypes.byref(dev)) == 0
                and lib.nvmlDeviceGetUUID(dev, name, ctypes.c_uint(96)) == 0
                and lib.nvmlDeviceGetMemoryInfo(dev, ctypes.byref(mem)) == 0):
            free[name.value.decode(errors="replace")] = int(mem.free)
    return free


def origin(pid: int, ends: set[int], limit: int = 64) -> int | None:
    """The first of `ends` among pid's ancestors (pid itself not counted), by /proc's parent links; None."""
    p = hygiene.parent_pid(pid)
    while p and p > 1 and limit > 0:
        if p in ends:
            return p
        p, limit = hygiene.parent_pid(p), limit - 1
    return None


class Watch(threading.Thread):
    """The judge's look, every WATCH_EVERY_S while the rounds run, at which processes hold a CUDA context:
    one that descends from a kernel's process (or from the judge, where the judge took in a kernel's orphan
    as their subreaper) is that kernel's work done out of its own process. Its CUPTI figures never see
    such work, and the judge's clock sees it only beyond its slack (12.5 us a call at the sparse
    attention's two calls a window): a kernel could have a helper process compute its outputs into the
    same GPU buffers and claim the time of an empty call. Honest kernels start no process that uses the
    GPU (Triton's compiler, ptxas, holds no context).

    kernels(): {pid: label} of the kernel processes now. found(): {label: "pid N (name)"}; an orphan of
    the job goes to `orphan_label` (the candidate: a process that hid its origin is charged to the
    kernel under judgment)."""

    def __init__(self, kernels, orphan_label: str, every_s: float = WATCH_EVERY_S) -> None:
        super().__init__(name="autogk-gpu-watch", daemon=True)
        self.kernels, self.orphan_label, self.every_s = kernels, orphan_label, every_s
        self.halt = threading.Event()
        self.seen: dict[str, str] = {}
        self.unavailable = ""

    def run(self) -> None:
        lib, why = nvml()
        if lib is None:
            self.unavailable = why
            return
        judge = os.getpid()
        while True:
            self.look(lib, judge)
            if self.halt.wait(self.every_s):
                self.look(lib, judge)  # once more after the last window
                return

    def look(self, lib, judge: int) -> None:
        try:
            pids = nvml_pids(lib)
            kernels = dict(self.kernels())
        except Exception as e:  # noqa: BLE001 - a failed look is recorded, never a verdict
            self.unavailable = f"{type(e).__name__}: {e}"
            return
        if pids is None:
            return
        for pid in pids - set(kernels) - {judge}:
            end = origin(pid, set(kernels) | {judge})
            if end is None or not cuda_loaded(pid):
                continue  # not of this job (name_strangers names such processes), or no CUDA there
            label = kernels.get(end, self.orphan_label)
            self.seen.setdefault(label, f"pid {pid} ({_name(pid)})")

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=10)

    def found(self, label: str) -> KernelFailure | None:
        what = self.seen.get(label)
        if what is None:
            return None
        return KernelFailure(Status.TAMPERED, f"a process of its own, {what}, held a CUDA context on the GPU while "
                             "the judge timed the job: a kernel's work runs in its own process, where its timer "
                             "sees it (a helper process's work is counted by no timer)")


def cuda_loaded(pid: int) -> bool:
    """Whether pid has the CUDA driver mapped, or hides its maps: a confirmation of NVML's pid, which in a
    container with a pid namespace of its own could name another process here (the job's torch_shm_manager,
    say, which holds no context)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any("libcuda" in line for line in f)
    except PermissionError:
        return True  # a process that made itself undumpable: nothing honest of the job's does
    except OSError:
        return False


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return plain(f.read().strip())
    except OSError:
        return "?"
