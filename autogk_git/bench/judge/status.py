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
    NOT_DESTINATION_PASSING = "NOT_DESTINATION_PASSING"
    """run() returned a value instead of writing into the output tensors it was given."""
    STREAM_ORDER = "STREAM_ORDER"
    """Work ran off the caller's stream: outputs were not ready in the caller's stream order, or the
    device time was far above the caller stream's elapsed time."""
    L2_PERSISTING = "L2_PERSISTING"
    """The kernel set a persisting-L2 limit or access window while timed (its data would stay in L2)."""
    COMPILE_ERROR = "COMPILE_ERROR"
    """The kernel's module failed to import (or its process died importing it), or Triton failed to compile it."""
    RUNTIME_ERROR = "RUNTIME_ERROR"
    """The kernel raised, or its process died (a crashed CUDA context, a segfault, os._exit)."""
    TIMEOUT = "TIMEOUT"
    """The kernel did not finish within its workload's or the job's time limit."""
    BELOW_FLOOR = "BELOW_FLOOR"
    """Correct, but timed faster than the bytes it must move allow: the timing cannot be real."""
    TAMPERED = "TAMPERED"
    """The kernel replaced part of what calls or times it in its process (a function, constant or
    state of the judge's helpers and timers, or a library call the timer makes)."""
    HARNESS_ERROR = "HARNESS_ERROR"
    """The harness could not make inputs or the reference's outputs: not the kernel's fault, never a pass."""
    NOT_RUN = "NOT_RUN"
    """Not run: the candidate already failed on a cheaper screening workload of the same job."""
    REFERENCE_ERROR = "REFERENCE_ERROR"
    """Older results' name for HARNESS_ERROR; the worker no longer writes it. Never a pass either."""

    @property
    def ok(self) -> bool:
        return self is Status.PASSED

    @property
    def harness(self) -> bool:
        """The harness failed, not the kernel: the candidate is neither passed nor blamed."""
        return self in (Status.HARNESS_ERROR, Status.REFERENCE_ERROR)


FAILURES = tuple(s for s in Status if s is not Status.PASSED)
"""Every status that is not a pass, harness errors included: nothing but PASSED lets a kernel be kept."""
HARNESS = tuple(s for s in Status if s.harness)
