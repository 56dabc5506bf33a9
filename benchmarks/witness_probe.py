"""Probe for a judge-owned clock: one process (the judge) brackets another process's timed window with
its own CUDA timing events, ordered against the other process's stream through inter-process events.

    python benchmarks/witness_probe.py [--rounds 30] [--calls 30] [--json OUT]

Per window: the kernel's process warms up and says "armed"; the judge enqueues an optional sleep
kernel (so the other process can queue its calls before the gate opens), its start event T0 and the
gate G, and says "go"; the kernel's process waits on G on its stream, runs N x (L2 flush, call), records
D and says "closed"; the judge waits on D on its stream, copies the outputs, records T1. W = T1 - T0.
The kernel's process also times each call with its own events (S = their sum): W - S is the time the
judge saw that the kernel's clock did not report. Two kernel processes with the same kernel (A/A) give
the spread of that difference between two labels, which sets the tolerance of a rule built on it.
Modes: `honest`; `host` (the kernel process sleeps 20 us on the host per call inside the window, the way a
kernel computing on the CPU would, and reports only its device time).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import multiprocessing as mp
import statistics
import time

DISABLE_TIMING, INTERPROCESS = 0x2, 0x4
OPENED: list = []


class IpcEventHandle(ctypes.Structure):
    # 64 opaque bytes, as eight words: a struct of arrays passed by value is where ctypes has had bugs
    _fields_ = [(f"w{i}", ctypes.c_uint64) for i in range(8)]


def cudart():
    import torch
    torch.zeros(1, device="cuda")
    with open("/proc/self/maps") as f:
        paths = sorted({ln.split()[-1] for ln in f if "libcudart.so" in ln and "/" in ln})
    for p in paths:
        lib = ctypes.CDLL(p)
        if hasattr(lib, "cudaIpcOpenEventHandle"):
            lib.cudaIpcOpenEventHandle.argtypes = [ctypes.POINTER(ctypes.c_void_p), IpcEventHandle]
            lib.cudaEventRecord.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            lib.cudaStreamWaitEvent.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]
            lib.cudaEventCreateWithFlags.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
            lib.cudaIpcGetEventHandle.argtypes = [ctypes.POINTER(IpcEventHandle), ctypes.c_void_p]
            return lib
    raise RuntimeError("no libcudart in this process")


def ipc_event(lib) -> tuple[ctypes.c_void_p, bytes]:
    ev = ctypes.c_void_p()
    assert lib.cudaEventCreateWithFlags(ctypes.byref(ev), DISABLE_TIMING | INTERPROCESS) == 0
    h = IpcEventHandle()
    assert lib.cudaIpcGetEventHandle(ctypes.byref(h), ev) == 0
    return ev, ctypes.string_at(ctypes.byref(h), 64)


def open_event(lib, raw: bytes):
    """The event behind `raw`, opened here: through torch where it can (its pointer used through the
    runtime), else through the runtime directly."""
    import torch
    try:
        tev = torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), raw)
        OPENED.append(tev)  # kept alive
        print("opened through torch", flush=True)
        return ctypes.c_void_p(tev.cuda_event)
    except Exception as e:  # noqa: BLE001
        print(f"torch could not open the event: {e}", flush=True)
    h = IpcEventHandle()
    ctypes.memmove(ctypes.byref(h), raw, 64)
    ev = ctypes.c_void_p()
    rc = lib.cudaIpcOpenEventHandle(ctypes.byref(ev), h)
    assert rc == 0, f"cudaIpcOpenEventHandle -> {rc}"
    return ev


def child(conn, numel: int, calls: int, mode: str) -> None:
    import torch
    lib = cudart()
    g_raw, d_raw = conn.recv()
    gate, done = open_event(lib, g_raw), open_event(lib, d_raw)
    flush_buf = torch.empty(100 << 20 >> 2, dtype=torch.int32, device="cuda")
    xs = [torch.randn(numel, device="cuda") for _ in range(calls)]
    ys = [torch.empty_like(x) for x in xs]
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    stream = torch.cuda.current_stream()
    while True:
        msg = conn.recv()
        if msg == "exit":
            return
        for x, y in zip(xs[:3], ys[:3]):  # warm-up
            torch.mul(x, 2.0, out=y)
        torch.cuda.synchronize()
        conn.send("armed")
        assert conn.recv() == "go"
        lib.cudaStreamWaitEvent(ctypes.c_void_p(stream.cuda_stream), gate, 0)
        for x, y, s, e in zip(xs, ys, starts, ends):
            flush_buf.zero_()
            s.record()
            torch.mul(x, 2.0, out=y)
            if mode == "host":
                t = time.perf_counter() + 20e-6
                while time.perf_counter() < t:
                    pass
            e.record()
        lib.cudaEventRecord(done, ctypes.c_void_p(stream.cuda_stream))
        conn.send("closed")
        torch.cuda.synchronize()
        conn.send(sum(s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends)))


def run(numel: int, calls: int, rounds: int, sleep_us: float, modes: tuple[str, str]) -> dict:
    import torch
    lib = cudart()
    ctx = mp.get_context("spawn")
    kids = []
    gates = []
    for m in modes:
        a, b = ctx.Pipe()
        p = ctx.Process(target=child, args=(b, numel, calls, m), daemon=True)
        p.start()
        g, g_raw = ipc_event(lib)
        d, d_raw = ipc_event(lib)
        a.send((g_raw, d_raw))
        kids.append((p, a))
        gates.append((g, d))
    js = torch.cuda.Stream()
    out = torch.empty(numel, device="cuda")
    t0s = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    t1s = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    for e in t0s + t1s:
        e.record(js)
    torch.cuda.synchronize()
    cycles = int(sleep_us * 1.98e3)
    rows = []
    for r in range(rounds + 2):
        row = {}
        for k in (0, 1) if r % 2 == 0 else (1, 0):
            p, conn = kids[k]
            g, d = gates[k]
            conn.send("time")
            assert conn.recv() == "armed"
            with torch.cuda.stream(js):
                if cycles:
                    torch.cuda._sleep(cycles)
                t0s[k].record(js)
            lib.cudaEventRecord(g, ctypes.c_void_p(js.cuda_stream))
            conn.send("go")
            assert conn.recv() == "closed"
            lib.cudaStreamWaitEvent(ctypes.c_void_p(js.cuda_stream), d, 0)
            with torch.cuda.stream(js):
                out.zero_()
                t1s[k].record(js)
            s = conn.recv()
            js.synchronize()
            w = t0s[k].elapsed_time(t1s[k]) * 1000.0
            row[k] = (w, s)
        if r >= 2:
            rows.append(row)
    for p, conn in kids:
        conn.send("exit")
        p.join(5)
    un = {k: [row[k][0] - row[k][1] for row in rows] for k in (0, 1)}
    diff = [a - b for a, b in zip(un[1], un[0])]
    return {
        "numel": numel, "calls": calls, "rounds": rounds, "sleep_us": sleep_us, "modes": list(modes),
        "W_us_median": [statistics.median(row[k][0] for row in rows) for k in (0, 1)],
        "S_us_median": [statistics.median(row[k][1] for row in rows) for k in (0, 1)],
        "unreported_us_median": [statistics.median(un[k]) for k in (0, 1)],
        "diff_per_call_mean": statistics.fmean(diff) / calls,
        "diff_per_call_sd": statistics.stdev(diff) / calls,
        "diff_per_call_se": statistics.stdev(diff) / calls / math.sqrt(len(diff)),
        "claimed_per_call": [statistics.median(row[k][1] for row in rows) / calls for k in (0, 1)],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--json")
    a = ap.parse_args()
    results = []
    for numel in (4096, 1 << 20, 16 << 20):
        for sleep_us in (0.0, 1000.0):
            for modes in (("honest", "honest"), ("honest", "host")):
                t = time.perf_counter()
                res = run(numel, a.calls, a.rounds, sleep_us, modes)
                res["wall_s"] = time.perf_counter() - t
                results.append(res)
                print(json.dumps(res), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
