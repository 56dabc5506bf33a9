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

import os
import re
import subprocess

from . import hygiene
from .calls import KernelFailure

QUERY = ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory,gpu_uuid", "--format=csv,noheader"]
SHOWN = 5  # processes named in one message


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
        name = re.sub(r"[^A-Za-z0-9._/+-]", "?", ",".join(rest[:-1]))[:40]
        rows.append({"pid": int(parts[0]), "name": name, "memory": rest[-1][:20], "gpu": gpu})
    return rows


def gpu_processes(timeout_s: float = 10.0) -> list[dict] | None:
    """Every process NVML lists on the machine's GPUs; None where nvidia-smi is missing or fails."""
    try:
        out = subprocess.run(QUERY, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_compute_apps(out.stdout) if out.returncode == 0 else None


def device_uuid() -> str:
    """NVML's name of the judge's own GPU (`GPU-...`), "" where torch cannot say."""
    try:
        import torch
        return "GPU-" + str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
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
