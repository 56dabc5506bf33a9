"""A stop request for backends that wait on jobs elsewhere (slurm).

Ctrl-C reaches the parallel loop's main thread, not its benchmark threads: each of those polls this
between queries and cancels its own job rather than wait it out.
"""
from __future__ import annotations

import threading

_STOP = threading.Event()


def request() -> None:
    """Ask every backend waiting on a remote job to cancel it and return."""
    _STOP.set()


def clear() -> None:
    _STOP.clear()


def requested() -> bool:
    return _STOP.is_set()
