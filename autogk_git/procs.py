"""Processes by pid, for the package's own state files (the worker's hygiene.py keeps its own copy:
it ships beside the worker and imports only the standard library); this process's heavy imports."""
from __future__ import annotations

import contextlib
import gc
import os
import sys

# `python -m MODULE` puts the current folder first on sys.path, so a folder named `autogk_git` in a checkout
# (an experiment's commit, or a file an agent left there) would run in autogk's place: git runs hooks from
# the checkout's top folder, and bisect steps in a worktree of experiment commits. This boot takes that
# entry out (unless Python already left it out: -P, PYTHONSAFEPATH), then runs the module as -m would; its
# arguments are the module's name and the module's own (Python 3.10 has no -P).
NO_CWD = 'getattr(sys.flags, "safe_path", False) or sys.path.pop(0)'  # after `import sys`, in a -c program
SAFE_BOOT = f'import runpy, sys; {NO_CWD}; runpy.run_module(sys.argv.pop(1), run_name="__main__", alter_sys=True)'


def module_command(module: str, *args: str) -> list[str]:
    """`python -m module args` with this interpreter, without the current folder on sys.path (SAFE_BOOT)."""
    return [sys.executable, "-c", SAFE_BOOT, module, *args]


def pid_alive(pid: int) -> bool:
    """True while a process with this pid exists (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def no_gc():
    """Python's cycle collector held off for a block of heavy imports (MLflow's, torch's), then, where the
    block imported anything, what the process holds frozen (`gc.freeze`): the collections the collector
    runs as imports allocate walk every object made so far (MLflow with its client and store 1.65 -> 1.35
    CPU-s, torch and Triton after it 1.17 -> 0.83), and so would every full collection after them, which
    the freeze spares (300,000 objects made after MLflow's imports: 0.92 CPU-s as Python comes, 1.10 with
    the collections held off alone, 0.24 frozen: benchmarks/import_gc.py). A block that imports nothing new
    (a later call) freezes nothing: a long loop's garbage stays collectable."""
    was, modules = gc.isenabled(), len(sys.modules)
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
        if len(sys.modules) > modules:
            gc.freeze()
