"""The L2 between a timer's calls: the judge's flush kernel (`_autogk_l2_flush`, which the CUPTI timer finds
by name among the kernel's own), the persisting-L2 carve-out reset and read back around each timed batch,
and a CUPTI window cut into its calls at the flushes. Used by timer.py in a kernel's process (and sealed
there with it); standard library, torch and triton only."""
from __future__ import annotations

import ctypes
from typing import Sequence

import torch
import triton
import triton.language as tl

FLUSH_KERNEL = "_autogk_l2_flush"


@triton.jit
def _autogk_l2_flush(ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.zeros([BLOCK], dtype=tl.int32), mask=offs < n)


def _l2_bytes() -> int:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return int(getattr(props, "L2_cache_size", 0) or 50 << 20)


def _flush_len(l2_bytes: int) -> int:
    """The flush buffer's length in int32s: twice the L2, at least 8 MB."""
    return max(2 * l2_bytes, 8 << 20) // 4


def load_flush() -> None:
    """Compile (or load) the flush kernel now, from the Triton cache TRITON_CACHE_DIR names now: a kernel's
    process does this in the judge's cache before the kernel is imported (kernel_process.py). One program
    over a small buffer, with the Timer's own length (masked past the buffer's end), so the launch has the
    Timer's specialization and every later launch finds it in Triton's in-memory cache."""
    buf = torch.empty(4096, dtype=torch.int32, device="cuda")
    _autogk_l2_flush[(1,)](buf, _flush_len(_l2_bytes()), BLOCK=4096)
    torch.cuda.synchronize()


CUDA_LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize
_CUDART = []


def cudart():
    """The CUDA runtime torch loaded (found in this process's maps, so it is the same instance), or
    None: then the L2 checks are skipped and the timing says so (`l2_reset`)."""
    if not _CUDART:
        lib = None
        try:
            with open("/proc/self/maps") as f:
                paths = sorted({line.split()[-1] for line in f if "libcudart.so" in line and "/" in line})
            for p in paths:
                cand = ctypes.CDLL(p)
                if hasattr(cand, "cudaDeviceSetLimit") and hasattr(cand, "cudaCtxResetPersistingL2Cache"):
                    lib = cand
                    break
        except Exception:  # noqa: BLE001 - no runtime to reach: the timer still works without the check
            lib = None
        _CUDART.append(lib)
    return _CUDART[0]


def persisting_l2_limit() -> int | None:
    lib = cudart()
    if lib is None:
        return None
    try:
        v = ctypes.c_size_t(0)
        if lib.cudaDeviceGetLimit(ctypes.byref(v), ctypes.c_int(CUDA_LIMIT_PERSISTING_L2)) != 0:
            return None
        return int(v.value)
    except Exception:  # noqa: BLE001
        return None


def reset_persisting_l2() -> str:
    """No carve-out for persisting lines, and any persisting line back to normal: 'ok', or why not."""
    lib = cudart()
    if lib is None:
        return "no CUDA runtime library found in this process"
    try:
        torch.cuda.synchronize()
        a = lib.cudaDeviceSetLimit(ctypes.c_int(CUDA_LIMIT_PERSISTING_L2), ctypes.c_size_t(0))
        b = lib.cudaCtxResetPersistingL2Cache()
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"
    return "ok" if a == 0 and b == 0 else f"cudaDeviceSetLimit -> {a}, cudaCtxResetPersistingL2Cache -> {b}"


def buckets(kernels: Sequence[tuple]) -> tuple[list[float], list[int], float]:
    """A CUPTI window's kernels, (start, name, us) in order of start, into one bucket a flush: each
    bucket's device time and kernel count (a flush opens it; the call after that flush, or the snapshot
    after the last), and the flushes' own time summed.

    Kernels that started before the window's first flush (nothing of the timer's runs there) go into the
    first call's bucket: work a kernel started ahead of its first call's flush, on a stream of its own
    that waited only for the judge's gate, say, overlapping its calls and the flushes. Left out, it was
    no call's, and the window's figure never saw it."""
    per_call: list[float] = []
    counts: list[int] = []
    flushes, ahead, n_ahead = 0.0, 0.0, 0
    for _start, name, dur in kernels:
        if FLUSH_KERNEL in name:
            flushes += float(dur)
            per_call.append(0.0)
            counts.append(0)
        elif per_call:
            per_call[-1] += float(dur)
            counts[-1] += 1
        else:
            ahead += float(dur)
            n_ahead += 1
    if n_ahead and per_call:
        per_call[0] += ahead
        counts[0] += n_ahead
    return per_call, counts, flushes
