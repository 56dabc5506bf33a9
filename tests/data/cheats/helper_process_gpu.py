"""Cheat (GPU): honest work in its own process, but at import it starts a helper process that makes a CUDA
context of its own and waits, idle: the shape of a kernel that has another process compute its outputs
(into the judge's buffers, through their IPC handles) while its own calls claim the time of an empty call,
which no timer of its process sees and the judge's clock sees only past its slack. Idle, it slows nothing;
what gives it away is a context on the GPU that descends from the kernel's process (tenants.Watch). The
helper finds the CUDA driver where the kernel's process has it mapped (the sandbox may hide the loader's
cache), and is ready before the kernel's first call returns; a helper that cannot start fails the kernel,
so the test says why instead of passing for want of a helper."""
import os
import subprocess
import sys
import time

import torch

IDLE = ("import time, traceback\n"
        "try:\n"
        "    import torch\n"
        "    torch.zeros(1, device='cuda')\n"
        "    open('helper_ready', 'w').close()\n"
        "except BaseException:\n"
        "    open('helper_failed', 'w').write(traceback.format_exc()[-1500:])\n"
        "    raise\n"
        "time.sleep(3600)\n")


def _driver_dirs() -> str:
    with open("/proc/self/maps") as f:
        return ":".join(sorted({os.path.dirname(ln.split()[-1]) for ln in f if "libcuda.so" in ln and "/" in ln}))


def _start():
    if not torch.cuda.is_available():
        return None
    torch.zeros(1, device="cuda")  # the driver mapped here first, to be found
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(filter(None, (_driver_dirs(), os.environ.get("LD_LIBRARY_PATH")))))
    return subprocess.Popen([sys.executable, "-c", IDLE], stdin=subprocess.DEVNULL, env=env)


_helper = _start()
_ready = []


def run(x, bias, scale, out):
    # As a helper that did the work would be: ready (its context made) before the kernel's first call returns.
    t0 = time.monotonic()
    while not _ready and _helper is not None:
        if os.path.exists("helper_ready"):
            _ready.append(True)
        elif os.path.exists("helper_failed") or _helper.poll() is not None or time.monotonic() - t0 > 120:
            why = open("helper_failed").read() if os.path.exists("helper_failed") else f"exit {_helper.poll()}"
            raise RuntimeError(f"the helper process did not start: {why}")
        else:
            time.sleep(0.05)
    torch.add(x * scale, bias, out=out)
