"""What happened to one kernel on one workload. A kernel's failure is data, not an exception."""
from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    PASSED = "PASSED"
    """Outputs matched the reference within tolerance on every trial; inputs were left unchanged."""
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    """An output differed from the reference, held NaN, or was not fully written."""
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    """The kernel returned tensors whose shape or dtype differs from the definition."""
    INPUT_MODIFIED = "INPUT_MODIFIED"
    """The kernel changed one of its inputs."""
    COMPILE_ERROR = "COMPILE_ERROR"
    """The kernel's module failed to import, or Triton failed to compile it."""
    RUNTIME_ERROR = "RUNTIME_ERROR"
    """The kernel raised, or its process died (a crashed CUDA context, a segfault)."""
    TIMEOUT = "TIMEOUT"
    """The kernel did not finish within the job's time limit."""
    BELOW_FLOOR = "BELOW_FLOOR"
    """Correct, but timed faster than the bytes it must move allow: the timing cannot be real."""
    REFERENCE_ERROR = "REFERENCE_ERROR"
    """The harness could not make inputs or expected outputs: not the kernel's fault."""

    @property
    def ok(self) -> bool:
        return self is Status.PASSED


FAILURES = tuple(s for s in Status if s not in (Status.PASSED, Status.REFERENCE_ERROR))
