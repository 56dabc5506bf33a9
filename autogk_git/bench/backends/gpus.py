"""The one reader of `nvidia-smi -L`: which GPUs the driver lists, without importing torch (the CLI
starts fast, and choosing a backend imports none)."""
from __future__ import annotations

import shutil
import subprocess


def listed() -> list[str]:
    """`nvidia-smi -L`'s GPU lines ("GPU 0: NVIDIA H200 (UUID: ...)"), in index order; [] where there is
    no nvidia-smi, or it fails or hangs (a machine without a usable driver has no GPU to offer)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [line for line in out.stdout.splitlines() if line.startswith("GPU")]
