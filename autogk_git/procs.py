"""Processes by pid, for the package's own state files (the worker's hygiene.py keeps its own copy:
it ships beside the worker and imports only the standard library)."""
from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True while a process with this pid exists (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
