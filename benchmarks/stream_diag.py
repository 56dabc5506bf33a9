"""On a CUDA GPU: what a consumer on the caller's stream reads after a kernel that writes its output on a
side stream after a delay, in one process and through the judge (two processes, CUDA IPC).

    python benchmarks/stream_diag.py

Prints, for each way of calling, whether the output read in the caller's stream order still held
the poison (NaN: the side-stream work was not yet done, as a real consumer would see) or the result.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def side_run(x, bias, scale, out, side):
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)
        torch.add(x * scale, bias, out=out)


def one_process() -> dict:
    n = 1 << 20
    x, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    res = {}
    for name, caller in (("legacy default stream", None), ("pool stream", torch.cuda.Stream())):
        out = torch.full((n,), float("nan"), device="cuda")
        snap = torch.empty_like(out)
        side = torch.cuda.Stream()
        torch.cuda.synchronize()
        ctx = torch.cuda.stream(caller) if caller is not None else torch.cuda.stream(torch.cuda.default_stream())
        with ctx:
            side_run(x, b, 1.5, out, side)
            snap.copy_(out)
            ev = torch.cuda.Event()
            ev.record(torch.cuda.current_stream())
        ev.synchronize()
        res[name] = {"snapshot_nan": bool(torch.isnan(snap).any()), "side_done_at_read": bool(side.query())}
        torch.cuda.synchronize()
    return res


def through_judge() -> dict:
    from autogk_git.bench import runner
    data = REPO / "tests" / "data"
    definition = json.loads((data / "scale" / "definition.json").read_text())
    wl = {"uuid": "00000000-0000-4000-8000-0000000000b1", "axes": {"n": 1 << 24},
          "inputs": {"x": {"type": "random"}, "bias": {"type": "random"}, "scale": {"type": "scalar", "value": 1.5}}}
    job = {"version": 1, "stage": "quick", "definition": definition, "workloads": [wl],
           "sources": {"side": {"kernel.py": (data / "cheats" / "side_stream.py").read_text()}},
           "generator": None, "blob_root": ".", "seed": 3, "settings": {"device": "cuda", "trials": 1}}
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = runner.run_worker(job, env, 300)
    return out["labels"]["side"]


if __name__ == "__main__":
    print(json.dumps({"torch": torch.__version__, "one_process": one_process(), "judge": through_judge()},
                     indent=1, default=str))
