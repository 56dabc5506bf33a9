"""The fast reference's proof records: where they live, what they say, and what a job may carry.

bench/refproof.py makes the records (the proof, in a process of its own); this module only reads them,
so that bench/job.py can ask, for every job it makes, whether the target's reference.py is proven on
every workload of the job. See refproof.py for the whole story.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from autogk_git import env
from autogk_git.project import FAST_REFERENCE as FILE

VERSION = 1  # of the proof's method: a record made by another method is made again


def source_in(folder: Path) -> str | None:
    """The fast reference in a target's folder, or None."""
    p = Path(folder) / FILE
    return p.read_text() if p.is_file() else None


def content_key(*parts: Any) -> str:
    """The sha256 of parts as JSON (keys sorted): the name a record of exactly this content is kept under."""
    return hashlib.sha256(json.dumps(list(parts), sort_keys=True).encode()).hexdigest()


def key(definition: dict[str, Any], workloads: list[dict[str, Any]], fast: str, generator: str | None) -> str:
    return content_key(VERSION, definition, workloads, fast, generator)


def cache_root(environ=None) -> Path:
    """Where the reference's records are cached for every project of this user (content-addressed)."""
    return env.user_cache(environ)


def proof_dir(environ=None) -> Path:
    return cache_root(environ) / "reference-proofs"


NVIDIA_NODES = ("/dev/nvidiactl", "/dev/dxg")  # the driver's control node; WSL's GPU node


def likely_device_kind() -> str:
    """"cpu" where no process started here can see a CUDA device (no NVIDIA device node on Linux, or
    CUDA_VISIBLE_DEVICES hides every device), else "cuda": what torch would say, without importing it
    (1.3-1.7 CPU-s for a CLI process on this project's 2-core machine). "cuda" may be wrong (a driver
    that does not load): a record kept under it must come from a process that did see CUDA."""
    if sys.platform.startswith("linux") and not any(os.path.exists(p) for p in NVIDIA_NODES):
        return "cpu"
    visible = env.cuda_visible_devices()
    if visible is not None and (not visible or visible[0].startswith("-")):
        return "cpu"
    return "cuda"


def device_kind() -> str:
    """"cuda" where a process started here will see a CUDA device, else "cpu" (the records are kept per
    device kind): torch is asked only where likely_device_kind cannot rule a device out."""
    if likely_device_kind() == "cpu":
        return "cpu"
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def records(k: str) -> list[dict[str, Any]]:
    """Every record made for key k (one per device kind it was proven on)."""
    out = []
    for p in sorted(proof_dir().glob(f"{k}-*.json")):
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, json.JSONDecodeError):
            continue  # a torn or foreign file proves nothing
    return out


def standing(recs: list[dict[str, Any]]) -> tuple[set[str], dict[str, str]]:
    """(workloads proven on some device, {workload: why} for those where the fast reference disagreed)."""
    proven, differs = set(), {}
    for r in recs:
        for uuid, w in r.get("workloads", {}).items():
            if w["status"] == "agrees":
                proven.add(uuid)
            elif w["status"] in ("differs", "error"):
                differs[uuid] = w.get("why", "")
    return proven, differs


def for_job(definition: dict[str, Any], all_workloads: list[dict[str, Any]], folder: Path, generator: str | None,
            job_workloads: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What a job carries to judge with the fast reference ({"file", "source", "proof"}), or None: the
    target has none, it is not proven on every workload of the job, or it disagreed anywhere."""
    fast = source_in(folder)
    if fast is None:
        return None
    k = key(definition, all_workloads, fast, generator)
    proven, differs = standing(records(k))
    if differs or not job_workloads or any(w["uuid"] not in proven for w in job_workloads):
        return None
    return {"file": FILE, "source": fast, "proof": k[:12]}
