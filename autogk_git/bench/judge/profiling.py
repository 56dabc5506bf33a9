"""cProfile for the judge and the kernel processes, when AUTOGK_PROFILE_DIR names a folder."""
from __future__ import annotations

import os
import sys


def profiled(fn, argv: list[str], tag: str) -> int:
    """fn(argv), under cProfile when AUTOGK_PROFILE_DIR names a folder (benchmarks/profile_job.py):
    the judge and each kernel process write TAG-PID.prof there, wall seconds per function."""
    where = os.environ.get("AUTOGK_PROFILE_DIR")
    if not where:
        return fn(argv)
    import cProfile
    import threading
    thread_run = threading.Thread.run

    def run_profiled(self) -> None:  # the judge checks labels in threads of its own: each gets a file
        p = cProfile.Profile()
        p.enable()
        try:
            thread_run(self)
        finally:
            p.disable()
            p.dump_stats(os.path.join(where, f"{tag}-{os.getpid()}-{self.name}.prof"))
    if sys.version_info < (3, 12):  # from 3.12 one profile sees every thread, and a second one cannot start
        threading.Thread.run = run_profiled
    prof = cProfile.Profile()
    prof.enable()
    try:
        return fn(argv)
    finally:
        prof.disable()
        prof.dump_stats(os.path.join(where, f"{tag}-{os.getpid()}.prof"))
