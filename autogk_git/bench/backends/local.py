"""This machine's CUDA GPUs: one worker subprocess per job, one job per GPU at a time.

`[bench] gpu` (or AUTOGK_BENCH_GPU) names the CUDA indices this project may use ("0,1"; empty: all).
A job takes the first free one: an exclusive lock on `<lock dir>/gpu<index>.lock` (flock, released
by the kernel when the process dies, so a crashed run never leaves a stale lock). Experiments run in
parallel on one machine therefore queue per GPU instead of timing each other's noise.
"""
from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from autogk_git import env
from autogk_git.bench import runner
from autogk_git.bench.job import timed_settings
from autogk_git.errors import ConfigError

LOCK_DIR_ENV = env.GPU_LOCK_DIR


def lock_dir() -> Path:
    """Where the per-GPU lock files live: $AUTOGK_GPU_LOCK_DIR, else <tmp>/autogk-gpu-locks (one per machine)."""
    d = env.gpu_lock_dir()
    d.mkdir(parents=True, exist_ok=True)
    return d


def visible_gpus() -> list[str]:
    """CUDA indices this process may see, without importing torch."""
    visible = env.cuda_visible_devices()
    if visible is not None:
        return visible
    from autogk_git.bench.backends.gpus import listed
    return [str(i) for i in range(len(listed()))]


def parse_gpus(spec: str) -> list[str]:
    """`[bench] gpu`: '0,2' -> ['0', '2']; '' -> every visible GPU."""
    if not spec.strip():
        return visible_gpus()
    gpus = [g.strip() for g in spec.split(",") if g.strip()]
    bad = [g for g in gpus if not g.isdigit()]
    if bad:
        raise ConfigError(f"[bench] gpu = {spec!r}: {', '.join(bad)} is not a CUDA device index",
                          "set it like gpu = \"0,1\" (or AUTOGK_BENCH_GPU=0), or empty for all GPUs")
    visible = env.cuda_visible_devices()
    if visible is not None:  # indices count within what this process may see, as CUDA counts them
        out_of_range = [g for g in gpus if int(g) >= len(visible)]
        if out_of_range:
            raise ConfigError(f"[bench] gpu = {spec!r}: CUDA_VISIBLE_DEVICES={','.join(visible)} shows only "
                              f"{len(visible)} GPU(s)",
                              f"use indices below {len(visible)}, or unset CUDA_VISIBLE_DEVICES")
        gpus = [visible[int(g)] for g in gpus]
    return gpus


@contextmanager
def gpu_lock(gpus: list[str], poll_s: float = 0.2, say=None) -> Iterator[str]:
    """Hold the first free GPU of gpus (waiting while all are busy); yields its index."""
    d = lock_dir()
    handles = {g: open(d / f"gpu{g}.lock", "a+") for g in gpus}
    held = None
    waited = False
    try:
        while held is None:
            for g, fh in handles.items():
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                held = g
                break
            if held is None:
                if not waited and say:
                    say(f"all of GPU(s) {','.join(gpus)} busy with other jobs; waiting")
                waited = True
                time.sleep(poll_s)
        fh = handles[held]
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        yield held
    finally:
        for g, fh in handles.items():
            if g == held:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()


class LocalBackend:
    name = "local"
    timing = True

    def __init__(self, config) -> None:
        b = config.bench
        self.gpus = parse_gpus(b.gpu)
        self.settings = timed_settings(config)

    def eligible(self, definition: dict[str, Any], workloads: list[dict[str, Any]]
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return list(workloads), []

    def run(self, job: dict[str, Any], timeout_s: float,
            on_progress: runner.OnProgress | None = None) -> dict[str, Any]:
        if not self.gpus:
            raise ConfigError("the local backend found no CUDA GPU (nvidia-smi -L lists none)",
                              "run on a machine with a GPU, or set [bench] backend = \"interpret\"")
        job = dict(job, settings={**job["settings"], **self.settings})
        with gpu_lock(self.gpus) as gpu:
            child_env = {k: v for k, v in os.environ.items() if k != env.TRITON_INTERPRET}
            child_env[env.CUDA_VISIBLE_DEVICES] = gpu
            t0 = time.monotonic()
            kw = {"on_progress": on_progress} if on_progress else {}  # older stand-ins take no such argument
            out = runner.run_worker(job, child_env, timeout_s, **kw)
            out["gpu_s"] = round(time.monotonic() - t0, 3)
            out["gpu"] = gpu
        return out
