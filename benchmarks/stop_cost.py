"""What the judge's stop of the job's other processes costs a time request, on this machine's CPU.

    .venv/bin/python benchmarks/stop_cost.py [--requests 200] [--threads 40,60,60,5]

Stands for a judge (this process, with the first number of threads) and its kernel processes (children
with the other numbers of threads, sleeping): each request enters and leaves `kernels.others_stopped` with
the first child as the label being timed, as `RemoteKernel.time` does. Prints ms a request.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from autogk_git.bench.judge import kernels  # noqa: E402

CHILD = ("import threading, time\nfor _ in range({n}): threading.Thread(target=time.sleep, args=(120,), "
         "daemon=True).start()\ntime.sleep(120)")


class _Label:
    def __init__(self, proc) -> None:
        self.proc = proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--threads", default="40,60,60,5", help="the judge's, then each child's")
    args = ap.parse_args()
    counts = [int(x) for x in args.threads.split(",")]
    for _ in range(counts[0]):
        threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
    procs = [subprocess.Popen([sys.executable, "-c", CHILD.format(n=n)]) for n in counts[1:]]
    try:
        time.sleep(1.5)  # the children's threads started
        label = _Label(procs[0])
        t = time.perf_counter()
        for _ in range(args.requests):
            with kernels.others_stopped(label):
                pass
        ms = (time.perf_counter() - t) / args.requests * 1e3
        print(f"others_stopped: {ms:.2f} ms a request ({args.requests} requests; stopped "
              f"{len(kernels.others(label))} processes each time)")
    finally:
        for p in procs:
            p.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
