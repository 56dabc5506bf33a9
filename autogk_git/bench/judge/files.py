"""A kernel's files on disk (each label's folder in the job's), and the trusted import of them into this
process: the target's generator here, a known kernel in the tools that time one by hand. The judge never
imports a kernel under test: that runs in a kernel process (kernels.RemoteKernel)."""
from __future__ import annotations

from pathlib import Path

from .calls import KernelFailure, load_module
from .status import Status


def write_files(label: str, files: dict, root: Path) -> Path:
    """Write a kernel's files to root/label (Triton's @jit needs a real file); returns the folder."""
    d = root / label
    d.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        # Inside the folder only (git/repo.tree_blobs refuses such trees before they get here; this package
        # imports nothing of autogk_git outside it, so the rule is restated).
        if rel.startswith("/") or any(part in ("", ".", "..") for part in rel.split("/")):
            raise ValueError(f"a kernel file's path leaves its folder: {rel!r}")
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return d


def import_files(label: str, files: dict, root: Path, main: str = "kernel.py"):
    """Write a kernel's files to disk and import the main one (in this process: trusted code only)."""
    return load_module(label, write_files(label, files, root), main)


def import_kernel(label: str, files: dict, root: Path):
    """Import a kernel into THIS process: for tools that time a known kernel by hand (benchmarks/,
    the profiler), never for the judge, which runs kernels in a RemoteKernel."""
    mod = import_files(label, files, root)
    if not callable(getattr(mod, "run", None)):
        raise KernelFailure(Status.COMPILE_ERROR, "kernel.py defines no run() function")
    return mod
