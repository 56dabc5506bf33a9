"""Backends, chosen by key. Each takes a job and returns the same result shape."""
from __future__ import annotations

from typing import Any, Callable, Protocol

from autogk_git.errors import ConfigError


class Backend(Protocol):
    name: str
    timing: bool  # True when the backend measures latency

    def eligible(self, definition: dict[str, Any], workloads: list[dict[str, Any]]
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(workloads this backend can run, skipped ones with the reason)."""

    def run(self, job: dict[str, Any], timeout_s: float, on_progress=None) -> dict[str, Any]:
        """Run a prepared job; returns runner.run_worker's result.

        on_progress(label, uuid, status, elapsed_s), when given, is called as each (kernel, workload)
        gets its status, where the backend can see that happen (a remote one reports at the end)."""


def cuda_available() -> bool:
    """Whether a CUDA GPU is visible, without importing torch (keeps the CLI fast)."""
    from autogk_git.bench.backends.gpus import listed
    return bool(listed())


def resolve_name(name: str) -> str:
    if name == "auto":
        return "local" if cuda_available() else "interpret"
    return name


# Each factory imports its backend's module when called: choosing one never imports another's SDK
# (modal), and the CLI's start-up imports none of them.
def _interpret(config) -> Backend:
    from autogk_git.bench.backends.interpret import InterpretBackend
    return InterpretBackend(config)


def _local(config) -> Backend:
    from autogk_git.bench.backends.local import LocalBackend
    return LocalBackend(config)


def _modal(config) -> Backend:
    from autogk_git.bench.backends.modal.backend import ModalBackend
    return ModalBackend(config)


def _slurm(config) -> Backend:
    from autogk_git.bench.backends.slurm.backend import SlurmBackend
    return SlurmBackend(config)


BACKENDS: dict[str, Callable[..., Backend]] = {"interpret": _interpret, "local": _local, "modal": _modal,
                                               "slurm": _slurm}
"""[bench] backend / --backend key -> factory(config). "auto" is resolved before the look-up (resolve_name)."""


def get_backend(name: str, config) -> Backend:
    name = resolve_name(name)
    factory = BACKENDS.get(name)
    if factory is None:
        keys = ["auto", *BACKENDS]
        raise ConfigError(f"unknown backend '{name}'", f"set [bench] backend to {', '.join(keys[:-1])} or {keys[-1]}")
    return factory(config)
